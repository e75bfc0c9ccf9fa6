package engine

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/tokentrace/tokentrace/traces"
)

// listening is a Server whose Handler is served on a loopback port, as
// sim.Start serves a replica's: the tests talk HTTP to the engine.
type listening struct {
	*Server
	URL string
	hs  *http.Server
}

// listen runs NewServer(ctx, o) and serves its Handler on 127.0.0.1 until
// the server closes.
func listen(ctx context.Context, o Options) (*listening, error) {
	s, err := NewServer(ctx, o)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.Close()
		return nil, err
	}
	l := &listening{Server: s, URL: "http://" + ln.Addr().String(), hs: &http.Server{Handler: s.Handler()}}
	go l.hs.Serve(ln)
	go func() {
		<-s.stop
		l.hs.Close()
	}()
	return l, nil
}

// Close stops the HTTP server and the engine.
func (l *listening) Close() error {
	l.hs.Close()
	return l.Server.Close()
}

func startSim(t *testing.T, mut func(*Options)) *listening {
	t.Helper()
	o := DefaultOptions()
	if err := ApplyPreset(&o, "tiny"); err != nil {
		t.Fatal(err)
	}
	if mut != nil {
		mut(&o)
	}
	s, err := listen(context.Background(), o)
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// post sends a JSON body and returns status, headers and the whole body.
func post(t *testing.T, url, body string, hdr map[string]string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, resp.Header, string(b) + "<read error: " + err.Error() + ">"
	}
	return resp.StatusCode, resp.Header, string(b)
}

// sseEvents splits an SSE body into its data payloads.
func sseEvents(body string) []string {
	var ev []string
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			ev = append(ev, d)
		}
	}
	return ev
}

type finalChunk struct {
	Choices []json.RawMessage `json:"choices"`
	Usage   *struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		TotalTokens         int `json:"total_tokens"`
		PromptTokensDetails *struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
	Metrics *struct {
		TTFT  float64  `json:"time_to_first_token_ms"`
		Gen   float64  `json:"generation_time_ms"`
		Queue float64  `json:"queue_time_ms"`
		ITL   *float64 `json:"mean_itl_ms"`
		TPS   float64  `json:"tokens_per_second"`
	} `json:"metrics"`
}

// With per-request metrics on, a streaming client recovers the engine's
// queue, prefill and decode times (to well under 1 ms) for every request,
// also under concurrency with queueing and prefix hits.
func TestPerRequestMetricsEqualTruth(t *testing.T) {
	s := startSim(t, func(o *Options) { o.PerRequestMetrics = true; o.MaxNumSeqs = 4 })
	const n = 24
	type got struct {
		queue, prefill, decode int64
		out, prompt, cached    int
	}
	results := make([]got, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			api, body := "/v1/completions", fmt.Sprintf(`{"model":%q,"prompt":"shared system prompt %s request %d","max_tokens":%d,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}`,
				DefaultModel, strings.Repeat("lorem ipsum ", 40), i, 5+i)
			if i%2 == 1 {
				api, body = "/v1/chat/completions", fmt.Sprintf(`{"messages":[{"role":"user","content":"hello %d"}],"max_tokens":%d,"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true}}`, i, 3+i)
			}
			st, _, b := post(t, s.URL+api, body, map[string]string{"X-Request-Id": fmt.Sprintf("req-%02d", i)})
			if st != 200 {
				t.Errorf("request %d: status %d: %s", i, st, b)
				return
			}
			ev := sseEvents(b)
			if len(ev) < 3 || ev[len(ev)-1] != "[DONE]" {
				t.Errorf("request %d: stream does not end with a usage chunk and [DONE]: %q", i, ev)
				return
			}
			var f finalChunk
			if err := json.Unmarshal([]byte(ev[len(ev)-2]), &f); err != nil || f.Metrics == nil || f.Usage == nil {
				t.Errorf("request %d: final chunk %s: %v", i, ev[len(ev)-2], err)
				return
			}
			ns := func(ms float64) int64 { return int64(math.Round(ms * 1e6)) }
			g := got{ns(f.Metrics.Queue), ns(f.Metrics.TTFT), ns(f.Metrics.Gen), f.Usage.CompletionTokens, f.Usage.PromptTokens, 0}
			if f.Usage.PromptTokensDetails != nil {
				g.cached = f.Usage.PromptTokensDetails.CachedTokens
			}
			results[i] = g
		}()
	}
	wg.Wait()
	truth := s.Truth()
	if len(truth) != n {
		t.Fatalf("%d truth rows, want %d", len(truth), n)
	}
	byID := map[string]traces.Record{}
	for _, r := range truth {
		byID[r.RequestID] = r
	}
	cachedSeen := false
	for i, g := range results {
		r, ok := byID[fmt.Sprintf("req-%02d", i)]
		if !ok {
			t.Fatalf("no truth row for req-%02d", i)
		}
		for _, c := range []struct {
			name      string
			got, want int64
		}{{"queue", g.queue, r.ServerQueueNs}, {"prefill", g.prefill, r.ServerPrefillNs}, {"decode", g.decode, r.ServerDecodeNs}} {
			if d := c.got - c.want; d > int64(time.Millisecond) || d < -int64(time.Millisecond) {
				t.Errorf("req-%02d %s: client %v, truth %v", i, c.name, time.Duration(c.got), time.Duration(c.want))
			}
		}
		if g.out != int(r.ServerOutputTokens) || g.prompt != int(r.ServerPromptTokens) || g.cached != int(r.ServerCachedTokens) {
			t.Errorf("req-%02d usage out/prompt/cached %d/%d/%d, truth %d/%d/%d", i, g.out, g.prompt, g.cached, r.ServerOutputTokens, r.ServerPromptTokens, r.ServerCachedTokens)
		}
		cachedSeen = cachedSeen || g.cached > 0
	}
	if !cachedSeen {
		t.Errorf("no request reported cached tokens; the shared prompt prefix should hit")
	}
}

