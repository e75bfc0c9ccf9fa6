package traces_test

import (
	"math"
	"testing"

	"github.com/tokentrace/tokentrace/traces"
)

func TestQuantile(t *testing.T) {
	x := []float64{1, 2, 3, 4, 10}
	cases := []struct {
		name string
		xs   []float64
		p    float64
		want float64
	}{
		// numpy.quantile([1,2,3,4,10], 0.5) == 3.0
		{"median", x, 0.5, 3},
		// numpy.quantile([1,2,3,4,10], 0.9) == 7.6000000000000005 (h = 3.6
		// uses numpy's upper form b - (b-a)(1-t))
		{"p90", x, 0.9, 7.6000000000000005},
		// numpy.quantile([1,2,3,4,10], 0.99) == 9.76
		{"p99", x, 0.99, 9.76},
		// numpy.quantile([1,2,3,4,10], 0.25) == 2.0
		{"p25", x, 0.25, 2},
		// numpy.quantile([1,2], 0.1) == 1.1
		{"low interpolation", []float64{1, 2}, 0.1, 1.1},
		// The ends are the min and the max.
		{"p0", x, 0, 1},
		{"p100", x, 1, 10},
		// Out-of-range p is clamped.
		{"clamped", x, 1.5, 10},
		// One element is every quantile.
		{"single", []float64{7}, 0.3, 7},
		// An interpolation touching +Inf (a failed request in a capacity
		// verdict) is +Inf; one that lands exactly on a finite rank is not.
		{"touches inf", []float64{1, 2, math.Inf(1)}, 0.75, math.Inf(1)},
		{"below inf", []float64{1, 2, math.Inf(1)}, 0.5, 2},
		{"all inf", []float64{math.Inf(1), math.Inf(1)}, 0.5, math.Inf(1)},
	}
	for _, tc := range cases {
		if got := traces.Quantile(tc.xs, tc.p); got != tc.want {
			t.Errorf("%s: Quantile(%v, %v) = %v, want %v", tc.name, tc.xs, tc.p, got, tc.want)
		}
	}
	if got := traces.Quantile(nil, 0.5); !math.IsNaN(got) {
		t.Errorf("Quantile(nil) = %v, want NaN", got)
	}
}
