package validate

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/tokentrace/tokentrace/internal/commalist"
	"github.com/tokentrace/tokentrace/traces"
)

// Verdicts of a Conclusion: does the synthetic workload's conclusion about
// a target (against the baseline) hold on the real workload?
const (
	// VerdictHolds: both workloads show no effect, or the same direction
	// with a magnitude that agrees (intervals overlap, or within
	// Options.MagnitudeTolerance of the real effect).
	VerdictHolds = "holds"
	// VerdictReversed: both significant, opposite directions.
	VerdictReversed = "reversed"
	// VerdictMagnitudeOff: same direction, magnitudes disagree.
	VerdictMagnitudeOff = "magnitude off"
	// VerdictNotSignificantReal: the synthetic workload shows an effect,
	// the real one does not.
	VerdictNotSignificantReal = "not significant on real"
	// VerdictNotSignificantSynthetic: the real workload shows an effect,
	// the synthetic one does not.
	VerdictNotSignificantSynthetic = "not significant on synthetic"
)

// Metric is one figure the configurations are judged on.
type Metric struct {
	// Name is as given: "ttft_p99", "tpot_p50", "e2e_p99.9", "goodput".
	Name string `json:"name"`
	// Kind is traces.MetricTTFT, MetricTPOT, MetricE2E, or "goodput" (the
	// share of requests meeting every SLO; higher is better).
	Kind string `json:"kind"`
	// Percentile (0–100) of a latency metric.
	Percentile float64 `json:"percentile,omitempty"`
}

// LowerIsBetter says which direction is an improvement.
func (m Metric) LowerIsBetter() bool { return m.Kind != kindGoodput }

const kindGoodput = "goodput"

// ParseMetrics parses a comma-separated list of metrics: KIND_pN for a
// latency percentile (ttft, tpot, e2e; e.g. ttft_p99, e2e_p99.9) or
// "goodput" (needs an SLO).
func ParseMetrics(s string) ([]Metric, error) {
	seen := map[string]bool{}
	ms, err := commalist.Parse(s, func(item string) (Metric, error) {
		name := strings.ToLower(item)
		if seen[name] {
			return Metric{}, fmt.Errorf("metric %q is given twice", name)
		}
		seen[name] = true
		if name == kindGoodput {
			return Metric{Name: name, Kind: kindGoodput}, nil
		}
		kind, p, ok := strings.Cut(name, "_p")
		if !ok || (kind != traces.MetricTTFT && kind != traces.MetricTPOT && kind != traces.MetricE2E) {
			return Metric{}, fmt.Errorf("metric %q: want ttft_pN, tpot_pN, e2e_pN (e.g. ttft_p99) or goodput", item)
		}
		pct, err := strconv.ParseFloat(p, 64)
		if err != nil || !(pct > 0 && pct < 100) {
			return Metric{}, fmt.Errorf("metric %q: percentile %q: want a number strictly between 0 and 100", item, p)
		}
		return Metric{Name: name, Kind: kind, Percentile: pct}, nil
	})
	if err != nil {
		return nil, err
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("metrics %q: want at least one (e.g. ttft_p99)", s)
	}
	return ms, nil
}

// Effect is a target's relative difference from the baseline on one
// metric under one workload, with its bootstrap interval.
type Effect struct {
	// Baseline and Value are the metric for the baseline and the target
	// (milliseconds, or the good share for goodput).
	Baseline float64 `json:"baseline"`
	Value    float64 `json:"value"`
	// Change is (Value − Baseline) / Baseline; CILow and CIHigh bound it.
	Change float64 `json:"change"`
	CILow  float64 `json:"ci_low"`
	CIHigh float64 `json:"ci_high"`
	// Significant: the interval excludes 0 and |Change| is at least
	// Options.MinEffect.
	Significant bool `json:"significant"`
	// BelowMinEffect: the interval excludes 0 but |Change| is under
	// Options.MinEffect, so the effect counts as none.
	BelowMinEffect bool `json:"below_min_effect,omitempty"`
	// Paired says the bootstrap drew the same requests from both cells.
	Paired bool `json:"paired"`
}

// sample is one cell's per-request values, aligned by request so that two
// cells of the same workload can be resampled as pairs.
type sample struct {
	seq    []int64              // per request (the bootstrap's subset)
	lat    map[string][]float64 // kind → per request ms, NaN when undefined
	order  map[string][]int32   // kind → requests with a value, by value
	sorted map[string][]float64 // kind → every value, sorted (point estimates)
	good   []bool               // per request: met every SLO (failures never do)
	goodN  int                  // good requests over all of them
	total  int
}

// maxBootstrap caps the requests a bootstrap resamples: larger cells keep
// every k-th request for the intervals (the same ones in every cell of a
// workload, so pairs stay pairs); point estimates use all.
const maxBootstrap = 20000

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// value is the metric's point estimate; ok is false without data.
func (s sample) value(m Metric) (float64, bool) {
	if m.Kind == kindGoodput {
		if s.total == 0 {
			return 0, false
		}
		return float64(s.goodN) / float64(s.total), true
	}
	v := s.sorted[m.Kind]
	if len(v) == 0 {
		return 0, false
	}
	return traces.Quantile(v, m.Percentile/100), true
}

// paired reports whether two cells hold the same requests in the same
// order (the same workload on two targets), so a resample can draw the
// same requests from both: the comparison then sees each request's change,
// not two independent noises.
func paired(a, b sample) bool { return slices.Equal(a.seq, b.seq) }