// The waiting queue is visible in /metrics while requests queue.
func TestMetricsShowWaiting(t *testing.T) {
	s := startSim(t, func(o *Options) { o.MaxNumSeqs = 1; o.StepFixed = 2 * time.Millisecond })
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			post(t, s.URL+"/v1/completions", fmt.Sprintf(`{"prompt":[%d,300,301],"max_tokens":40,"ignore_eos":true,"stream":true}`, 400+i), nil)
		}()
	}
	maxWaiting := 0.0
	deadline := time.Now().Add(10 * time.Second)
	for maxWaiting < 3 && time.Now().Before(deadline) {
		fams := scrape(t, s.URL)
		maxWaiting = math.Max(maxWaiting, fams["vllm:num_requests_waiting"].GetMetric()[0].GetGauge().GetValue())
		time.Sleep(2 * time.Millisecond)
	}
	wg.Wait()
	if maxWaiting < 3 {
		t.Errorf("max vllm:num_requests_waiting seen %g, want ≥ 3 with 6 requests and max-num-seqs 1", maxWaiting)
	}
	fams := scrape(t, s.URL)
	if got := fams["vllm:request_success_total"]; got == nil || len(got.GetMetric()) != 3 {
		t.Fatalf("vllm:request_success_total missing or without its finished_reason series")
	}
	if got := fams["vllm:request_queue_time_seconds"].GetMetric()[0].GetHistogram().GetSampleCount(); got != 6 {
		t.Errorf("queue histogram count %d, want 6", got)
	}
}

func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// /metrics carries vLLM's names, types, labels and buckets.
func TestMetricsExposition(t *testing.T) {
	s := startSim(t, nil)
	post(t, s.URL+"/v1/completions", `{"prompt":"hi there","max_tokens":3}`, nil)
	fams := scrape(t, s.URL)
	want := map[string]string{
		"vllm:num_requests_running": "GAUGE", "vllm:num_requests_waiting": "GAUGE", "vllm:kv_cache_usage_perc": "GAUGE",
		"vllm:prefix_cache_queries_total": "COUNTER", "vllm:prefix_cache_hits_total": "COUNTER", "vllm:num_preemptions_total": "COUNTER",
		"vllm:prompt_tokens_total": "COUNTER", "vllm:generation_tokens_total": "COUNTER", "vllm:request_success_total": "COUNTER",
		"vllm:time_to_first_token_seconds": "HISTOGRAM", "vllm:inter_token_latency_seconds": "HISTOGRAM",
		"vllm:e2e_request_latency_seconds": "HISTOGRAM", "vllm:request_queue_time_seconds": "HISTOGRAM",
		"vllm:request_prefill_time_seconds": "HISTOGRAM", "vllm:request_decode_time_seconds": "HISTOGRAM",
		"vllm:request_inference_time_seconds": "HISTOGRAM", "vllm:request_time_per_output_token_seconds": "HISTOGRAM",
	}
	for name, typ := range want {
		f := fams[name]
		if f == nil {
			t.Errorf("missing %s", name)
			continue
		}
		if f.GetType().String() != typ {
			t.Errorf("%s type %s, want %s", name, f.GetType(), typ)
		}
		m := f.GetMetric()[0]
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["model_name"] != DefaultModel || labels["engine"] != "0" {
			t.Errorf("%s labels %v, want model_name and engine", name, labels)
		}
	}
	h := fams["vllm:time_to_first_token_seconds"].GetMetric()[0].GetHistogram()
	if len(h.GetBucket()) != len(ttftBuckets)+1 || h.GetBucket()[0].GetUpperBound() != 0.001 || h.GetSampleCount() != 1 {
		t.Errorf("TTFT histogram: %d buckets from %g, count %d; want vLLM's 22 from 0.001 plus +Inf and 1 sample",
			len(h.GetBucket()), h.GetBucket()[0].GetUpperBound(), h.GetSampleCount())
	}
	if got := fams["vllm:generation_tokens_total"].GetMetric()[0].GetCounter().GetValue(); got != 3 {
		t.Errorf("generation tokens %g, want 3", got)
	}
}

