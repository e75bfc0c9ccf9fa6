package validate

import (
	"math"
	"slices"
	"testing"
)

// eff is an effect with its interval, significant as finish would judge it
// under the default options (2 % minimum effect).
func eff(change, lo, hi float64) Effect {
	o := DefaultOptions()
	e := Effect{Change: change, CILow: lo, CIHigh: hi}
	excludes0 := lo > 0 || hi < 0
	e.Significant = excludes0 && math.Abs(change) >= o.MinEffect
	e.BelowMinEffect = excludes0 && !e.Significant
	return e
}

// The verdict rules, one case per branch and at the edges of the
// magnitude tolerance (±50 % of the real effect by default).
func TestVerdictRules(t *testing.T) {
	o := DefaultOptions()
	ns := eff(0.01, -0.02, 0.04)
	for _, tc := range []struct {
		name      string
		real, syn Effect
		want      string
	}{
		{"no effect on either side holds", ns, eff(-0.005, -0.03, 0.02), VerdictHolds},
		{"an effect under the minimum on both sides holds", eff(0.01, 0.005, 0.016), eff(0.015, 0.01, 0.02), VerdictHolds},
		{"only the synthetic workload shows an effect", ns, eff(0.30, 0.20, 0.40), VerdictNotSignificantReal},
		{"only the real workload shows an effect", eff(0.30, 0.20, 0.40), ns, VerdictNotSignificantSynthetic},
		{"an effect under the minimum counts as none", eff(0.30, 0.20, 0.40), eff(0.015, 0.01, 0.02), VerdictNotSignificantSynthetic},
		{"opposite directions, both significant", eff(0.30, 0.20, 0.40), eff(-0.20, -0.30, -0.10), VerdictReversed},
		{"the same direction, intervals overlap", eff(0.30, 0.20, 0.40), eff(0.60, 0.35, 0.90), VerdictHolds},
		{"the same direction, within the tolerance", eff(0.30, 0.28, 0.32), eff(0.44, 0.42, 0.46), VerdictHolds},
		{"the same direction, just within the tolerance", eff(0.30, 0.29, 0.31), eff(0.449, 0.44, 0.46), VerdictHolds},
		{"the same direction, past the tolerance", eff(0.30, 0.29, 0.31), eff(0.46, 0.45, 0.47), VerdictMagnitudeOff},
		{"the same direction, far smaller", eff(-0.50, -0.55, -0.45), eff(-0.10, -0.12, -0.08), VerdictMagnitudeOff},
		{"negative effects, within the tolerance", eff(-0.40, -0.42, -0.38), eff(-0.25, -0.27, -0.23), VerdictHolds},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := verdict(tc.real, tc.syn, &o); got != tc.want {
				t.Errorf("verdict(real %+v, synthetic %+v) = %q, want %q", tc.real, tc.syn, got, tc.want)
			}
		})
	}
	// A tolerance of its own moves the edge.
	o.MagnitudeTolerance = 0.1
	if got := verdict(eff(0.30, 0.29, 0.31), eff(0.34, 0.33, 0.35), &o); got != VerdictMagnitudeOff {
		t.Errorf("tolerance 0.1: +34%% against +30%%: %q, want magnitude off", got)
	}
}

// finish sets the interval from the resampled changes and judges it: an
// interval that excludes 0 is significant only from the minimum effect
// on, and under it is marked as below the minimum, not as noise.
func TestFinishSignificance(t *testing.T) {
	o := DefaultOptions()
	spread := func(center, half float64) []float64 {
		var ds []float64
		for i := range 1001 {
			ds = append(ds, center-half+2*half*float64(i)/1000)
		}
		return ds
	}
	for _, tc := range []struct {
		name            string
		change          float64
		ds              []float64
		significant, lo bool
	}{
		{"an interval around 0 is not significant", 0.01, spread(0.01, 0.05), false, false},
		{"an interval that excludes 0 and a change past the minimum", 0.10, spread(0.10, 0.05), true, false},
		{"an interval that excludes 0 and a change under the minimum", 0.010, spread(0.010, 0.005), false, true},
		{"a negative change under the minimum", -0.015, spread(-0.015, 0.005), false, true},
		{"a negative change past the minimum", -0.20, spread(-0.20, 0.05), true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := finish(Effect{Change: tc.change}, tc.ds, &o)
			if e.Significant != tc.significant || e.BelowMinEffect != tc.lo {
				t.Errorf("%+v: significant %v, below the minimum %v; want %v, %v", e, e.Significant, e.BelowMinEffect, tc.significant, tc.lo)
			}
			if !(e.CILow <= tc.change && tc.change <= e.CIHigh) {
				t.Errorf("interval [%g, %g] does not hold the change %g", e.CILow, e.CIHigh, tc.change)
			}
		})
	}
	// No resample with a value: an unbounded interval, no effect.
	e := finish(Effect{Change: 0.5}, nil, &o)
	if e.Significant || !math.IsInf(e.CILow, -1) || !math.IsInf(e.CIHigh, 1) {
		t.Errorf("no resamples: %+v, want an unbounded interval and no significance", e)
	}
	// The minimum effect is an option: at 0 % any interval that excludes
	// 0 is significant (a zero MinEffect is its default; a tiny one is not).
	o.MinEffect = 1e-9
	if e := finish(Effect{Change: 0.01}, spread(0.01, 0.005), &o); !e.Significant || e.BelowMinEffect {
		t.Errorf("MinEffect ~0: %+v, want significant", e)
	}
}

