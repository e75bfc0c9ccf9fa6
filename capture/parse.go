package capture

import (
	"bytes"
	"encoding/json"
	"strings"
)

// The parse stage: a format's parser finds the fields of one log line and
// hands the redact stage a request. Text in a request aliases the line, so
// it is redacted before the next line is read and never stored.

// request is one request as its log line states it.
type request struct {
	line  int64
	t     int64 // Unix ns
	model string
	// kind says which prompt fields are set: msgs and tools (promptChat),
	// prompt (promptCompletion, a JSON string or array), or none.
	kind   int
	msgs   []chatMsg
	tools  rawValue
	prompt rawValue
	// usage numbers and max_tokens (-1 = not logged)
	usageIn, usageOut int32
	maxTok            int32
	// choices are the response's, read only when usageOut is missing.
	choices []choice
	// sessID is a session or user id of kind sessKind ("session", "user",
	// "trace").
	sessKind, sessID string
	// spanID names this call and parentID the call that spawned it, each
	// within the id space scope (an OTLP trace id); empty = none. They are
	// hashed by the redact stage and never leave it.
	scope, spanID, parentID string
	outcome
}

func newRequest(line, t int64, model string) request {
	return request{line: line, t: t, model: model, usageIn: -1, usageOut: -1, maxTok: -1, outcome: noOutcome()}
}

// session sets the first non-empty id as the session field.
func (q *request) session(kind string, ids ...string) {
	for _, id := range ids {
		if id != "" {
			q.sessKind, q.sessID = kind, id
			return
		}
	}
}

// lineParser is one format's parser. parse handles one line and hands each
// request it finds to out; kind != "" marks the line malformed. end is
// called at the end of the input and returns requests that span lines and
// problems found only then.
type lineParser interface {
	parse(line []byte, lineNo int64) (kind, field string)
	end() []LineError
}

// emitter receives a parser's requests and redacts them at once.
type emitter struct {
	rd      *redactor
	input   int32
	name    string
	out     []redacted
	ignored int64
}

// emit redacts q and queues it; false means q's prompt is malformed.
func (em *emitter) emit(q *request) bool {
	e, ok := em.rd.redact(q)
	if !ok {
		return false
	}
	em.add(e)
	return true
}

func (em *emitter) add(e redacted) {
	e.input = em.input
	em.out = append(em.out, e)
}

func parserFor(format string, em *emitter) lineParser {
	switch format {
	case FormatOpenAI:
		return newOpenAIParser(em)
	case FormatLiteLLM:
		return &litellmParser{em: em}
	case FormatVLLM:
		return newVLLMParser(em)
	case FormatOTLP:
		return &otlpParser{em: em}
	}
	return nil
}

// chatMsg is one message. Content and tool calls stay raw JSON (aliasing the
// line) until redacted.
type chatMsg struct {
	Role      string   `json:"role"`
	Name      string   `json:"name"`
	Content   rawValue `json:"content"`
	ToolCalls rawValue `json:"tool_calls"`
	FuncCall  rawValue `json:"function_call"`
}

// rawValue keeps a JSON value's bytes without copying (valid while the line
// is being parsed).
type rawValue []byte

func (r *rawValue) UnmarshalJSON(b []byte) error {
	if len(b) == 4 && string(b) == "null" {
		*r = nil
		return nil
	}
	*r = b
	return nil
}

// contentText returns the text of a content value: a string, or the text
// parts of an array of content parts, joined by newlines. Non-text parts add
// nothing.
func contentText(r rawValue) string {
	if len(r) == 0 {
		return ""
	}
	switch r[0] {
	case '"':
		return unquoteJSON(r)
	case '[':
		var parts []struct {
			Type string   `json:"type"`
			Text rawValue `json:"text"`
		}
		if json.Unmarshal(r, &parts) != nil {
			return ""
		}
		var sb strings.Builder
		for i, p := range parts {
			if len(p.Text) > 0 && p.Text[0] == '"' {
				if i > 0 && sb.Len() > 0 {
					sb.WriteByte('\n')
				}
				sb.WriteString(unquoteJSON(p.Text))
			}
		}
		return sb.String()
	}
	return ""
}

// unquoteJSON decodes a JSON string literal (already validated).
func unquoteJSON(b []byte) string {
	if len(b) < 2 {
		return ""
	}
	inner := b[1 : len(b)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return string(inner)
	}
	var s string
	if json.Unmarshal(b, &s) != nil {
		return ""
	}
	return s
}