// Bad input gets vLLM's status and error JSON, and the server keeps serving.
func TestBadInput(t *testing.T) {
	s := startSim(t, func(o *Options) { o.MaxModelLen = 64 })
	long := strings.TrimSuffix(strings.Repeat("1,", 70), ",")
	cases := []struct {
		name, path, body string
		status           int
		typ, msg         string
	}{
		// Not JSON at all.
		{"malformed JSON", "/v1/completions", `{"prompt": "x",`, 400, "BadRequestError", "JSON decode error"},
		// A model the server does not serve.
		{"unknown model", "/v1/completions", `{"model":"gpt-9","prompt":"x"}`, 404, "NotFoundError", "The model `gpt-9` does not exist."},
		// Completions without a prompt.
		{"missing prompt", "/v1/completions", `{"max_tokens":3}`, 400, "BadRequestError", "'prompt'"},
		// Chat without messages.
		{"missing messages", "/v1/chat/completions", `{"max_tokens":3}`, 400, "BadRequestError", "'messages'"},
		// Chat message without a role.
		{"message without role", "/v1/chat/completions", `{"messages":[{"content":"x"}]}`, 400, "BadRequestError", "'role'"},
		// Negative max_tokens.
		{"negative max_tokens", "/v1/completions", `{"prompt":"x","max_tokens":-1}`, 400, "BadRequestError", "max_tokens must be at least 1, got -1."},
		// max_tokens of the wrong type.
		{"string max_tokens", "/v1/completions", `{"prompt":"x","max_tokens":"ten"}`, 400, "BadRequestError", "JSON decode error"},
		// A prompt longer than max-model-len.
		{"over-long prompt", "/v1/completions", `{"prompt":[` + long + `],"max_tokens":1}`, 400, "BadRequestError", "maximum context length is 64 tokens"},
		// Prompt fits but prompt + max_tokens does not.
		{"over-long max_tokens", "/v1/completions", `{"prompt":[1,2,3],"max_tokens":62}`, 400, "BadRequestError", "'max_tokens' or 'max_completion_tokens' is too large: 62"},
		// Token ids out of the vocabulary.
		{"bad token id", "/v1/completions", `{"prompt":[-5]}`, 400, "BadRequestError", "out of vocabulary"},
		// An empty prompt.
		{"empty prompt", "/v1/completions", `{"prompt":""}`, 400, "BadRequestError", "empty"},
		// min_tokens above max_tokens.
		{"min over max", "/v1/completions", `{"prompt":"x","max_tokens":2,"min_tokens":3}`, 400, "BadRequestError", "min_tokens"},
		// stream_options without stream.
		{"stream options without stream", "/v1/completions", `{"prompt":"x","stream_options":{"include_usage":true}}`, 400, "BadRequestError", "stream=True"},
		// priority without the priority policy.
		{"priority under fcfs", "/v1/completions", `{"prompt":"x","priority":3}`, 400, "BadRequestError", "Priority scheduling is not enabled"},
	}
	for _, c := range cases {
		st, hdr, body := post(t, s.URL+c.path, c.body, nil)
		if st != c.status {
			t.Errorf("%s: status %d, want %d (%s)", c.name, st, c.status, body)
			continue
		}
		if ct := hdr.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s: Content-Type %q", c.name, ct)
		}
		var e struct {
			Error struct {
				Message string  `json:"message"`
				Type    string  `json:"type"`
				Param   *string `json:"param"`
				Code    int     `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(body), &e); err != nil {
			t.Errorf("%s: body %s: %v", c.name, body, err)
			continue
		}
		if e.Error.Type != c.typ || e.Error.Code != c.status || !strings.Contains(e.Error.Message, c.msg) {
			t.Errorf("%s: error %+v, want type %s code %d message containing %q", c.name, e.Error, c.typ, c.status, c.msg)
		}
	}
	st, _, body := post(t, s.URL+"/v1/completions", `{"prompt":"still serving?","max_tokens":2}`, nil)
	if st != 200 || !strings.Contains(body, `"finish_reason":"length"`) {
		t.Errorf("after bad input: status %d body %s", st, body)
	}
	// Unknown routes and methods answer like FastAPI.
	if st, _, body := post(t, s.URL+"/v1/nothing", `{}`, nil); st != 404 || body != `{"detail":"Not Found"}` {
		t.Errorf("unknown route: %d %s", st, body)
	}
	if resp, err := http.Get(s.URL + "/v1/completions"); err != nil || resp.StatusCode != 405 {
		t.Errorf("GET /v1/completions: %v %v, want 405", resp.StatusCode, err)
	} else {
		resp.Body.Close()
	}
	// The flat (pre-0.10.1) error shape on request.
	s2 := startSim(t, func(o *Options) { o.FlatErrors = true })
	if _, _, body := post(t, s2.URL+"/v1/completions", `{"prompt":"x","max_tokens":0}`, nil); !strings.HasPrefix(body, `{"object":"error","message":"max_tokens must be at least 1, got 0."`) {
		t.Errorf("flat error body %s", body)
	}
	for _, r := range s.Truth() {
		if r.Status == traces.StatusHTTPError && r.HTTPStatus != 400 {
			t.Errorf("refused row %+v", r)
		}
	}
}

// Injected faults: refusals, a cut stream, an error event inside a 200
// stream, a stall; the truth says what the engine saw.
func TestFaults(t *testing.T) {
	s := startSim(t, func(o *Options) { o.StallDuration = 300 * time.Millisecond })
	body := `{"prompt":"fault","max_tokens":10,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}`
	for _, code := range []string{"500", "503", "429"} {
		st, _, b := post(t, s.URL+"/v1/completions", body, map[string]string{FaultHeader: code, "X-Request-Id": "f" + code})
		if fmt.Sprint(st) != code || !strings.Contains(b, `"code":`+code) {
			t.Errorf("fault %s: status %d body %s", code, st, b)
		}
	}
	_, _, b := post(t, s.URL+"/v1/completions", body, map[string]string{FaultHeader: "disconnect", "X-Request-Id": "cut"})
	if !strings.Contains(b, "read error") || strings.Contains(b, "[DONE]") {
		t.Errorf("disconnect: body %q; want a cut stream without [DONE]", b)
	}
	_, _, b = post(t, s.URL+"/v1/completions", body, map[string]string{FaultHeader: "stream-error", "X-Request-Id": "err"})
	ev := sseEvents(b)
	if len(ev) < 3 || !strings.HasPrefix(ev[len(ev)-2], `{"error":{"message":`) || ev[len(ev)-1] != "[DONE]" {
		t.Errorf("stream-error: events %q", ev)
	}
	t0 := time.Now()
	_, _, b = post(t, s.URL+"/v1/completions", body, map[string]string{FaultHeader: "stall", "X-Request-Id": "stall"})
	if time.Since(t0) < 300*time.Millisecond || !strings.HasSuffix(b, "data: [DONE]\n\n") {
		t.Errorf("stall: took %v, body %q", time.Since(t0), b)
	}
	// The engine learns of the abort asynchronously; wait for its rows.
	want := map[string]string{"f500": traces.StatusHTTPError, "f503": traces.StatusHTTPError, "f429": traces.StatusHTTPError,
		"cut": traces.StatusDisconnect, "err": traces.StatusStreamError, "stall": traces.StatusOK}
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := map[string]string{}
		for _, r := range s.Truth() {
			got[r.RequestID] = r.Status
		}
		ok := true
		for id, st := range want {
			if got[id] != st {
				ok = false
			}
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("truth statuses %v, want %v", got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Rate-driven failures use the seeded draw.
	s2 := startSim(t, func(o *Options) { o.FailRate = 1; o.FailStatus = 429 })
	if st, _, _ := post(t, s2.URL+"/v1/completions", `{"prompt":"x"}`, nil); st != 429 {
		t.Errorf("fail-rate 1: status %d, want 429", st)
	}
}

// Close writes the truth file (any codec by extension) and is idempotent.
func TestTruthOutAndClose(t *testing.T) {
	path := filepath.Join(t.TempDir(), "truth.jsonl")
	o := DefaultOptions()
	ApplyPreset(&o, "tiny")
	o.TruthOut = path
	o.Virtual = true
	s, err := listen(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		post(t, s.URL+"/v1/completions", fmt.Sprintf(`{"prompt":"truth %d","max_tokens":4,"ignore_eos":true}`, i), map[string]string{"X-Request-Id": fmt.Sprint("t", i)})
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	recs, meta, err := traces.ReadAll(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 3 || meta.Source != "sim" {
		t.Fatalf("%d rows, source %q; want 3 from sim", len(recs), meta.Source)
	}
	for i, r := range recs {
		if r.RequestID != fmt.Sprint("t", i) || r.OutputTokens != 4 || r.ServerPrefillNs <= 0 || r.ServerDecodeNs <= 0 || r.ServerQueueNs < 0 {
			t.Errorf("row %d: %+v", i, r)
		}
	}
	// A cancelled context also closes the server.
	ctx, cancel := context.WithCancel(context.Background())
	o.TruthOut = ""
	s2, err := listen(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case <-s2.loopDone:
	case <-time.After(5 * time.Second):
		t.Fatal("engine still running after ctx cancel")
	}
}

// Other endpoints: models, health, tokenize, multi-prompt completions.
func TestEndpoints(t *testing.T) {
	s := startSim(t, func(o *Options) { o.RequestIDHeaders = true })
	resp, err := http.Get(s.URL + "/health")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("health: %v", err)
	}
	resp.Body.Close()
	resp, err = http.Get(s.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	var models struct {
		Data []struct {
			ID          string `json:"id"`
			MaxModelLen int    `json:"max_model_len"`
		} `json:"data"`
	}
	json.NewDecoder(resp.Body).Decode(&models)
	resp.Body.Close()
	if len(models.Data) != 1 || models.Data[0].ID != DefaultModel || models.Data[0].MaxModelLen != 4096 {
		t.Errorf("models %+v", models)
	}
	_, _, b := post(t, s.URL+"/tokenize", `{"prompt":"Hello, world!"}`, nil)
	var tok struct {
		Count  int     `json:"count"`
		Tokens []int32 `json:"tokens"`
	}
	json.Unmarshal([]byte(b), &tok)
	if tok.Count != 7 || len(tok.Tokens) != 7 || tok.Tokens[0] != TokenBOS {
		t.Errorf("tokenize: %s; want 7 tokens starting with BOS", b)
	}
	// The usage of a text prompt equals /tokenize's count.
	_, hdr, b := post(t, s.URL+"/v1/completions", `{"prompt":"Hello, world!","max_tokens":1}`, map[string]string{"X-Request-Id": "echo-me"})
	if !strings.Contains(b, `"prompt_tokens":7,`) || hdr.Get("X-Request-Id") != "echo-me" {
		t.Errorf("usage %s, X-Request-Id %q", b, hdr.Get("X-Request-Id"))
	}
	// A list of prompts gives one choice per prompt and summed usage.
	_, _, b = post(t, s.URL+"/v1/completions", `{"prompt":[[300,301,302],[400,401]],"max_tokens":2,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}`, nil)
	if !strings.Contains(b, `"index":1`) || !strings.Contains(b, `"usage":{"prompt_tokens":5,"total_tokens":9,"completion_tokens":4}`) {
		t.Errorf("multi-prompt stream: %s", b)
	}
}

// Stream interval: the first token alone, then chunks of N, the last chunk
// whatever is left.
func TestStreamInterval(t *testing.T) {
	s := startSim(t, func(o *Options) { o.StreamInterval = 4; o.Virtual = true })
	_, _, b := post(t, s.URL+"/v1/completions", `{"prompt":"x","max_tokens":10,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true}}`, nil)
	var counts []int
	for _, e := range sseEvents(b) {
		var c finalChunk
		if json.Unmarshal([]byte(e), &c) == nil && len(c.Choices) > 0 && c.Usage != nil {
			counts = append(counts, c.Usage.CompletionTokens)
		}
	}
	if fmt.Sprint(counts) != "[1 5 9 10]" {
		t.Errorf("cumulative tokens per chunk %v, want [1 5 9 10]", counts)
	}
}

var _ = bytes.NewReader

// --max-num-queued-reqs refuses with 503 beyond the cap; the rest are served.
func TestMaxQueuedRequests(t *testing.T) {
	s := startSim(t, func(o *Options) { o.MaxNumSeqs = 1; o.MaxQueuedRequests = 2; o.StepFixed = 2 * time.Millisecond })
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, _, body := post(t, s.URL+"/v1/completions", fmt.Sprintf(`{"prompt":[%d,5000],"max_tokens":50,"ignore_eos":true}`, 300+i), nil)
			if st == 503 && !strings.Contains(body, `"type":"ServiceUnavailableError"`) {
				t.Errorf("503 body %s", body)
			}
			mu.Lock()
			codes[st]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if codes[200] < 1 || codes[503] < 1 || codes[200]+codes[503] != 8 {
		t.Errorf("status counts %v, want some 200 and some 503", codes)
	}
}

// Real-time mode really paces: a client never sees a request finish sooner
// than the step model allows (a lower bound only, so load cannot flake it),
// and the engine's truth agrees with the model exactly for a lone request.
func TestRealTimePacing(t *testing.T) {
	s := startSim(t, func(o *Options) { o.StepFixed = 5 * time.Millisecond })
	o := s.Options()
	t0 := time.Now()
	st, _, _ := post(t, s.URL+"/v1/completions", `{"prompt":[300,301,302,303],"max_tokens":10,"ignore_eos":true}`, map[string]string{"X-Request-Id": "paced"})
	el := time.Since(t0)
	prefill := o.StepFixed + 4*o.PrefillPerToken + 4*o.AttnPerContextToken
	if st != 200 || el < prefill+9*o.StepFixed {
		t.Fatalf("status %d after %v; want ≥ %v (prefill + 9 decode steps)", st, el, prefill+9*o.StepFixed)
	}
	r := s.Truth()[0]
	if r.ServerPrefillNs < int64(prefill) || r.ServerDecodeNs < int64(9*o.StepFixed) {
		t.Errorf("truth prefill %v decode %v; want ≥ %v and ≥ %v", time.Duration(r.ServerPrefillNs), time.Duration(r.ServerDecodeNs), prefill, 9*o.StepFixed)
	}
}

// TestResponseHead: every response body and stream chunk opens with the
// id, object, created and model OpenAI clients read; the object names the
// API and whether it is a chunk.
func TestResponseHead(t *testing.T) {
	s := startSim(t, nil)
	for _, tc := range []struct {
		why, path, body, object, idPrefix string
	}{
		{"a chat answer is a chat.completion", "/v1/chat/completions",
			`{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}`, "chat.completion", "chatcmpl-"},
		{"a streamed chat answer is made of chat.completion.chunk", "/v1/chat/completions",
			`{"messages":[{"role":"user","content":"hi"}],"max_tokens":2,"stream":true}`, "chat.completion.chunk", "chatcmpl-"},
		{"a completion is a text_completion", "/v1/completions",
			`{"prompt":"hi","max_tokens":2}`, "text_completion", "cmpl-"},
		{"a streamed completion is made of text_completion too (as vLLM sends it)", "/v1/completions",
			`{"prompt":"hi","max_tokens":2,"stream":true}`, "text_completion", "cmpl-"},
	} {
		code, _, b := post(t, s.URL+tc.path, tc.body, nil)
		bodies := []string{b}
		if strings.Contains(tc.body, `"stream":true`) {
			bodies = sseEvents(b)
		}
		if code != 200 || len(bodies) == 0 {
			t.Fatalf("%s: status %d, body %s", tc.why, code, b)
		}
		for _, body := range bodies {
			if body == "[DONE]" {
				continue
			}
			var head struct {
				ID, Object, Model string
				Created           int64
				Choices           []json.RawMessage
			}
			if err := json.Unmarshal([]byte(body), &head); err != nil {
				t.Fatalf("%s: %v in %s", tc.why, err, body)
			}
			if head.Object != tc.object || !strings.HasPrefix(head.ID, tc.idPrefix) || head.Model != DefaultModel || head.Created <= 0 || head.Choices == nil {
				t.Errorf("%s: want object %s, id %s…, model %s, created and choices; got %s", tc.why, tc.object, tc.idPrefix, DefaultModel, body)
			}
		}
	}
}
