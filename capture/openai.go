package capture

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// fieldNames are the openai-jsonl names Options.Fields can remap.
var fieldNames = []string{"time", "request", "response", "session", "user", "status", "ttft_ms", "latency_ms",
	"end_time", "trace_id", "call_id", "parent_call_id"}

type openaiRequest struct {
	Model               string    `json:"model"`
	Messages            []chatMsg `json:"messages"`
	Tools               rawValue  `json:"tools"`
	Functions           rawValue  `json:"functions"`
	Prompt              rawValue  `json:"prompt"`
	MaxTokens           rawValue  `json:"max_tokens"`
	MaxCompletionTokens rawValue  `json:"max_completion_tokens"`
	User                rawValue  `json:"user"`
}

type openaiLine struct {
	Time     rawValue       `json:"time"`
	Request  *openaiRequest `json:"request"`
	Response rawValue       `json:"response"`
	Session  rawValue       `json:"session"`
	User     rawValue       `json:"user"`
	Status   rawValue       `json:"status"`
	TTFT     rawValue       `json:"ttft_ms"`
	Latency  rawValue       `json:"latency_ms"`
	// EndTime is when the response ended (formats as Time).
	EndTime rawValue `json:"end_time"`
	// TraceID groups calls into a session when there is no session or user
	// field; CallID names this call and ParentCallID the call that spawned
	// it (ids within the trace, or the whole log without one).
	TraceID      rawValue `json:"trace_id"`
	CallID       rawValue `json:"call_id"`
	ParentCallID rawValue `json:"parent_call_id"`
}