// resampler draws bootstrap resamples as multinomial counts per request:
// a quantile is found by walking the requests in value order, no sort.
type resampler struct {
	rng *rand.Rand
}

func (r *resampler) draw(counts []int32) {
	clear(counts)
	n := len(counts)
	for range n {
		counts[r.rng.IntN(n)]++
	}
}

// quantile is the nearest-rank p-quantile of kind's values weighted by
// counts; ok is false when the resample drew no value.
func quantile(s sample, kind string, p float64, counts []int32) (float64, bool) {
	ord := s.order[kind]
	n := 0
	for _, i := range ord {
		n += int(counts[i])
	}
	if n == 0 {
		return 0, false
	}
	rank := max(int(math.Ceil(p*float64(n))), 1)
	acc := 0
	vals := s.lat[kind]
	for _, i := range ord {
		acc += int(counts[i])
		if acc >= rank {
			return vals[i], true
		}
	}
	return vals[ord[len(ord)-1]], true
}

func share(s sample, counts []int32) (float64, bool) {
	n, g := 0, 0
	for i, c := range counts {
		n += int(c)
		if s.good[i] {
			g += int(c)
		}
	}
	if n == 0 {
		return 0, false
	}
	return float64(g) / float64(n), true
}

// effect compares target against base on m with a seeded percentile
// bootstrap: paired when both cells hold the same requests, else each
// side resampled on its own. ok is false when either side has no value or
// the baseline is 0.
func effect(base, target sample, m Metric, o *Options, seed uint64) (Effect, bool) {
	vb, ok1 := base.value(m)
	vt, ok2 := target.value(m)
	if !ok1 || !ok2 || vb == 0 {
		return Effect{}, false
	}
	e := Effect{Baseline: vb, Value: vt, Change: (vt - vb) / vb, Paired: paired(base, target)}
	rs := &resampler{rng: rand.New(rand.NewPCG(o.Seed, seed))}
	cb := make([]int32, len(base.seq))
	ct := cb
	if !e.Paired {
		ct = make([]int32, len(target.seq))
	}
	stat := func(s sample, c []int32) (float64, bool) {
		if m.Kind == kindGoodput {
			return share(s, c)
		}
		return quantile(s, m.Kind, m.Percentile/100, c)
	}
	ds := make([]float64, 0, o.Resamples)
	for range o.Resamples {
		rs.draw(cb)
		if !e.Paired {
			rs.draw(ct)
		}
		qb, ok1 := stat(base, cb)
		qt, ok2 := stat(target, ct)
		if ok1 && ok2 && qb != 0 {
			ds = append(ds, (qt-qb)/qb)
		}
	}
	return finish(e, ds, o), true
}

// finish sets the interval from the resampled changes and the
// significance.
func finish(e Effect, ds []float64, o *Options) Effect {
	if len(ds) == 0 {
		e.CILow, e.CIHigh = math.Inf(-1), math.Inf(1)
		return e
	}
	slices.Sort(ds)
	a := (1 - o.Confidence) / 2
	e.CILow, e.CIHigh = traces.Quantile(ds, a), traces.Quantile(ds, 1-a)
	excludes0 := e.CILow > 0 || e.CIHigh < 0
	e.Significant = excludes0 && math.Abs(e.Change) >= o.MinEffect
	e.BelowMinEffect = excludes0 && !e.Significant
	return e
}

// Counts tallies the conclusions by what becomes of their decision: the
// one count the headline, the ablation and the table share.
type Counts struct {
	Judged int `json:"judged"`
	// Holds, SizeOff and NotCarried add up to Judged: SizeOff are
	// VerdictMagnitudeOff (the decision carries over, its size does not),
	// NotCarried the reversed ones and those significant on one side only
	// (the decision does not carry over).
	Holds      int `json:"holds"`
	SizeOff    int `json:"size_off"`
	NotCarried int `json:"not_carried"`
	// ByVerdict counts each verdict given.
	ByVerdict map[string]int `json:"by_verdict"`
}

// Broken is the conclusions that do not hold: SizeOff + NotCarried.
func (c Counts) Broken() int { return c.SizeOff + c.NotCarried }

// countConclusions tallies cs.
func countConclusions(cs []Conclusion) Counts {
	n := Counts{Judged: len(cs), ByVerdict: map[string]int{}}
	for _, c := range cs {
		n.ByVerdict[c.Verdict]++
		switch {
		case c.Verdict == VerdictHolds:
			n.Holds++
		case c.Verdict == VerdictMagnitudeOff:
			n.SizeOff++
		default:
			n.NotCarried++
		}
	}
	return n
}

// verdict judges whether the synthetic effect's conclusion holds on the
// real one.
func verdict(real, syn Effect, o *Options) string {
	switch {
	case !real.Significant && !syn.Significant:
		return VerdictHolds
	case !real.Significant:
		return VerdictNotSignificantReal
	case !syn.Significant:
		return VerdictNotSignificantSynthetic
	case (real.Change > 0) != (syn.Change > 0):
		return VerdictReversed
	case real.CILow <= syn.CIHigh && syn.CILow <= real.CIHigh,
		math.Abs(syn.Change-real.Change) <= o.MagnitudeTolerance*math.Abs(real.Change):
		return VerdictHolds
	}
	return VerdictMagnitudeOff
}
