package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"iter"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

func TestParseChunk(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want chunk
		err  bool
	}{
		{
			// A completions token chunk carries text.
			name: "completions token",
			in:   `{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":" hi","logprobs":null,"finish_reason":null,"stop_reason":null}]}`,
			want: chunk{choices: true, content: true, text: []byte(" hi")},
		},
		{
			// The chat role chunk has choices but no content.
			name: "chat role chunk",
			in:   `{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`,
			want: chunk{choices: true},
		},
		{
			// A chat content chunk with an escaped quote in the text.
			name: "chat content escaped",
			in:   `{"choices":[{"index":0,"delta":{"content":"a \"b\" \\"}}]}`,
			want: chunk{choices: true, content: true, text: []byte(`a \"b\" \\`)},
		},
		{
			// The final usage chunk with cached tokens and vLLM's metrics object.
			name: "usage with metrics",
			in:   `{"id":"x","choices":[],"usage":{"prompt_tokens":100,"total_tokens":110,"completion_tokens":10,"prompt_tokens_details":{"cached_tokens":64}},"metrics":{"time_to_first_token_ms":12.5,"generation_time_ms":99.25,"queue_time_ms":0.5,"mean_itl_ms":11.0,"tokens_per_second":90.1}}`,
			want: chunk{promptTokens: 100, completionTokens: 10, cachedTokens: 64, queueMs: 0.5, ttftMs: 12.5, genMs: 99.25},
		},
		{
			// prompt_tokens_details may be null.
			name: "usage null details",
			in:   `{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3,"prompt_tokens_details":null}}`,
			want: chunk{promptTokens: 7, completionTokens: 3},
		},
		{
			// Every chunk before the last says "usage":null, and a server may
			// send null choices or metrics: each reads as absent.
			name: "null usage, choices and metrics",
			in:   `{"choices":null,"usage":null,"metrics":null}`,
			want: chunk{queueMs: math.NaN(), ttftMs: math.NaN(), genMs: math.NaN()},
		},
		{
			// A misspelt null where an object may stand is malformed.
			name: "misspelt null usage",
			in:   `{"choices":[],"usage":nul}`,
			err:  true,
		},
		{
			// Nested error body (vLLM >= 0.10.1): type and code only, never the message.
			name: "nested error",
			in:   `{"error":{"message":"secret words","type":"BadRequestError","param":null,"code":400}}`,
			want: chunk{isError: true, errType: "BadRequestError", errCode: "400"},
		},
		{
			// Flat error body (older vLLM).
			name: "flat error",
			in:   `{"object":"error","message":"secret","type":"InternalServerError","param":null,"code":500}`,
			want: chunk{isError: true, errType: "InternalServerError", errCode: "500"},
		},
		{
			// A truncated chunk is malformed.
			name: "truncated",
			in:   `{"choices":[{"text":"x"`,
			err:  true,
		},
		{
			// Trailing garbage is malformed.
			name: "trailing garbage",
			in:   `{"choices":[]} x`,
			err:  true,
		},
		{
			// Not JSON at all.
			name: "not json",
			in:   `hello`,
			err:  true,
		},
		{
			// Token ids count as content even when the text is empty.
			name: "token ids",
			in:   `{"choices":[{"text":"","token_ids":[5]}]}`,
			want: chunk{choices: true, content: true, ids: []byte("[5]")},
		},
		{
			// vLLM's chat token_ids sit beside the delta; the text kept is
			// the answer's content, still escaped.
			name: "chat token ids",
			in:   `{"choices":[{"index":0,"delta":{"content":"x\ny"},"token_ids":[7, 8]}]}`,
			want: chunk{choices: true, content: true, text: []byte(`x\ny`), ids: []byte("[7, 8]")},
		},
		{
			// Reasoning is content but not the answer: context growth does
			// not send it back.
			name: "reasoning only",
			in:   `{"choices":[{"index":0,"delta":{"reasoning_content":"think"}}]}`,
			want: chunk{choices: true, content: true},
		},
		{
			// prompt_token_ids (vLLM's first chunk) are the prompt's, not the output's.
			name: "prompt token ids",
			in:   `{"choices":[{"index":0,"text":"","prompt_token_ids":[1,2]}]}`,
			want: chunk{choices: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got chunk
			err := parseChunk([]byte(tt.in), &got)
			if tt.err {
				if err == nil {
					t.Fatalf("parseChunk(%s) = nil error, want an error", tt.in)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseChunk(%s) = %v", tt.in, err)
			}
			want := tt.want
			fill := func(c *chunk) {
				if c.promptTokens == 0 && !strings.Contains(tt.in, "prompt_tokens") {
					c.promptTokens = -1
				}
				if c.completionTokens == 0 && !strings.Contains(tt.in, "completion_tokens") {
					c.completionTokens = -1
				}
				if c.cachedTokens == 0 && !strings.Contains(tt.in, "cached_tokens") {
					c.cachedTokens = -1
				}
				if !strings.Contains(tt.in, "metrics") {
					c.queueMs, c.ttftMs, c.genMs = math.NaN(), math.NaN(), math.NaN()
				}
			}
			fill(&want)
			if !chunkEqual(got, want) {
				t.Errorf("parseChunk(%s) = %+v, want %+v", tt.in, got, want)
			}
		})
	}
}

