package engine

import (
	"fmt"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/tokentrace/tokentrace/internal/golden"
)

var createdRE = regexp.MustCompile(`"created":\d+`)

// TestGoldenSSE records what a real HTTP client receives, byte for byte
// (only "created" is normalized): vLLM's chunk shapes for completions and
// chat, usage, continuous usage, cached tokens, per-request metrics,
// non-streaming bodies, a mid-stream error event and error JSON. The server
// runs in Virtual mode, so every timing in the metrics objects is the step
// model's and the transcripts are stable.
func TestGoldenSSE(t *testing.T) {
	s := startSim(t, func(o *Options) {
		o.Virtual = true
		o.PerRequestMetrics = true
		o.RequestIDHeaders = true
	})
	cases := []struct {
		name, path, body string
		hdr              map[string]string
	}{
		{"completions_stream_usage", "/v1/completions",
			`{"model":"sim-llama3-8b","prompt":"The quick brown fox jumps over the lazy dog.","max_tokens":5,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}`, nil},
		{"completions_stream_continuous_usage", "/v1/completions",
			`{"prompt":[300,301,302,303,304,305,306,307,308,309,310,311,312,313,314,315,316,317],"max_tokens":3,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true}}`, nil},
		{"completions_stream_cached_tokens", "/v1/completions",
			`{"prompt":[300,301,302,303,304,305,306,307,308,309,310,311,312,313,314,315,316,317,999],"max_tokens":2,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}`, nil},
		{"completions_stream_no_usage", "/v1/completions",
			`{"prompt":"no usage","max_tokens":2,"ignore_eos":true,"stream":true}`, nil},
		{"chat_stream_usage", "/v1/chat/completions",
			`{"model":"sim-llama3-8b","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say something."}],"max_tokens":4,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}`, nil},
		{"chat_stream_continuous_usage", "/v1/chat/completions",
			`{"messages":[{"role":"user","content":[{"type":"text","text":"Count to three."}]}],"max_completion_tokens":3,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true}}`, nil},
		{"chat_stream_error_event", "/v1/chat/completions",
			`{"messages":[{"role":"user","content":"fail please"}],"max_tokens":6,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}`,
			map[string]string{FaultHeader: "stream-error"}},
		{"completions_nonstream", "/v1/completions",
			`{"prompt":"Hello","max_tokens":3,"ignore_eos":true}`, nil},
		{"chat_nonstream", "/v1/chat/completions",
			`{"messages":[{"role":"user","content":"Hello"}],"max_tokens":3,"ignore_eos":true}`, nil},
		{"error_context_length", "/v1/completions",
			`{"prompt":"x","max_tokens":5000}`, nil},
		{"error_unknown_model", "/v1/chat/completions",
			`{"model":"gpt-4o","messages":[{"role":"user","content":"x"}]}`, nil},
		{"error_fault_503", "/v1/completions", `{"prompt":"x"}`, map[string]string{FaultHeader: "503"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			hdr := map[string]string{"X-Request-Id": c.name}
			for k, v := range c.hdr {
				hdr[k] = v
			}
			st, h, body := post(t, s.URL+c.path, c.body, hdr)
			got := fmt.Sprintf("POST %s\n%s\n\nHTTP %d\nContent-Type: %s\nX-Request-Id: %s\n\n%s", c.path, c.body, st,
				h.Get("Content-Type"), h.Get("X-Request-Id"), createdRE.ReplaceAllString(body, `"created":0`))
			golden.Check(t, filepath.Join("testdata", "golden", c.name+".txt"), []byte(got))
		})
	}
}
