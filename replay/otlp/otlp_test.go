package otlp

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpTestSpan is a finished request with distinct, exactly representable
// timings derived from i.
func otlpTestSpan(id string, i int) LLMRequestSpan {
	ms := time.Millisecond
	return LLMRequestSpan{
		RequestID:        id,
		Start:            time.Unix(1_763_776_800, int64(i)*1000),
		Queue:            time.Duration(10+i) * ms,
		Prefill:          time.Duration(20+i)*ms + 123*time.Microsecond,
		Decode:           time.Duration(300+i)*ms + 7*time.Nanosecond,
		TTFT:             time.Duration(35+2*i) * ms,
		E2E:              time.Duration(340+3*i) * ms,
		PromptTokens:     100 + i,
		CompletionTokens: 10 + i,
		MaxTokens:        10 + i,
	}
}

// mustReceiver is a receiver with DefaultReceiverOptions changed by set
// (nil: the defaults); an error fails the test.
func mustReceiver(t testing.TB, set func(*ReceiverOptions)) *Receiver {
	t.Helper()
	o := DefaultReceiverOptions()
	if set != nil {
		set(&o)
	}
	r, err := NewReceiver(o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func startTestReceiver(t *testing.T) (*Receiver, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	r := mustReceiver(t, nil)
	addr, err := r.Start(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatalf("Start = %v", err)
	}
	return r, "http://" + addr + TracesPath
}

func checkTimings(t *testing.T, r *Receiver, id string, want LLMRequestSpan) {
	t.Helper()
	got, ok := r.Lookup(id)
	if !ok {
		t.Fatalf("Lookup(%q) found nothing", id)
	}
	if got.QueueNs != want.Queue.Nanoseconds() || got.PrefillNs != want.Prefill.Nanoseconds() ||
		got.DecodeNs != want.Decode.Nanoseconds() || got.TTFTNs != want.TTFT.Nanoseconds() ||
		got.E2ENs != want.E2E.Nanoseconds() || got.InferenceNs != (want.Prefill+want.Decode).Nanoseconds() {
		t.Errorf("Lookup(%q) timings = %+v, want %+v", id, got, want)
	}
	if int(got.PromptTokens) != want.PromptTokens || int(got.CompletionTokens) != want.CompletionTokens {
		t.Errorf("Lookup(%q) tokens = %d/%d, want %d/%d", id, got.PromptTokens, got.CompletionTokens, want.PromptTokens, want.CompletionTokens)
	}
	if got.StartUnixNano != want.Start.UnixNano() || got.EndUnixNano != want.Start.Add(want.E2E).UnixNano() {
		t.Errorf("Lookup(%q) start/end = %d/%d", id, got.StartUnixNano, got.EndUnixNano)
	}
}

// Every form of vLLM's gen_ai.request.id, and a bare traceparent, joins to
// our X-Request-Id with the exact timings.
func TestOTLPJoin(t *testing.T) {
	r, endpoint := startTestReceiver(t)
	ctx := context.Background()
	chat := otlpTestSpan("chatcmpl-replay-1", 1) // chat: chatcmpl-<X-Request-Id>
	cmpl := otlpTestSpan("cmpl-replay-2-0", 2)   // completions: cmpl-<X-Request-Id>-<prompt index>
	raw := otlpTestSpan("replay-3", 3)           // a server that sends the id as is
	viaTrace := otlpTestSpan("", 4)              // no request id at all: join on the traceparent
	viaTrace.TraceParent, _ = TraceParentFor("replay-4")
	weird := otlpTestSpan("cmpl-replay-5-x", 5) // a suffix that is not a prompt index is kept
	if err := ExportLLMRequestSpans(ctx, endpoint, []LLMRequestSpan{chat, cmpl, raw, viaTrace, weird}); err != nil {
		t.Fatalf("ExportLLMRequestSpans = %v", err)
	}
	r.Expect("replay-1", "replay-2", "replay-3", "replay-4", "replay-5-x")
	checkTimings(t, r, "replay-1", chat)
	checkTimings(t, r, "replay-2", cmpl)
	checkTimings(t, r, "replay-3", raw)
	checkTimings(t, r, "replay-4", viaTrace)
	checkTimings(t, r, "replay-5-x", weird)
	if _, ok := r.Lookup("replay-6"); ok {
		t.Errorf("Lookup(replay-6) found a span for a request that has none")
	}
	got, _ := r.Lookup("replay-4")
	_, wantTrace := TraceParentFor("replay-4")
	if got.TraceID != wantTrace {
		t.Errorf("span trace id = %x, want the traceparent's %x", got.TraceID, wantTrace)
	}
	st := r.Stats()
	want := Stats{Exports: 1, Received: 5, Spans: 5, Matched: 5}
	if st != want {
		t.Errorf("Stats() = %+v, want %+v", st, want)
	}
}

// A JSON export (hex ids, int64 as strings, enum by name or number), plain
// and gzipped, is read like protobuf; other span names are ignored.
func TestOTLPJSONFixture(t *testing.T) {
	body, err := os.ReadFile("testdata/otlp/vllm_llm_request.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, gz := range []bool{false, true} {
		t.Run(fmt.Sprintf("gzip=%v", gz), func(t *testing.T) {
			r := mustReceiver(t, nil)
			b := body
			if gz {
				b = gzipBytes(t, body)
			}
			rec := postOTLP(r, "application/json", gz, b)
			if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" || rec.Body.String() != "{}" {
				t.Fatalf("POST fixture = %d %q %q, want 200 application/json {}", rec.Code, rec.Header().Get("Content-Type"), rec.Body.String())
			}
			r.Expect("fixture-1", "fixture-2")
			s1, ok := r.Lookup("fixture-1")
			if !ok || s1.QueueNs != 250_000_000 || s1.PrefillNs != 125_000_000 || s1.DecodeNs != 1_500_000_000 ||
				s1.TTFTNs != 400_000_000 || s1.E2ENs != 1_900_000_000 || s1.PromptTokens != 128 || s1.CompletionTokens != 64 ||
				s1.StartUnixNano != 1763776800000000000 || fmt.Sprintf("%x", s1.TraceID) != "5b8efff798038103d269b633813fc60c" ||
				fmt.Sprintf("%x", s1.SpanID) != "eee19b7ec3c1b174" {
				t.Errorf("Lookup(fixture-1) = %+v, %v", s1, ok)
			}
			// fixture-2's span has no request id: it joins on the trace id of
			// TraceParentFor("fixture-2"), and what it lacks is NotReported.
			s2, ok := r.Lookup("fixture-2")
			if !ok || s2.QueueNs != 500_000_000 || s2.PrefillNs != 100_000_000 || s2.DecodeNs != 300_000_000 ||
				s2.TTFTNs != -1 || s2.E2ENs != -1 || s2.CompletionTokens != -1 || s2.PromptTokens != 7 {
				t.Errorf("Lookup(fixture-2) = %+v, %v", s2, ok)
			}
			if st := r.Stats(); st.Spans != 2 || st.OtherSpans != 1 || st.Matched != 2 || st.Garbage != 0 {
				t.Errorf("Stats() = %+v", st)
			}
		})
	}
}

func gzipBytes(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func postOTLP(r *Receiver, contentType string, gz bool, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, TracesPath, bytes.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if gz {
		req.Header.Set("Content-Encoding", "gzip")
	}
	rec := httptest.NewRecorder()
	r.ServeHTTP(rec, req)
	return rec
}

// Garbage bodies are answered 400 and counted; good exports around them
// are still joined, and nothing fails.
func TestOTLPGarbage(t *testing.T) {
	r := mustReceiver(t, func(o *ReceiverOptions) { o.MaxBody = 1 << 20 })
	good, err := proto.Marshal(LLMRequestTraces([]LLMRequestSpan{otlpTestSpan("chatcmpl-g-1", 1)}))
	if err != nil {
		t.Fatal(err)
	}
	text, _ := os.ReadFile("testdata/otlp/garbage.txt")
	badJSON, _ := os.ReadFile("testdata/otlp/garbage.json")
	cases := []struct {
		name, contentType string
		gz                bool
		body              []byte
		want              int
	}{
		{"text sent as protobuf is not a valid message", "application/x-protobuf", false, text, 400},
		{"JSON whose spans are not a list", "application/json", false, badJSON, 400},
		{"truncated JSON", "application/json", false, []byte(`{"resourceSpans": [`), 400},
		{"a gzip header that lies", "application/x-protobuf", true, []byte("not gzip at all"), 400},
		{"gzip of garbage", "application/x-protobuf", true, gzipBytes(t, text), 400},
		{"a body over MaxBody after decompression", "application/x-protobuf", true, gzipBytes(t, make([]byte, 2<<20)), 400},
		{"an unknown content type with a protobuf body is sniffed", "text/plain", false, good, 200},
		{"an empty export is fine", "application/x-protobuf", false, nil, 200},
		{"the good export again is a duplicate, not garbage", "application/x-protobuf", false, good, 200},
	}
	for _, c := range cases {
		rec := postOTLP(r, c.contentType, c.gz, c.body)
		if rec.Code != c.want {
			t.Errorf("%s: status %d, want %d", c.name, rec.Code, c.want)
		}
	}
	rec := httptest.NewRecorder()
	r.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, TracesPath, nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("GET status %d, want 405", rec.Code)
	}
	rec = httptest.NewRecorder()
	r.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/metrics", nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("POST /v1/metrics status %d, want 404", rec.Code)
	}
	r.Expect("g-1")
	checkTimings(t, r, "g-1", otlpTestSpan("chatcmpl-g-1", 1))
	st := r.Stats()
	if st.Garbage != 6 || st.Spans != 1 || st.Duplicates != 1 || st.Matched != 1 || st.Exports != 3 {
		t.Errorf("Stats() = %+v, want 6 garbage, 1 span, 1 duplicate, 1 matched, 3 exports", st)
	}
}

