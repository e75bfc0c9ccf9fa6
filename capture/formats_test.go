package capture

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

func captureFiles(t *testing.T, o Options, names ...string) *Result {
	t.Helper()
	var inputs []Input
	for _, n := range names {
		f, err := os.Open(filepath.Join("testdata", n))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		inputs = append(inputs, Input{Name: n, R: f})
	}
	return mustCapture(t, o, inputs)
}

// mustCapture is Capture of inputs with o; an error fails the test.
func mustCapture(t *testing.T, o Options, inputs []Input) *Result {
	t.Helper()
	res, err := Capture(context.Background(), o, inputs)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// captureN captures the fixture name with o and wants n records.
func captureN(t *testing.T, o Options, name string, n int) (*Result, []traces.Record) {
	t.Helper()
	res := captureFiles(t, o, name)
	if len(res.Records) != n {
		t.Fatalf("%s: %d records, want %d", name, len(res.Records), n)
	}
	return res, res.Records
}

// captureVLLM captures a vLLM server log fixture: its timestamps carry no
// year, so the capture is told 2025.
func captureVLLM(t *testing.T, name string, blockSize, n int) (*Result, []traces.Record) {
	t.Helper()
	o := DefaultOptions()
	o.BlockSize = blockSize
	o.Year = 2025
	return captureN(t, o, name, n)
}

func tok(t *testing.T, s string) int32 {
	t.Helper()
	// tiktoken-go itself, so these tests also pin the fast encoder.
	return int32(len(tiktokenIDs(t, DefaultTokenizer, s)))
}

// msgTok is one chat message as capture counts it: 3 + role + content.
func msgTok(t *testing.T, role, content string) int32 { return 3 + tok(t, role) + tok(t, content) }

func canonJSON(t *testing.T, raw string) string {
	var v any
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

const (
	fixtureSys1  = "You are Nimbus, the support assistant for Quokka Rentals. Answer briefly and politely."
	fixtureTools = `[{"type":"function","function":{"name":"lookup_booking","description":"Find a booking by its code","parameters":{"type":"object","properties":{"code":{"type":"string"}},"required":["code"]}}}]`
)

func problemOf(res *Result, kind string) (Problem, bool) {
	for _, p := range res.Stats.Problems {
		if p.Kind == kind {
			return p, true
		}
	}
	return Problem{}, false
}

func TestOpenAIFixture(t *testing.T) {
	o := DefaultOptions()
	o.MinCategorySize = 2
	o.BlockSize = 0
	res := captureFiles(t, o, "openai.jsonl")
	toolsTok := tok(t, canonJSON(t, fixtureTools))
	prefix := toolsTok + msgTok(t, "system", fixtureSys1)
	const nr = traces.NotReported
	type want struct {
		arrival      time.Duration
		session      int64
		turn         int32
		category     string
		prefixTokens int32
		in, out      int32
		api, model   string
		first, last  int64
		status       string
		http         int32
		srvIn        int32
	}
	ms := func(v float64) int64 { return int64(v * 1e6) }
	wants := []want{
		// line 1: conversation A starts; tools + system → category c1 (6 requests ≥ k=2)
		{0, 1, 1, "c1", prefix, 100, 20, "chat", "m1", ms(120.5), ms(900.25), "ok", 200, 100},
		// line 2: same tools with keys reordered → same category; single-shot
		{500 * time.Millisecond, 0, 0, "c1", prefix, 110, 30, "chat", "m1", nr, ms(500 + 1500), "ok", 200, 110},
		// line 3: Unix seconds
		{time.Second, 0, 0, "c1", prefix, 90, 5, "chat", "m1", nr, nr, "ok", 0, 90},
		// line 4: Unix milliseconds; extends line 1 (tool call + tool result) → turn 2
		{1250 * time.Millisecond, 1, 2, "c1", prefix, 150, 10, "chat", "m1", ms(1250 + 80), ms(1250 + 400), "ok", 200, 150},
		// line 5: completions, no usage → tokenized prompt and output text
		{2125 * time.Millisecond, 0, 0, "", 0, tok(t, "Once upon a time"), tok(t, " there was a cat."), "completions", "m1-base", nr, nr, "ok", 0, nr},
		// line 6: array content parts (image part adds nothing); its category has 1 request < k → ""
		{3 * time.Second, 0, 0, "", 0, 3 + msgTok(t, "system", "Describe images for the catalogue.") + msgTok(t, "user", "What is on this photo?"), tok(t, "A red kayak."), "chat", "m1", nr, nr, "ok", 200, nr},
		// line 7: HTTP 500 with no usage: tokenized input, no output
		{4 * time.Second, 0, 0, "c1", prefix, 3 + toolsTok + msgTok(t, "system", fixtureSys1) + msgTok(t, "user", "Cancel everything"), 0, "chat", "m1", nr, ms(4000 + 12), "http_error", 500, nr},
		// lines 8, 9: explicit session field
		{5 * time.Second, 2, 1, "", 0, 10, 3, "chat", "m2", nr, nr, "ok", 0, 10},
		{6 * time.Second, 2, 2, "", 0, 12, 4, "chat", "m2", nr, nr, "ok", 0, 12},
		// line 12: conversation A turn 3
		{7 * time.Second, 1, 3, "c1", prefix, 200, 8, "chat", "m1", nr, nr, "ok", 200, 200},
	}
	if len(res.Records) != len(wants) {
		t.Fatalf("got %d records, want %d", len(res.Records), len(wants))
	}
	for i, w := range wants {
		r := res.Records[i]
		got := want{time.Duration(r.ArrivalNs), r.Session, r.Turn, r.Category, r.PrefixTokens, r.InputTokens, r.OutputTokens, r.API, r.Model, r.FirstTokenNs, r.LastTokenNs, r.Status, r.HTTPStatus, r.ServerPromptTokens}
		if got != w {
			t.Errorf("record %d:\n got %+v\nwant %+v", i, got, w)
		}
		if r.Run != RunLabel || r.SentNs != r.ArrivalNs || r.RequestID != "" {
			t.Errorf("record %d: run %q sent %d request id %q", i, r.Run, r.SentNs, r.RequestID)
		}
	}
	if res.Records[0].ServerCachedTokens != 64 {
		t.Errorf("cached tokens %d, want 64", res.Records[0].ServerCachedTokens)
	}
	if res.Records[6].Error != "http 500" {
		t.Errorf("error %q", res.Records[6].Error)
	}
	if p, ok := problemOf(res, KindBadJSON); !ok || p.Count != 1 || p.First.Line != 10 {
		t.Errorf("bad_json problem %+v", p)
	}
	if p, ok := problemOf(res, KindMissing); !ok || p.Count != 1 || p.First.Line != 11 || p.First.Field != "time" {
		t.Errorf("missing_field problem %+v", p)
	}
	if res.Stats.Categories != 1 || res.Stats.CategoriesDropped != 1 || res.Stats.Sessions != 2 {
		t.Errorf("stats %+v", res.Stats)
	}
	m := res.Meta
	if m.Source != "capture:openai-jsonl" || m.KThreshold != 2 || m.KeyFingerprint != EphemeralFingerprint || m.Tokenizer != "usage+o200k_base" {
		t.Errorf("meta %+v", m)
	}
	if got := m.Get("capture.start"); got != "2025-03-01T10:00:00Z" {
		t.Errorf("start %q", got)
	}
}

func TestOpenAIBlocks(t *testing.T) {
	o := DefaultOptions()
	o.MinCategorySize = 2
	o.BlockSize = 16
	res := captureFiles(t, o, "openai.jsonl")
	seen := map[int64]int{}
	for _, r := range res.Records {
		want := (int(r.InputTokens) + 15) / 16
		if len(r.PrefixBlocks) != want {
			t.Errorf("seq %d: %d blocks for %d tokens, want %d", r.Seq, len(r.PrefixBlocks), r.InputTokens, want)
		}
		for _, b := range r.PrefixBlocks {
			seen[b]++
		}
	}
	for b, n := range seen {
		if n > 1 && n < 2 {
			t.Errorf("block %d shared by %d < k requests", b, n)
		}
	}
	// The c1 requests share their first blocks (tools + system prompt).
	var first []int64
	for _, r := range res.Records {
		if r.Category != "c1" {
			continue
		}
		if first == nil {
			first = r.PrefixBlocks[:3]
			continue
		}
		for j := 0; j < 3; j++ {
			if r.PrefixBlocks[j] != first[j] {
				t.Errorf("seq %d block %d = %d, want shared %d", r.Seq, j, r.PrefixBlocks[j], first[j])
			}
		}
	}
	if first[0] != 1 || first[1] != 2 || first[2] != 3 {
		t.Errorf("first blocks %v, want renumbered 1 2 3", first)
	}
	// Conversation A's turns share more than the category prefix.
	a1, a2 := res.Records[0].PrefixBlocks, res.Records[3].PrefixBlocks
	if a1[3] == a2[3] {
		t.Logf("turn blocks %v %v", a1, a2)
	}
	// With k above every sharing count, no block id repeats.
	o.MinCategorySize = 100
	res = captureFiles(t, o, "openai.jsonl")
	ids := map[int64]bool{}
	for _, r := range res.Records {
		for _, b := range r.PrefixBlocks {
			if ids[b] {
				t.Fatalf("block %d repeats although k=100", b)
			}
			ids[b] = true
		}
	}
}

func TestFieldRemap(t *testing.T) {
	in := `{"ts":"2025-03-01T10:00:00Z","body":{"req":{"model":"m","messages":[{"role":"user","content":"hi"}]},"resp":{"usage":{"prompt_tokens":7,"completion_tokens":2}}},"sid":"s1","http":{"code":429},"timing":{"first":12.5,"total":50}}
{"ts":"2025-03-01T10:00:01.000000001Z","body":{"req":{"model":"m","messages":[{"role":"user","content":"ho"}]},"resp":{"usage":{"prompt_tokens":8,"completion_tokens":3}}},"sid":"s1","http":{"code":200}}
`
	o := DefaultOptions()
	o.Format = FormatOpenAI
	o.Fields = map[string]string{"time": "ts", "request": "body.req", "response": "body.resp", "session": "sid", "status": "http.code", "ttft_ms": "timing.first", "latency_ms": "timing.total"}
	res := mustCapture(t, o, []Input{{Name: "x", R: stringsReader(in)}})
	if len(res.Records) != 2 {
		t.Fatalf("%d records", len(res.Records))
	}
	r0, r1 := res.Records[0], res.Records[1]
	if r0.InputTokens != 7 || r0.HTTPStatus != 429 || r0.Status != traces.StatusHTTPError || r0.FirstTokenNs != 12_500_000 || r0.LastTokenNs != 50_000_000 {
		t.Errorf("r0 %+v", r0)
	}
	if r1.ArrivalNs != 1_000_000_001 || r1.Session != 1 || r1.Turn != 2 || r0.Session != 1 || r0.Turn != 1 {
		t.Errorf("r1 %+v", r1)
	}
}

func TestLiteLLMFixture(t *testing.T) {
	o := DefaultOptions()
	o.BlockSize = 0
	o.MinCategorySize = 2
	res, r := captureN(t, o, "litellm.jsonl", 4)
	sys := "You translate product names into French."
	// payload 1: usage, stream timings (startTime has µs: exact)
	if r[0].ArrivalNs != 0 || r[0].InputTokens != 50 || r[0].OutputTokens != 7 || r[0].FirstTokenNs != 300_000_000 || r[0].LastTokenNs != 1_376_544_000 || r[0].ServerCachedTokens != 32 {
		t.Errorf("r0 %+v", r[0])
	}
	if r[0].Category != "c1" || r[0].PrefixTokens != msgTok(t, "system", sys) || r[0].Session != 1 || r[0].Turn != 1 {
		t.Errorf("r0 category/session %+v", r[0])
	}
	// payload 2: failure, prompt_tokens 0 → tokenized; HTTP 429 from error_code
	wantIn := 3 + msgTok(t, "system", sys) + msgTok(t, "user", "red chair")
	if r[1].ArrivalNs != 1_876_544_000 || r[1].Status != traces.StatusHTTPError || r[1].HTTPStatus != 429 || r[1].InputTokens != wantIn || r[1].OutputTokens != 0 || r[1].FirstTokenNs != traces.NotReported || r[1].Error != "http 429" {
		t.Errorf("r1 %+v (want input %d)", r[1], wantIn)
	}
	// payload 3 (wrapped): same end_user → session 1 turn 2
	if r[2].ArrivalNs != 3_376_544_000 || r[2].Session != 1 || r[2].Turn != 2 || r[2].InputTokens != 70 || r[2].FirstTokenNs != r[2].ArrivalNs+250_000_000 {
		t.Errorf("r2 %+v", r[2])
	}
	// payload 4: text completion, ISO times
	if r[3].API != traces.APICompletions || r[3].InputTokens != 4 || r[3].OutputTokens != 12 || r[3].ArrivalNs != 4_876_544_000 || r[3].Category != "" || r[3].LastTokenNs-r[3].ArrivalNs != 1e9 {
		t.Errorf("r3 %+v", r[3])
	}
	if p, ok := problemOf(res, KindMissing); !ok || p.First.Line != 5 {
		t.Errorf("problems %+v", res.Stats.Problems)
	}
}

func TestVLLMOldFormat(t *testing.T) {
	res, r := captureVLLM(t, "vllm_old.log", 4, 2)
	if r[0].InputTokens != 10 || r[0].OutputTokens != 3 || r[0].ServerOutputTokens != 3 || r[0].ArrivalNs != 0 || r[0].API != traces.APICompletions || len(r[0].PrefixBlocks) != 3 {
		t.Errorf("r0 %+v", r[0])
	}
	if r[1].InputTokens != 3 || r[1].OutputTokens != 2 || r[1].ArrivalNs != int64(time.Second) {
		t.Errorf("r1 %+v", r[1])
	}
	if p, ok := problemOf(res, KindUnmatched); !ok || p.First.Line != 8 {
		t.Errorf("unmatched: %+v", res.Stats.Problems)
	}
	if p, ok := problemOf(res, KindBadLogLine); !ok || p.First.Line != 9 {
		t.Errorf("bad log line: %+v", res.Stats.Problems)
	}
	if res.Meta.Get("capture.input.1.time_precision") != "1s" || res.Meta.Get("capture.input.1.year") != "2025" || res.Meta.Get("capture.start") != "2025-03-01T10:00:00Z" {
		t.Errorf("meta %+v", res.Meta.Extra)
	}
	if res.Meta.Tokenizer != SourceTokenIDs {
		t.Errorf("tokenizer %q", res.Meta.Tokenizer)
	}
}

func TestVLLMNewFormat(t *testing.T) {
	res, r := captureVLLM(t, "vllm_new.log", 0, 3)
	// chatcmpl-1: ids at DEBUG; output = streaming deltas' ids
	if r[0].InputTokens != 12 || r[0].OutputTokens != 3 || r[0].ArrivalNs != 0 {
		t.Errorf("r0 %+v", r[0])
	}
	// chatcmpl-3: prompt text only → tokenized; output ids from the DEBUG details line; crosses New Year
	if r[1].InputTokens != tok(t, "Summarise: the cat sat on the mat.") || r[1].OutputTokens != 4 || r[1].ArrivalNs != int64(3*time.Second) {
		t.Errorf("r1 %+v", r[1])
	}
	// chatcmpl-4: aborted; output unknown → max_tokens
	if r[2].Status != traces.StatusDisconnect || r[2].InputTokens != 5 || r[2].OutputTokens != 8 {
		t.Errorf("r2 %+v", r[2])
	}
	// chatcmpl-2 logged only at INFO: no prompt
	if p, ok := problemOf(res, KindNoPrompt); !ok || p.First.Line != 4 || p.Count != 1 {
		t.Errorf("no_prompt: %+v", res.Stats.Problems)
	}
	if res.Meta.Get("capture.start") != "2025-12-31T23:00:00Z" {
		t.Errorf("start %q", res.Meta.Get("capture.start"))
	}
}

func TestOTLPFixture(t *testing.T) {
	res, r := captureN(t, DefaultOptions(), "otlp.jsonl", 3)
	if r[0].InputTokens != 812 || r[0].OutputTokens != 64 || r[0].FirstTokenNs != 250_000_000 || r[0].LastTokenNs != 1_500_000_000 ||
		r[0].ServerQueueNs != 125_000_000 || r[0].ServerPrefillNs != 100_000_000 || r[0].ServerDecodeNs != 1_250_000_000 {
		t.Errorf("r0 %+v", r[0])
	}
	if r[1].ArrivalNs != 500_000_000 || r[1].ServerQueueNs != 0 || r[1].InputTokens != 20 {
		t.Errorf("r1 %+v", r[1])
	}
	if r[2].Status != traces.StatusHTTPError || r[2].ServerQueueNs != 2_500_000_000 || r[2].OutputTokens != 0 || r[2].ServerOutputTokens != traces.NotReported {
		t.Errorf("r2 %+v", r[2])
	}
	if res.Stats.Ignored != 1 {
		t.Errorf("ignored %d", res.Stats.Ignored)
	}
	if p, ok := problemOf(res, KindMissing); !ok || p.First.Line != 3 {
		t.Errorf("problems %+v", res.Stats.Problems)
	}
}

func TestSniff(t *testing.T) {
	for _, c := range []struct{ file, want string }{
		{"openai.jsonl", FormatOpenAI}, {"litellm.jsonl", FormatLiteLLM}, {"otlp.jsonl", FormatOTLP},
		{"vllm_old.log", FormatVLLM}, {"vllm_new.log", FormatVLLM},
	} {
		b, err := os.ReadFile(filepath.Join("testdata", c.file))
		if err != nil {
			t.Fatal(err)
		}
		if got := sniff(b); got != c.want {
			t.Errorf("%s sniffed as %s, want %s", c.file, got, c.want)
		}
	}
}
