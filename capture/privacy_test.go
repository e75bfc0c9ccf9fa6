package capture

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/traces"
)

// canaries hands out random marker strings and remembers them. The letters
// g–z never occur in hex digests, ids or numbers of a trace.
type canaries struct {
	rng  *rand.Rand
	list []string
}

func (c *canaries) next() string {
	var sb strings.Builder
	sb.WriteString("qz")
	for i := 0; i < 14; i++ {
		sb.WriteByte(byte('g' + c.rng.IntN(20)))
	}
	s := sb.String()
	c.list = append(c.list, s)
	return s
}

// text is a sentence with a canary inside, so it survives tokenizing intact
// only if content leaks.
func (c *canaries) text() string { return "please see " + c.next() + " now" }

func (c *canaries) check(t *testing.T, what string, out []byte) {
	t.Helper()
	for _, s := range c.leaks(out) {
		t.Errorf("%s contains (part of) canary %s", what, s)
	}
}

// leaks lists the canaries found in out, whole or by their inner part (in
// case one was split or re-encoded).
func (c *canaries) leaks(out []byte) []string {
	var found []string
	for _, s := range c.list {
		if bytes.Contains(out, []byte(s)) || bytes.Contains(out, []byte(s[4:12])) {
			found = append(found, s)
		}
	}
	return found
}

func canaryOpenAI(c *canaries, n int) string {
	var sb strings.Builder
	sys := c.text()
	tools := []any{map[string]any{"type": "function", "function": map[string]any{"name": c.next(), "description": c.text(),
		"parameters": map[string]any{"type": "object", "properties": map[string]any{c.next(): map[string]any{"type": "string", "description": c.text()}}}}}}
	var prevCall any
	var trace string
	for i := 0; i < n; i++ {
		msgs := []any{
			map[string]any{"role": "system", "content": sys},
			map[string]any{"role": "user", "name": c.next(), "content": []any{map[string]any{"type": "text", "text": c.text()}, map[string]any{"type": "image_url", "image_url": map[string]any{"url": "https://" + c.next() + ".example/x.png"}}}},
			map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": c.next(), "type": "function", "function": map[string]any{"name": c.next(), "arguments": `{"q":"` + c.next() + `"}`}}}},
			map[string]any{"role": "tool", "tool_call_id": c.next(), "content": c.text()},
			map[string]any{"role": "user", "content": c.text()},
		}
		line := map[string]any{
			"time":       fmt.Sprintf("2025-03-01T10:00:%02d.%03dZ", i/10, i%10*100),
			"request_id": c.next(),
			"session":    c.next(),
			"user":       c.next(),
			"metadata":   map[string]any{"tenant": c.next(), c.next(): c.next(), "ip": c.next()},
			"headers":    map[string]any{"x-api-key": c.next(), "authorization": "Bearer " + c.next()},
			"request": map[string]any{"model": "m", "messages": msgs, "tools": tools, "user": c.next(), "stop": []string{c.next()},
				"metadata": map[string]any{"k": c.next()}, "max_tokens": 50, "stream": i%2 == 0},
			"status": []any{200, 500, "error", c.next()}[i%4],
		}
		// Trace, call and parent ids (a chain of calls per trace of 3) and
		// a response end time with a canary, on some lines instead of the
		// session and user fields.
		if i%5 == 4 {
			delete(line, "session")
			delete(line, "user")
		}
		if i%3 == 0 {
			trace = c.next()
		}
		line["trace_id"] = trace
		line["call_id"] = c.next()
		if i%3 > 0 {
			line["parent_call_id"] = []any{c.next(), prevCall}[i%2]
		}
		prevCall = line["call_id"]
		line["end_time"] = []any{fmt.Sprintf("2025-03-01T10:00:%02d.%03dZ", i/10+1, i%10*100), c.next()}[i%2]
		if i%3 == 0 {
			// no usage: output is tokenized from the response text
			line["response"] = map[string]any{"id": c.next(), "system_fingerprint": c.next(), "choices": []any{map[string]any{"message": map[string]any{"role": "assistant", "content": c.text(), "tool_calls": []any{map[string]any{"id": c.next(), "function": map[string]any{"name": c.next(), "arguments": c.next()}}}}}}}
		} else {
			line["response"] = map[string]any{"id": c.next(), "error": map[string]any{"message": c.text(), "type": c.next()},
				"usage": map[string]any{"prompt_tokens": 40 + i, "completion_tokens": 9}}
		}
		b, _ := json.Marshal(line)
		sb.Write(b)
		sb.WriteByte('\n')
	}
	// Malformed lines with canaries.
	sb.WriteString(`{"time":"2025-03-01T10:00:00Z","request":{"messages":[{"role":"user","content":"` + c.next() + "\n")
	sb.WriteString(`{"time":"` + c.next() + `","request":{"model":"m","messages":[{"role":"user","content":"x"}]}}` + "\n")
	sb.WriteString(`{"time":"2025-03-01T10:00:00Z","request":{"model":"m","prompt":{"` + c.next() + `":1}}}` + "\n")
	sb.WriteString(`{"time":"2025-03-01T10:00:00Z","request":{"model":"m","messages":"` + c.next() + `"}}` + "\n")
	sb.WriteString("{\"time\":\"2025-03-01T10:00:00Z\",\"x\":\"" + c.next() + "\xff\xfe\"}\n")
	sb.WriteString(c.next() + "\n")
	return sb.String()
}

