package capture

import (
	"hash/maphash"
	"testing"
)

// TestParseLines is a table of single log lines through each format's
// parser: which problem a line is (kind and field), and how many requests
// it yields.
func TestParseLines(t *testing.T) {
	const ts = `"time":"2025-03-01T10:00:00Z"`
	span := func(name, start string) string {
		return `{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"` + name + `","startTimeUnixNano":"` + start +
			`","attributes":[{"key":"gen_ai.usage.prompt_tokens","value":{"intValue":"5"}}]}]}]}]}`
	}
	tests := []struct {
		name, format, line string
		kind, field        string
		requests           int
	}{
		{"a chat request is one request", FormatOpenAI, `{` + ts + `,"request":{"model":"m","messages":[{"role":"user","content":"hi"}]}}`, "", "", 1},
		{"a completions request is one request", FormatOpenAI, `{` + ts + `,"request":{"model":"m","prompt":"hi"}}`, "", "", 1},
		{"broken JSON is bad_json", FormatOpenAI, `{"time":`, KindBadJSON, "", 0},
		{"a wrong JSON type is bad_value", FormatOpenAI, `{"request":[1]}`, KindBadValue, "", 0},
		{"no request is missing_field request", FormatOpenAI, `{` + ts + `}`, KindMissing, "request", 0},
		{"no time is missing_field time", FormatOpenAI, `{"request":{"model":"m","prompt":"x"}}`, KindMissing, "time", 0},
		{"an unreadable time is bad_value time", FormatOpenAI, `{"time":"soon","request":{"prompt":"x"}}`, KindBadValue, "time", 0},
		{"a response that is a number is bad_value response", FormatOpenAI, `{` + ts + `,"request":{"prompt":"x"},"response":5}`, KindBadValue, "response", 0},
		{"neither messages nor prompt is missing_field request.messages", FormatOpenAI, `{` + ts + `,"request":{"model":"m"}}`, KindMissing, "request.messages", 0},
		{"a prompt object is bad_value request.prompt", FormatOpenAI, `{` + ts + `,"request":{"prompt":{"a":1}}}`, KindBadValue, "request.prompt", 0},
		{"a litellm payload is one request", FormatLiteLLM, `{"startTime":1740823200,"messages":[{"role":"user","content":"hi"}]}`, "", "", 1},
		{"a wrapped litellm payload is one request", FormatLiteLLM, `{"standard_logging_object":{"startTime":1740823200,"messages":"hi"}}`, "", "", 1},
		{"litellm without messages is missing_field messages", FormatLiteLLM, `{"startTime":1740823200}`, KindMissing, "messages", 0},
		{"litellm messages that are a number are bad_value messages", FormatLiteLLM, `{"startTime":1740823200,"messages":7}`, KindBadValue, "messages", 0},
		{"an llm_request span is one request", FormatOTLP, span("llm_request", "1740823200000000000"), "", "", 1},
		{"another span is ignored", FormatOTLP, span("http", "1740823200000000000"), "", "", 0},
		{"a span without a start is bad_value", FormatOTLP, span("llm_request", "x"), KindBadValue, "startTimeUnixNano", 0},
		{"no resourceSpans is missing_field", FormatOTLP, `{}`, KindMissing, "resourceSpans", 0},
		{"a vLLM request line waits for the end of the input", FormatVLLM, `INFO 03-01 10:00:00 logger.py:37] Received request r1: prompt: 'hi', params: SamplingParams(max_tokens=5), prompt_token_ids: [1, 2], lora_request: None.`, "", "", 1},
		{"a vLLM output line without its request is unmatched", FormatVLLM, `INFO 03-01 10:00:00 logger.py:70] Generated response r9: output: 'x', output_token_ids: [1], finish_reason: stop`, KindUnmatched, "", 0},
		{"a vLLM request line that does not parse is bad_log_line", FormatVLLM, `INFO 03-01 10:00:00 logger.py:37] Received request r1: nonsense`, KindBadLogLine, "", 0},
		{"other vLLM lines are ignored", FormatVLLM, `INFO 03-01 10:00:00 engine.py:1] Avg throughput: 3 tokens/s`, "", "", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions()
			o.Year = 2025
			em := &emitter{rd: newRedactor(o, []byte("0123456789abcdef"), maphash.MakeSeed()), name: "log"}
			p := parserFor(tc.format, em)
			kind, field := p.parse([]byte(tc.line), 1)
			if problems := p.end(); len(problems) > 0 {
				t.Errorf("end: %v", problems)
			}
			if kind != tc.kind || field != tc.field {
				t.Errorf("got %q %q, want %q %q", kind, field, tc.kind, tc.field)
			}
			if len(em.out) != tc.requests {
				t.Errorf("got %d requests, want %d", len(em.out), tc.requests)
			}
			for _, e := range em.out {
				if e.line != 1 || e.t <= 0 {
					t.Errorf("request at line %d time %d", e.line, e.t)
				}
			}
		})
	}
}

// TestVLLMNoPrompt: a vLLM request whose prompt was never logged is a
// no_prompt problem at its request line, found at the end of the input.
func TestVLLMNoPrompt(t *testing.T) {
	em := &emitter{rd: newRedactor(DefaultOptions(), []byte("0123456789abcdef"), maphash.MakeSeed()), name: "vllm.log"}
	p := parserFor(FormatVLLM, em)
	p.parse([]byte(`INFO 03-01 10:00:00 [logger.py:45] Received request r1: params: SamplingParams(max_tokens=5), lora_request: None.`), 7)
	problems := p.end()
	if len(problems) != 1 || problems[0].Kind != KindNoPrompt || problems[0].Line != 7 || problems[0].File != "vllm.log" || len(em.out) != 0 {
		t.Errorf("got %+v and %d requests", problems, len(em.out))
	}
}
