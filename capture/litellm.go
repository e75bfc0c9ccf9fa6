package capture

import (
	"encoding/json"
	"strconv"

	"github.com/tokentrace/tokentrace/traces"
)

// litellmPayload is the part of LiteLLM's StandardLoggingPayload capture
// reads (docs/my-website/docs/proxy/logging_spec.md). A line may also wrap
// it as {"standard_logging_object": {...}}.
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
	ErrorInformation    *struct {
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

type litellmParser struct{ st *state }

func (p *litellmParser) end() {}

func (p *litellmParser) parse(line []byte, lineNo int64) (string, string) {
	var pl litellmPayload
	if err := json.Unmarshal(line, &pl); err != nil {
		return jsonErrKind(err)
	}
	if pl.Wrapped != nil {
		pl = *pl.Wrapped
	}
	st := p.st
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
	usageIn, usageOut, cached := resp.usage()
	if v, ok := rawInt(pl.PromptTokens); ok && v > 0 {
		usageIn = int32(v)
	}
	if v, ok := rawInt(pl.CompletionTokens); ok && (v > 0 || pl.Status != "failure") {
		usageOut = int32(v)
	}
	var tools, maxTokens, maxCompl, user rawValue
	if mp := pl.ModelParameters; mp != nil {
		tools, maxTokens, maxCompl, user = mp.Tools, mp.MaxTokens, mp.MaxCompletionTokens, mp.User
		if len(tools) == 0 {
			tools = mp.Functions
		}
	}
	e := newEntry(st, lineNo)
	e.t = start
	e.model = st.intern(pl.Model)
	switch pl.Messages[0] {
	case '[':
		var msgs []chatMsg
		if json.Unmarshal(pl.Messages, &msgs) != nil {
			st.entries = st.entries[:len(st.entries)-1]
			return KindBadValue, "messages"
		}
		st.chatPrompt(e, msgs, tools, usageIn)
	case '{':
		var m chatMsg
		if json.Unmarshal(pl.Messages, &m) != nil {
			st.entries = st.entries[:len(st.entries)-1]
			return KindBadValue, "messages"
		}
		st.chatPrompt(e, []chatMsg{m}, tools, usageIn)
	case '"':
		st.completionPrompt(e, pl.Messages, usageIn)
	default:
		st.entries = st.entries[:len(st.entries)-1]
		return KindBadValue, "messages"
	}
	switch {
	case rawString(pl.EndUser) != "":
		st.sessionField(e, "user", rawString(pl.EndUser))
	case rawString(user) != "":
		st.sessionField(e, "user", rawString(user))
	}
	maxTok := int32(-1)
	if v, ok := rawInt(maxCompl); ok {
		maxTok = int32(v)
	} else if v, ok := rawInt(maxTokens); ok {
		maxTok = int32(v)
	}
	e.hasOutcome = true
	e.status = traces.StatusOK
	if pl.Status == "failure" {
		e.status = traces.StatusHTTPError
		if ei := pl.ErrorInformation; ei != nil {
			if c, ok := rawInt(ei.ErrorCode); ok && c >= 100 && c < 600 {
				e.httpStatus = int32(c)
			}
		}
		if e.errMsg = "litellm failure"; e.httpStatus > 0 {
			e.errMsg = "http " + itoa(int64(e.httpStatus))
		}
	}
	st.outcome(e, &resp, usageIn, usageOut, cached, maxTok)
	if end, ok := parseTime(pl.EndTime); ok && end >= start {
		e.e2e = end - start
	}
	if cs, ok := parseTime(pl.CompletionStartTime); ok && cs >= start && e.status == traces.StatusOK {
		e.ttft = cs - start
	}
	return "", ""
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
