package engine

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// With an OTLP endpoint, every finished request becomes one llm_request
// span whose vLLM attributes equal the truth, in the caller's trace.
func TestOTLPExport(t *testing.T) {
	var mu sync.Mutex
	spans := map[string]*tracepb.Span{}
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
			t.Errorf("export to %s as %s", r.URL.Path, r.Header.Get("Content-Type"))
		}
		var td tracepb.TracesData
		if err := proto.Unmarshal(b, &td); err != nil {
			t.Errorf("unmarshal: %v", err)
		}
		mu.Lock()
		for _, rs := range td.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, sp := range ss.Spans {
					for _, a := range sp.Attributes {
						if a.Key == "gen_ai.request.id" {
							spans[a.Value.GetStringValue()] = sp
						}
					}
				}
			}
		}
		mu.Unlock()
	}))
	defer recv.Close()
	s := startSim(t, func(o *Options) { o.OTLPTracesEndpoint = recv.URL })
	const traceID, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	for i := range 4 {
		api, body := "/v1/completions", `{"prompt":"otlp","max_tokens":4,"ignore_eos":true}`
		if i%2 == 1 {
			api, body = "/v1/chat/completions", `{"messages":[{"role":"user","content":"otlp"}],"max_tokens":3,"ignore_eos":true}`
		}
		post(t, s.URL+api, body, map[string]string{"X-Request-Id": fmt.Sprint("o", i), "traceparent": "00-" + traceID + "-" + parent + "-01"})
	}
	if err := s.Close(); err != nil { // flushes the exporter
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, tr := range s.Truth() {
		ext := "cmpl-" + tr.RequestID + "-0"
		if tr.API == "chat" {
			ext = "chatcmpl-" + tr.RequestID
		}
		sp := spans[ext]
		if sp == nil {
			t.Errorf("no span for %s (have %d)", ext, len(spans))
			continue
		}
		if sp.Name != "llm_request" || fmt.Sprintf("%x", sp.TraceId) != traceID || fmt.Sprintf("%x", sp.ParentSpanId) != parent {
			t.Errorf("%s: span %s trace %x parent %x", ext, sp.Name, sp.TraceId, sp.ParentSpanId)
		}
		attr := map[string]float64{}
		for _, a := range sp.Attributes {
			if d, ok := a.Value.Value.(*commonDouble); ok {
				attr[a.Key] = d.DoubleValue
			}
			if n, ok := a.Value.Value.(*commonInt); ok {
				attr[a.Key] = float64(n.IntValue)
			}
		}
		for _, c := range []struct {
			key  string
			want int64
		}{{"gen_ai.latency.time_in_queue", tr.ServerQueueNs}, {"gen_ai.latency.time_in_model_prefill", tr.ServerPrefillNs},
			{"gen_ai.latency.time_in_model_decode", tr.ServerDecodeNs}} {
			if got := int64(math.Round(attr[c.key] * 1e9)); math.Abs(float64(got-c.want)) > float64(time.Microsecond) {
				t.Errorf("%s %s = %v, truth %v", ext, c.key, time.Duration(got), time.Duration(c.want))
			}
		}
		if attr["gen_ai.usage.completion_tokens"] != float64(tr.OutputTokens) || attr["gen_ai.usage.prompt_tokens"] != float64(tr.InputTokens) {
			t.Errorf("%s usage attrs %v", ext, attr)
		}
	}
}

type (
	commonDouble = commonpb.AnyValue_DoubleValue
	commonInt    = commonpb.AnyValue_IntValue
)
