package twin

import (
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/tokentrace/tokentrace/sim"
	"github.com/tokentrace/tokentrace/traces"
)

// DefaultTolerance is a check's bound on the relative error of the p50 and
// p90 of each metric; the p99's is twice it.
const DefaultTolerance = 0.10

// SpreadFactor scales the server's own run-to-run spread into a bound: a
// twin cannot be asked to be closer to one run than another run is.
const SpreadFactor = 1.5

// CheckOptions configure Check. Start from DefaultCheckOptions: a zero
// field is a value like any other, which Validate refuses where Check
// cannot use it.
type CheckOptions struct {
	// Tolerance bounds the relative error of p50 and p90 (p99: twice it),
	// unless the measured runs of one trace disagree more (SpreadFactor ×
	// their spread): a fraction, above 0 and below 10. Defaults to
	// DefaultTolerance.
	Tolerance float64
	// Prompt builds the simulated requests' prompts. Defaults to
	// DefaultPrompt.
	Prompt PromptFunc
	// Predicted, when set, receives every predicted row (results rows).
	// Defaults to nil.
	Predicted func(traces.Record) error
	// ReorderWindow: see PredictOptions. Defaults to DefaultReorderWindow.
	ReorderWindow int64
	// WhatIfs are changes to ask the twin about (configuration keys
	// applied over it: "replicas=3", "max-num-seqs=64"): each input's
	// requests are simulated on each too, beside the twin's prediction.
	// Defaults to nil.
	WhatIfs []string
}

// DefaultCheckOptions returns every CheckOptions default.
func DefaultCheckOptions() CheckOptions {
	return CheckOptions{
		Tolerance:     DefaultTolerance,
		Prompt:        DefaultPrompt,
		Predicted:     nil,
		ReorderWindow: DefaultReorderWindow,
		WhatIfs:       nil,
	}
}

// Validate reports the first option Check cannot use, naming it in a
// *traces.OptionError (the what-ifs are checked against the twin, by
// Check).
func (co CheckOptions) Validate() error {
	if !(co.Tolerance > 0 && co.Tolerance < 10) {
		return traces.OptionErrorf("twin", "CheckOptions.Tolerance", "want a fraction such as 0.1, got %g", co.Tolerance)
	}
	return co.predictOptions().Validate()
}

// predictOptions are the options of Check's predictions.
func (co CheckOptions) predictOptions() PredictOptions {
	po := DefaultPredictOptions()
	po.Prompt, po.ReorderWindow = co.Prompt, co.ReorderWindow
	return po
}

// CheckResult compares a twin's predictions with measured runs.
type CheckResult struct {
	// Traces are the measured runs grouped by the trace they replayed.
	Traces []TraceCheck
	// Pass is true when every metric of every trace is within its bound.
	Pass bool
	// Tolerance is the bound used.
	Tolerance float64
}

// TraceCheck is one trace: its measured runs, the twin's prediction of
// it and each metric's error.
type TraceCheck struct {
	// Runs are the measured runs' names.
	Runs []string
	// Requests, RatePerSec and MeanInFlight describe the load (of the
	// first run).
	Requests                 int64
	RatePerSec, MeanInFlight float64
	Rows                     []CheckRow
	// WhatIfs are the twin's answers to CheckOptions.WhatIfs.
	WhatIfs []WhatIf
}

// WhatIf is the twin's prediction of a trace under a change.
type WhatIf struct {
	// Spec is the change as given.
	Spec string
	// Predicted holds each metric's p50, p90 and p99 (ns), in the order
	// of the rows (ttft, tpot, itl, e2e); Twin the unchanged twin's.
	Predicted, Twin [4][3]float64
}

// CheckRow is one metric at one percentile.
type CheckRow struct {
	Metric, Percentile string
	// Measured is the runs' mean, Spread their (max − min) / mean (0 with
	// one run), Predicted the twin's (mean over the runs' predictions).
	Measured, Spread, Predicted float64
	// Error is (predicted − measured) / measured; Bound the largest
	// allowed |Error|.
	Error, Bound float64
	Pass         bool
}

