// Package otlp receives the llm_request spans vLLM exports with
// --otlp-traces-endpoint over OTLP/HTTP and joins their server timings
// (queue, prefill, decode) to replay results by request id; it also holds
// the matching exporter (used by tests; the simulator carries its own copy,
// as it imports nothing of replay).
//
// The wire type is go.opentelemetry.io/proto/otlp/trace/v1.TracesData, which
// is wire- and JSON-identical to collector/trace/v1.ExportTraceServiceRequest
// (both are "repeated ResourceSpans resource_spans = 1"); the collector
// package is not imported because it drags in gRPC, which tokentrace does
// not otherwise need.
package otlp

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tokentrace/tokentrace/traces"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// vLLM's span name and attribute names (vllm/tracing.py SpanAttributes,
// set by OutputProcessor.do_tracing in vllm/v1/engine/output_processor.py).
// Latencies are float seconds; token counts are ints.
const (
	OTLPSpanName             = "llm_request"
	OTLPAttrRequestID        = "gen_ai.request.id"
	OTLPAttrTimeInQueue      = "gen_ai.latency.time_in_queue"
	OTLPAttrTimeInPrefill    = "gen_ai.latency.time_in_model_prefill"
	OTLPAttrTimeInDecode     = "gen_ai.latency.time_in_model_decode"
	OTLPAttrTimeInInference  = "gen_ai.latency.time_in_model_inference"
	OTLPAttrTimeToFirstToken = "gen_ai.latency.time_to_first_token"
	OTLPAttrE2E              = "gen_ai.latency.e2e"
	OTLPAttrPromptTokens     = "gen_ai.usage.prompt_tokens"
	OTLPAttrCompletionTokens = "gen_ai.usage.completion_tokens"
	OTLPAttrMaxTokens        = "gen_ai.request.max_tokens"
)

// TracesPath is the OTLP/HTTP traces path. The receiver also accepts "/"
// (an exporter given a bare host:port as its full endpoint posts there).
const TracesPath = "/v1/traces"

// DefaultOTLPMaxBody bounds one export request's body, after gzip
// decompression.
const DefaultOTLPMaxBody = 32 << 20

// DefaultOTLPMaxSpans bounds the spans a receiver keeps (a server shared
// with other traffic exports spans for every request).
const DefaultOTLPMaxSpans = 1 << 20

// DefaultGrace is how long a replay waits after its last request for
// spans still in the server's batch exporter (vLLM's BatchSpanProcessor
// flushes every 5 s by default).
const DefaultGrace = 10 * time.Second

// SpanTimings is what one llm_request span says about one request. Times are
// nanoseconds; NotReported (-1) marks an attribute the span did not carry.
type SpanTimings struct {
	// RequestID is gen_ai.request.id as the server sent it; vLLM sends its
	// external id, "chatcmpl-<X-Request-Id>" or "cmpl-<X-Request-Id>-<i>".
	RequestID string
	// TraceID and SpanID identify the span; with a traceparent header the
	// trace id is the one the client sent.
	TraceID [16]byte
	SpanID  [8]byte
	// StartUnixNano is the span start (vLLM: the frontend arrival time);
	// EndUnixNano its end.
	StartUnixNano, EndUnixNano int64
	// QueueNs, PrefillNs, DecodeNs, InferenceNs, TTFTNs and E2ENs are the
	// gen_ai.latency.* attributes.
	QueueNs, PrefillNs, DecodeNs, InferenceNs, TTFTNs, E2ENs int64
	// PromptTokens and CompletionTokens are gen_ai.usage.*.
	PromptTokens, CompletionTokens int32
}

// Stats counts what an Receiver got.
type Stats struct {
	// Exports is the number of well-formed export requests.
	Exports int64
	// Received is the number of llm_request spans received, duplicates
	// included.
	Received int64
	// Spans is the number of distinct llm_request spans kept.
	Spans int64
	// Duplicates is the number of llm_request spans dropped because a span
	// with the same request id (or trace and span id) was already kept.
	Duplicates int64
	// Matched is the number of distinct expected request ids (see Expect)
	// that have a span.
	Matched int64
	// Unknown is the number of kept spans that match no expected request id.
	Unknown int64
	// Garbage is the number of export requests that could not be decoded
	// (answered 400).
	Garbage int64
	// OtherSpans is the number of spans of other names, ignored.
	OtherSpans int64
	// Dropped is the number of distinct llm_request spans dropped because
	// MaxSpans were already kept.
	Dropped int64
}

