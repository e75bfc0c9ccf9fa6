package twin

import (
	"context"
	"fmt"
	"math"
	"strconv"

	"github.com/tokentrace/tokentrace/sim"
	"github.com/tokentrace/tokentrace/traces"
)

// budgetCandidates are the token budgets a simulation tries: vLLM's
// usual values, none below the most tokens a step was seen to compute.
var budgetCandidates = []int{256, 512, 1024, 2048, 4096, 8192, 16384}

// confirm simulates the kept rows on the fitted twin: the token budget is
// chosen where the rows' first-token times tell budgets apart, and the
// report gets the twin's residuals per metric.
func (f *fitter) confirm(ctx context.Context, res *Result) error {
	if f.o.SimRows < 0 || f.windowRows() == 0 {
		return nil
	}
	if err := f.chooseBudget(ctx, res); err != nil {
		return err
	}
	meas, pred, _, err := f.simulateWindows(ctx, res.Options)
	if err != nil {
		return err
	}
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

// simulateWindows runs the kept rows on o: the measured and predicted
// metrics, and the mean squared log error of each request's first-token
// time (the loss a limit is chosen by).
func (f *fitter) simulateWindows(ctx context.Context, o sim.Options) (meas, pred latencies, loss float64, err error) {
	n := 0
	for _, w := range f.windows {
		if len(w) == 0 {
			continue
		}
		ttft := make(map[int64]float64, len(w))
		for i := range w {
			meas.add(&w[i])
			if v, ok := w[i].TTFT(); ok {
				ttft[w[i].Seq] = float64(v)
			}
		}
		_, err = Predict(ctx, o, traces.Values(w), PredictOptions{Prompt: f.o.Prompt, ReorderWindow: f.o.ReorderWindow}, func(t traces.Record) error {
			pred.add(&t)
			if m, ok := ttft[t.Seq]; ok && m > 0 {
				if v, ok := t.TTFT(); ok && v > 0 {
					d := math.Log(float64(v) / m)
					loss += d * d
					n++
				}
			}
			return nil
		})
		if err != nil {
			return meas, pred, 0, err
		}
	}
	if n > 0 {
		loss /= float64(n)
	}
	return meas, pred, loss, nil
}

// chooseBudget simulates the kept rows with each candidate token budget
// (no smaller than the largest batch seen) and keeps the one whose
// first-token times fit best, unless the prior's fits as well: then the
// rows never made the budget bind and it stays the prior's.
func (f *fitter) chooseBudget(ctx context.Context, res *Result) error {
	o := res.Options
	prior := o.MaxNumBatchedTokens
	if o.IsFleet() {
		// A fleet's pools may differ; the budget stays the prior's.
		res.Report.Params = append(res.Report.Params, Param{Key: "max-num-batched-tokens", Value: strconv.Itoa(prior), From: "prior: not searched for a fleet"})
		return nil
	}
	minBudget := 1
	for _, g := range f.groups {
		minBudget = max(minBudget, g.maxBatch, g.maxTokens)
	}
	type try struct {
		budget int
		loss   float64
	}
	var tries []try
	seen := map[int]bool{}
	for _, b := range append([]int{prior}, budgetCandidates...) {
		if b < minBudget || seen[b] {
			continue
		}
		seen[b] = true
		c := o
		c.MaxNumBatchedTokens = b
		if c.Validate() != nil {
			continue
		}
		_, _, loss, err := f.simulateWindows(ctx, c)
		if err != nil {
			return err
		}
		tries = append(tries, try{b, loss})
	}
	best := tries[0]
	for _, t := range tries[1:] {
		if t.loss < best.loss {
			best = t
		}
	}
	pr := Param{Key: "max-num-batched-tokens", Value: strconv.Itoa(prior)}
	rms := func(l float64) float64 { return 100 * (math.Exp(math.Sqrt(l)) - 1) }
	if best.budget != prior && best.loss < 0.8*tries[0].loss {
		res.Options.MaxNumBatchedTokens = best.budget
		pr.Value, pr.Fitted = strconv.Itoa(best.budget), true
		pr.From = fmt.Sprintf("simulation of %d rows: first-token times off by %.1f %% (rms) at %d against %.1f %% at the prior's %d", f.windowRows(), rms(best.loss), best.budget, rms(tries[0].loss), prior)
	} else {
		pr.From = fmt.Sprintf("prior: simulating %d rows with budgets from %d to %d fits their first-token times no better (%.1f %% rms)", f.windowRows(), minBudget, budgetCandidates[len(budgetCandidates)-1], rms(tries[0].loss))
	}
	res.Report.Params = append(res.Report.Params, pr)
	return nil
}
