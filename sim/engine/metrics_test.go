package engine

import (
	"math"
	"sort"
	"testing"
)

// A histogram counts each value in the bucket sort.SearchFloat64s picks
// (the first bound at or above it, the +Inf bucket past the last), at the
// bounds themselves, between and beyond them, and for NaN and infinities.
func TestHistogramBuckets(t *testing.T) {
	for _, bounds := range [][]float64{ttftBuckets, itlBuckets, iterationBuckets, {1}, {}} {
		var vs []float64
		for _, b := range bounds {
			vs = append(vs, b, math.Nextafter(b, math.Inf(-1)), math.Nextafter(b, math.Inf(1)))
		}
		vs = append(vs, -1, 0, 1e12, math.Inf(1), math.Inf(-1), math.NaN())
		for _, v := range vs {
			h := newHistogram("h", "", bounds)
			h.observe(v)
			want := sort.SearchFloat64s(bounds, v)
			if h.counts[want] != 1 {
				t.Errorf("bounds %v: %v counted in %v, want bucket %d", bounds, v, h.counts, want)
			}
		}
	}
}