// sampleOf is a cell's sample of per-request TTFTs (ms), request i with
// seq i, as sampleBuilder builds it.
func sampleOf(ttft []float64) sample {
	s := sample{lat: map[string][]float64{}, order: map[string][]int32{}, sorted: map[string][]float64{}, total: len(ttft)}
	for i := range ttft {
		s.seq = append(s.seq, int64(i))
		s.good = append(s.good, ttft[i] < 100)
		if ttft[i] < 100 {
			s.goodN++
		}
	}
	for _, k := range kinds {
		vals := slices.Clone(ttft)
		var ord []int32
		for i := range vals {
			ord = append(ord, int32(i))
		}
		slices.SortStableFunc(ord, func(a, b int32) int { return cmpFloat(vals[a], vals[b]) })
		s.lat[k], s.order[k] = vals, ord
		s.sorted[k] = slices.Sorted(slices.Values(vals))
	}
	return s
}

// The bootstrap of a change: paired when both cells hold the same
// requests, so that a uniform slow-down has a tight interval however
// spread the requests are, and no change at all an interval of exactly 0.
func TestEffectBootstrap(t *testing.T) {
	o := DefaultOptions()
	base := make([]float64, 400)
	for i := range base {
		base[i] = 10 + float64(i%97) // widely spread
	}
	slower := make([]float64, len(base))
	for i := range base {
		slower[i] = base[i] * 1.3
	}
	p50 := Metric{Name: "ttft_p50", Kind: "ttft", Percentile: 50}
	e, ok := effect(sampleOf(base), sampleOf(slower), p50, &o, 1)
	if !ok || !e.Paired || math.Abs(e.Change-0.3) > 1e-9 || !e.Significant {
		t.Fatalf("a uniform 30%% slow-down: %+v, %v; want a paired, significant +30%%", e, ok)
	}
	if e.CIHigh-e.CILow > 1e-9 {
		t.Errorf("paired, every request 30%% slower: interval [%g, %g], want exactly +30%%", e.CILow, e.CIHigh)
	}
	if e, _ := effect(sampleOf(base), sampleOf(base), p50, &o, 1); e.Change != 0 || e.CILow != 0 || e.CIHigh != 0 || e.Significant {
		t.Errorf("no change: %+v, want 0 [0, 0], not significant", e)
	}
	// Unpaired (other requests): the interval holds the change and is
	// wider than the paired one.
	other := sampleOf(slower)
	for i := range other.seq {
		other.seq[i] += 10000
	}
	u, ok := effect(sampleOf(base), other, p50, &o, 1)
	if !ok || u.Paired || !(u.CILow < 0.3 && 0.3 < u.CIHigh) || u.CIHigh-u.CILow < 0.01 {
		t.Errorf("unpaired: %+v, want an interval around +30%% with room in it", u)
	}
	// The same seed gives the same interval.
	if u2, _ := effect(sampleOf(base), other, p50, &o, 1); u2 != u {
		t.Errorf("the bootstrap is not deterministic: %+v then %+v", u, u2)
	}
	// A zero baseline has no relative change.
	if _, ok := effect(sampleOf(make([]float64, 10)), sampleOf(base[:10]), p50, &o, 1); ok {
		t.Error("a zero baseline gave a relative change")
	}
	// Goodput: the share under the SLO (here under 100 ms), higher is
	// better.
	good := Metric{Name: "goodput", Kind: kindGoodput}
	half := slices.Clone(base)
	for i := range half[:200] {
		half[i] = 500
	}
	if g, ok := effect(sampleOf(base), sampleOf(half), good, &o, 1); !ok || math.Abs(g.Change+0.5) > 1e-9 || !g.Significant {
		t.Errorf("half the requests past the SLO: goodput change %+v, want -50%%", g)
	}
}