// ReceiverOptions tune a Receiver. Start from DefaultReceiverOptions: a
// field's zero is a value of its own, never its default.
type ReceiverOptions struct {
	// MaxBody bounds one request body after decompression (> 0). Defaults
	// to DefaultOTLPMaxBody.
	MaxBody int64
	// MaxSpans bounds the llm_request spans kept (> 0). Defaults to
	// DefaultOTLPMaxSpans.
	MaxSpans int
}

// DefaultReceiverOptions returns every ReceiverOptions default.
func DefaultReceiverOptions() ReceiverOptions {
	return ReceiverOptions{MaxBody: DefaultOTLPMaxBody, MaxSpans: DefaultOTLPMaxSpans}
}

// Validate reports the first option a Receiver cannot use, naming it in a
// *traces.OptionError.
func (o ReceiverOptions) Validate() error {
	switch {
	case o.MaxBody <= 0:
		return traces.OptionErrorf("otlp", "ReceiverOptions.MaxBody", "must be > 0, got %d", o.MaxBody)
	case o.MaxSpans <= 0:
		return traces.OptionErrorf("otlp", "ReceiverOptions.MaxSpans", "must be > 0, got %d", o.MaxSpans)
	}
	return nil
}

// Receiver is an OTLP/HTTP traces receiver (protobuf and JSON, optional
// gzip) that keeps vLLM's llm_request spans and joins them to request ids,
// through gen_ai.request.id or through the trace id of the traceparent
// header from TraceParentFor. Bad input is counted, never fatal. It is safe
// for concurrent use.
type Receiver struct {
	maxBody  int64
	maxSpans int

	mu       sync.Mutex
	spans    []SpanTimings
	byKey    map[string]int // request-id forms → index in spans
	byTrace  map[[16]byte]int
	seen     map[string]struct{} // dedup keys
	expected map[string]struct{}
	stats    Stats
	changed  chan struct{} // closed and replaced on every new span
}

// NewReceiver returns a receiver; serve it with Start or mount it as an
// http.Handler. An error is o's (Validate).
func NewReceiver(o ReceiverOptions) (*Receiver, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return &Receiver{
		maxBody:  o.MaxBody,
		maxSpans: o.MaxSpans,
		byKey:    map[string]int{},
		byTrace:  map[[16]byte]int{},
		seen:     map[string]struct{}{},
		expected: map[string]struct{}{},
		changed:  make(chan struct{}),
	}, nil
}

// Start listens on addr ("127.0.0.1:4318"; port 0 picks one) and serves
// until ctx is done. It returns the address actually bound.
func (r *Receiver) Start(ctx context.Context, addr string) (string, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return "", fmt.Errorf("otlp receiver: listen %s: %w", addr, err)
	}
	srv := &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	return ln.Addr().String(), nil
}

// Expect registers the request ids of a run, so Stats can tell matched spans
// from unknown ones. Spans may arrive before or after their id is expected.
func (r *Receiver) Expect(ids ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range ids {
		r.expected[id] = struct{}{}
	}
}

// Lookup returns the span of a request id (our X-Request-Id), matched on
// gen_ai.request.id in any of vLLM's forms, else on the trace id that
// TraceParentFor gives the id.
func (r *Receiver) Lookup(requestID string) (SpanTimings, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	i, ok := r.lookupLocked(requestID)
	if !ok {
		return SpanTimings{}, false
	}
	return r.spans[i], true
}

func (r *Receiver) lookupLocked(requestID string) (int, bool) {
	if i, ok := r.byKey[requestID]; ok {
		return i, true
	}
	_, tid := TraceParentFor(requestID)
	i, ok := r.byTrace[tid]
	return i, ok
}