// Check runs each input's requests on the twin o offline (Predict: the
// measured sends, lengths, sessions and prefixes) and compares the
// predicted TTFT, TPOT, ITL and E2E percentiles with the measured ones.
// Inputs that replayed the same trace (the same requests: seq, arrival,
// lengths) are one trace whose runs' spread widens the bound.
func Check(ctx context.Context, o sim.Options, inputs []Input, co CheckOptions) (*CheckResult, error) {
	if err := co.Validate(); err != nil {
		return nil, err
	}
	res := &CheckResult{Pass: true, Tolerance: co.Tolerance}
	whatIfs, err := whatIfOptions(o, co.WhatIfs)
	if err != nil {
		return nil, err
	}
	type run struct {
		meas, pred latencies
		rep        InputReport
		whatIf     []latencies
	}
	byTrace := map[uint64][]run{}
	var order []uint64
	for _, in := range inputs {
		var r run
		var fp traceFingerprint
		rows := func(yield func(traces.Record, error) bool) {
			for rec, err := range in.Rows {
				if err == nil {
					r.meas.add(&rec)
					fp.add(&rec)
					r.rep.observe(&rec)
				}
				if !yield(rec, err) {
					return
				}
			}
		}
		_, err := Predict(ctx, o, rows, co.predictOptions(), func(t traces.Record) error {
			r.pred.add(&t)
			if co.Predicted != nil {
				return co.Predicted(t)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("twin: check %s: %w", in.Name, err)
		}
		r.rep.Name = in.Name
		r.rep.finish()
		for i, wo := range whatIfs {
			var l latencies
			if _, err := Predict(ctx, wo, in.Rows, co.predictOptions(), func(t traces.Record) error {
				l.add(&t)
				return nil
			}); err != nil {
				return nil, fmt.Errorf("twin: what if %s on %s: %w", co.WhatIfs[i], in.Name, err)
			}
			r.whatIf = append(r.whatIf, l)
		}
		k := fp.sum()
		if _, ok := byTrace[k]; !ok {
			order = append(order, k)
		}
		byTrace[k] = append(byTrace[k], r)
	}
	for _, k := range order {
		runs := byTrace[k]
		tc := TraceCheck{Requests: runs[0].rep.OK, RatePerSec: runs[0].rep.RatePerSec, MeanInFlight: runs[0].rep.MeanInFlight}
		for _, r := range runs {
			tc.Runs = append(tc.Runs, r.rep.Name)
		}
		for m, name := range metricNames {
			for q, p := range quantiles {
				row := CheckRow{Metric: name, Percentile: fmt.Sprintf("p%g", 100*p)}
				lo, hi := math.Inf(1), math.Inf(-1)
				for _, r := range runs {
					v := r.meas[m].quantile(p)
					row.Measured += v / float64(len(runs))
					row.Predicted += r.pred[m].quantile(p) / float64(len(runs))
					lo, hi = min(lo, v), max(hi, v)
				}
				if math.IsNaN(row.Measured) {
					continue
				}
				if len(runs) > 1 && row.Measured > 0 {
					row.Spread = (hi - lo) / row.Measured
				}
				row.Bound = co.Tolerance
				if q == 2 {
					row.Bound = 2 * co.Tolerance
				}
				row.Bound = max(row.Bound, SpreadFactor*row.Spread)
				row.Error = relErr(row.Predicted, row.Measured)
				row.Pass = !math.IsNaN(row.Error) && math.Abs(row.Error) <= row.Bound
				res.Pass = res.Pass && row.Pass
				tc.Rows = append(tc.Rows, row)
			}
		}
		r := runs[0]
		for i, spec := range co.WhatIfs {
			w := WhatIf{Spec: spec}
			for m := range metricNames {
				for q, p := range quantiles {
					w.Predicted[m][q], w.Twin[m][q] = r.whatIf[i][m].quantile(p), r.pred[m].quantile(p)
				}
			}
			tc.WhatIfs = append(tc.WhatIfs, w)
		}
		res.Traces = append(res.Traces, tc)
	}
	return res, nil
}

// whatIfOptions are the twin o with each change applied.
func whatIfOptions(o sim.Options, specs []string) ([]sim.Options, error) {
	var out []sim.Options
	for _, spec := range specs {
		w := o
		w.Fleet.Overrides = slices.Clone(o.Fleet.Overrides)
		if err := sim.ApplyConfig(&w, spec); err != nil {
			return nil, traces.OptionErrorf("twin", "CheckOptions.WhatIfs", "%q: %w", spec, err)
		}
		out = append(out, w)
	}
	return out, nil
}

// observe adds a row to the load the input report describes.
func (in *InputReport) observe(r *traces.Record) {
	in.Rows++
	if !r.OK() || r.FirstTokenNs < 0 {
		return
	}
	in.OK++
	t := sentAt(r)
	if in.first == 0 && in.last == 0 || t < in.first {
		in.first = t
	}
	in.last = max(in.last, t)
	if r.LastTokenNs >= t {
		in.busy += float64(r.LastTokenNs - t)
	}
}

// finish sets the rate and mean in flight from what observe saw.
func (in *InputReport) finish() {
	if span := float64(in.last - in.first); span > 0 {
		in.RatePerSec = float64(in.OK-1) / (span / 1e9)
		in.MeanInFlight = in.busy / span
	}
}

// traceFingerprint identifies the requests of a run whatever their order:
// a sum of each request's hash (seq, arrival, lengths).
type traceFingerprint struct{ s, n uint64 }

func (f *traceFingerprint) add(r *traces.Record) {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%d/%d/%d", r.Seq, r.ArrivalNs, r.InputTokens, r.OutputTokens)
	f.s += h.Sum64()
	f.n++
}

func (f *traceFingerprint) sum() uint64 { return f.s ^ f.n*0x9E3779B97F4A7C15 }

// WriteText writes the comparison as a table per trace and a verdict.
func (c *CheckResult) WriteText(w io.Writer) error {
	for _, tc := range c.Traces {
		fmt.Fprintf(w, "%s: %d requests, %.2f req/s, %.1f in flight on average\n", strings.Join(tc.Runs, " + "), tc.Requests, tc.RatePerSec, tc.MeanInFlight)
		fmt.Fprintf(w, "  %-5s %-4s %10s %10s %9s %8s %8s\n", "", "", "measured", "twin", "error", "spread", "bound")
		for _, r := range tc.Rows {
			mark := "ok"
			if !r.Pass {
				mark = "OFF"
			}
			fmt.Fprintf(w, "  %-5s %-4s %10s %10s %9s %8s %8s  %s\n", r.Metric, r.Percentile, fmtNs(r.Measured), fmtNs(r.Predicted),
				fmtErr(r.Error), fmt.Sprintf("%.1f %%", 100*r.Spread), fmt.Sprintf("%.0f %%", 100*r.Bound), mark)
		}
	}
	for _, tc := range c.Traces {
		for _, wi := range tc.WhatIfs {
			fmt.Fprintf(w, "what if %s (the twin's answer for %s):\n", wi.Spec, strings.Join(tc.Runs, " + "))
			for m, name := range metricNames {
				var b strings.Builder
				for q, p := range []string{"p50", "p90", "p99"} {
					fmt.Fprintf(&b, "  %s %s (%s)", p, fmtNs(wi.Predicted[m][q]), fmtErr(relErr(wi.Predicted[m][q], wi.Twin[m][q])))
				}
				fmt.Fprintf(w, "  %-5s%s\n", name, b.String())
			}
		}
		if len(tc.WhatIfs) > 0 {
			fmt.Fprintln(w, "  (in brackets: the change against the twin's own prediction of the run; trust it as far as the check above)")
		}
	}
	for _, l := range c.Summary() {
		fmt.Fprintln(w, l)
	}
	return nil
}

// Summary is the check in a few lines, for the twin file (RecordCheck).
func (c *CheckResult) Summary() []string {
	var lines []string
	for _, tc := range c.Traces {
		worst := CheckRow{}
		for _, r := range tc.Rows {
			if math.Abs(r.Error)/r.Bound > math.Abs(worst.Error)/max(worst.Bound, 1e-9) || worst.Metric == "" {
				worst = r
			}
		}
		lines = append(lines, fmt.Sprintf("%s (%d requests, %.2f req/s, %.1f in flight): worst %s %s %s (bound %.0f %%)",
			strings.Join(tc.Runs, " + "), tc.Requests, tc.RatePerSec, tc.MeanInFlight, worst.Metric, worst.Percentile, fmtErr(worst.Error), 100*worst.Bound))
	}
	if c.Pass {
		lines = append(lines, fmt.Sprintf("verdict: the twin holds within tolerance (%.0f %% at p50 and p90, %.0f %% at p99, or %.1f× the runs' own spread)", 100*c.Tolerance, 200*c.Tolerance, SpreadFactor))
	} else {
		var off []string
		for _, tc := range c.Traces {
			for _, r := range tc.Rows {
				if !r.Pass {
					off = append(off, fmt.Sprintf("%s %s %s", r.Metric, r.Percentile, fmtErr(r.Error)))
				}
			}
		}
		lines = append(lines, "verdict: the twin does NOT hold: "+strings.Join(off, ", ")+": do not trust its answers at this load")
	}
	return lines
}