// quantile reads a resample's nearest-rank quantile from its counts: a
// request drawn twice counts twice.
func TestQuantileOfAResample(t *testing.T) {
	s := sampleOf([]float64{5, 1, 4, 2, 3})
	for _, tc := range []struct {
		counts []int32
		p      float64
		want   float64
	}{
		{[]int32{1, 1, 1, 1, 1}, 0.5, 3},
		{[]int32{1, 1, 1, 1, 1}, 1, 5},
		{[]int32{1, 1, 1, 1, 1}, 0.01, 1},
		{[]int32{5, 0, 0, 0, 0}, 0.5, 5},
		{[]int32{0, 3, 0, 0, 2}, 0.5, 1},
		{[]int32{0, 3, 0, 0, 2}, 0.9, 3},
	} {
		if got, ok := quantile(s, "ttft", tc.p, tc.counts); !ok || got != tc.want {
			t.Errorf("counts %v, p %g: %g, want %g", tc.counts, tc.p, got, tc.want)
		}
	}
	if _, ok := quantile(s, "ttft", 0.5, make([]int32, 5)); ok {
		t.Error("an empty resample has a quantile")
	}
}

// countConclusions tallies the decisions: reversed and one-sided verdicts
// do not carry over, magnitude off carries over with its size off.
func TestCountConclusions(t *testing.T) {
	var cs []Conclusion
	for _, v := range []string{VerdictHolds, VerdictHolds, VerdictMagnitudeOff, VerdictReversed, VerdictNotSignificantReal, VerdictNotSignificantSynthetic, VerdictNotSignificantSynthetic} {
		cs = append(cs, Conclusion{Verdict: v})
	}
	n := countConclusions(cs)
	if n.Judged != 7 || n.Holds != 2 || n.SizeOff != 1 || n.NotCarried != 4 || n.Broken() != 5 {
		t.Errorf("counts %+v, want 7 judged: 2 hold, 1 size off, 4 not carried over (5 broken)", n)
	}
	if n.ByVerdict[VerdictNotSignificantSynthetic] != 2 || n.ByVerdict[VerdictReversed] != 1 {
		t.Errorf("by verdict %v", n.ByVerdict)
	}
	if n.Holds+n.SizeOff+n.NotCarried != n.Judged {
		t.Error("the three counts do not add up to the judged")
	}
	for _, c := range cs {
		if carriesOver(c) != (c.Verdict == VerdictHolds || c.Verdict == VerdictMagnitudeOff) {
			t.Errorf("carriesOver(%s) = %v", c.Verdict, carriesOver(c))
		}
	}
}

// A ranking puts a target whose change is not significant in the
// baseline's group, so that "no difference" never reads as an order.
func TestRankTies(t *testing.T) {
	r := &Result{Baseline: "a", Targets: []TargetInfo{{Name: "a"}, {Name: "b"}, {Name: "c"}, {Name: "d"}}}
	for name, v := range map[string]float64{"a": 100, "b": 99, "c": 50, "d": 150} {
		r.Cells = append(r.Cells, Cell{Workload: "real", Target: name, Values: map[string]float64{"ttft_p50": v}})
	}
	m := Metric{Name: "ttft_p50", Kind: "ttft", Percentile: 50}
	got := rankText(r.rank("real", m, map[string]bool{"b": true}))
	if got != "c > a = b > d" {
		t.Errorf("ranking %q, want c > a = b > d", got)
	}
	good := Metric{Name: "ttft_p50", Kind: kindGoodput}
	if got := rankText(r.rank("real", good, map[string]bool{})); got != "d > a > b > c" {
		t.Errorf("higher is better: %q, want d > a > b > c", got)
	}
}

func TestDecision(t *testing.T) {
	for _, tc := range []struct {
		e    Effect
		want int
	}{
		{eff(0.3, 0.2, 0.4), 1},
		{eff(-0.3, -0.4, -0.2), -1},
		{eff(0.3, -0.1, 0.6), 0},
		{eff(0.01, 0.005, 0.015), 0},
	} {
		if got := decision(tc.e); got != tc.want {
			t.Errorf("decision(%+v) = %d, want %d", tc.e, got, tc.want)
		}
	}
}
