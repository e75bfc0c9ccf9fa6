package synth

import (
	"math"
	"slices"
	"time"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/stat"
)

// rateDense sets the per-minute rate figures over the full minutes up to
// end, counting every minute.
func (rep *Report) rateDense(real, synth []int64, end int64) {
	minute := int64(time.Minute)
	rc, sc := countsPer(real, minute, end), countsPer(synth, minute, end)
	if len(rc) == 0 && end > 0 { // under a minute: compare the rate over the common span
		rc = []float64{float64(countBefore(real, end))}
		sc = []float64{float64(countBefore(synth, end))}
	}
	var num, den float64
	for i := range rc {
		num += math.Abs(sc[i] - rc[i])
		den += rc[i]
	}
	rep.RateError = relErr(num, 0)
	if den > 0 {
		rep.RateError = num / den
	}
	rcs, scs := slices.Clone(rc), slices.Clone(sc)
	slices.Sort(rcs)
	slices.Sort(scs)
	rep.KS.RatePerMinute = ks(rcs, scs)
	rep.Wasserstein.RatePerMinute = wasserstein1(rcs, scs)
}

// rateSparse is rateDense over a span of more than maxDenseWindows
// minutes (years of sparse traffic): the same figures from the non-empty
// minutes and a count of the empty ones, in memory that follows the
// arrivals, not the span.
func (rep *Report) rateSparse(real, synth []int64, end int64) {
	minute := int64(time.Minute)
	last := end / minute // minutes [0, last) are full
	var num, den float64
	i, j := 0, 0
	for i < len(real) || j < len(synth) {
		// The next non-empty minute of either trace, and each one's count.
		m := int64(math.MaxInt64)
		if i < len(real) {
			m = real[i] / minute
		}
		if j < len(synth) {
			m = min(m, synth[j]/minute)
		}
		if m >= last {
			break
		}
		var r, s float64
		for ; i < len(real) && real[i]/minute == m; i++ {
			r++
		}
		for ; j < len(synth) && synth[j]/minute == m; j++ {
			s++
		}
		num += math.Abs(s - r)
		den += r
	}
	rep.RateError = relErr(num, 0)
	if den > 0 {
		rep.RateError = num / den
	}
	weighted := func(sorted []int64) (v, w []float64) {
		n, c := sparseCounts(sorted, minute, end)
		slices.Sort(c)
		v = append([]float64{0}, c...)
		w = make([]float64, len(v))
		w[0] = float64(n - int64(len(c)))
		for k := 1; k < len(w); k++ {
			w[k] = 1
		}
		return v, w
	}
	rv, rw := weighted(real)
	sv, sw := weighted(synth)
	rep.KS.RatePerMinute = stat.KolmogorovSmirnov(rv, rw, sv, sw)
	rep.Wasserstein.RatePerMinute = wasserstein1w(rv, rw, sv, sw)
}

// wasserstein1w is wasserstein1 of weighted sorted samples; nil weights
// count each value once.
func wasserstein1w(a, aw, b, bw []float64) float64 {
	ta, tb := totalWeight(a, aw), totalWeight(b, bw)
	if ta == 0 || tb == 0 {
		return 0
	}
	i, j := 0, 0
	var fa, fb, w float64
	prev := math.Min(a[0], b[0])
	for i < len(a) || j < len(b) {
		var x float64
		if j >= len(b) || (i < len(a) && a[i] <= b[j]) {
			x = a[i]
		} else {
			x = b[j]
		}
		w += math.Abs(fa-fb) * (x - prev)
		i0, j0 := i, j
		for i < len(a) && a[i] == x {
			i++
		}
		for j < len(b) && b[j] == x {
			j++
		}
		fa, fb = cdfPast(fa, aw, i0, i, ta), cdfPast(fb, bw, j0, j, tb)
		prev = x
	}
	return w
}

// totalWeight is the weight of a sample: its length without weights.
func totalWeight(v, w []float64) float64 {
	if w == nil {
		return float64(len(v))
	}
	return floats.Sum(w)
}

// cdfPast is the CDF f of a sample of total weight t moved past its values
// from to to−1: the count over t without weights (exact however many
// values), the weights over t added one by one with them.
func cdfPast(f float64, w []float64, from, to int, t float64) float64 {
	if w == nil {
		return float64(to) / t
	}
	for k := from; k < to; k++ {
		f += w[k] / t
	}
	return f
}
