package capture

import (
	"encoding/json"
	"strconv"

	"github.com/tokentrace/tokentrace/traces"
)

// litellmPayload is the part of LiteLLM's StandardLoggingPayload (its
// logging spec) that capture reads. A line may also wrap it as
// {"standard_logging_object": {...}}.
type litellmPayload struct {
	Wrapped             *litellmPayload `json:"standard_logging_object"`
	CallType            string          `json:"call_type"`
	Status              string          `json:"status"`
	PromptTokens        rawValue        `json:"prompt_tokens"`
	CompletionTokens    rawValue        `json:"completion_tokens"`
	StartTime           rawValue        `json:"startTime"`
	EndTime             rawValue        `json:"endTime"`
	CompletionStartTime rawValue        `json:"completionStartTime"`
	Model               string          `json:"model"`
	Messages            rawValue        `json:"messages"`
	Response            rawValue        `json:"response"`
	EndUser             rawValue        `json:"end_user"`
	// TraceID groups the calls of one overall request (LiteLLM's
	// litellm_trace_id; a fresh one per call unless the caller passes it).
	TraceID          rawValue `json:"trace_id"`
	ErrorInformation *struct {
		ErrorCode  rawValue `json:"error_code"`
		ErrorClass string   `json:"error_class"`
	} `json:"error_information"`
	ModelParameters *struct {
		Tools               rawValue `json:"tools"`
		Functions           rawValue `json:"functions"`
		MaxTokens           rawValue `json:"max_tokens"`
		MaxCompletionTokens rawValue `json:"max_completion_tokens"`
		User                rawValue `json:"user"`
	} `json:"model_parameters"`
}

type litellmParser struct{ em *emitter }

func (p *litellmParser) end() []LineError { return nil }

func (p *litellmParser) parse(line []byte, lineNo int64) (string, string) {
	var pl litellmPayload
	if err := json.Unmarshal(line, &pl); err != nil {
		return jsonErrKind(err)
	}
	if pl.Wrapped != nil {
		pl = *pl.Wrapped
	}
	start, ok := parseTime(pl.StartTime)
	if !ok {
		if len(pl.StartTime) == 0 {
			return KindMissing, "startTime"
		}
		return KindBadValue, "startTime"
	}
	if len(pl.Messages) == 0 {
		return KindMissing, "messages"
	}
	var resp openaiResponse
	if len(pl.Response) > 0 && pl.Response[0] == '{' {
		if kind := decodeResponse(pl.Response, &resp); kind != "" {
			return kind, "response"
		}
	}
	q := newRequest(lineNo, start, pl.Model)
	q.usageIn, q.usageOut, q.srvCached = resp.usage()
	if v, ok := rawInt(pl.PromptTokens); ok && v > 0 {
		q.usageIn = int32(v)
	}
	if v, ok := rawInt(pl.CompletionTokens); ok && (v > 0 || pl.Status != "failure") {
		q.usageOut = int32(v)
	}
	var maxTokens, maxCompl, user rawValue
	if mp := pl.ModelParameters; mp != nil {
		q.tools, maxTokens, maxCompl, user = mp.Tools, mp.MaxTokens, mp.MaxCompletionTokens, mp.User
		if len(q.tools) == 0 {
			q.tools = mp.Functions
		}
	}
	switch pl.Messages[0] {
	case '[':
		if json.Unmarshal(pl.Messages, &q.msgs) != nil {
			return KindBadValue, "messages"
		}
		q.kind = promptChat
	case '{':
		var m chatMsg
		if json.Unmarshal(pl.Messages, &m) != nil {
			return KindBadValue, "messages"
		}
		q.kind, q.msgs = promptChat, []chatMsg{m}
	case '"':
		q.kind, q.prompt = promptCompletion, pl.Messages
	default:
		return KindBadValue, "messages"
	}
	// The spec carries no parent call id: calls of one trace are a
	// session (a chain in a closed-session replay), never a graph.
	if q.session("user", rawString(pl.EndUser), rawString(user)); q.sessID == "" {
		q.session("trace", rawString(pl.TraceID))
	}
	if v, ok := rawInt(maxCompl); ok {
		q.maxTok = int32(v)
	} else if v, ok := rawInt(maxTokens); ok {
		q.maxTok = int32(v)
	}
	q.has = true
	q.status = traces.StatusOK
	if pl.Status == "failure" {
		q.status = traces.StatusHTTPError
		if ei := pl.ErrorInformation; ei != nil {
			if c, ok := rawInt(ei.ErrorCode); ok && c >= 100 && c < 600 {
				q.httpStatus = int32(c)
			}
		}
		if q.errMsg = "litellm failure"; q.httpStatus > 0 {
			q.errMsg = "http " + itoa(int64(q.httpStatus))
		}
	}
	q.srvIn, q.srvOut = q.usageIn, q.usageOut
	q.choices = resp.Choices
	if end, ok := parseTime(pl.EndTime); ok && end >= start {
		q.e2e = end - start
	}
	if cs, ok := parseTime(pl.CompletionStartTime); ok && cs >= start && q.status == traces.StatusOK {
		q.ttft = cs - start
	}
	p.em.emit(&q) // a string prompt is always valid
	return "", ""
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
