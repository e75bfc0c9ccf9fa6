package capture

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
)

func fuzzCapture(f *testing.F, format string, seeds ...string) {
	for _, s := range seeds {
		b, err := os.ReadFile(filepath.Join("testdata", s))
		if err != nil {
			f.Fatal(err)
		}
		if format == FormatVLLM {
			f.Add(b) // request and output lines join across lines
		}
		lines := bytes.SplitAfter(b, []byte("\n"))
		for _, l := range lines {
			f.Add(l)
		}
	}
	testEncode = func(s string) []int { // one token per 4 bytes
		ids := make([]int, (len(s)+3)/4)
		for i := range ids {
			ids[i] = int(s[i*4])
		}
		return ids
	}
	f.Cleanup(func() { testEncode = nil })
	f.Fuzz(func(t *testing.T, data []byte) {
		o := DefaultOptions()
		o.Format = format
		o.BlockSize = 4
		o.MinCategorySize = 2
		o.MaxLineBytes = 1 << 16
		o.Year = 2025
		res, err := Capture(context.Background(), o, []Input{{Name: "fuzz", R: bytes.NewReader(data)}})
		if err != nil {
			t.Fatalf("non-strict capture failed: %v", err)
		}
		cats := map[string]int{}
		for i, r := range res.Records {
			if r.Seq != int64(i) || r.ArrivalNs < 0 || (i > 0 && r.ArrivalNs < res.Records[i-1].ArrivalNs) {
				t.Fatalf("record %d out of order: %+v", i, r)
			}
			if r.InputTokens < 0 || r.OutputTokens < 0 || r.RequestID != "" {
				t.Fatalf("record %d: %+v", i, r)
			}
			if r.Category != "" {
				cats[r.Category]++
			}
		}
		for c, n := range cats {
			if n < o.MinCategorySize {
				t.Fatalf("category %s has %d < k requests", c, n)
			}
		}
		o.Strict = true
		Capture(context.Background(), o, []Input{{Name: "fuzz", R: bytes.NewReader(data)}})
	})
}

func FuzzOpenAI(f *testing.F)  { fuzzCapture(f, FormatOpenAI, "openai.jsonl") }
func FuzzLiteLLM(f *testing.F) { fuzzCapture(f, FormatLiteLLM, "litellm.jsonl") }
func FuzzVLLM(f *testing.F)    { fuzzCapture(f, FormatVLLM, "vllm_old.log", "vllm_new.log") }
func FuzzOTLP(f *testing.F)    { fuzzCapture(f, FormatOTLP, "otlp.jsonl", "otlp_agent.jsonl") }
func FuzzAuto(f *testing.F) {
	fuzzCapture(f, FormatAuto, "openai.jsonl", "litellm.jsonl", "vllm_new.log", "otlp.jsonl")
}

// FuzzPyString checks the Python repr decoder never panics and round-trips
// plain strings.
func FuzzPyString(f *testing.F) {
	f.Add(`'it\'s \x41\u00e9\n', rest`)
	f.Add(`"a\\b"`)
	f.Fuzz(func(t *testing.T, s string) {
		pyString(s)
		pyIntList(s)
		maxTokensOf(s)
		decimalNs(s, 1e9)
	})
}
