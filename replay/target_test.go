package replay

import (
	"context"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/replay/sim"
	"github.com/tokentrace/tokentrace/traces"
)

// TestTargetWiresCompanions starts the built-in simulator with its scraper
// and an OTLP receiver through one Target: requests go to the simulator's
// model whatever the trace names, the run is scraped, and every request's
// span is joined.
func TestTargetWiresCompanions(t *testing.T) {
	ctx := context.Background()
	so := sim.DefaultOptions()
	so.PerRequestMetrics = false // server timings must come from the spans
	tgt, err := StartTarget(ctx, TargetOptions{Sim: &so, ScrapeBuiltin: true, MetricsInterval: 20 * time.Millisecond, OTLPListen: "127.0.0.1:0", OTLPGrace: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer tgt.Close()
	recs := testTrace(12, 20*time.Millisecond, 64, 4)
	for i := range recs {
		recs[i].Model = "prod-model-not-served"
	}
	o := DefaultOptions()
	tgt.Apply(&o)
	if !tgt.Builtin || o.Model != so.Model || !o.TraceParent {
		t.Fatalf("Apply: builtin %v model %q traceparent %v", tgt.Builtin, o.Model, o.TraceParent)
	}
	res, err := Run(ctx, recs, traces.NewMeta("test"), o)
	if err != nil {
		t.Fatal(err)
	}
	samples, unmatched := tgt.Finish(ctx, res)
	if res.Summary.OK != len(recs) {
		t.Fatalf("%d of %d ok", res.Summary.OK, len(recs))
	}
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

// TestTargetStartsFleet: with a fleet in Sim, the built-in target is the
// fleet's one endpoint, and its /metrics (every replica, labelled) scrapes
// as one server's would.
func TestTargetStartsFleet(t *testing.T) {
	ctx := context.Background()
	so := sim.DefaultOptions()
	if err := sim.ApplyConfig(&so, "preset=tiny,replicas=3,router=least-outstanding"); err != nil {
		t.Fatal(err)
	}
	tgt, err := StartTarget(ctx, TargetOptions{Sim: &so, ScrapeBuiltin: true, MetricsInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer tgt.Close()
	recs := testTrace(12, 20*time.Millisecond, 64, 4)
	o := DefaultOptions()
	tgt.Apply(&o)
	res, err := Run(ctx, recs, traces.NewMeta("test"), o)
	if err != nil {
		t.Fatal(err)
	}
	samples, _ := tgt.Finish(ctx, res)
	if res.Summary.OK != len(recs) {
		t.Fatalf("%d of %d ok", res.Summary.OK, len(recs))
	}
	if len(samples) < 2 || tgt.stats.Failures > 0 {
		t.Errorf("%d metrics samples scraped, stats %+v", len(samples), tgt.stats)
	}
}