// Wait blocks until every id has a span, grace has elapsed or ctx is done,
// and returns how many ids still have none.
func (r *Receiver) Wait(ctx context.Context, ids []string, grace time.Duration) int {
	timer := time.NewTimer(grace)
	defer timer.Stop()
	next := 0 // ids[:next] are known to have spans
	for {
		r.mu.Lock()
		for next < len(ids) {
			if _, ok := r.lookupLocked(ids[next]); !ok {
				break
			}
			next++
		}
		changed := r.changed
		r.mu.Unlock()
		if next == len(ids) {
			return 0
		}
		select {
		case <-changed:
		case <-timer.C:
			return r.missing(ids[next:])
		case <-ctx.Done():
			return r.missing(ids[next:])
		}
	}
}

func (r *Receiver) missing(ids []string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, id := range ids {
		if _, ok := r.lookupLocked(id); !ok {
			n++
		}
	}
	return n
}

// Stats returns the counters so far.
func (r *Receiver) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.stats
	st.Spans = int64(len(r.spans))
	matchedSpan := make([]bool, len(r.spans))
	for id := range r.expected {
		if i, ok := r.lookupLocked(id); ok {
			st.Matched++
			matchedSpan[i] = true
		}
	}
	for _, m := range matchedSpan {
		if !m {
			st.Unknown++
		}
	}
	return st
}

// ServeHTTP implements OTLP/HTTP POST /v1/traces: protobuf
// (application/x-protobuf) or JSON (application/json), optionally gzip.
// Undecodable bodies get 400 and are counted as garbage; everything else
// gets 200 with an empty ExportTraceServiceResponse.
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path != TracesPath && req.URL.Path != "/" {
		http.NotFound(w, req)
		return
	}
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	body, err := r.readBody(req)
	if err != nil {
		r.garbage(w, err)
		return
	}
	ct, _, _ := mime.ParseMediaType(req.Header.Get("Content-Type"))
	isJSON := ct == "application/json"
	if ct != "application/json" && ct != "application/x-protobuf" && ct != "application/protobuf" {
		isJSON = len(bytes.TrimSpace(body)) > 0 && bytes.TrimSpace(body)[0] == '{'
	}
	var td tracepb.TracesData
	if isJSON {
		err = protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(body, &td)
	} else {
		err = proto.Unmarshal(body, &td)
	}
	if err != nil {
		r.garbage(w, errors.New("body is not an OTLP ExportTraceServiceRequest"))
		return
	}
	r.Ingest(&td, isJSON)
	if isJSON {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, "{}")
		return
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.WriteHeader(http.StatusOK) // an empty ExportTraceServiceResponse is zero bytes
}

func (r *Receiver) readBody(req *http.Request) ([]byte, error) {
	var src io.Reader = http.MaxBytesReader(nil, req.Body, r.maxBody)
	switch enc := strings.ToLower(strings.TrimSpace(req.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(src)
		if err != nil {
			return nil, errors.New("bad gzip body")
		}
		defer zr.Close()
		src = zr
	default:
		return nil, fmt.Errorf("unsupported Content-Encoding %q", enc)
	}
	body, err := io.ReadAll(io.LimitReader(src, r.maxBody+1))
	if err != nil {
		return nil, errors.New("unreadable body")
	}
	if int64(len(body)) > r.maxBody {
		return nil, fmt.Errorf("body over %d bytes", r.maxBody)
	}
	return body, nil
}

func (r *Receiver) garbage(w http.ResponseWriter, err error) {
	r.mu.Lock()
	r.stats.Garbage++
	r.mu.Unlock()
	http.Error(w, "otlp: "+err.Error(), http.StatusBadRequest)
}

// Ingest keeps the llm_request spans of a decoded export request. fromJSON
// says the ids came through protojson, which reads OTLP JSON's hex ids as
// base64; they are converted back.
func (r *Receiver) Ingest(td *tracepb.TracesData, fromJSON bool) {
	var got []SpanTimings
	other := int64(0)
	for _, rs := range td.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				if sp.GetName() != OTLPSpanName {
					other++
					continue
				}
				got = append(got, spanTimingsOf(sp, fromJSON))
			}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stats.Exports++
	r.stats.OtherSpans += other
	added := false
	for _, s := range got {
		r.stats.Received++
		dedup := "id:" + s.RequestID
		if s.RequestID == "" {
			dedup = "span:" + hex.EncodeToString(s.TraceID[:]) + hex.EncodeToString(s.SpanID[:])
		}
		if _, dup := r.seen[dedup]; dup {
			r.stats.Duplicates++
			continue
		}
		if len(r.spans) >= r.maxSpans {
			r.stats.Dropped++
			continue
		}
		r.seen[dedup] = struct{}{}
		i := len(r.spans)
		r.spans = append(r.spans, s)
		for _, k := range otlpRequestIDKeys(s.RequestID) {
			if _, ok := r.byKey[k]; !ok {
				r.byKey[k] = i
			}
		}
		if s.TraceID != ([16]byte{}) {
			if _, ok := r.byTrace[s.TraceID]; !ok {
				r.byTrace[s.TraceID] = i
			}
		}
		added = true
	}
	if added {
		close(r.changed)
		r.changed = make(chan struct{})
	}
}

