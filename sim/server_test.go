package sim

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

func startFleet(t *testing.T, spec string) *Server {
	t.Helper()
	o := DefaultOptions()
	if err := ApplyConfig(&o, "preset=tiny,"+spec); err != nil {
		t.Fatal(err)
	}
	o.PerRequestMetrics = true
	ctx, cancel := context.WithCancel(context.Background())
	s, err := Start(ctx, o)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); s.Close() })
	return s
}

// post sends a streamed completion and returns the response's headers and
// body.
func post(t *testing.T, url, id, session string, prompt int, out int) (http.Header, string) {
	t.Helper()
	p := make([]string, prompt)
	for i := range p {
		p[i] = fmt.Sprint(1000 + i)
	}
	body := fmt.Sprintf(`{"prompt":[%s],"max_tokens":%d,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}`, strings.Join(p, ","), out)
	req, _ := http.NewRequest("POST", url+"/v1/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Request-Id", id)
	if session != "" {
		req.Header.Set(traces.SessionHeader, session)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(b), "[DONE]") {
		t.Fatalf("%s: HTTP %d: %s", id, resp.StatusCode, b)
	}
	return resp.Header, string(b)
}

// TestServeAggregated: one endpoint in front of three replicas, round
// robin: each response names its replica, the truth rows do too, and one
// /metrics has every replica under its pod label.
func TestServeAggregated(t *testing.T) {
	s := startFleet(t, "replicas=3,router=round-robin")
	for i := range 6 {
		h, _ := post(t, s.URL, fmt.Sprintf("q%d", i), "", 40, 4)
		if want := fmt.Sprintf("replica-%d", i%3); h.Get(traces.ReplicaHeader) != want || h.Get(traces.RouteReasonHeader) != ReasonRoundRobin {
			t.Fatalf("request %d: %s=%q %s=%q, want %s round-robin", i, traces.ReplicaHeader, h.Get(traces.ReplicaHeader), traces.RouteReasonHeader, h.Get(traces.RouteReasonHeader), want)
		}
	}
	truth := s.Truth()
	if len(truth) != 6 {
		t.Fatalf("%d truth rows, want 6", len(truth))
	}
	for i, r := range truth {
		if r.Seq != int64(i) || r.RequestID != fmt.Sprintf("q%d", i) || r.Replica != fmt.Sprintf("replica-%d", i%3) || r.Status != traces.StatusOK {
			t.Errorf("row %d: seq %d id %s replica %s status %s", i, r.Seq, r.RequestID, r.Replica, r.Status)
		}
		if r.ServerKVTransferNs != traces.NotReported || r.PrefillReplica != "" {
			t.Errorf("row %d: an aggregated replica with P/D columns: %+v", i, r)
		}
		if i > 0 && r.ArrivalNs < truth[i-1].ArrivalNs {
			t.Errorf("row %d arrives before row %d on the fleet's clock", i, i-1)
		}
	}
	text := get(t, s.URL+"/metrics")
	for _, name := range []string{"replica-0", "replica-1", "replica-2"} {
		want := fmt.Sprintf(`vllm:request_success_total{engine="0",finished_reason="length",model_name="sim-llama3-8b",pod="%s",role="prefill-decode"} 2.0`, name)
		if !strings.Contains(text, want) {
			t.Errorf("no %q in /metrics", want)
		}
	}
	if n := strings.Count(text, "# TYPE vllm:num_requests_running "); n != 1 {
		t.Errorf("vllm:num_requests_running declared %d times", n)
	}
	one := get(t, s.URL+"/replicas/replica-1/metrics")
	if !strings.Contains(one, `vllm:request_success_total{engine="0",finished_reason="length",model_name="sim-llama3-8b"} 2.0`) || strings.Contains(one, "pod=") {
		t.Errorf("/replicas/replica-1/metrics is not that replica's own:\n%s", one)
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: HTTP %d", url, resp.StatusCode)
	}
	return string(b)
}

