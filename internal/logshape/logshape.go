// Package logshape recognises serving logs by their first line: the
// shapes capture reads (OpenAI-style gateway JSON lines, LiteLLM logs,
// OTLP spans as JSON, vLLM server logs). capture picks its parser by it,
// and the trace readers use it to tell logs given where a trace belongs
// from a malformed trace, so both judge a line by the same rules.
package logshape

import (
	"bytes"
	"regexp"
)

// Shape is a kind of serving log.
type Shape uint8

// The shapes capture reads.
const (
	// None is no shape: no line to judge, or (Recognise) a line that is
	// not surely logs.
	None Shape = iota
	// OpenAI is a gateway's JSON lines with OpenAI-style request bodies.
	OpenAI
	// LiteLLM is LiteLLM's logging objects.
	LiteLLM
	// OTLP is OpenTelemetry spans as OTLP/JSON.
	OTLP
	// VLLM is a vLLM server's log.
	VLLM
)

// String says what the shape is, in the words of messages ("vLLM server
// logs"); "" for None.
func (s Shape) String() string {
	switch s {
	case OpenAI:
		return "gateway logs (OpenAI-style JSON lines)"
	case LiteLLM:
		return "LiteLLM logs"
	case OTLP:
		return "OTLP spans (JSON)"
	case VLLM:
		return "vLLM server logs"
	}
	return ""
}

// FirstLine returns the first line of head that is not blank, white space
// trimmed, or nil. head may end in the middle of a line (the first bytes
// of a file): that line is judged as far as it goes.
func FirstLine(head []byte) []byte {
	for len(head) > 0 {
		line := head
		if i := bytes.IndexByte(head, '\n'); i >= 0 {
			line, head = head[:i], head[i+1:]
		} else {
			head = nil
		}
		if line = bytes.TrimSpace(line); len(line) > 0 {
			return line
		}
	}
	return nil
}

// Guess returns the shape capture reads line, the first line of its input
// (FirstLine), as when it is not told the format: OTLP for resourceSpans,
// LiteLLM for its logging fields, OpenAI for any other JSON object, VLLM
// for a line that is not one; None for no line.
func Guess(line []byte) Shape {
	s, _ := judge(line)
	return s
}

// Recognise returns the shape of line, the first line of a file
// (FirstLine), only when the line has what that shape's parser needs and
// a trace never has: a request body ("messages" or "prompt"), LiteLLM's
// logging fields, OTLP's resourceSpans, vLLM's log line prefix. Otherwise
// it returns None.
func Recognise(line []byte) Shape {
	if s, sure := judge(line); sure {
		return s
	}
	return None
}

// vllmLogLine is the start of a vLLM server log line: an optional
// "(APIServer pid=N) " prefix, a level and a month-day time stamp.
var vllmLogLine = regexp.MustCompile(`^(\([A-Za-z]+ pid=\d+\) )?(INFO|DEBUG|WARNING|ERROR) \d\d-\d\d \d\d:\d\d:\d\d`)

// judge is the one set of rules: the shape line is read as, and whether
// the line proves it.
func judge(line []byte) (s Shape, sure bool) {
	if len(line) == 0 {
		return None, false
	}
	has := func(k string) bool { return bytes.Contains(line, []byte(k)) }
	switch {
	case line[0] != '{':
		return VLLM, vllmLogLine.Match(line)
	case has(`"resourceSpans"`):
		return OTLP, true
	case has(`"standard_logging_object"`),
		has(`"startTime"`) && (has(`"call_type"`) || has(`"completionStartTime"`) || has(`"model_parameters"`)):
		return LiteLLM, true
	}
	return OpenAI, has(`"messages"`) || has(`"prompt"`)
}