func canaryLiteLLM(c *canaries, n int) string {
	var sb strings.Builder
	sys := c.text()
	for i := 0; i < n; i++ {
		p := map[string]any{
			"id": c.next(), "trace_id": c.next(), "call_type": "acompletion", "status": []string{"success", "failure"}[i%2],
			"prompt_tokens": 30 * (i % 3), "completion_tokens": 5, "startTime": 1740823200.5 + float64(i), "endTime": 1740823201.5 + float64(i), "completionStartTime": 1740823201.0 + float64(i),
			"model": "m", "model_id": c.next(), "model_group": c.next(), "api_base": "https://" + c.next() + ".example",
			"model_map_information": map[string]any{"model_map_key": c.next()},
			"metadata": map[string]any{"user_api_key_hash": c.next(), "user_api_key_alias": c.next(), "user_api_key_user_id": c.next(), "user_api_key_team_id": c.next(),
				"spend_logs_metadata": map[string]any{c.next(): c.next()}, "requester_ip_address": c.next(), "requester_metadata": map[string]any{"x": c.next()}},
			"cache_key": c.next(), "request_tags": []string{c.next()}, "end_user": c.next(), "requester_ip_address": c.next(),
			"messages":  []any{map[string]any{"role": "system", "content": sys}, map[string]any{"role": "user", "content": c.text()}},
			"response":  map[string]any{"id": c.next(), "choices": []any{map[string]any{"message": map[string]any{"content": c.text()}}}},
			"error_str": c.text(), "error_information": map[string]any{"error_code": c.next(), "error_class": c.next(), "llm_provider": c.next()},
			"model_parameters": map[string]any{"tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": c.next(), "description": c.text()}}}, "user": c.next(), "stop": c.next()},
			"hidden_params":    map[string]any{"model_id": c.next(), "api_base": c.next(), "additional_headers": map[string]any{"x": c.next()}},
		}
		if i%4 == 3 {
			p = map[string]any{"standard_logging_object": p}
		}
		b, _ := json.Marshal(p)
		sb.Write(b)
		sb.WriteByte('\n')
	}
	sb.WriteString(`{"startTime":"` + c.next() + `","call_type":"x","messages":[]}` + "\n")
	sb.WriteString(`{"startTime":1740823200,"messages":[{"role":"` + c.next() + "\n")
	return sb.String()
}