// otlpRequestIDKeys returns the forms of our request id that a
// gen_ai.request.id may stand for: itself, and with vLLM's "chatcmpl-"
// prefix or "cmpl-" prefix and "-<prompt index>" suffix removed.
func otlpRequestIDKeys(id string) []string {
	if id == "" {
		return nil
	}
	keys := []string{id}
	if rest, ok := strings.CutPrefix(id, "chatcmpl-"); ok && rest != "" {
		keys = append(keys, rest)
	}
	if rest, ok := strings.CutPrefix(id, "cmpl-"); ok && rest != "" {
		keys = append(keys, rest)
		if i := strings.LastIndexByte(rest, '-'); i > 0 {
			if _, err := strconv.Atoi(rest[i+1:]); err == nil {
				keys = append(keys, rest[:i])
			}
		}
	}
	return keys
}

// spanLatencies are the gen_ai.latency.* attributes (float seconds) and
// the fields they fill; spanCounts the gen_ai.usage.* counts.
var (
	spanLatencies = []struct {
		attr  string
		field func(*SpanTimings) *int64
	}{
		{OTLPAttrTimeInQueue, func(s *SpanTimings) *int64 { return &s.QueueNs }},
		{OTLPAttrTimeInPrefill, func(s *SpanTimings) *int64 { return &s.PrefillNs }},
		{OTLPAttrTimeInDecode, func(s *SpanTimings) *int64 { return &s.DecodeNs }},
		{OTLPAttrTimeInInference, func(s *SpanTimings) *int64 { return &s.InferenceNs }},
		{OTLPAttrTimeToFirstToken, func(s *SpanTimings) *int64 { return &s.TTFTNs }},
		{OTLPAttrE2E, func(s *SpanTimings) *int64 { return &s.E2ENs }},
	}
	spanCounts = []struct {
		attr  string
		field func(*SpanTimings) *int32
	}{
		{OTLPAttrPromptTokens, func(s *SpanTimings) *int32 { return &s.PromptTokens }},
		{OTLPAttrCompletionTokens, func(s *SpanTimings) *int32 { return &s.CompletionTokens }},
	}
)

func spanTimingsOf(sp *tracepb.Span, fromJSON bool) SpanTimings {
	s := SpanTimings{
		StartUnixNano: otlpClampNano(sp.GetStartTimeUnixNano()),
		EndUnixNano:   otlpClampNano(sp.GetEndTimeUnixNano()),
	}
	for _, a := range spanLatencies {
		*a.field(&s) = traces.NotReported
	}
	for _, a := range spanCounts {
		*a.field(&s) = traces.NotReported
	}
	copy(s.TraceID[:], otlpID(sp.GetTraceId(), 16, fromJSON))
	copy(s.SpanID[:], otlpID(sp.GetSpanId(), 8, fromJSON))
	for _, kv := range sp.GetAttributes() {
		key, v := kv.GetKey(), kv.GetValue()
		if key == OTLPAttrRequestID {
			s.RequestID = otlpString(v)
		}
		for _, a := range spanLatencies {
			if a.attr == key {
				*a.field(&s) = otlpSeconds(v)
			}
		}
		for _, a := range spanCounts {
			if a.attr == key {
				*a.field(&s) = otlpCount(v)
			}
		}
	}
	return s
}

