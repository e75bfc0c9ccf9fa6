package engine

import (
	"bytes"
	"context"
	"encoding/hex"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/tokentrace/tokentrace/traces"
)

// otlpExporter sends one "llm_request" span per finished request, with the
// attribute names of vLLM's V1 do_tracing, as OTLP/HTTP protobuf
// (vLLM --otlp-traces-endpoint with OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf).
// Spans are batched and posted every otlpInterval from one goroutine.
type otlpExporter struct {
	endpoint string
	client   *http.Client

	mu    sync.Mutex
	spans []*tracepb.Span

	kick chan struct{}
	stop chan struct{}
	done chan struct{}

	sent, failed atomic.Int64
}

const (
	otlpInterval = 100 * time.Millisecond
	otlpBatch    = 512
)

// otlpEndpoint normalizes an endpoint: a URL with no path gets /v1/traces.
func otlpEndpoint(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", traces.OptionErrorf("sim", "Options.OTLPTracesEndpoint", "%q: want http(s)://host:port[/path]", s)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/traces"
	}
	return u.String(), nil
}

func newOTLPExporter(endpoint string) *otlpExporter {
	x := &otlpExporter{endpoint: endpoint, client: &http.Client{Timeout: 5 * time.Second},
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go x.run()
	return x
}

func (x *otlpExporter) add(sp *tracepb.Span) {
	x.mu.Lock()
	x.spans = append(x.spans, sp)
	n := len(x.spans)
	x.mu.Unlock()
	if n >= otlpBatch {
		select {
		case x.kick <- struct{}{}:
		default:
		}
	}
}

func (x *otlpExporter) run() {
	defer close(x.done)
	t := time.NewTicker(otlpInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-x.kick:
		case <-x.stop:
			x.flush()
			return
		}
		x.flush()
	}
}

// close flushes what is left and stops the exporter.
func (x *otlpExporter) close() {
	close(x.stop)
	<-x.done
}

func (x *otlpExporter) flush() {
	x.mu.Lock()
	spans := x.spans
	x.spans = nil
	x.mu.Unlock()
	if len(spans) == 0 {
		return
	}
	td := &tracepb.TracesData{ResourceSpans: []*tracepb.ResourceSpans{{
		Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{strAttr("service.name", "tokentrace-sim")}},
		ScopeSpans: []*tracepb.ScopeSpans{{
			Scope: &commonpb.InstrumentationScope{Name: "vllm.llm_engine"},
			Spans: spans,
		}},
	}}}
	// TracesData and ExportTraceServiceRequest share their wire format.
	body, err := proto.Marshal(td)
	if err != nil {
		x.failed.Add(int64(len(spans)))
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, x.endpoint, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/x-protobuf")
	resp, err := x.client.Do(req)
	if err != nil {
		x.failed.Add(int64(len(spans)))
		return
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		x.failed.Add(int64(len(spans)))
		return
	}
	x.sent.Add(int64(len(spans)))
}

func strAttr(k, v string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
}

func intAttr(k string, v int64) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: v}}}
}

func secAttr(k string, ns int64) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: float64(ns) / 1e9}}}
}

// parseTraceparent reads a W3C traceparent header
// ("00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>").
func parseTraceparent(h string) (trace, parent []byte, ok bool) {
	p := strings.Split(strings.TrimSpace(h), "-")
	if len(p) != 4 || len(p[1]) != 32 || len(p[2]) != 16 {
		return nil, nil, false
	}
	t, err1 := hex.DecodeString(p[1])
	s, err2 := hex.DecodeString(p[2])
	if err1 != nil || err2 != nil || bytes.Equal(t, make([]byte, 16)) || bytes.Equal(s, make([]byte, 8)) {
		return nil, nil, false
	}
	return t, s, true
}

// span builds the llm_request span of a finished request. startUnixNs is
// the server start in Unix nanoseconds; engine times are offsets from it.
func (s *Server) span(r *request) *tracepb.Span {
	base := s.start.UnixNano()
	id := func(n int, salt uint64) []byte {
		b := make([]byte, n)
		for i := 0; i < n; i += 8 {
			v := mix64(uint64(s.o.Seed) ^ strHash(r.id) ^ uint64(r.seq)<<20 ^ salt + uint64(i))
			for j := 0; j < 8 && i+j < n; j++ {
				b[i+j] = byte(v >> (8 * j))
			}
		}
		return b
	}
	sp := &tracepb.Span{
		Name:              "llm_request",
		Kind:              tracepb.Span_SPAN_KIND_SERVER,
		StartTimeUnixNano: uint64(base + r.arrival),
		EndTimeUnixNano:   uint64(base + r.lastTok),
		SpanId:            id(8, 2),
		TraceState:        r.traceState,
	}
	if r.traceID != nil {
		sp.TraceId, sp.ParentSpanId = r.traceID, r.parentSpan
	} else {
		sp.TraceId = id(16, 1)
	}
	sp.Attributes = []*commonpb.KeyValue{
		strAttr("gen_ai.request.id", r.extID),
		intAttr("gen_ai.request.max_tokens", int64(r.maxTokens)),
		intAttr("gen_ai.request.n", 1),
		intAttr("gen_ai.usage.prompt_tokens", int64(r.promptLen)),
		intAttr("gen_ai.usage.completion_tokens", int64(r.numOut)),
		secAttr("gen_ai.latency.time_in_queue", r.firstSched-r.arrival),
		secAttr("gen_ai.latency.time_to_first_token", r.firstTok-r.arrival),
		secAttr("gen_ai.latency.e2e", r.lastTok-r.arrival),
		secAttr("gen_ai.latency.time_in_model_prefill", r.firstTok-r.firstSched),
		secAttr("gen_ai.latency.time_in_model_decode", r.lastTok-r.firstTok),
		secAttr("gen_ai.latency.time_in_model_inference", r.lastTok-r.firstSched),
	}
	return sp
}