func canaryVLLM(c *canaries, n int) string {
	var sb strings.Builder
	for i := 0; i < n; i++ {
		id := "chatcmpl-" + c.next()
		ts := fmt.Sprintf("03-01 10:00:%02d", i)
		params := fmt.Sprintf("SamplingParams(n=1, stop=['%s'], max_tokens=32, min_tokens=0)", c.next())
		lora := fmt.Sprintf("LoRARequest(lora_name='%s', lora_int_id=1, lora_path='/%s')", c.next(), c.next())
		switch i % 3 {
		case 0: // old format, prompt text and ids
			fmt.Fprintf(&sb, "INFO %s logger.py:37] Received request %s: prompt: '%s\\n%s', params: %s, prompt_token_ids: [1, 2, 3], lora_request: %s, prompt_adapter_request: None.\n", ts, id, c.text(), c.text(), params, lora)
			fmt.Fprintf(&sb, "INFO %s logger.py:70] Generated response %s: output: '%s', output_token_ids: [4, 5], finish_reason: stop\n", ts, id, c.text())
		case 1: // new format, DEBUG details with text only
			fmt.Fprintf(&sb, "(APIServer pid=1) DEBUG %s [logger.py:36] Request %s details: prompt: \"%s it's\", prompt_token_ids: None, prompt_embeds shape: None.\n", ts, id, c.text())
			fmt.Fprintf(&sb, "(APIServer pid=1) INFO %s [logger.py:45] Received request %s: params: %s, lora_request: %s.\n", ts, id, params, lora)
			fmt.Fprintf(&sb, "(APIServer pid=1) INFO %s [logger.py:80] Generated response %s (streaming delta): output: '%s', output_token_ids: None, finish_reason: None\n", ts, id, c.text())
			fmt.Fprintf(&sb, "(APIServer pid=1) INFO %s [logger.py:80] Generated response %s (streaming complete): output: '%s', output_token_ids: None, finish_reason: streaming_complete\n", ts, id, c.text())
		case 2: // INFO only: no prompt
			fmt.Fprintf(&sb, "(APIServer pid=1) INFO %s [logger.py:45] Received request %s: params: %s, lora_request: None.\n", ts, id, params)
			fmt.Fprintf(&sb, "(APIServer pid=1) ERROR %s [serving_chat.py:1] Error in request %s: %s\n", ts, id, c.text())
		}
	}
	fmt.Fprintf(&sb, "INFO 03-01 10:01:00 logger.py:37] Received request %s: prompt: '%s\n", c.next(), c.next())
	fmt.Fprintf(&sb, "INFO 03-01 10:01:00 logger.py:70] Generated response %s: output: '%s', output_token_ids: [1], finish_reason: stop\n", c.next(), c.next())
	return sb.String()
}

