package traces

import "math"

// Quantile returns the p-quantile (p in [0, 1]) of sorted, which must be in
// ascending order, with linear interpolation between closest ranks: exactly
// numpy.quantile(x, p) (method "linear", the default). The virtual index is
// h = (len(sorted)-1)·p; the result is sorted[⌊h⌋] + (h−⌊h⌋)·(sorted[⌊h⌋+1] −
// sorted[⌊h⌋]), computed from the upper neighbour when h−⌊h⌋ ≥ 0.5 as numpy
// does, so results match numpy bit for bit. p outside [0, 1] is clamped; an
// empty slice or a NaN p gives NaN.
func Quantile(sorted []float64, p float64) float64 {
	n := len(sorted)
	if n == 0 || math.IsNaN(p) {
		return math.NaN()
	}
	p = min(max(p, 0), 1)
	h := float64(n-1) * p
	if h >= float64(n-1) {
		return sorted[n-1]
	}
	lo := math.Floor(h)
	i := int(lo)
	t := h - lo
	a, b := sorted[i], sorted[i+1]
	if t == 0 {
		return a
	}
	if math.IsInf(a, 1) || math.IsInf(b, 1) {
		return math.Inf(1)
	}
	d := b - a
	if t >= 0.5 {
		return b - d*(1-t)
	}
	return a + d*t
}