// Spans arriving out of order, duplicated, concurrently, for unknown ids
// and late are joined or counted; Wait returns as soon as the late ones are
// in, and gives up on a missing one after the grace period.
func TestOTLPOutOfOrderDuplicatesUnknownLate(t *testing.T) {
	r, endpoint := startTestReceiver(t)
	ctx := context.Background()
	const n = 40
	ids := make([]string, n)
	spans := make([]LLMRequestSpan, n)
	for i := range n {
		ids[i] = fmt.Sprintf("run-%d", i)
		spans[i] = otlpTestSpan("chatcmpl-"+ids[i], i)
	}
	r.Expect(ids...)
	// The first 30 arrive shuffled, in batches of 3 from 4 concurrent
	// exporters, each batch sent twice; plus 2 spans of strangers.
	rng := rand.New(rand.NewPCG(1, 2))
	order := rng.Perm(30)
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for w := range 4 {
		wg.Go(func() {
			for b := w * 3; b < 30; b += 12 {
				var batch []LLMRequestSpan
				for _, j := range order[b:min(b+3, 30)] {
					batch = append(batch, spans[j])
				}
				for range 2 {
					if err := ExportLLMRequestSpans(ctx, endpoint, batch); err != nil {
						errs <- err
					}
				}
			}
		})
	}
	wg.Wait()
	if err := ExportLLMRequestSpans(ctx, endpoint, []LLMRequestSpan{otlpTestSpan("chatcmpl-stranger-1", 1), otlpTestSpan("cmpl-stranger-2-0", 2)}); err != nil {
		t.Fatal(err)
	}
	close(errs)
	for err := range errs {
		t.Fatalf("export: %v", err)
	}
	// The last 9 arrive late, in reverse order, while the replay waits.
	go func() {
		for i := n - 2; i >= 30; i-- {
			time.Sleep(5 * time.Millisecond)
			ExportLLMRequestSpans(ctx, endpoint, []LLMRequestSpan{spans[i]})
		}
	}()
	if missing := r.Wait(ctx, ids[:n-1], time.Minute); missing != 0 {
		t.Fatalf("Wait(first %d, 1m) = %d missing, want 0", n-1, missing)
	}
	// run-39 never comes: Wait gives up after its grace period.
	if missing := r.Wait(ctx, ids, 50*time.Millisecond); missing != 1 {
		t.Errorf("Wait(all, 50ms) = %d missing, want 1", missing)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if missing := r.Wait(cctx, ids, time.Minute); missing != 1 {
		t.Errorf("Wait(cancelled ctx) = %d missing, want 1", missing)
	}
	for i := range n - 1 {
		checkTimings(t, r, ids[i], spans[i])
	}
	st := r.Stats()
	want := Stats{Exports: 20 + 1 + 9, Received: 60 + 2 + 9, Spans: 39 + 2, Duplicates: 30, Matched: 39, Unknown: 2}
	if st != want {
		t.Errorf("Stats() = %+v, want %+v", st, want)
	}
}

// Start serves until its context ends.
func TestOTLPStartStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	r := mustReceiver(t, nil)
	addr, err := r.Start(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "http://" + addr + "/" // a bare host:port endpoint posts to "/"
	if err := ExportLLMRequestSpans(context.Background(), endpoint, []LLMRequestSpan{otlpTestSpan("a", 1)}); err != nil {
		t.Fatalf("export to %s = %v", endpoint, err)
	}
	if _, err := r.Start(context.Background(), addr); err == nil || !strings.Contains(err.Error(), "listen") {
		t.Errorf("Start on a busy address = %v, want a listen error", err)
	}
	cancel()
	deadline := time.Now().Add(10 * time.Second)
	for ExportLLMRequestSpans(context.Background(), endpoint, nil) == nil {
		if time.Now().After(deadline) {
			t.Fatal("receiver still serving 10s after its context ended")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TraceParentFor is deterministic, valid W3C, and distinct per id.
func TestTraceParentFor(t *testing.T) {
	h1, t1 := TraceParentFor("replay-1")
	h1b, _ := TraceParentFor("replay-1")
	h2, t2 := TraceParentFor("replay-2")
	if h1 != h1b || h1 == h2 || t1 == t2 {
		t.Errorf("TraceParentFor not deterministic and distinct: %s %s %s", h1, h1b, h2)
	}
	tid, parent, ok := otlpParseTraceParent(h1)
	if !ok || tid != t1 || parent == ([8]byte{}) || len(h1) != 55 || !strings.HasPrefix(h1, "00-") || !strings.HasSuffix(h1, "-01") {
		t.Errorf("TraceParentFor(replay-1) = %q, not a valid sampled traceparent", h1)
	}
}

// The exporter writes vLLM's span name, kind and attribute names, with
// latencies as double seconds and tokens as ints.
func TestLLMRequestTracesShape(t *testing.T) {
	s := otlpTestSpan("chatcmpl-x", 1)
	s.TraceParent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	td := LLMRequestTraces([]LLMRequestSpan{s})
	sp := td.GetResourceSpans()[0].GetScopeSpans()[0].GetSpans()[0]
	if sp.GetName() != "llm_request" || sp.GetKind() != tracepb.Span_SPAN_KIND_SERVER ||
		fmt.Sprintf("%x", sp.GetTraceId()) != "0af7651916cd43dd8448eb211c80319c" ||
		fmt.Sprintf("%x", sp.GetParentSpanId()) != "b7ad6b7169203331" || len(sp.GetSpanId()) != 8 {
		t.Errorf("span = %v", sp)
	}
	types := map[string]string{}
	for _, kv := range sp.GetAttributes() {
		types[kv.GetKey()] = fmt.Sprintf("%T", kv.GetValue().GetValue())
	}
	want := map[string]string{
		"gen_ai.latency.time_to_first_token":     "*v1.AnyValue_DoubleValue",
		"gen_ai.latency.e2e":                     "*v1.AnyValue_DoubleValue",
		"gen_ai.latency.time_in_queue":           "*v1.AnyValue_DoubleValue",
		"gen_ai.latency.time_in_model_prefill":   "*v1.AnyValue_DoubleValue",
		"gen_ai.latency.time_in_model_decode":    "*v1.AnyValue_DoubleValue",
		"gen_ai.latency.time_in_model_inference": "*v1.AnyValue_DoubleValue",
		"gen_ai.usage.prompt_tokens":             "*v1.AnyValue_IntValue",
		"gen_ai.usage.completion_tokens":         "*v1.AnyValue_IntValue",
		"gen_ai.request.id":                      "*v1.AnyValue_StringValue",
		"gen_ai.request.max_tokens":              "*v1.AnyValue_IntValue",
	}
	if fmt.Sprint(types) != fmt.Sprint(want) {
		t.Errorf("attributes = %v\nwant %v", types, want)
	}
}

func FuzzOTLPReceiver(f *testing.F) {
	good, _ := proto.Marshal(LLMRequestTraces([]LLMRequestSpan{otlpTestSpan("chatcmpl-f-1", 1)}))
	fixture, _ := os.ReadFile("testdata/otlp/vllm_llm_request.json")
	f.Add(good, false)
	f.Add(fixture, true)
	f.Add([]byte("garbage"), false)
	f.Fuzz(func(t *testing.T, body []byte, asJSON bool) {
		r := mustReceiver(t, func(o *ReceiverOptions) { o.MaxBody = 1 << 20 })
		ct := "application/x-protobuf"
		if asJSON {
			ct = "application/json"
		}
		rec := postOTLP(r, ct, false, body)
		if rec.Code != http.StatusOK && rec.Code != http.StatusBadRequest {
			t.Fatalf("status %d, want 200 or 400", rec.Code)
		}
		r.Expect("f-1")
		r.Lookup("f-1")
		r.Stats()
	})
}

// JoinRecords fills what is not reported, keeps what the response said
// unless told otherwise, and counts ok requests without a span.
func TestOTLPJoinRecords(t *testing.T) {
	r := mustReceiver(t, nil)
	a, b := otlpTestSpan("chatcmpl-j-1", 1), otlpTestSpan("cmpl-j-2-0", 2)
	r.Ingest(LLMRequestTraces([]LLMRequestSpan{a, b}), false)
	rec := func(id, status string) traces.Record {
		x := traces.NewRecord()
		x.RequestID, x.Status = id, status
		return x
	}
	recs := []traces.Record{
		rec("j-1", traces.StatusOK),        // nothing reported: filled from the span
		rec("j-2", traces.StatusOK),        // the response had per-request metrics: kept
		rec("j-3", traces.StatusOK),        // no span: unmatched, stays NotReported
		rec("j-4", traces.StatusHTTPError), // refused before the engine: not counted
		rec("", traces.StatusOK),           // no request id: skipped
	}
	recs[1].ServerQueueNs, recs[1].ServerPrefillNs, recs[1].ServerDecodeNs = 1, 2, 3
	matched, unmatched := r.JoinRecords(recs, false)
	if matched != 2 || unmatched != 1 {
		t.Errorf("JoinRecords = %d matched, %d unmatched; want 2, 1", matched, unmatched)
	}
	if g := recs[0]; g.ServerQueueNs != a.Queue.Nanoseconds() || g.ServerPrefillNs != a.Prefill.Nanoseconds() ||
		g.ServerDecodeNs != a.Decode.Nanoseconds() || int(g.ServerPromptTokens) != a.PromptTokens || int(g.ServerOutputTokens) != a.CompletionTokens {
		t.Errorf("j-1 = %+v", g)
	}
	if g := recs[1]; g.ServerQueueNs != 1 || g.ServerPrefillNs != 2 || g.ServerDecodeNs != 3 || int(g.ServerPromptTokens) != b.PromptTokens {
		t.Errorf("j-2 without overwrite = %+v", g)
	}
	if g := recs[2]; g.ServerQueueNs != -1 || g.ServerPrefillNs != -1 || g.ServerDecodeNs != -1 || g.ServerPromptTokens != -1 {
		t.Errorf("j-3 = %+v, want NotReported", g)
	}
	r.JoinRecords(recs, true)
	if g := recs[1]; g.ServerQueueNs != b.Queue.Nanoseconds() || g.ServerDecodeNs != b.Decode.Nanoseconds() {
		t.Errorf("j-2 with overwrite = %+v", g)
	}
	r.Expect("j-1", "j-2", "j-3")
	m := traces.NewMeta("replay")
	r.Stats().Annotate(&m)
	if m.Get(MetaOTLPSpans) != "2" || m.Get(MetaOTLPMatched) != "2" || m.Get(MetaOTLPUnknown) != "0" || m.Get(MetaOTLPGarbage) != "0" {
		t.Errorf("Annotate = %v", m.Extra)
	}
}

// BenchmarkOTLPReceive measures one 100-span protobuf export through
// ServeHTTP (decode, extract, index).
func BenchmarkOTLPReceive(b *testing.B) {
	spans := make([]LLMRequestSpan, 100)
	for i := range spans {
		spans[i] = otlpTestSpan(fmt.Sprintf("chatcmpl-b-%d", i), i)
	}
	body, err := proto.Marshal(LLMRequestTraces(spans))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		r := mustReceiver(b, nil)
		if rec := postOTLP(r, "application/x-protobuf", false, body); rec.Code != http.StatusOK {
			b.Fatal(rec.Code)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/100, "ns/span")
}

// Past MaxSpans, new spans are dropped and counted.
func TestOTLPMaxSpans(t *testing.T) {
	r := mustReceiver(t, func(o *ReceiverOptions) { o.MaxSpans = 2 })
	r.Ingest(LLMRequestTraces([]LLMRequestSpan{otlpTestSpan("a", 1), otlpTestSpan("b", 2), otlpTestSpan("c", 3), otlpTestSpan("a", 1)}), false)
	st := r.Stats()
	if st.Spans != 2 || st.Dropped != 1 || st.Duplicates != 1 || st.Received != 4 {
		t.Errorf("Stats() = %+v, want 2 kept, 1 dropped, 1 duplicate", st)
	}
	if _, ok := r.Lookup("c"); ok {
		t.Errorf("Lookup(c) found a dropped span")
	}
}

// A disaggregated request's span is the decode replica's: its queue is
// the decode-side queue, and the prefill side's queue and prefill stay
// unreported; DecodeSide does the same to a metrics object's timings.
func TestOTLPJoinDecodeSide(t *testing.T) {
	r := mustReceiver(t, nil)
	a := otlpTestSpan("chatcmpl-d-1", 1)
	r.Ingest(LLMRequestTraces([]LLMRequestSpan{a}), false)
	x := traces.NewRecord()
	x.RequestID, x.Status, x.PrefillReplica = "d-1", traces.StatusOK, "prefill-0"
	recs := []traces.Record{x}
	if m, _ := r.JoinRecords(recs, false); m != 1 {
		t.Fatalf("matched %d", m)
	}
	if g := recs[0]; g.ServerDecodeQueueNs != a.Queue.Nanoseconds() || g.ServerDecodeNs != a.Decode.Nanoseconds() ||
		g.ServerQueueNs != traces.NotReported || g.ServerPrefillNs != traces.NotReported {
		t.Errorf("joined %+v: want the span's queue as the decode-side queue", g)
	}
	y := traces.NewRecord()
	y.ServerQueueNs, y.ServerPrefillNs, y.ServerDecodeNs = 5, 6, 7
	DecodeSide(&y)
	if y.ServerDecodeQueueNs != 5 || y.ServerQueueNs != traces.NotReported || y.ServerPrefillNs != traces.NotReported || y.ServerDecodeNs != 7 {
		t.Errorf("DecodeSide: %+v", y)
	}
	DecodeSide(&y) // a row with decode-side columns is left alone
	if y.ServerDecodeQueueNs != 5 {
		t.Errorf("DecodeSide twice: %+v", y)
	}
}
