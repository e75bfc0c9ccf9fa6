package main

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/analyze"
	"github.com/tokentrace/tokentrace/bench/pmdemo/pdincident"
	"github.com/tokentrace/tokentrace/replay"
	"github.com/tokentrace/tokentrace/sim"
	"github.com/tokentrace/tokentrace/traces"
	"github.com/tokentrace/tokentrace/validate"
)

// oneAnswerFleet is a prefill/decode fleet whose two decode replicas take
// 4 sequences each: 24 req/s of short answers fill them, and the p99 E2E
// tail waits there (83 % of it in the offline simulation).
const oneAnswerFleet = "prefill-replicas=1,decode-replicas=2,decode.max-num-seqs=4"

// oneAnswerTrace is 12 s of Poisson arrivals at 24 req/s, prompts of
// 200–1,500 tokens (log-uniform), answers of 32–95 tokens.
func oneAnswerTrace() []traces.Record {
	return poissonRecords(rand.New(rand.NewPCG(45, 11)), 12*time.Second, 24, func(rng *rand.Rand) (int, int) {
		return int(logUniform(rng, 200, 1500)), 32 + rng.IntN(64)
	})
}

// TestOneAnswerPerFleet: one fleet and one workload, explained three
// ways, name the same dominant component of the p99 E2E tail: validate's
// run table (the offline simulation, exact timings: the reference);
// analyze of a real-time replay's results (the decode replicas' own
// per-request timings, the prefill side estimated); and postmortem of the
// same requests as a gateway logged them (no server timings, no replica
// named) with the fleet's history read from a real Prometheus (the pools
// from its role label).
func TestOneAnswerPerFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Prometheus and a fleet, replays in real time (~20 s)")
	}
	t.Parallel() // mostly waits on the real-time replay
	ctx := context.Background()
	recs := oneAnswerTrace()

	// validate, offline: the reference.
	var ts []validate.Target
	for _, s := range []string{"fleet=sim:" + oneAnswerFleet, "wider=sim:prefill-replicas=1,decode-replicas=2,decode.max-num-seqs=8"} {
		tg, err := validate.ParseTarget(s, sim.DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, tg)
	}
	vo := validate.DefaultOptions()
	vo.Targets, vo.Resamples = ts, 100
	vres, err := validate.Run(ctx, validate.Workload{Name: "real", Records: recs}, validate.Workload{Name: "synthetic", Records: recs}, vo)
	if err != nil {
		t.Fatal(err)
	}
	var cell *validate.Cell
	for i := range vres.Cells {
		if c := &vres.Cells[i]; c.Workload == "real" && c.Target == "fleet" {
			cell = c
		}
	}
	if cell == nil || cell.TailCause != "decode_queue" {
		t.Fatalf("validate's run table: %+v; want the tail on decode_queue (the scenario's design)", cell)
	}
	t.Logf("validate (offline, exact): %s %.0f%%", cell.TailCause, 100*cell.TailShare)

	// The fleet in real time, scraped by Prometheus.
	srv := startSimServer(t, oneAnswerFleet, func(so *sim.Options) { so.PerRequestMetrics = true })
	promURL := startScraping(t, srv)
	ro := replay.DefaultOptions()
	ro.NoPreflight, ro.Model = true, sim.DefaultModel
	ro.ReplicaHeader, ro.PrefillReplicaHeader = traces.ReplicaHeader, traces.PrefillReplicaHeader
	pl, err := pdincident.Play(ctx, srv.URL, recs, traces.NewMeta("one-answer"), ro)
	if err != nil {
		t.Fatal(err)
	}
	simLate := srv.Lateness()
	t.Logf("simulator: %s", simLate)

	// analyze of the replay's results.
	results := filepath.Join(t.TempDir(), "results.parquet")
	if err := traces.WriteAll(results, pl.Result.Meta, pl.Result.Records); err != nil {
		t.Fatal(err)
	}
	rep, err := analyze.AnalyzeFiles(ctx, []string{results}, analyze.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("analyze: %s %.0f%%: %s", rep.Attribution.Dominant, 100*rep.Attribution.Share.Array()[componentIdx(rep.Attribution.Dominant)], strings.Join(rep.Attribution.Diagnosis, " | "))

	// postmortem of the gateway's log with the fleet's history.
	var pm reportJSON
	postmortemPlayed(t, promURL, pl, []string{"--instance-label", "pod", "--role-label", "role", "--tail", "p99", "--tail-metric", "e2e"}, &pm)
	t.Logf("postmortem: %s %.0f%%", pm.Attribution.Dominant, 100*pm.Attribution.Share[pm.Attribution.Dominant])

	if rep.Attribution.Dominant != cell.TailCause || pm.Attribution.Dominant != cell.TailCause {
		if simLate.FellBehind() {
			// A simulator that ran slower than its model was not the fleet
			// validate simulated (its replicas' capacity was the machine's):
			// analyze and postmortem rightly explain the fleet that ran.
			t.Skipf("the real-time simulator fell behind its model (%s), so it was not the fleet validate simulated: validate %s, analyze %s, postmortem %s",
				simLate, cell.TailCause, rep.Attribution.Dominant, pm.Attribution.Dominant)
		}
		t.Errorf("dominant component of the p99 E2E tail: validate %s, analyze %s, postmortem %s; want one answer", cell.TailCause, rep.Attribution.Dominant, pm.Attribution.Dominant)
	}
}
