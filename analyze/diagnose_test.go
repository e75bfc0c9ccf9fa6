package analyze

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// lowLoadQueueTail is a run shaped like an interactive trace beside a
// batch load whose start-up wave the first requests queue behind: ten
// requests sent in the first 10 ms, while almost nothing is in flight, wait
// 1.9 s in the server's queue; then 300 requests (one every 10 ms, 1.5 s
// each, so about 150 in flight) wait 10 ms. The server's metrics, when
// given, show a short queue and an emptier KV cache in the first 2 s.
func lowLoadQueueTail(withSamples bool) (*Report, error) {
	var recs []traces.Record
	for i := range 10 {
		r := rec(int64(i), time.Duration(i)*ms, 0, 2000*ms, 2100*ms, 100, 10, 1)
		recs = append(recs, withServer(r, 1900*ms, 50*ms, 100*ms, 0))
	}
	for i := range 300 {
		r := rec(int64(10+i), 100*ms+time.Duration(i)*10*ms, 0, 60*ms+time.Duration(i%20)*ms, 1500*ms, 100, 10, 1)
		recs = append(recs, withServer(r, 10*ms, 50*ms, 1440*ms, 0))
	}
	o := DefaultOptions()
	o.TailMetric = MetricTTFT
	a, err := New(o)
	if err != nil {
		return nil, err
	}
	if withSamples {
		var s []traces.MetricsSample
		for k := range 10 {
			x := traces.MetricsSample{TimeNs: int64(k) * int64(500*ms), Waiting: 4, Running: 150, KVCacheUsage: 0.27, PrefixHitRate: -1}
			if k <= 4 {
				x.Waiting, x.Running, x.KVCacheUsage = 0, 10, 0.08
			}
			s = append(s, x)
		}
		a.AddSamples(s)
	}
	for i := range recs {
		a.Add(&recs[i])
	}
	return a.Close(context.Background())
}

// TestDiagnosisQueueAtLowLoad: when the tail is dominated by queueing but
// the report's own evidence (in flight at send, the server's waiting queue
// and KV cache around the tail) says load was below average, the diagnosis
// must not call it load-driven queueing ("Queueing: …" beside numbers that
// say the opposite), and must say the load was lower.
func TestDiagnosisQueueAtLowLoad(t *testing.T) {
	for _, withSamples := range []bool{false, true} {
		rep, err := lowLoadQueueTail(withSamples)
		if err != nil {
			t.Fatal(err)
		}
		at := rep.Attribution
		if at.Dominant != "queue" || at.TailRequests != 10 {
			t.Fatalf("samples %v: tail %d dominated by %s; the scenario wants the 10 early requests, queue", withSamples, at.TailRequests, at.Dominant)
		}
		if !(at.Load.TailInFlight < at.Load.AllInFlight/10) {
			t.Fatalf("samples %v: in flight %.1f in the tail against %.1f: the scenario wants far fewer", withSamples, at.Load.TailInFlight, at.Load.AllInFlight)
		}
		if withSamples && (at.ServerLoad == nil || *at.ServerLoad.TailKVCacheUsage >= *at.ServerLoad.AllKVCacheUsage) {
			t.Fatalf("server load %+v: want an emptier KV cache around the tail", at.ServerLoad)
		}
		var q string
		for _, d := range at.Diagnosis {
			if strings.HasPrefix(d, "Queueing") {
				q = d
			}
		}
		if q == "" {
			t.Fatalf("samples %v: no queueing sentence in %q", withSamples, at.Diagnosis)
		}
		if strings.HasPrefix(q, "Queueing:") || strings.HasPrefix(q, "Queueing burst") {
			t.Errorf("samples %v: the tail was sent into less load, yet the diagnosis reads as load-driven queueing:\n%s", withSamples, q)
		}
		if !strings.Contains(q, "without more load") || !strings.Contains(q, "did not come from load") {
			t.Errorf("samples %v: the diagnosis does not say the load was lower:\n%s", withSamples, q)
		}
		if withSamples && !strings.Contains(q, "KV cache usage 8% against") {
			t.Errorf("the server's evidence is missing:\n%s", q)
		}
	}
}

// TestDiagnosisQueueUnderLoad: a tail sent into more load than average is
// still called queueing (a burst when the load was over twice the mean).
func TestDiagnosisQueueUnderLoad(t *testing.T) {
	var recs []traces.Record
	for i := range 200 {
		// 1 request in flight, 10 ms queue ...
		r := rec(int64(i), time.Duration(i)*100*ms, 0, 60*ms+time.Duration(i%20)*ms, 90*ms, 100, 10, 1)
		recs = append(recs, withServer(r, 10*ms, 50*ms, 30*ms, 0))
	}
	for i := range 10 {
		// ... then a burst of 10 at once waits 1.9 s
		r := rec(int64(200+i), 20*time.Second+time.Duration(i)*ms, 0, 2000*ms, 2100*ms, 100, 10, 1)
		recs = append(recs, withServer(r, 1900*ms, 50*ms, 100*ms, 0))
	}
	o := DefaultOptions()
	o.TailMetric = MetricTTFT
	rep := mustAnalyze(t, recs, o)
	if rep.Attribution.Dominant != "queue" {
		t.Fatalf("dominant %s, want queue", rep.Attribution.Dominant)
	}
	found := false
	for _, d := range rep.Attribution.Diagnosis {
		if strings.HasPrefix(d, "Queueing burst:") {
			found = true
		}
	}
	if !found {
		t.Errorf("a burst tail is not called a queueing burst: %q", rep.Attribution.Diagnosis)
	}
}
