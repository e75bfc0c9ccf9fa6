package logshape

import "testing"

// TestGuessAndRecognise: capture's guess names a shape for any line; a
// reader of traces is told a shape only where the line proves it.
func TestGuessAndRecognise(t *testing.T) {
	for _, c := range []struct {
		head         string
		guess, proof Shape
	}{
		{"\n  \n" + `{"request":{"model":"m","messages":[]}}` + "\n", OpenAI, OpenAI},
		{`{"model":"m","prompt":"x"}`, OpenAI, OpenAI},
		{`{"seq":0,"arrival_ns":0}`, OpenAI, None},
		{`{"id":"x","call_type":"acompletion","startTime":1.5}`, LiteLLM, LiteLLM},
		{`{"standard_logging_object":{}}`, LiteLLM, LiteLLM},
		{`{"resourceSpans":[]}`, OTLP, OTLP},
		{"INFO 03-01 10:00:00 api_server.py:527] vLLM API server version 0.6.3", VLLM, VLLM},
		{"(APIServer pid=4242) INFO 12-31 23:59:50 [api_server.py:1880] Starting", VLLM, VLLM},
		{"seq,arrival_ns,input_tokens\n0,0,5\n", VLLM, None},
		{"", None, None},
		{" \n\t\n", None, None},
	} {
		line := FirstLine([]byte(c.head))
		if got := Guess(line); got != c.guess {
			t.Errorf("Guess(%q) = %v, want %v", line, got, c.guess)
		}
		if got := Recognise(line); got != c.proof {
			t.Errorf("Recognise(%q) = %v, want %v", line, got, c.proof)
		}
	}
}