// otlpID returns an id of want bytes. OTLP JSON carries ids as hex, which
// protojson decodes as base64 into 3/2 as many bytes; those are re-encoded
// and read as hex. Ids of any other length are dropped.
func otlpID(b []byte, want int, fromJSON bool) []byte {
	if len(b) == want {
		return b
	}
	if fromJSON && len(b) == want*3/2 {
		if h, err := hex.DecodeString(base64.StdEncoding.EncodeToString(b)); err == nil && len(h) == want {
			return h
		}
	}
	return nil
}

func otlpClampNano(v uint64) int64 {
	if v > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(v)
}

func otlpNumber(v *commonpb.AnyValue) (float64, bool) {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_DoubleValue:
		return x.DoubleValue, true
	case *commonpb.AnyValue_IntValue:
		return float64(x.IntValue), true
	case *commonpb.AnyValue_StringValue:
		f, err := strconv.ParseFloat(strings.TrimSpace(x.StringValue), 64)
		return f, err == nil
	}
	return 0, false
}

// otlpSeconds converts a latency attribute (float seconds) to nanoseconds;
// NotReported for non-numbers, NaN, infinities, negatives and values over
// a century.
func otlpSeconds(v *commonpb.AnyValue) int64 {
	f, ok := otlpNumber(v)
	if !ok || math.IsNaN(f) || f < 0 || f > 3.2e9 {
		return traces.NotReported
	}
	return int64(math.Round(f * 1e9))
}

func otlpCount(v *commonpb.AnyValue) int32 {
	f, ok := otlpNumber(v)
	if !ok || math.IsNaN(f) || f < 0 || f > math.MaxInt32 {
		return traces.NotReported
	}
	return int32(math.Round(f))
}

func otlpString(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	}
	return ""
}

// TimingSource is the timing-source value (see replay.MetaTimingSource) for
// server timings joined from OTLP llm_request spans.
const TimingSource = "otlp"

// Metadata keys Stats.Annotate sets in Meta.Extra.
const (
	MetaOTLPSpans      = "replay.otlp_spans"
	MetaOTLPMatched    = "replay.otlp_matched"
	MetaOTLPDuplicates = "replay.otlp_duplicates"
	MetaOTLPUnknown    = "replay.otlp_unknown"
	MetaOTLPGarbage    = "replay.otlp_garbage"
	MetaOTLPDropped    = "replay.otlp_dropped"
)

// Annotate records the counters in m.
func (st Stats) Annotate(m *traces.Meta) {
	m.Set(MetaOTLPSpans, strconv.FormatInt(st.Spans, 10))
	m.Set(MetaOTLPMatched, strconv.FormatInt(st.Matched, 10))
	m.Set(MetaOTLPDuplicates, strconv.FormatInt(st.Duplicates, 10))
	m.Set(MetaOTLPUnknown, strconv.FormatInt(st.Unknown, 10))
	m.Set(MetaOTLPGarbage, strconv.FormatInt(st.Garbage, 10))
	m.Set(MetaOTLPDropped, strconv.FormatInt(st.Dropped, 10))
}

// DecodeSide re-reads the engine timings of a disaggregated request (one
// that names a prefill replica) as the decode replica's. Under
// prefill/decode disaggregation the engine that answers the client (and
// exports the request's span) is the decode replica: llm-d's routing
// sidecar, like the built-in simulator's fleet, sends the prefill replica
// a request of its own and streams the decode replica's answer. That
// engine never saw the prefill side, so its queue time is the request's
// wait on the decode replica (which, with vLLM's NIXL connector, holds the
// KV pull: server_decode_queue_ns), its prefill only the last prompt token
// (dropped: server_prefill_ns means the prompt's), its decode the decode;
// the prefill side's queue and prefill stay NotReported, and analyze
// estimates them. A row that already has decode-side columns is left as
// it is.
func DecodeSide(rec *traces.Record) {
	if rec.ServerDecodeQueueNs != traces.NotReported || rec.ServerKVTransferNs != traces.NotReported {
		return
	}
	rec.ServerDecodeQueueNs = rec.ServerQueueNs
	rec.ServerQueueNs, rec.ServerPrefillNs = traces.NotReported, traces.NotReported
}