type usageJSON struct {
	PromptTokens        rawValue `json:"prompt_tokens"`
	CompletionTokens    rawValue `json:"completion_tokens"`
	InputTokens         rawValue `json:"input_tokens"`
	OutputTokens        rawValue `json:"output_tokens"`
	PromptTokensDetails *struct {
		CachedTokens rawValue `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

type respMsg struct {
	Content   rawValue `json:"content"`
	ToolCalls rawValue `json:"tool_calls"`
}

type openaiResponse struct {
	Usage   *usageJSON `json:"usage"`
	Choices []choice   `json:"choices"`
}

type choice struct {
	Message respMsg  `json:"message"`
	Delta   respMsg  `json:"delta"`
	Text    rawValue `json:"text"`
}

type openaiParser struct {
	em    *emitter
	paths map[string][]string // remapped names → path
}

func newOpenAIParser(em *emitter) *openaiParser {
	p := &openaiParser{em: em}
	if fields := em.rd.o.Fields; len(fields) > 0 {
		p.paths = map[string][]string{}
		for _, n := range fieldNames {
			path := n
			if v, ok := fields[n]; ok {
				path = v
			}
			p.paths[n] = strings.Split(path, ".")
		}
	}
	return p
}

func (p *openaiParser) end() []LineError { return nil }

func (p *openaiParser) parse(line []byte, lineNo int64) (string, string) {
	var l openaiLine
	if p.paths == nil {
		if err := json.Unmarshal(line, &l); err != nil {
			return jsonErrKind(err)
		}
	} else if kind, field := p.remap(line, &l); kind != "" {
		return kind, field
	}
	if l.Request == nil {
		return KindMissing, "request"
	}
	t, ok := parseTime(l.Time)
	if !ok {
		if len(l.Time) == 0 {
			return KindMissing, "time"
		}
		return KindBadValue, "time"
	}
	var resp openaiResponse
	if kind := decodeResponse(l.Response, &resp); kind != "" {
		return kind, "response"
	}
	req := l.Request
	q := newRequest(lineNo, t, req.Model)
	q.usageIn, q.usageOut, q.srvCached = resp.usage()
	switch {
	case req.Messages != nil:
		q.kind, q.msgs, q.tools = promptChat, req.Messages, req.Tools
		if len(q.tools) == 0 {
			q.tools = req.Functions
		}
	case len(req.Prompt) > 0:
		q.kind, q.prompt = promptCompletion, req.Prompt
	default:
		return KindMissing, "request.messages"
	}
	if v, ok := rawInt(req.MaxCompletionTokens); ok {
		q.maxTok = int32(v)
	} else if v, ok := rawInt(req.MaxTokens); ok {
		q.maxTok = int32(v)
	}
	if s := rawString(l.Session); s != "" {
		q.session("session", s)
	} else {
		q.session("user", rawString(l.User), rawString(req.User))
	}
	trace := rawString(l.TraceID)
	if q.sessID == "" {
		q.session("trace", trace)
	}
	if call, parent := rawString(l.CallID), rawString(l.ParentCallID); call != "" || parent != "" {
		q.scope, q.spanID, q.parentID = trace, call, parent
	}
	if end, ok := parseTime(l.EndTime); ok && end >= t {
		q.finish = end - t
	}
	q.has = true
	q.status, q.httpStatus = parseStatus(l.Status)
	if q.status != traces.StatusOK {
		q.errMsg = q.status
		if q.httpStatus > 0 {
			q.errMsg = "http " + itoa(int64(q.httpStatus))
		}
	}
	q.srvIn, q.srvOut = q.usageIn, q.usageOut
	q.choices = resp.Choices
	if v, ok := rawDecimalNs(l.TTFT, 1e6); ok {
		q.ttft = v
	}
	if v, ok := rawDecimalNs(l.Latency, 1e6); ok {
		q.e2e = v
	}
	if !p.em.emit(&q) {
		return KindBadValue, "request.prompt"
	}
	return "", ""
}

// remap fills l from dotted paths.
func (p *openaiParser) remap(line []byte, l *openaiLine) (string, string) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(line, &top); err != nil {
		return jsonErrKind(err)
	}
	get := func(name string) rawValue {
		path := p.paths[name]
		cur := top
		for i, k := range path {
			v, ok := cur[k]
			if !ok {
				return nil
			}
			if i == len(path)-1 {
				if string(v) == "null" {
					return nil
				}
				return rawValue(v)
			}
			cur = nil
			if json.Unmarshal(v, &cur) != nil {
				return nil
			}
		}
		return nil
	}
	l.Time, l.Response, l.Session, l.User = get("time"), get("response"), get("session"), get("user")
	l.Status, l.TTFT, l.Latency = get("status"), get("ttft_ms"), get("latency_ms")
	l.EndTime, l.TraceID, l.CallID, l.ParentCallID = get("end_time"), get("trace_id"), get("call_id"), get("parent_call_id")
	if r := get("request"); r != nil {
		l.Request = new(openaiRequest)
		if err := json.Unmarshal(r, l.Request); err != nil {
			return KindBadValue, "request"
		}
	}
	return "", ""
}

// decodeResponse reads a response body, or an array of streamed chunks.
func decodeResponse(raw rawValue, resp *openaiResponse) string {
	if len(raw) == 0 {
		return ""
	}
	switch raw[0] {
	case '{':
		if json.Unmarshal(raw, resp) != nil {
			return KindBadValue
		}
	case '[':
		var chunks []openaiResponse
		if json.Unmarshal(raw, &chunks) != nil {
			return KindBadValue
		}
		for _, c := range chunks {
			if c.Usage != nil {
				resp.Usage = c.Usage
			}
			resp.Choices = append(resp.Choices, c.Choices...)
		}
	case '"':
		// A bare text response: tokenized if needed.
		resp.Choices = append(resp.Choices, choice{Text: raw})
	default:
		return KindBadValue
	}
	return ""
}

func (r *openaiResponse) usage() (in, out, cached int32) {
	in, out, cached = -1, -1, -1
	if r.Usage == nil {
		return
	}
	if v, ok := rawInt(r.Usage.PromptTokens); ok {
		in = int32(v)
	} else if v, ok := rawInt(r.Usage.InputTokens); ok {
		in = int32(v)
	}
	if v, ok := rawInt(r.Usage.CompletionTokens); ok {
		out = int32(v)
	} else if v, ok := rawInt(r.Usage.OutputTokens); ok {
		out = int32(v)
	}
	if d := r.Usage.PromptTokensDetails; d != nil {
		if v, ok := rawInt(d.CachedTokens); ok {
			cached = int32(v)
		}
	}
	return
}

// jsonErrKind maps a decoding error to a problem kind (never its text,
// which may quote content).
func jsonErrKind(err error) (string, string) {
	if _, ok := err.(*json.UnmarshalTypeError); ok {
		return KindBadValue, ""
	}
	return KindBadJSON, ""
}

// parseStatus reads an HTTP status number or a status word.
func parseStatus(raw rawValue) (string, int32) {
	if len(raw) == 0 {
		return traces.StatusOK, 0
	}
	code, ok := rawInt(raw)
	if !ok {
		s := strings.ToLower(rawString(raw))
		switch s {
		case "", "ok", "success", "succeeded", "completed":
			return traces.StatusOK, 0
		case "timeout":
			return traces.StatusTimeout, 0
		case "disconnect", "cancelled", "canceled", "aborted":
			return traces.StatusDisconnect, 0
		}
		if slices.Contains(traces.Statuses, s) {
			return s, 0
		}
		return traces.StatusHTTPError, 0
	}
	if code >= 200 && code < 400 {
		return traces.StatusOK, int32(code)
	}
	return traces.StatusHTTPError, int32(code)
}

// rawString returns a JSON string's value, or a number's literal text.
func rawString(raw rawValue) string {
	if len(raw) == 0 {
		return ""
	}
	if raw[0] == '"' {
		return unquoteJSON(raw)
	}
	if raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9') {
		return string(raw)
	}
	return ""
}

// rawLiteral is a JSON string's value, or any other value's literal text.
func rawLiteral(raw rawValue) string {
	if len(raw) > 0 && raw[0] == '"' {
		return unquoteJSON(raw)
	}
	return string(raw)
}

// rawInt reads an integer from a JSON number or numeric string.
func rawInt(raw rawValue) (int64, bool) {
	if len(raw) == 0 {
		return 0, false
	}
	s := rawLiteral(raw)
	if v, err := strconv.ParseInt(s, 10, 64); err == nil {
		return v, v >= 0 && v <= math.MaxInt32
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && f >= 0 && f <= math.MaxInt32 && f == math.Trunc(f) {
		return int64(f), true
	}
	return 0, false
}

// rawDecimalNs reads a JSON number (or numeric string) in units of unitNs
// nanoseconds exactly.
func rawDecimalNs(raw rawValue, unitNs int64) (int64, bool) {
	if len(raw) == 0 {
		return 0, false
	}
	v, ok := decimalNs(rawLiteral(raw), unitNs)
	return v, ok && v >= 0
}

// decimalNs converts a decimal literal in units of unitNs (a power of ten)
// to nanoseconds without floating-point error.
func decimalNs(s string, unitNs int64) (int64, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, false
	}
	if strings.ContainsAny(s, "eE") {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(f) || math.Abs(f*float64(unitNs)) > 9e18 {
			return 0, false
		}
		return int64(math.Round(f * float64(unitNs))), true
	}
	neg := false
	if s[0] == '-' {
		neg, s = true, s[1:]
	}
	ip, fp, _ := strings.Cut(s, ".")
	if ip == "" {
		ip = "0"
	}
	iv, err := strconv.ParseInt(ip, 10, 64)
	if err != nil || (unitNs > 0 && iv > math.MaxInt64/unitNs) {
		return 0, false
	}
	ns := iv * unitNs
	digits := 0
	for u := unitNs; u > 1; u /= 10 {
		digits++
	}
	if len(fp) > digits {
		fp = fp[:digits]
	}
	if fp != "" {
		for _, c := range fp {
			if c < '0' || c > '9' {
				return 0, false
			}
		}
		fv, _ := strconv.ParseInt(fp, 10, 64)
		for i := len(fp); i < digits; i++ {
			fv *= 10
		}
		ns += fv
	}
	if neg {
		ns = -ns
	}
	return ns, true
}

// parseTime reads an RFC 3339 string, or Unix seconds, milliseconds,
// microseconds or nanoseconds told apart by magnitude (number or numeric
// string).
func parseTime(raw rawValue) (int64, bool) {
	if len(raw) == 0 {
		return 0, false
	}
	s := rawLiteral(raw)
	if raw[0] == '"' {
		for _, layout := range []string{time.RFC3339Nano, "2006-01-02 15:04:05.999999999Z07:00", "2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999"} {
			if t, err := time.Parse(layout, s); err == nil {
				return t.UnixNano(), true
			}
		}
	}
	return unixNumber(s)
}

func unixNumber(s string) (int64, bool) {
	s = strings.TrimSpace(s)
	ip, _, _ := strings.Cut(s, ".")
	if strings.ContainsAny(s, "eE") {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return 0, false
		}
		ip = strconv.FormatFloat(math.Trunc(f), 'f', 0, 64)
	}
	iv, err := strconv.ParseInt(ip, 10, 64)
	if err != nil || iv <= 0 {
		return 0, false
	}
	unit := int64(1)
	switch {
	case iv < 1e11:
		unit = 1e9
	case iv < 1e14:
		unit = 1e6
	case iv < 1e17:
		unit = 1e3
	}
	return decimalNs(s, unit)
}