func canaryOTLP(c *canaries, n int) string {
	var sb strings.Builder
	attr := func(k string, v any) map[string]any {
		switch v := v.(type) {
		case int:
			return map[string]any{"key": k, "value": map[string]any{"intValue": fmt.Sprint(v)}}
		case float64:
			return map[string]any{"key": k, "value": map[string]any{"doubleValue": v}}
		}
		return map[string]any{"key": k, "value": map[string]any{"stringValue": v}}
	}
	// Pairs of calls share a trace id; the second of a pair is spawned by
	// the first through a tool span (parent links and trace sessions with
	// canary ids), every fourth names a conversation.
	var trace, prev string
	for i := 0; i < n; i++ {
		if i%2 == 0 {
			trace, prev = c.next(), ""
		}
		span, tool := c.next(), c.next()
		attrs := []any{attr("gen_ai.request.id", c.next()), attr("gen_ai.usage.prompt_tokens", 10+i), attr("gen_ai.usage.completion_tokens", 3),
			attr("gen_ai.latency.time_in_queue", 0.01), attr(c.next(), c.next()), attr("gen_ai.prompt", c.text())}
		if i%4 == 3 {
			attrs = append(attrs, attr("gen_ai.conversation.id", c.next()), attr("session.id", c.next()))
		}
		spans := []any{
			map[string]any{"traceId": trace, "spanId": span, "parentSpanId": tool, "name": "llm_request", "startTimeUnixNano": fmt.Sprint(1740823200000000000 + int64(i)*1e8),
				"endTimeUnixNano": fmt.Sprint(1740823200050000000 + int64(i)*1e8),
				"attributes":      attrs,
				"events":          []any{map[string]any{"name": c.next(), "attributes": []any{attr("x", c.text())}}},
				"status":          map[string]any{"code": i % 3, "message": c.text()}},
			map[string]any{"traceId": trace, "spanId": tool, "parentSpanId": prev, "name": c.next(), "startTimeUnixNano": "1740823200000000000", "attributes": []any{attr("http.url", c.next())}},
		}
		prev = span
		doc := map[string]any{"resourceSpans": []any{map[string]any{"resource": map[string]any{"attributes": []any{attr("service.name", c.next()), attr("host.name", c.next())}},
			"scopeSpans": []any{map[string]any{"scope": map[string]any{"name": c.next()}, "spans": spans}}}}}
		b, _ := json.Marshal(doc)
		sb.Write(b)
		sb.WriteByte('\n')
	}
	sb.WriteString(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"llm_request","startTimeUnixNano":"` + c.next() + `"}]}]}]}` + "\n")
	sb.WriteString(`{"resourceSpans":` + c.next() + "\n")
	return sb.String()
}

// TestPrivacyCanaries feeds logs with random canaries in every text field,
// user id, request id and metadata value (and in malformed lines) through
// every format, with and without --keep-hashes and --strict, and checks
// that no canary reaches the records, the metadata, the stats or an error.
func TestPrivacyCanaries(t *testing.T) {
	c := &canaries{rng: rand.New(rand.NewPCG(7, 8))}
	logs := map[string]string{
		FormatOpenAI:  canaryOpenAI(c, 30),
		FormatLiteLLM: canaryLiteLLM(c, 12),
		FormatVLLM:    canaryVLLM(c, 12),
		FormatOTLP:    canaryOTLP(c, 8),
	}
	for format, text := range logs {
		for _, variant := range []string{"default", "keep-hashes", "strict", "gzip"} {
			t.Run(format+"/"+variant, func(t *testing.T) {
				o := DefaultOptions()
				o.Format = FormatAuto
				o.BlockSize = 8
				o.MinCategorySize = 2
				o.Key = []byte("0123456789abcdef-test-key")
				data := []byte(text)
				switch variant {
				case "keep-hashes":
					o.KeepHashes, o.KeepStart = true, true
				case "strict":
					o.Strict = true
				case "gzip":
					var buf bytes.Buffer
					zw := gzip.NewWriter(&buf)
					zw.Write(data)
					zw.Close()
					data = buf.Bytes()[:buf.Len()-9] // truncated
				}
				res, err := Capture(context.Background(), o, []Input{{Name: "logs", R: bytes.NewReader(data)}})
				var out bytes.Buffer
				if err != nil {
					if variant != "strict" {
						t.Fatalf("capture: %v", err)
					}
					fmt.Fprintf(&out, "%v %+v", err, err)
				} else {
					if variant != "strict" && len(res.Records) == 0 {
						t.Fatalf("no records")
					}
					w, werr := traces.NewJSONLWriter(&out, res.Meta)
					if werr != nil {
						t.Fatal(werr)
					}
					w.Write(res.Records)
					w.Close()
					fmt.Fprintf(&out, "%+v %v", res.Stats, res.Stats.Problems)
					for _, p := range res.Stats.Problems {
						out.WriteString(p.First.Error())
					}
					if res.Stats.Malformed() == 0 {
						t.Errorf("the malformed canary lines were not counted")
					}
				}
				c.check(t, "capture output", out.Bytes())
				if bytes.Contains(out.Bytes(), o.Key) {
					t.Errorf("output contains the key")
				}
			})
		}
	}
}

// TestPrivacyCheckCatchesLeaks shows the canary check can fail: model names
// leave capture by design (docs/commands.md, capture), so a canary placed there must be found.
func TestPrivacyCheckCatchesLeaks(t *testing.T) {
	c := &canaries{rng: rand.New(rand.NewPCG(9, 9))}
	model := c.next()
	line := `{"time":"2025-03-01T10:00:00Z","request":{"model":"` + model + `","messages":[{"role":"user","content":"hi"}]}}` + "\n"
	res := mustCapture(t, DefaultOptions(), []Input{{R: strings.NewReader(line)}})
	var out bytes.Buffer
	w, _ := traces.NewJSONLWriter(&out, res.Meta)
	w.Write(res.Records)
	w.Close()
	if len(c.leaks(out.Bytes())) != 1 {
		t.Errorf("the canary check did not notice a canary in the model column")
	}
}