// JoinRecords fills the server timing columns (server_queue_ns,
// server_prefill_ns, server_decode_ns; for a disaggregated request the
// decode side's, see DecodeSide) and, where NotReported, the server
// token counts of recs from their spans, looked up by RequestID. Columns that
// already hold a value (per-request metrics from the response) are kept
// unless overwrite is set. matched counts the records that got a span;
// unmatched the ok records (status ok) that have none — they keep
// NotReported, nothing is guessed.
func (r *Receiver) JoinRecords(recs []traces.Record, overwrite bool) (matched, unmatched int) {
	for i := range recs {
		rec := &recs[i]
		if rec.RequestID == "" {
			continue
		}
		s, ok := r.Lookup(rec.RequestID)
		if !ok {
			if rec.Status == traces.StatusOK {
				unmatched++
			}
			continue
		}
		matched++
		set64 := func(dst *int64, v int64) {
			if v != traces.NotReported && (overwrite || *dst == traces.NotReported) {
				*dst = v
			}
		}
		set32 := func(dst *int32, v int32) {
			if v != traces.NotReported && *dst == traces.NotReported {
				*dst = v
			}
		}
		if rec.PrefillReplica != "" {
			// The decode replica's span (DecodeSide): its queue is the
			// request's wait there; the prefill side's is not in it.
			set64(&rec.ServerDecodeQueueNs, s.QueueNs)
		} else {
			set64(&rec.ServerQueueNs, s.QueueNs)
			set64(&rec.ServerPrefillNs, s.PrefillNs)
		}
		set64(&rec.ServerDecodeNs, s.DecodeNs)
		set32(&rec.ServerPromptTokens, s.PromptTokens)
		set32(&rec.ServerOutputTokens, s.CompletionTokens)
	}
	return matched, unmatched
}

// TraceParentFor returns the W3C traceparent header the client sends with a
// request, and its trace id. Both are derived from the request id alone
// (SHA-256), so the receiver can join a span on its trace id without any
// shared state.
func TraceParentFor(requestID string) (header string, traceID [16]byte) {
	h := sha256.Sum256([]byte("tokentrace/traceparent\x00" + requestID))
	copy(traceID[:], h[:16])
	var parent [8]byte
	copy(parent[:], h[16:24])
	if traceID == ([16]byte{}) { // all-zero ids are invalid
		traceID[15] = 1
	}
	if parent == ([8]byte{}) {
		parent[7] = 1
	}
	return "00-" + hex.EncodeToString(traceID[:]) + "-" + hex.EncodeToString(parent[:]) + "-01", traceID
}

// otlpParseTraceParent reads a version-00 traceparent header.
func otlpParseTraceParent(h string) (traceID [16]byte, parent [8]byte, ok bool) {
	parts := strings.Split(strings.TrimSpace(h), "-")
	if len(parts) < 4 || len(parts[1]) != 32 || len(parts[2]) != 16 {
		return traceID, parent, false
	}
	t, err1 := hex.DecodeString(parts[1])
	p, err2 := hex.DecodeString(parts[2])
	if err1 != nil || err2 != nil {
		return traceID, parent, false
	}
	copy(traceID[:], t)
	copy(parent[:], p)
	return traceID, parent, traceID != [16]byte{} && parent != [8]byte{}
}