func chunkEqual(a, b chunk) bool {
	f := func(x, y float64) bool { return x == y || (math.IsNaN(x) && math.IsNaN(y)) }
	return a.choices == b.choices && a.content == b.content && a.promptTokens == b.promptTokens &&
		a.completionTokens == b.completionTokens && a.cachedTokens == b.cachedTokens &&
		f(a.queueMs, b.queueMs) && f(a.ttftMs, b.ttftMs) && f(a.genMs, b.genMs) &&
		a.isError == b.isError && a.errType == b.errType && a.errCode == b.errCode &&
		string(a.text) == string(b.text) && string(a.ids) == string(b.ids)
}

// FuzzParseChunk checks that the hand-written chunk parser never panics and
// agrees with encoding/json on usage and validity for well-formed input.
func FuzzParseChunk(f *testing.F) {
	f.Add(`{"choices":[{"index":0,"text":" hi","finish_reason":null}]}`)
	f.Add(`{"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":10,"prompt_tokens_details":{"cached_tokens":64}},"metrics":{"queue_time_ms":1.5}}`)
	f.Add(`{"error":{"message":"m","type":"T","code":400}}`)
	f.Add(`{"choices":[{"delta":{"content":"\u00e9\"x"}}]}`)
	f.Add(`[1,2,{"a":-1.5e3}]`)
	f.Add(`{"choices":[{"text":"a","token_ids":[1,2]}]}`)
	f.Fuzz(func(t *testing.T, s string) {
		var c chunk
		err := parseChunk([]byte(s), &c)
		if err != nil {
			return
		}
		// What context growth keeps is a piece of the input: ids an array.
		if len(c.ids) > 0 && (c.ids[0] != '[' || c.ids[len(c.ids)-1] != ']' || !strings.Contains(s, string(c.ids))) {
			t.Errorf("token_ids kept as %q", c.ids)
		}
		if len(c.text) > 0 && !strings.Contains(s, string(c.text)) {
			t.Errorf("text kept as %q", c.text)
		}
		if !json.Valid([]byte(s)) {
			// The scanner is lenient about escapes inside strings and number
			// syntax; it must still have consumed a whole object.
			return
		}
		// encoding/json matches keys case-insensitively; servers send them
		// exactly, and so does the scanner: compare only exact-case input.
		// Keys with escapes ("us\u0061ge") are decoded by encoding/json only.
		if strings.Contains(s, `\`) {
			return
		}
		low := strings.ToLower(s)
		for _, k := range []string{`"usage"`, `"prompt_tokens"`, `"completion_tokens"`} {
			if strings.Count(low, k) != strings.Count(s, k) {
				return
			}
		}
		var v struct {
			Usage *struct {
				PromptTokens     *int64 `json:"prompt_tokens"`
				CompletionTokens *int64 `json:"completion_tokens"`
			} `json:"usage"`
		}
		if json.Unmarshal([]byte(s), &v) != nil || v.Usage == nil {
			return
		}
		if p := v.Usage.PromptTokens; p != nil && *p >= 0 && *p < math.MaxInt32 && c.promptTokens != *p {
			t.Errorf("prompt_tokens = %d, encoding/json says %d", c.promptTokens, *p)
		}
		if p := v.Usage.CompletionTokens; p != nil && *p >= 0 && *p < math.MaxInt32 && c.completionTokens != *p {
			t.Errorf("completion_tokens = %d, encoding/json says %d", c.completionTokens, *p)
		}
	})
}

// FuzzSSEReader checks that the SSE splitters (sseReader, which reads, and
// sseSplitter, which bytes are pushed to) never panic and return each data
// line's payload.
func FuzzSSEReader(f *testing.F) {
	f.Add("data: {\"a\":1}\n\n: keep-alive\n\ndata: [DONE]\n\n", 3)
	f.Add("event: x\r\ndata:y\r\n\r\nid: 3\nretry: 5\ndata: z", 1)
	f.Fuzz(func(t *testing.T, s string, chunkSize int) {
		if chunkSize < 1 || chunkSize > 64 {
			chunkSize = 7
		}
		sr := &sseReader{r: &chunkedBytes{b: []byte(s), n: chunkSize}, buf: make([]byte, 8), max: 1 << 20}
		var got []string
		for i := 0; i < 1e5; i++ {
			p, _, err := sr.next()
			if err != nil {
				break
			}
			got = append(got, string(p))
		}
		var want []string
		for _, line := range strings.Split(s, "\n") {
			line = strings.TrimSuffix(line, "\r")
			if v, ok := strings.CutPrefix(line, "data:"); ok {
				want = append(want, strings.TrimPrefix(v, " "))
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("payloads = %q, want %q", got, want)
		}
		// The event loop's splitter, the same bytes pushed in pieces.
		sp := sseSplitter{max: 1 << 20}
		var pushed []string
		for b := []byte(s); len(b) > 0; {
			p := b[:min(chunkSize, len(b))]
			b = b[len(p):]
			for {
				pl, ok, err := sp.next(&p)
				if err != nil || !ok {
					break
				}
				pushed = append(pushed, string(pl))
			}
		}
		if pl, ok := sp.last(); ok {
			pushed = append(pushed, string(pl))
		}
		if !slices.Equal(pushed, want) {
			t.Errorf("pushed payloads = %q, want %q", pushed, want)
		}
	})
}

func TestPromptsExactAndShared(t *testing.T) {
	o := DefaultOptions()
	pb := newPromptBuilder(&o, 4)
	ids := func(rec traces.Record, n int) []int {
		var v []int
		if err := json.Unmarshal(pb.appendTokenIDs(nil, &rec, n, 0), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	a := traces.Record{Seq: 1, PrefixBlocks: []int64{7, 8, 9}}
	b := traces.Record{Seq: 2, PrefixBlocks: []int64{7, 8, 10}}
	c := traces.Record{Seq: 3, Category: "support", PrefixTokens: 6}
	d := traces.Record{Seq: 4, Category: "support", PrefixTokens: 6}
	ta, tb := ids(a, 15), ids(b, 15)
	if len(ta) != 15 || len(tb) != 15 {
		t.Fatalf("token counts %d, %d, want 15", len(ta), len(tb))
	}
	for _, id := range append(ta, tb...) {
		if id < o.TokenIDMin || id >= o.TokenIDMax {
			t.Fatalf("token id %d outside [%d,%d)", id, o.TokenIDMin, o.TokenIDMax)
		}
	}
	if !slices.Equal(ta[:8], tb[:8]) {
		t.Errorf("shared blocks 7,8 differ: %v vs %v", ta[:8], tb[:8])
	}
	if slices.Equal(ta[8:12], tb[8:12]) {
		t.Errorf("distinct blocks 9 and 10 produced equal tokens")
	}
	if slices.Equal(ta[12:], tb[12:]) {
		t.Errorf("unique tails are equal")
	}
	tc, td := ids(c, 10), ids(d, 10)
	if !slices.Equal(tc[:6], td[:6]) || slices.Equal(tc[6:], td[6:]) {
		t.Errorf("category prefix not shared or tails not unique: %v %v", tc, td)
	}
	// A prompt shorter than its blocks is truncated to exactly input tokens.
	if got := len(ids(a, 5)); got != 5 {
		t.Errorf("short prompt has %d tokens, want 5", got)
	}
	// Words: n words, JSON-safe.
	w := string(pb.appendWords(nil, &c, 50, 0))
	if n := len(strings.Fields(w)); n != 50 {
		t.Errorf("appendWords gave %d words, want 50", n)
	}
}

func testTrace(n int, gap time.Duration, in, out int32) []traces.Record {
	recs := make([]traces.Record, n)
	for i := range recs {
		r := traces.NewRecord()
		r.Seq = int64(i)
		r.ArrivalNs = int64(i) * int64(gap)
		r.InputTokens, r.OutputTokens = in, out
		recs[i] = r
	}
	return recs
}

func TestRunAgainstFake(t *testing.T) {
	f := newFake(0)
	defer f.Close()
	recs := testTrace(50, 2*time.Millisecond, 33, 5)
	recs[3].PrefixBlocks = []int64{1, 2}
	o := DefaultOptions()
	o.URL = f.srv.URL + "/v1/"
	o.Run = "t1"
	o.APIKey = "sk-secret-key"
	o.Headers = map[string][]string{"X-Tenant": {"a"}}
	o.ContinuousUsage = true
	res := mustRun(t, recs, traces.NewMeta("test"), o)
	if len(res.Records) != 50 {
		t.Fatalf("got %d records, want 50", len(res.Records))
	}
	for i, rec := range res.Records {
		if rec.Seq != int64(i) || rec.Status != traces.StatusOK {
			t.Fatalf("record %d: seq %d status %q error %q", i, rec.Seq, rec.Status, rec.Error)
		}
		if rec.ServerPromptTokens != 33 || rec.ServerOutputTokens != 5 || len(rec.ChunkNs) != 5 || len(rec.ChunkTokens) != 5 {
			t.Errorf("record %d: prompt %d output %d chunks %d/%d", i, rec.ServerPromptTokens, rec.ServerOutputTokens, len(rec.ChunkNs), len(rec.ChunkTokens))
		}
		if rec.RequestID != requestID("t1", int64(i)) || rec.Run != "t1" {
			t.Errorf("record %d: request id %q run %q", i, rec.RequestID, rec.Run)
		}
		if rec.ScheduledNs != int64(i)*int64(2*time.Millisecond) || rec.SentNs < rec.ScheduledNs || rec.FirstTokenNs < rec.SentNs || rec.LastTokenNs < rec.FirstTokenNs {
			t.Errorf("record %d: times %d %d %d %d", i, rec.ScheduledNs, rec.SentNs, rec.FirstTokenNs, rec.LastTokenNs)
		}
		if rec.ServerQueueNs != -1 || rec.ServerPrefillNs != -1 || rec.ServerDecodeNs != -1 {
			t.Errorf("record %d: server timings invented without metrics", i)
		}
	}
	reqs := f.requests()
	if len(reqs) != 50 {
		t.Fatalf("server saw %d requests", len(reqs))
	}
	for _, r := range reqs {
		if len(r.Prompt) != 33 || r.MaxTokens != 5 || r.MinTokens != 5 || !r.IgnoreEOS || r.Model != "fake-model" || r.Path != "/v1/completions" {
			t.Fatalf("request %+v", r)
		}
		if r.Auth != "Bearer sk-secret-key" || r.Header.Get("X-Tenant") != "a" {
			t.Fatalf("headers not sent: %v", r.Header)
		}
	}
	m := res.Meta
	if m.Get(MetaTimingSource) != TimingSourceNone || m.Get(MetaTimingMatched) != "0" || m.Get(MetaTimingUnmatched) != "50" {
		t.Errorf("timing meta: %v", m.Extra)
	}
	blob, _ := json.Marshal(m)
	if bytes.Contains(blob, []byte("sk-secret")) {
		t.Errorf("metadata leaks the API key: %s", blob)
	}
	if res.Summary.OK != 50 || res.Summary.Sent != 50 {
		t.Errorf("summary %+v", res.Summary)
	}
	var sb strings.Builder
	res.Summary.WriteText(&sb)
	if !strings.Contains(sb.String(), "lateness") {
		t.Errorf("summary text lacks lateness:\n%s", sb.String())
	}
	// The fake sends no per-request timings: the summary says so plainly
	// rather than "0 matched, 50 unmatched", which reads like a fault.
	if !strings.Contains(sb.String(), "server timings  none (") {
		t.Errorf("summary text without server timings:\n%s", sb.String())
	}
}

func TestRunChatCalibrated(t *testing.T) {
	f := newFake(0)
	defer f.Close()
	recs := testTrace(5, time.Millisecond, 120, 3)
	o := DefaultOptions()
	o.URL = f.srv.URL
	o.API = traces.APIChat
	o.Model = "m"
	res := mustRun(t, recs, traces.NewMeta("test"), o)
	for _, rec := range res.Records {
		if rec.Status != traces.StatusOK || rec.ServerPromptTokens != 120 || len(rec.ChunkNs) != 3 {
			t.Errorf("chat record %d: %s %q prompt %d chunks %d", rec.Seq, rec.Status, rec.Error, rec.ServerPromptTokens, len(rec.ChunkNs))
		}
	}
	if !strings.Contains(res.Meta.Get(MetaChatCalibration), "overhead 5") {
		t.Errorf("calibration = %q, want overhead 5", res.Meta.Get(MetaChatCalibration))
	}
	for _, r := range f.requests() {
		if r.Path == "/v1/chat/completions" && r.Content == "" {
			t.Errorf("empty chat content")
		}
	}
}

func TestFaults(t *testing.T) {
	modes := []struct {
		mode   string
		status string
		errSub string
		http   int32
	}{
		// A 500 with a JSON error body: http_error, type kept, message dropped.
		{"500", traces.StatusHTTPError, "HTTP 500 InternalServerError", 500},
		// A flat (pre-0.10.1) 503 error body.
		{"flat-500", traces.StatusHTTPError, "HTTP 503 ServiceUnavailable", 503},
		// A connection reset mid-stream: disconnect, tokens so far kept.
		{"reset", traces.StatusDisconnect, "", 200},
		// A server that never answers: timeout.
		{"hang", traces.StatusTimeout, "timeout", 0},
		// A malformed JSON chunk.
		{"garbage", traces.StatusStreamError, "malformed", 200},
		// An error event inside a 200 stream is a failure.
		{"error-event", traces.StatusStreamError, "error event in stream InternalServerError", 500},
		// A stream that stops without [DONE].
		{"no-done", traces.StatusDisconnect, "[DONE]", 200},
		// Keep-alive comments are ignored.
		{"keepalive", traces.StatusOK, "", 200},
		// A normal request.
		{"", traces.StatusOK, "", 200},
	}
	f := newFakeMode(0, func(id string) string {
		i := strings.LastIndexByte(id, '-')
		var n int
		for _, ch := range id[i+1:] {
			n = n*10 + int(ch-'0')
		}
		return modes[n%len(modes)].mode
	})
	defer f.Close()
	recs := testTrace(2*len(modes), time.Millisecond, 16, 8)
	o := f.options()
	o.Run = "f"
	o.Timeout = 500 * time.Millisecond
	res := mustRun(t, recs, traces.NewMeta("test"), o)
	if len(res.Records) != len(recs) {
		t.Fatalf("got %d records, want %d", len(res.Records), len(recs))
	}
	for _, rec := range res.Records {
		m := modes[int(rec.Seq)%len(modes)]
		if rec.Status != m.status || !strings.Contains(rec.Error, m.errSub) || rec.HTTPStatus != m.http {
			t.Errorf("mode %q: status %q error %q http %d, want %q ~%q %d", m.mode, rec.Status, rec.Error, rec.HTTPStatus, m.status, m.errSub, m.http)
		}
		if strings.Contains(rec.Error, "secret") {
			t.Errorf("mode %q: error leaks content: %q", m.mode, rec.Error)
		}
		switch m.mode {
		case "reset", "garbage", "error-event", "no-done":
			if len(rec.ChunkNs) != 4 {
				t.Errorf("mode %q: kept %d chunks, want the 4 received", m.mode, len(rec.ChunkNs))
			}
		}
	}
	if res.Summary.Failed != 2*7 || res.Summary.OK != 4 {
		t.Errorf("summary ok %d failed %d", res.Summary.OK, res.Summary.Failed)
	}
}

// TestConnectionRefused checks a target nobody listens on: the preflight
// ends the run before the clock starts, naming the cause; without the
// preflight every request is recorded as refused.
func TestConnectionRefused(t *testing.T) {
	f := newFake(0)
	url := f.srv.URL
	f.Close()
	o := DefaultOptions()
	o.URL = url
	o.Model = "m"
	res, err := Run(context.Background(), testTrace(3, 0, 4, 2), traces.NewMeta("t"), o)
	if res != nil || err == nil || !strings.Contains(err.Error(), "preflight") || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("Run = %v, %v; want no result and a preflight error naming the refused connection", res, err)
	}
	o.NoPreflight = true
	res = mustRun(t, testTrace(3, 0, 4, 2), traces.NewMeta("t"), o)
	for _, rec := range res.Records {
		if rec.Status != traces.StatusDisconnect || rec.Error != "connection refused" {
			t.Errorf("status %q error %q, want disconnect/connection refused", rec.Status, rec.Error)
		}
	}
}

// selectedSeqs is what a run of recs under o would send, in order, read
// back through Scan's plan and the streaming feed.
func selectedSeqs(t *testing.T, recs []traces.Record, o Options) []int64 {
	t.Helper()
	p, err := Scan(context.Background(), Records(recs, traces.Meta{}), o)
	if errors.Is(err, ErrNothingToSend) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	next := sliceFeed(nil)
	if !p.InMemory {
		f, closeFeed, err := p.streamFeed(&o)
		if err != nil {
			t.Fatal(err)
		}
		defer closeFeed()
		next = f
	} else {
		for _, rec := range p.sorted {
			next = appendFeed(next, rec)
		}
	}
	var seqs []int64
	for it := range feedItems(t, next) {
		seqs = append(seqs, it.rec.Seq)
	}
	if len(seqs) != p.Selected {
		t.Errorf("the feed gave %d records, Scan planned %d", len(seqs), p.Selected)
	}
	return seqs
}

// feedItems is next's items until it ends; an error fails the test.
func feedItems(t *testing.T, next feed) iter.Seq[*item] {
	return func(yield func(*item) bool) {
		for {
			it, err := next()
			if err != nil {
				t.Fatal(err)
			}
			if it == nil || !yield(it) {
				return
			}
		}
	}
}

func appendFeed(f feed, rec *traces.Record) feed {
	done := false
	return func() (*item, error) {
		if it, err := f(); it != nil || err != nil {
			return it, err
		}
		if done {
			return nil, nil
		}
		done = true
		return &item{rec: rec}, nil
	}
}

func TestSelectWindowSpeedShard(t *testing.T) {
	recs := testTrace(100, 10*time.Millisecond, 1, 1)
	o := DefaultOptions()
	o.WindowFrom, o.WindowTo = 100*time.Millisecond, 300*time.Millisecond
	sel := selectedSeqs(t, recs, o)
	if len(sel) != 20 || sel[0] != 10 || sel[19] != 29 {
		t.Fatalf("window selected %d records from %v", len(sel), sel)
	}
	o = DefaultOptions()
	o.Speed = 2
	o.Duration = 100 * time.Millisecond
	if got := len(selectedSeqs(t, recs, o)); got != 21 {
		t.Errorf("speed 2 duration 100ms selected %d, want 21", got)
	}
	seen := map[int64]int{}
	for i := 0; i < 3; i++ {
		o := DefaultOptions()
		o.ShardIndex, o.ShardCount = i, 3
		for _, s := range selectedSeqs(t, recs, o) {
			seen[s]++
		}
	}
	for _, r := range recs {
		if seen[r.Seq] != 1 {
			t.Fatalf("record %d in %d shards, want 1", r.Seq, seen[r.Seq])
		}
	}
	// Out of arrival order, the trace is sorted in memory: same records,
	// in arrival order.
	shuffled := slices.Clone(recs)
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	o = DefaultOptions()
	o.WindowFrom, o.WindowTo = 100*time.Millisecond, 300*time.Millisecond
	if got := selectedSeqs(t, shuffled, o); !slices.Equal(got, sel) {
		t.Errorf("shuffled trace sends %v, want %v", got, sel)
	}
	if i, n, err := ParseShard("2/5"); err != nil || i != 2 || n != 5 {
		t.Errorf("ParseShard(2/5) = %d, %d, %v", i, n, err)
	}
	for _, bad := range []string{"5/5", "x", "-1/2", "1/0"} {
		if _, _, err := ParseShard(bad); err == nil {
			t.Errorf("ParseShard(%q) accepted", bad)
		}
	}
	if from, to, err := ParseWindow("10s,1m"); err != nil || from != 10*time.Second || to != time.Minute {
		t.Errorf("ParseWindow = %v %v %v", from, to, err)
	}
}

func TestClosedSessions(t *testing.T) {
	f := newFake(2 * time.Millisecond)
	defer f.Close()
	// Two sessions of three turns, turns 1 ms apart in the trace and no
	// finish recorded: in closed mode each turn waits for the previous
	// one's answer (~10 ms), then keeps the recorded 1 ms from its send,
	// which has passed: it is due at the answer.
	var recs []traces.Record
	for s := int64(1); s <= 2; s++ {
		for turn := int32(0); turn < 3; turn++ {
			r := traces.NewRecord()
			r.Seq = int64(len(recs))
			r.Session, r.Turn = s, turn
			r.ArrivalNs = int64(turn) * int64(time.Millisecond)
			r.InputTokens, r.OutputTokens = 8, 5
			recs = append(recs, r)
		}
	}
	o := f.options()
	o.Sessions = SessionsClosed
	res := mustRun(t, recs, traces.NewMeta("t"), o)
	if len(res.Records) != 6 {
		t.Fatalf("got %d records", len(res.Records))
	}
	byKey := map[[2]int64]traces.Record{}
	for _, r := range res.Records {
		if r.Status != traces.StatusOK {
			t.Fatalf("turn failed: %q", r.Error)
		}
		byKey[[2]int64{r.Session, int64(r.Turn)}] = r
	}
	for s := int64(1); s <= 2; s++ {
		for turn := int64(1); turn < 3; turn++ {
			prev, cur := byKey[[2]int64{s, turn - 1}], byKey[[2]int64{s, turn}]
			if cur.ScheduledNs != prev.LastTokenNs || cur.SentNs < prev.LastTokenNs {
				t.Errorf("session %d turn %d scheduled %d, want the previous answer's end %d", s, turn, cur.ScheduledNs, prev.LastTokenNs)
			}
		}
	}
}

func TestMaxConcurrencyShowsAsLateness(t *testing.T) {
	f := newFake(5 * time.Millisecond)
	defer f.Close()
	recs := testTrace(6, 0, 4, 4) // all due at 0, each takes ~20 ms
	o := f.options()
	o.MaxConcurrency = 1
	res := mustRun(t, recs, traces.NewMeta("t"), o)
	if res.Summary.LatenessMax < 50*time.Millisecond {
		t.Errorf("lateness max %v with a cap of 1, want the cap's delay (>= 50ms)", res.Summary.LatenessMax)
	}
}

func TestStopDrainAndJournal(t *testing.T) {
	f := newFake(time.Millisecond)
	defer f.Close()
	dir := t.TempDir()
	jpath := JournalPath(filepath.Join(dir, "res.parquet"))
	recs := testTrace(1000, 5*time.Millisecond, 4, 3) // 5 s of trace
	o := f.options()
	o.Journal = jpath
	o.JournalSync = 20 * time.Millisecond
	o.Drain = 2 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	res, err := Run(ctx, recs, traces.NewMeta("t"), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Records) == 0 || len(res.Records) >= 1000 || res.Summary.NotSent != 1000-len(res.Records) {
		t.Fatalf("stopped run kept %d records, not sent %d", len(res.Records), res.Summary.NotSent)
	}
	got, m, err := traces.ReadAll(jpath)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(res.Records) || m.Get(MetaTarget) == "" {
		t.Errorf("journal has %d records (meta %v), want %d", len(got), m.Extra, len(res.Records))
	}
	// A torn last line (SIGKILL mid-write) is skipped, the rest is read.
	b, _ := os.ReadFile(jpath)
	os.WriteFile(jpath, append(b, `{"seq":99,"arr`...), 0o644)
	got2, _, err := traces.ReadAll(jpath)
	if (err != nil && !errors.Is(err, traces.ErrTruncated)) || len(got2) != len(got) {
		t.Errorf("torn journal: %d records, %v; want %d", len(got2), err, len(got))
	}
}

func TestOptionsValidate(t *testing.T) {
	o := DefaultOptions()
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "Options.URL") {
		t.Errorf("missing URL: %v", err)
	}
	o.URL = "http://x"
	o.Speed = 0
	o.Sessions = "half"
	err := o.Validate()
	for _, flag := range []string{"Options.Speed", "Options.Sessions"} {
		if err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("Validate() = %v, want it to name %s", err, flag)
		}
	}
	if got := RedactURL("http://user:pw@h:1/v1?key=s#f"); got != "http://h:1/v1" {
		t.Errorf("RedactURL = %q", got)
	}
}

// TestProgressLine checks the live progress in both forms: rewritten in
// place for a terminal, plain lines for logs. Each report gives sent of
// total, ok and failed with the most frequent failure reason, lateness,
// tok/s and the time until the last request is due.
func TestProgressLine(t *testing.T) {
	for _, lines := range []bool{false, true} {
		f := newFakeMode(0, func(id string) string {
			if strings.HasSuffix(id, "0") { // every tenth request
				return "500"
			}
			return ""
		})
		var buf syncBuffer
		o := f.options()
		o.Progress = &buf
		o.ProgressLines = lines
		o.ProgressPeriod = 10 * time.Millisecond
		if _, err := Run(context.Background(), testTrace(60, 5*time.Millisecond, 4, 2), traces.NewMeta("t"), o); err != nil {
			t.Fatal(err)
		}
		f.Close()
		s := buf.String()
		for _, want := range []string{"/60 (", "in flight", " ok ", "failed", "× http_error: HTTP 500", "lateness p99", "tok/s", "sending ends in"} {
			if !strings.Contains(s, want) {
				t.Errorf("lines=%v: progress output lacks %q: %q", lines, want, s)
			}
		}
		if lines {
			for _, l := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
				if !strings.HasPrefix(l, "replay: ") || strings.Contains(l, "\033") {
					t.Errorf("plain progress line %q: want a 'replay: ' prefix and no terminal codes", l)
				}
			}
		} else if !strings.Contains(s, "\r\033[K") {
			t.Errorf("terminal progress does not rewrite its line: %q", s)
		}
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestStartAt(t *testing.T) {
	f := newFake(0)
	defer f.Close()
	o := f.options()
	o.StartAt = time.Now().Add(300 * time.Millisecond)
	called := time.Now()
	res := mustRun(t, testTrace(2, 0, 4, 2), traces.NewMeta("t"), o)
	reqs := f.requests()
	if len(reqs) != 2 || reqs[0].At.Before(o.StartAt) {
		t.Fatalf("requests sent at %v, before --start-at %v (called %v)", reqs[0].At, o.StartAt, called)
	}
	got, err := time.Parse(time.RFC3339Nano, res.Meta.Get(MetaStartedAt))
	if err != nil || got.Sub(o.StartAt).Abs() > 50*time.Millisecond {
		t.Errorf("started_at %v (%v), want ~%v", got, err, o.StartAt)
	}
}

func TestWarmupDurationExtensionsPerRecordAPI(t *testing.T) {
	f := newFake(0)
	defer f.Close()
	recs := testTrace(40, 10*time.Millisecond, 12, 2) // 400 ms of trace
	recs[1].API = traces.APIChat
	o := f.options()
	o.Run = "w"
	o.Warmup = 3
	o.Duration = 95 * time.Millisecond
	o.NoVLLMExtensions = true
	res := mustRun(t, recs, traces.NewMeta("t"), o)
	// Records due at 0..90 ms are sent; warm-ups are not recorded.
	if len(res.Records) != 10 {
		t.Fatalf("got %d records, want the 10 due within --duration", len(res.Records))
	}
	warm, chat := 0, 0
	for _, r := range f.requests() {
		if strings.Contains(r.ID, "warmup") {
			warm++
		}
		if r.IgnoreEOS || r.MinTokens != 0 {
			t.Errorf("request %s sent vLLM extensions with NoVLLMExtensions", r.ID)
		}
		if r.Path == "/v1/chat/completions" && !strings.Contains(r.ID, "warmup") {
			chat++
			if r.ID != "w-1" {
				t.Errorf("chat request %s, want only w-1 (its api column)", r.ID)
			}
		}
	}
	if warm != 3 || chat != 1 {
		t.Errorf("server saw %d warm-ups and %d chat requests, want 3 and 1", warm, chat)
	}
	for _, r := range res.Records {
		if strings.Contains(r.RequestID, "warmup") || r.Status != traces.StatusOK {
			t.Errorf("record %s: %s %q", r.RequestID, r.Status, r.Error)
		}
	}
}