// TestServeDisaggregated: in real time, a request is prefilled on one
// pool, pulled over the link (here 30 ms plus 1 ms a token) and decoded on
// the other; the client gets the decode replica's stream, and the truth
// row's components add up to its time to first token.
func TestServeDisaggregated(t *testing.T) {
	s := startFleet(t, "prefill-replicas=1,decode-replicas=2,router=least-outstanding,kv-transfer-latency=30ms,kv-transfer-per-token=1ms")
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, body := post(t, s.URL, fmt.Sprintf("pd%d", i), "", 33, 5)
			if h.Get(traces.PrefillReplicaHeader) != "prefill-0" || !strings.HasPrefix(h.Get(traces.ReplicaHeader), "decode-") {
				t.Errorf("pd%d: headers %v", i, h)
			}
			if !strings.Contains(body, `"completion_tokens":5`) {
				t.Errorf("pd%d: body %s", i, body)
			}
		}()
	}
	wg.Wait()
	truth := s.Truth()
	if len(truth) != 4 {
		t.Fatalf("%d rows, want 4: %+v", len(truth), truth)
	}
	for _, r := range truth {
		if r.PrefillReplica != "prefill-0" || !strings.HasPrefix(r.Replica, "decode-") || r.Status != traces.StatusOK {
			t.Fatalf("%s: %+v", r.RequestID, r)
		}
		ttft := r.ServerQueueNs + r.ServerPrefillNs + r.ServerKVTransferNs + r.ServerDecodeQueueNs
		if r.FirstTokenNs-r.ArrivalNs != ttft || r.LastTokenNs-r.FirstTokenNs != r.ServerDecodeNs {
			t.Errorf("%s: first − arrival %d, components add to %d", r.RequestID, r.FirstTokenNs-r.ArrivalNs, ttft)
		}
		// 32 of 33 prompt tokens are pulled: at least 30 ms + 32 ms.
		if r.ServerKVTransferNs < int64(62*time.Millisecond) {
			t.Errorf("%s: pull took %v, want ≥ 62ms", r.RequestID, time.Duration(r.ServerKVTransferNs))
		}
	}
	text := get(t, s.URL+"/metrics")
	if !strings.Contains(text, `vllm:nixl_xfer_time_seconds_count{engine="0",model_name="sim-llama3-8b",pod="decode-`) ||
		!strings.Contains(text, "tokentrace_kv_transfer_tokens_total 128.0") {
		t.Errorf("/metrics lacks the KV pulls:\n%s", text)
	}
}

// TestServeSessionAffinity: a session's requests stay on its replica.
func TestServeSessionAffinity(t *testing.T) {
	s := startFleet(t, "replicas=3,router=session-affinity")
	first := map[string]string{}
	for i := range 9 {
		sess := fmt.Sprintf("run-s%d", i%3)
		h, _ := post(t, s.URL, fmt.Sprintf("s%d", i), sess, 20, 2)
		r := h.Get(traces.ReplicaHeader)
		if f, ok := first[sess]; ok && f != r {
			t.Fatalf("session %s on %s then %s", sess, f, r)
		}
		first[sess] = r
	}
	if len(first) != 3 {
		t.Errorf("sessions %v", first)
	}
}

// TestServeTruthOut: Close writes the fleet's truth.
func TestServeTruthOut(t *testing.T) {
	o := DefaultOptions()
	if err := ApplyConfig(&o, "preset=tiny,replicas=2"); err != nil {
		t.Fatal(err)
	}
	o.TruthOut = filepath.Join(t.TempDir(), "truth.jsonl")
	s, err := Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	post(t, s.URL, "a", "", 10, 2)
	post(t, s.URL, "b", "", 10, 2)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	recs, m, err := traces.ReadAll(o.TruthOut)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].Replica != "replica-0" || recs[1].Replica != "replica-1" || m.Extra["sim.router"] != RouterRoundRobin {
		t.Errorf("truth %+v, meta %+v", recs, m)
	}
}
