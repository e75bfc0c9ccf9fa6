package replay

import (
	"context"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/replay/scrape"
	"github.com/tokentrace/tokentrace/sim"
	"github.com/tokentrace/tokentrace/traces"
)

// TestTargetWiresCompanions starts the built-in simulator with its scraper
// and an OTLP receiver through one Target: requests go to the simulator's
// model whatever the trace names, the run is scraped, and every request's
// span is joined.
func TestTargetWiresCompanions(t *testing.T) {
	so := sim.DefaultOptions()
	so.PerRequestMetrics = false // server timings must come from the spans
	to := DefaultTargetOptions()
	to.Sim, to.ScrapeBuiltin, to.MetricsInterval = &so, true, 20*time.Millisecond
	to.OTLPListen, to.OTLPGrace = "127.0.0.1:0", 5*time.Second
	tgt := startTarget(t, to)
	recs := testTrace(12, 20*time.Millisecond, 64, 4)
	for i := range recs {
		recs[i].Model = "prod-model-not-served"
	}
	o := DefaultOptions()
	tgt.Apply(&o)
	if !tgt.Builtin || o.Model != so.Model || !o.TraceParent {
		t.Fatalf("Apply: builtin %v model %q traceparent %v", tgt.Builtin, o.Model, o.TraceParent)
	}
	res, samples, unmatched := runOnTarget(t, tgt, recs)
	if len(samples) < 2 {
		t.Errorf("%d metrics samples scraped", len(samples))
	}
	if unmatched != 0 {
		t.Errorf("%d requests without a span", unmatched)
	}
	for _, r := range res.Records {
		if r.ServerQueueNs == traces.NotReported {
			t.Errorf("seq %d: no server timings joined from its span", r.Seq)
		}
	}
}

// replayOnFleet replays recs against the built-in simulator configured by
// config (as sim.ApplyConfig reads it), scraped every 20 ms, and returns
// the target (closed when the test ends), the result and the samples
// scraped; it fails the test unless every request was ok.
func replayOnFleet(t *testing.T, config string, recs []traces.Record) (*Target, *Result, []traces.MetricsSample) {
	t.Helper()
	so := sim.DefaultOptions()
	if err := sim.ApplyConfig(&so, config); err != nil {
		t.Fatal(err)
	}
	to := DefaultTargetOptions()
	to.Sim, to.ScrapeBuiltin, to.MetricsInterval = &so, true, 20*time.Millisecond
	tgt := startTarget(t, to)
	res, samples, _ := runOnTarget(t, tgt, recs)
	return tgt, res, samples
}

// startTarget starts a Target with to and closes it when the test ends.
func startTarget(t *testing.T, to TargetOptions) *Target {
	t.Helper()
	tgt, err := StartTarget(context.Background(), to)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tgt.Close)
	return tgt
}

// runOnTarget replays recs with the options tgt applies and finishes it,
// returning the result, the samples scraped and the requests without a
// span; it fails the test unless every request was ok.
func runOnTarget(t *testing.T, tgt *Target, recs []traces.Record) (*Result, []traces.MetricsSample, int) {
	t.Helper()
	o := DefaultOptions()
	tgt.Apply(&o)
	res, err := Run(context.Background(), recs, traces.NewMeta("test"), o)
	if err != nil {
		t.Fatal(err)
	}
	samples, unmatched := tgt.Finish(context.Background(), res)
	if res.Summary.OK != len(recs) {
		t.Fatalf("%d of %d ok", res.Summary.OK, len(recs))
	}
	return res, samples, unmatched
}

// TestTargetStartsFleet: with a fleet in Sim, the built-in target is the
// fleet's one endpoint, and its /metrics (every replica, labelled) scrapes
// as one server's would.
func TestTargetStartsFleet(t *testing.T) {
	tgt, _, samples := replayOnFleet(t, "preset=tiny,replicas=3,router=least-outstanding", testTrace(12, 20*time.Millisecond, 64, 4))
	if len(samples) < 2 || tgt.stats.Failures > 0 {
		t.Errorf("%d metrics samples scraped, stats %+v", len(samples), tgt.stats)
	}
}

// TestTargetScrapesFleetPerReplica: a prefill/decode fleet as the built-in
// target is scraped per replica: each pod's rows carry its role and
// metadata says how many replicas the series has, and the pooled rows
// count each request once although it finished on both pools.
func TestTargetScrapesFleetPerReplica(t *testing.T) {
	recs := testTrace(16, 10*time.Millisecond, 64, 4)
	_, res, samples := replayOnFleet(t, "preset=tiny,prefill-replicas=1,decode-replicas=2", recs)
	finished := map[string]int64{}
	for _, s := range samples {
		want := map[string]string{"": "", "prefill-0": "prefill", "decode-0": "decode", "decode-1": "decode"}[s.Instance]
		if s.Role != want {
			t.Errorf("row of %q at %d ns has role %q, want %q", s.Instance, s.TimeNs, s.Role, want)
		}
		if s.ScrapeError == "" {
			finished[s.Instance] += max(s.RequestsFinished, 0)
		}
	}
	n := int64(len(recs))
	if finished[""] != n || finished["prefill-0"] != n || finished["decode-0"]+finished["decode-1"] != n {
		t.Errorf("finished per row %v: want %d pooled (once each), on prefill-0 and over the decode pool", finished, n)
	}
	if got := res.Meta.Get(scrape.MetaMetricsInstances); got != "3" {
		t.Errorf("metadata %s = %q, want 3", scrape.MetaMetricsInstances, got)
	}
}
