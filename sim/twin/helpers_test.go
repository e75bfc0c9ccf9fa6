package twin

import (
	"context"
	"math"
	"slices"
	"strconv"
	"testing"

	"github.com/tokentrace/tokentrace/sim"
	"github.com/tokentrace/tokentrace/sim/engine"
	"github.com/tokentrace/tokentrace/traces"
)

// workload is n requests arriving as a Poisson process at rate per
// second (seeded): prompts of 64 to 2047 tokens, a quarter of them behind
// one of 8 shared 256-token prefixes, outputs of 8 to 199 tokens, one in
// five in a session of its own.
func workload(n int, rate float64, seed uint64) []traces.Record {
	x := seed
	rnd := func() uint64 { x = splitmix(x); return x }
	unif := func() float64 { return float64(rnd()>>11) / (1 << 53) }
	recs := make([]traces.Record, n)
	at := 0.0
	for i := range recs {
		at += -math.Log(1-unif()) / rate * 1e9
		r := traces.NewRecord()
		r.Seq, r.ArrivalNs = int64(i), int64(at)
		r.InputTokens = int32(64 + rnd()%1984)
		r.OutputTokens = int32(8 + rnd()%192)
		if rnd()%4 == 0 {
			r.Category, r.PrefixTokens = "c"+string(rune('a'+rnd()%8)), 256
			r.InputTokens += 256
		}
		if rnd()%5 == 0 {
			r.Session = int64(i + 1)
		}
		recs[i] = r
	}
	return recs
}

// scaled is recs with arrivals compressed by factor (twice the load at 2).
func scaled(recs []traces.Record, factor float64) []traces.Record {
	out := slices.Clone(recs)
	for i := range out {
		out[i].ArrivalNs = int64(float64(out[i].ArrivalNs) / factor)
	}
	return out
}

// measure runs recs on the hidden simulator offline and returns its rows
// as a replay's results would hold them, in send order.
func measure(t testing.TB, hidden sim.Options, recs []traces.Record) []traces.Record {
	t.Helper()
	var out []traces.Record
	_, err := Predict(context.Background(), hidden, traces.Values(recs), predictRun("measured"), func(r traces.Record) error {
		out = append(out, r)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(out, func(a, b traces.Record) int { return int(a.Seq - b.Seq) })
	return out
}

// mustConfig is the options a configuration string gives.
func mustConfig(t testing.TB, s string) sim.Options {
	t.Helper()
	o := sim.DefaultOptions()
	if err := sim.ApplyConfig(&o, s); err != nil {
		t.Fatal(err)
	}
	return o
}

// within reports whether got is within frac of want.
func within(got, want, frac float64) bool { return math.Abs(got-want) <= frac*math.Abs(want) }

// sized is n, halved under the race detector (raceBuild).
func sized(n int) int {
	if raceBuild {
		return n / 2
	}
	return n
}

// predictRun is DefaultPredictOptions with its rows labelled run.
func predictRun(run string) PredictOptions {
	po := DefaultPredictOptions()
	po.Run = run
	return po
}

// checkTolerance is DefaultCheckOptions with tolerance tol.
func checkTolerance(tol float64) CheckOptions {
	co := DefaultCheckOptions()
	co.Tolerance = tol
	return co
}

// checkWhatIfs is DefaultCheckOptions asking the twin about changes.
func checkWhatIfs(changes []string) CheckOptions {
	co := DefaultCheckOptions()
	co.WhatIfs = changes
	return co
}

// scraped is the metrics series a scrape of the hidden simulator every
// interval would have kept while it served recs (as measure runs them):
// running, waiting, KV usage and preemptions, from the reference engine's
// steps (the one-engine simulation measure's rows come from).
func scraped(t testing.TB, hidden sim.Options, recs []traces.Record, intervalNs int64) []traces.MetricsSample {
	t.Helper()
	o := hidden
	o.ChunkTimes = true
	o = o.AdmitLongest(o.NumGPUBlocks * o.BlockSize)
	arr := make([]engine.Arrival, len(recs))
	for i := range recs {
		r := &recs[i]
		out := max(outputTokens(r), 1)
		arr[i] = engine.Arrival{ID: "twin-" + strconv.FormatInt(r.Seq, 10), ArrivalNs: sentAt(r), Prompt: DefaultPrompt(r),
			MaxTokens: out, MinTokens: out, IgnoreEOS: true, Session: r.Session}
	}
	res, err := engine.Simulate(context.Background(), o.Options, arr)
	if err != nil {
		t.Fatal(err)
	}
	var out []traces.MetricsSample
	st := engine.StepStat{}
	preempted := int64(0)
	k := 0
	for at := intervalNs; len(res.Steps) > 0 && at <= res.Steps[len(res.Steps)-1].EndNs+intervalNs; at += intervalNs {
		for ; k < len(res.Steps) && res.Steps[k].EndNs <= at; k++ {
			st = res.Steps[k]
		}
		s := traces.NewMetricsSample(at)
		s.IntervalNs = intervalNs
		s.Running, s.Waiting, s.KVCacheUsage = int64(st.Running), int64(st.Waiting), st.KVUsage
		s.Preemptions, preempted = st.PreemptionsSoFar-preempted, st.PreemptionsSoFar
		out = append(out, s)
	}
	return out
}
