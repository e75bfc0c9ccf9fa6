package replay

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/sim"
	"github.com/tokentrace/tokentrace/traces"
)

// gatewayServer is a real HTTP server (net/http on loopback) standing in
// for a gateway in front of replicas: it names the pod that served each
// request in a response header (round-robin over pods, by X-Request-Id's
// seq), leaves it out for the seqs in bare, and streams a two-token answer
// with vLLM's per-request metrics object. Under disaggregation (pd) it
// also names a prefill pod.
func gatewayServer(t *testing.T, header string, pods int, bare map[int]bool, pd bool) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		seq, _ := strconv.Atoi(id[strings.LastIndexByte(id, '-')+1:])
		if !bare[seq] {
			w.Header().Set(header, fmt.Sprintf("pod-%d", seq%pods))
			if pd {
				w.Header().Set("X-Prefill-Pod", fmt.Sprintf("prefill-%d", seq%2))
			}
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		for i := range 2 {
			fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"text\":\"w%d\"}]}\n\n", i)
			fl.Flush()
		}
		fmt.Fprint(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":8,\"completion_tokens\":2},"+
			"\"metrics\":{\"queue_time_ms\":3.0,\"time_to_first_token_ms\":5.0,\"generation_time_ms\":7.0}}\n\n")
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv
}

func replicaTrace(n int) []traces.Record {
	recs := make([]traces.Record, n)
	for i := range recs {
		r := traces.NewRecord()
		r.Seq, r.ArrivalNs, r.InputTokens, r.OutputTokens = int64(i), int64(i)*int64(2*time.Millisecond), 8, 2
		recs[i] = r
	}
	return recs
}

// TestReplicaColumnFromHeader: the replica column is filled from the
// response header the user names, set by a real HTTP server, on replay's
// own HTTP/1.1 client and on net/http alike; responses without it are
// counted, and said once.
func TestReplicaColumnFromHeader(t *testing.T) {
	for _, netHTTP := range []bool{false, true} {
		t.Run(fmt.Sprintf("net/http=%v", netHTTP), func(t *testing.T) {
			srv := gatewayServer(t, "X-Served-By", 3, map[int]bool{4: true, 7: true}, false)
			var log bytes.Buffer
			o := DefaultOptions()
			o.URL, o.Model, o.NoPreflight, o.NetHTTP = srv.URL, "m", true, netHTTP
			o.ReplicaHeader = "x-served-by" // header names are case-insensitive
			o.Log = &log
			res := mustRun(t, replicaTrace(12), traces.NewMeta("test"), o)
			for _, r := range res.Records {
				want := fmt.Sprintf("pod-%d", r.Seq%3)
				if r.Seq == 4 || r.Seq == 7 {
					want = ""
				}
				if r.Status != traces.StatusOK || r.Replica != want {
					t.Errorf("request %d: status %s, replica %q, want %q", r.Seq, r.Status, r.Replica, want)
				}
				if r.PrefillReplica != "" || r.ServerQueueNs != 3_000_000 || r.ServerDecodeQueueNs != traces.NotReported {
					t.Errorf("request %d: aggregated, yet prefill replica %q, queue %d, decode queue %d", r.Seq, r.PrefillReplica, r.ServerQueueNs, r.ServerDecodeQueueNs)
				}
			}
			s := res.Summary
			if s.ReplicaHeader != "x-served-by" || s.ReplicaNamed != 10 || s.ReplicaMissing != 2 {
				t.Errorf("summary: header %q, named %d, missing %d; want 10 and 2", s.ReplicaHeader, s.ReplicaNamed, s.ReplicaMissing)
			}
			if got := res.Meta.Extra[MetaReplicaMissing]; got != "2" {
				t.Errorf("metadata %s = %q, want 2", MetaReplicaMissing, got)
			}
			if n := strings.Count(log.String(), "lacked the replica header"); n != 1 {
				t.Errorf("want one notice of the missing header, got %d:\n%s", n, log.String())
			}
		})
	}
}

// TestReplicaHeaderNeverSeen: a header no response carries leaves the
// column empty, and replay says so once, counting the responses.
func TestReplicaHeaderNeverSeen(t *testing.T) {
	srv := gatewayServer(t, "X-Served-By", 3, nil, false)
	var log bytes.Buffer
	o := DefaultOptions()
	o.URL, o.Model, o.NoPreflight, o.Log = srv.URL, "m", true, &log
	o.ReplicaHeader = "X-Upstream-Host"
	res := mustRun(t, replicaTrace(6), traces.NewMeta("test"), o)
	if res.Summary.ReplicaNamed != 0 || res.Summary.ReplicaMissing != 6 {
		t.Errorf("named %d, missing %d; want 0 and 6", res.Summary.ReplicaNamed, res.Summary.ReplicaMissing)
	}
	want := "the replica header X-Upstream-Host was in none of the 6 responses"
	if strings.Count(log.String(), "replica header") != 1 || !strings.Contains(log.String(), want) {
		t.Errorf("log %q: want once %q", log.String(), want)
	}
}