// LLMRequestSpan is one finished request as vLLM's do_tracing describes it.
type LLMRequestSpan struct {
	// RequestID becomes gen_ai.request.id (vLLM: its external id).
	RequestID string
	// TraceParent is the request's incoming traceparent header ("" = the
	// span starts its own trace, with ids derived from RequestID).
	TraceParent string
	// Start is the arrival time; the span ends at Start+E2E.
	Start time.Time
	// Queue, Prefill, Decode, TTFT and E2E become the gen_ai.latency.*
	// attributes (in seconds); inference is Prefill+Decode.
	Queue, Prefill, Decode, TTFT, E2E time.Duration
	// PromptTokens and CompletionTokens become gen_ai.usage.*.
	PromptTokens, CompletionTokens int
	// MaxTokens becomes gen_ai.request.max_tokens when > 0.
	MaxTokens int
}

// LLMRequestTraces builds the export request (as TracesData, wire-identical
// to ExportTraceServiceRequest) for spans, with vLLM's span name, kind and
// attribute names.
func LLMRequestTraces(spans []LLMRequestSpan) *tracepb.TracesData {
	ss := &tracepb.ScopeSpans{Scope: &commonpb.InstrumentationScope{Name: "vllm.llm_engine"}}
	for _, s := range spans {
		ss.Spans = append(ss.Spans, llmRequestSpanProto(s))
	}
	return &tracepb.TracesData{ResourceSpans: []*tracepb.ResourceSpans{{
		Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{
			otlpKV("service.name", &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: "tokentrace-sim"}}),
		}},
		ScopeSpans: []*tracepb.ScopeSpans{ss},
	}}}
}

func llmRequestSpanProto(s LLMRequestSpan) *tracepb.Span {
	traceID, parent, ok := otlpParseTraceParent(s.TraceParent)
	if !ok {
		_, traceID = TraceParentFor(s.RequestID)
		parent = [8]byte{}
	}
	h := sha256.Sum256([]byte("tokentrace/span\x00" + s.RequestID))
	spanID := h[:8]
	if bytes.Equal(spanID, make([]byte, 8)) {
		spanID[7] = 1
	}
	sec := func(d time.Duration) *commonpb.AnyValue {
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: d.Seconds()}}
	}
	num := func(n int) *commonpb.AnyValue {
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: int64(n)}}
	}
	attrs := []*commonpb.KeyValue{
		otlpKV(OTLPAttrTimeToFirstToken, sec(s.TTFT)),
		otlpKV(OTLPAttrE2E, sec(s.E2E)),
		otlpKV(OTLPAttrTimeInQueue, sec(s.Queue)),
		otlpKV(OTLPAttrPromptTokens, num(s.PromptTokens)),
		otlpKV(OTLPAttrCompletionTokens, num(s.CompletionTokens)),
		otlpKV(OTLPAttrTimeInPrefill, sec(s.Prefill)),
		otlpKV(OTLPAttrTimeInDecode, sec(s.Decode)),
		otlpKV(OTLPAttrTimeInInference, sec(s.Prefill+s.Decode)),
		otlpKV(OTLPAttrRequestID, &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: s.RequestID}}),
	}
	if s.MaxTokens > 0 {
		attrs = append(attrs, otlpKV(OTLPAttrMaxTokens, num(s.MaxTokens)))
	}
	sp := &tracepb.Span{
		TraceId:           traceID[:],
		SpanId:            spanID,
		Name:              OTLPSpanName,
		Kind:              tracepb.Span_SPAN_KIND_SERVER,
		StartTimeUnixNano: uint64(s.Start.UnixNano()),
		EndTimeUnixNano:   uint64(s.Start.Add(s.E2E).UnixNano()),
		Attributes:        attrs,
	}
	if ok {
		sp.ParentSpanId = parent[:]
	}
	return sp
}

func otlpKV(k string, v *commonpb.AnyValue) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: v}
}

// ExportLLMRequestSpans posts spans to an OTLP/HTTP traces endpoint
// ("http://127.0.0.1:4318/v1/traces") as one protobuf export request, the
// way vLLM's http/protobuf exporter does.
func ExportLLMRequestSpans(ctx context.Context, endpoint string, spans []LLMRequestSpan) error {
	body, err := proto.Marshal(LLMRequestTraces(spans))
	if err != nil {
		return fmt.Errorf("otlp export: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("otlp export: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("otlp export: %w", err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("otlp export: status %d", resp.StatusCode)
	}
	return nil
}
