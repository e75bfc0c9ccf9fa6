package analyze

import (
	"math"
	"slices"
	"testing"
)

// Reference values computed by hand with numpy's definitions:
// np.percentile(x, p) (method="linear": h = (n−1)·p/100, interpolate between
// x[floor h] and the next) and np.std(x) (population, ddof = 0).
func TestQuantileAndDistMatchNumpy(t *testing.T) {
	tests := []struct {
		name                         string
		x                            []float64
		p50, p90, p95, p99, p999, sd float64
		mean                         float64
	}{
		// Four evenly spaced values: every percentile interpolates.
		{"1..4", []float64{1, 2, 3, 4}, 2.5, 3.7, 3.85, 3.97, 3.997, 1.118033988749895, 2.5},
		// The textbook example: p90 = 40 + 0.6·10.
		{"wikipedia", []float64{15, 20, 35, 40, 50}, 35, 46, 48, 49.6, 49.96, 12.884098726725126, 32},
		// One value: every statistic is that value, std 0.
		{"single", []float64{7}, 7, 7, 7, 7, 7, 0, 7},
		// Unsorted with duplicates: Dist sorts first.
		{"pi digits", []float64{3, 1, 4, 1, 5, 9, 2, 6, 5, 3}, 3.5, 6.3, 7.65, 8.73, 8.973, 2.3430749027719964, 3.9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s sample
			for _, v := range tt.x {
				s.add(v * 1e6) // ms → ns
			}
			d := s.dist()
			check := func(what string, got, want float64) {
				t.Helper()
				if math.Abs(got-want) > 1e-9*max(1, math.Abs(want)) {
					t.Errorf("%s(%v) = %.12g, want %.12g", what, tt.x, got, want)
				}
			}
			check("p50", d.P50, tt.p50)
			check("p90", d.P90, tt.p90)
			check("p95", d.P95, tt.p95)
			check("p99", d.P99, tt.p99)
			check("p99.9", d.P999, tt.p999)
			check("std", d.Std, tt.sd)
			check("mean", d.Mean, tt.mean)
			check("max", d.Max, slices.Max(tt.x))
			check("min", d.Min, slices.Min(tt.x))
			if d.Count != len(tt.x) {
				t.Errorf("count = %d, want %d", d.Count, len(tt.x))
			}
		})
	}
}

func TestQuantileEdges(t *testing.T) {
	if !math.IsNaN(Quantile(nil, 0.5)) {
		t.Errorf("Quantile(nil) is not NaN")
	}
	x := []float64{1, 2}
	if got := Quantile(x, 0); got != 1 {
		t.Errorf("Quantile(x, 0) = %v, want 1", got)
	}
	if got := Quantile(x, 1); got != 2 {
		t.Errorf("Quantile(x, 1) = %v, want 2", got)
	}
	if d := (&sample{}).dist(); d != (Dist{}) {
		t.Errorf("empty dist = %+v, want zero", d)
	}
}

// The log histogram used for huge pooled ITL samples stays within its
// 0.1 % resolution of the exact percentiles.
func TestPooledSwitchesToHistogram(t *testing.T) {
	var exact sample
	p := pooled{limit: 1000}
	for i := range 5000 {
		v := float64(1e6 + (i*7919)%5000*1e3)
		exact.add(v)
		p.add(v)
	}
	if !p.approx {
		t.Fatalf("pooled did not switch to the histogram past its limit")
	}
	e, a := exact.dist(), p.dist()
	for _, c := range [][2]float64{{e.P50, a.P50}, {e.P90, a.P90}, {e.P99, a.P99}, {e.P999, a.P999}} {
		if math.Abs(c[0]-c[1])/c[0] > 0.002 {
			t.Errorf("histogram percentile %v, exact %v: off by more than 0.2%%", c[1], c[0])
		}
	}
	if math.Abs(e.Mean-a.Mean) > 1e-6 || math.Abs(e.Std-a.Std) > 1e-6 || e.Max != a.Max {
		t.Errorf("moments differ: exact %+v, approx %+v", e, a)
	}
}

func FuzzParsePercentile(f *testing.F) {
	for _, s := range []string{"p99", "99.9", "p0", "p100", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePercentile(s)
		if err == nil && (p <= 0 || p >= 100) {
			t.Fatalf("ParsePercentile(%q) = %v outside (0, 100)", s, p)
		}
	})
}
