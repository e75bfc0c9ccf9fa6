package main

import (
	"context"
	"testing"

	"github.com/tokentrace/tokentrace/analyze"
	"github.com/tokentrace/tokentrace/internal/testtraces"
	"github.com/tokentrace/tokentrace/replay"
	"github.com/tokentrace/tokentrace/sim"
	"github.com/tokentrace/tokentrace/traces"
)

// replayWithBackground replays recs against a fresh "tiny" simulator with
// the given background loads and analyzes the results by class.
func replayWithBackground(t *testing.T, recs []traces.Record, bg []replay.Background) (*analyze.Report, []traces.Record) {
	t.Helper()
	ctx := context.Background()
	srv := startSimServer(t, "preset=tiny", func(so *sim.Options) { so.PerRequestMetrics = true })
	defer srv.Close()
	o := replay.DefaultOptions()
	o.URL = srv.URL
	o.Background = bg
	res, err := replay.Run(ctx, recs, traces.NewMeta("test"), o)
	if err != nil {
		t.Fatal(err)
	}
	ao := analyze.DefaultOptions()
	ao.By = analyze.ByClass
	ao.TailMetric = analyze.MetricTTFT
	rep, err := analyze.Analyze(ctx, res.Records, ao)
	if err != nil {
		t.Fatal(err)
	}
	if err := analyze.AttributeGroups(ctx, rep, res.Records); err != nil {
		t.Fatal(err)
	}
	return rep, res.Records
}

func group(rep *analyze.Report, v string) *analyze.Group {
	for i := range rep.Groups {
		if rep.Groups[i].Value == v {
			return &rep.Groups[i]
		}
	}
	return nil
}

func TestBackgroundBatchRaisesInteractiveTail(t *testing.T) {
	recs := testtraces.Constant(40, 20, 256, 16) // 2 s of interactive traffic
	quiet, _ := replayWithBackground(t, recs, nil)
	loaded, out := replayWithBackground(t, recs, []replay.Background{{Class: "batch", Concurrency: 16, Input: 1024, Output: 64}})

	inter := group(loaded, replay.DefaultTraceClass)
	batch := group(loaded, "batch")
	if inter == nil || batch == nil {
		t.Fatalf("groups %+v: want interactive and batch", loaded.Groups)
	}
	if inter.Requests != len(recs) {
		t.Errorf("interactive requests %d, want %d", inter.Requests, len(recs))
	}
	if batch.Completed == 0 {
		t.Fatal("no batch request completed")
	}
	for i := range out {
		if out[i].Class == "" {
			t.Fatalf("request %s has no class", out[i].RequestID)
		}
	}
	base := quiet.TTFT.P99
	if !(inter.TTFT.P99 > 2*base) {
		t.Errorf("interactive p99 TTFT %.1f ms with batch load, %.1f ms without: want at least double", inter.TTFT.P99, base)
	}
	at := inter.Attribution
	if at == nil || at.TailRequests == 0 {
		t.Fatalf("no per-class attribution for interactive: %+v", inter)
	}
	if at.Dominant != "queue" && at.Dominant != "prefill" {
		t.Errorf("interactive tail dominated by %s (shares %+v); want queue or prefill interference", at.Dominant, at.Share)
	}
	t.Logf("interactive TTFT p99 %.1f ms alone, %.1f ms beside %d batch requests (%.1f out tok/s); tail dominant %s, diagnosis %q",
		base, inter.TTFT.P99, batch.Completed, batch.Throughput.OutputTokensPerS, at.Dominant, at.Diagnosis)
}
