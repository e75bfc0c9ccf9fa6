package twin

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/tokentrace/tokentrace/sim"
	"github.com/tokentrace/tokentrace/traces"
)

// budgetCandidates are the token budgets a simulation tries besides the
// prior's: vLLM's usual values, none below the most tokens a step was
// seen to compute.
var budgetCandidates = []int{512, 2048, 8192, 16384}

// confirm simulates the kept rows on the fitted twin: the token budget is
// chosen where the rows' first-token times tell budgets apart, and the
// report gets the twin's residuals per metric.
func (f *fitter) confirm(ctx context.Context, res *Result) error {
	if f.o.SimRows < 0 || f.windowRows() == 0 {
		return nil
	}
	// The cache first: a twin without the measured server's KV pressure
	// runs fast, and a search of the other limits would make up for it.
	if err := f.kvCapacity(ctx, res); err != nil {
		return err
	}
	if err := f.chooseLimit(ctx, res); err != nil {
		return err
	}
	if err := f.chooseBudget(ctx, res); err != nil {
		return err
	}
	f.params = res.Report.Params
	if err := f.refine(ctx, res); err != nil {
		return err
	}
	run, err := f.simulateWindows(ctx, res.Options)
	if err != nil {
		return err
	}
	meas, pred := run.meas, run.pred
	for m, name := range metricNames {
		r := Residual{Metric: name}
		for q, p := range quantiles {
			r.Measured[q], r.Predicted[q] = meas[m].quantile(p), pred[m].quantile(p)
		}
		if !math.IsNaN(r.Measured[0]) {
			res.Report.Residuals = append(res.Report.Residuals, r)
		}
	}
	return nil
}

func (f *fitter) windowRows() int {
	n := 0
	for _, w := range f.windows {
		n += len(w)
	}
	return n
}

// simRun is one simulation of the kept rows.
type simRun struct {
	meas, pred latencies
	// loss is what a limit is chosen by: the mean squared log ratio of
	// the predicted to the measured TTFT and E2E at p50, p90 and p99
	// (what a check compares).
	loss float64
	// kvPeak is the highest KV cache usage any replica reached;
	// preemptions counts the requests the replicas preempted.
	kvPeak      float64
	preemptions int64
}

// filled reports whether the simulated cache filled as kvCapacity counts
// a measured server's: its usage reached kvFull, or it preempted.
func (s simRun) filled() bool { return s.kvPeak >= kvFull || s.preemptions > 0 }

// simulateWindows runs the kept rows on o.
func (f *fitter) simulateWindows(ctx context.Context, o sim.Options) (simRun, error) {
	run := simRun{meas: f.measured()}
	for _, w := range f.windows {
		if len(w) == 0 {
			continue
		}
		pr, err := Predict(ctx, o, traces.Values(w), f.o.predictOptions(), func(t traces.Record) error {
			run.pred.add(&t)
			return nil
		})
		if err != nil {
			return run, err
		}
		for _, r := range pr.Sim.Replicas {
			run.kvPeak = max(run.kvPeak, r.Counters.KVUsagePeak)
			run.preemptions += r.Counters.Preemptions
		}
	}
	n := 0
	for _, m := range []int{0, 3} {
		for _, p := range quantiles {
			a, b := run.meas[m].quantile(p), run.pred[m].quantile(p)
			if a > 0 && b > 0 {
				d := math.Log(b / a)
				run.loss += d * d
				n++
			}
		}
	}
	if n > 0 {
		run.loss /= float64(n)
	}
	return run, nil
}

// minGain is the least improvement of the loss that moves a limit off the
// prior: a 3 % rms error (squared log), above the noise of a near fit.
const minGain = 0.001

// measured is the kept rows' metrics, taken once.
func (f *fitter) measured() latencies {
	if f.meas == nil {
		f.meas = new(latencies)
		for _, w := range f.windows {
			for i := range w {
				f.meas.add(&w[i])
			}
		}
	}
	return *f.meas
}

// search simulates the kept rows with each candidate value of a limit
// (set by apply; the prior's first) and keeps the one that fits the
// measured percentiles best, unless the prior's fits about as well (the
// best does not halve its loss, or gains less than minGain): then the rows
// do not tell the values apart, or what they tell is the step costs'
// error made up for.
func (f *fitter) search(ctx context.Context, res *Result, key string, prior int, candidates []int, apply func(*sim.Options, int)) (Param, error) {
	type try struct {
		v    int
		loss float64
	}
	var tries []try
	seen := map[int]bool{}
	for _, v := range append([]int{prior}, candidates...) {
		if seen[v] {
			continue
		}
		seen[v] = true
		c := res.Options
		apply(&c, v)
		if c.Validate() != nil {
			continue
		}
		run, err := f.simulateWindows(ctx, c)
		if err != nil {
			return Param{}, err
		}
		tries = append(tries, try{v, run.loss})
	}
	best := tries[0]
	for _, t := range tries[1:] {
		if t.loss < best.loss {
			best = t
		}
	}
	rms := func(l float64) float64 { return 100 * (math.Exp(math.Sqrt(l)) - 1) }
	pr := Param{Key: key, Value: strconv.Itoa(prior)}
	if best.v != prior && best.loss < 0.5*tries[0].loss && tries[0].loss-best.loss > minGain {
		apply(&res.Options, best.v)
		pr.Value, pr.Fitted = strconv.Itoa(best.v), true
		pr.From = fmt.Sprintf("simulation of %d rows: TTFT and E2E percentiles off by %.1f %% (rms) at %d against %.1f %% at the prior's %d", f.windowRows(), rms(best.loss), best.v, rms(tries[0].loss), prior)
	} else {
		lo, hi := prior, prior
		for _, t := range tries {
			lo, hi = min(lo, t.v), max(hi, t.v)
		}
		pr.From = fmt.Sprintf("prior: simulating %d rows with values from %d to %d fits their TTFT and E2E percentiles no better (%.1f %% rms)", f.windowRows(), lo, hi, rms(tries[0].loss))
	}
	return pr, nil
}