// TestDisaggregatedTimings: a response that names a prefill replica comes
// from the decode replica, so its metrics object is the decode side's:
// its queue becomes the decode-side queue, and the prefill side's queue
// and prefill stay unreported.
func TestDisaggregatedTimings(t *testing.T) {
	srv := gatewayServer(t, "X-Served-By", 2, nil, true)
	o := DefaultOptions()
	o.URL, o.Model, o.NoPreflight = srv.URL, "m", true
	o.ReplicaHeader, o.PrefillReplicaHeader = "X-Served-By", "X-Prefill-Pod"
	res := mustRun(t, replicaTrace(4), traces.NewMeta("test"), o)
	for _, r := range res.Records {
		if r.PrefillReplica != fmt.Sprintf("prefill-%d", r.Seq%2) {
			t.Errorf("request %d: prefill replica %q", r.Seq, r.PrefillReplica)
		}
		if r.ServerDecodeQueueNs != 3_000_000 || r.ServerQueueNs != traces.NotReported || r.ServerPrefillNs != traces.NotReported || r.ServerDecodeNs != 7_000_000 {
			t.Errorf("request %d: queue %d prefill %d decode queue %d decode %d; want the decode side's", r.Seq,
				r.ServerQueueNs, r.ServerPrefillNs, r.ServerDecodeQueueNs, r.ServerDecodeNs)
		}
	}
}

// TestBuiltinFleetNamesReplicas: the in-process target's fleet fills the
// replica, prefill replica and route reason columns with no option set.
func TestBuiltinFleetNamesReplicas(t *testing.T) {
	ctx := context.Background()
	so := sim.DefaultOptions()
	if err := sim.ApplyConfig(&so, "prefill-replicas=2,decode-replicas=2,router=least-outstanding"); err != nil {
		t.Fatal(err)
	}
	to := DefaultTargetOptions()
	to.Sim = &so
	tg, err := StartTarget(ctx, to)
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	o := DefaultOptions()
	o.NoPreflight = true
	tg.Apply(&o)
	res := mustRun(t, replicaTrace(8), traces.NewMeta("test"), o)
	for _, r := range res.Records {
		if !strings.HasPrefix(r.Replica, "decode-") || !strings.HasPrefix(r.PrefillReplica, "prefill-") || r.RouteReason != "least-outstanding/least-outstanding" {
			t.Errorf("request %d: replica %q prefill %q reason %q", r.Seq, r.Replica, r.PrefillReplica, r.RouteReason)
		}
	}
	if len(res.Records) != 8 || res.Summary.ReplicaMissing != 0 {
		t.Errorf("%d rows, %d responses without a replica", len(res.Records), res.Summary.ReplicaMissing)
	}
}

// TestSimFleetHeadersByDefault: a replay of tokentrace sim's fleet at its
// URL keeps the replicas its responses name with no option, and reads a
// disaggregated response's metrics object as the decode side's.
func TestSimFleetHeadersByDefault(t *testing.T) {
	so := sim.DefaultOptions()
	so.PerRequestMetrics = true
	if err := sim.ApplyConfig(&so, "prefill-replicas=1,decode-replicas=2"); err != nil {
		t.Fatal(err)
	}
	srv, err := sim.Start(context.Background(), so)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	o := DefaultOptions()
	o.URL, o.Model, o.NoPreflight = srv.URL, so.Model, true
	res := mustRun(t, replicaTrace(6), traces.NewMeta("test"), o)
	for _, r := range res.Records {
		if !strings.HasPrefix(r.Replica, "decode-") || r.PrefillReplica != "prefill-0" || r.RouteReason == "" {
			t.Errorf("request %d: replica %q prefill %q reason %q", r.Seq, r.Replica, r.PrefillReplica, r.RouteReason)
		}
		if r.ServerDecodeQueueNs < 0 || r.ServerQueueNs != traces.NotReported || r.ServerDecodeNs < 0 {
			t.Errorf("request %d: queue %d, decode queue %d, decode %d: want the decode side's", r.Seq, r.ServerQueueNs, r.ServerDecodeQueueNs, r.ServerDecodeNs)
		}
	}
	if res.Summary.ReplicaHeader != "" {
		t.Errorf("summary names header %q: the default headers are not counted", res.Summary.ReplicaHeader)
	}
}