// chooseBudget searches the token budget (no smaller than the most tokens
// or requests a step was seen to hold) for one engine or every replica of
// an aggregated fleet; a disaggregated fleet's stays the prior's.
func (f *fitter) chooseBudget(ctx context.Context, res *Result) error {
	prior := res.Options.MaxNumBatchedTokens
	if res.Options.Disaggregated() {
		res.Report.Params = append(res.Report.Params, Param{Key: "max-num-batched-tokens", Value: strconv.Itoa(prior), From: "prior: not searched for a disaggregated fleet"})
		return nil
	}
	minBudget := 1
	for _, g := range f.groups {
		minBudget = max(minBudget, g.maxBatch, g.maxTokens)
	}
	var cands []int
	for _, b := range budgetCandidates {
		if b >= minBudget {
			cands = append(cands, b)
		}
	}
	pr, err := f.search(ctx, res, "max-num-batched-tokens", prior, cands, func(o *sim.Options, v int) { o.MaxNumBatchedTokens = v })
	if err != nil {
		return err
	}
	res.Report.Params = append(res.Report.Params, pr)
	return nil
}

// chooseLimit searches max-num-seqs for one engine or every replica of an
// aggregated fleet when the rows did not show the batch full while
// requests waited: the most requests seen decoding at once, a little more,
// and the prior.
func (f *fitter) chooseLimit(ctx context.Context, res *Result) error {
	if res.Options.Disaggregated() {
		return nil
	}
	i := slices.IndexFunc(res.Report.Params, func(p Param) bool { return p.Key == "max-num-seqs" })
	if i < 0 || res.Report.Params[i].Fitted {
		return nil
	}
	seen := 0
	for _, g := range f.groups {
		seen = max(seen, g.maxBatch, g.maxDecoding)
	}
	if seen == 0 {
		return nil
	}
	cands := []int{seen, seen + 1, seen * 5 / 4, seen * 3 / 2}
	pr, err := f.search(ctx, res, "max-num-seqs", res.Options.MaxNumSeqs, cands, func(o *sim.Options, v int) { o.MaxNumSeqs = v })
	if err != nil {
		return err
	}
	if pr.Fitted {
		res.Report.Params[i] = pr
	}
	return nil
}

// refine adjusts the step costs fitted from whole requests (no chunk
// times: each request's pace assumed steady, preempted requests'
// recomputation unseen) by simulating the kept rows: each cost in turn is
// scaled by 1 ± 10 %, then 3 %, where that brings the TTFT and E2E
// percentiles closer to the measured ones. Costs fitted from chunk times
// are left as they are.
func (f *fitter) refine(ctx context.Context, res *Result) error {
	if f.counts.chunked > 0 || f.counts.whole == 0 || res.Options.Disaggregated() {
		return nil
	}
	o := &res.Options
	run, err := f.simulateWindows(ctx, *o)
	if err != nil {
		return err
	}
	best := run.loss
	scale := [nFeat]float64{1, 1, 1, 1}
	base := thetaOf(o.Options)
	for _, step := range []float64{0.1, 0.03} {
		for j := range nFeat {
			if !f.fittedCost(j) {
				continue
			}
			for _, dir := range []float64{1, -1} {
				c := *o
				s := scale
				s[j] *= 1 + dir*step
				t := base
				for k := range nFeat {
					t[k] *= s[k]
				}
				setTheta(&c.Options, t)
				run, err := f.simulateWindows(ctx, c)
				if err != nil {
					return err
				}
				if run.loss < best-minGain/4 {
					best, scale, *o = run.loss, s, c
					break
				}
			}
		}
	}
	for j := range nFeat {
		if scale[j] == 1 {
			continue
		}
		for i := range res.Report.Params {
			p := &res.Report.Params[i]
			if p.Key == featKeys[j] {
				p.Value = fmtDur(dur(base[j] * scale[j]))
				p.From += fmt.Sprintf("; ×%.3f by simulating the rows (their TTFT and E2E percentiles)", scale[j])
			}
		}
	}
	return nil
}

// fittedCost reports whether the unscoped cost j was fitted from the data.
func (f *fitter) fittedCost(j int) bool {
	for _, p := range f.params {
		if p.Key == featKeys[j] {
			return p.Fitted
		}
	}
	return false
}
