package synth

import (
	"context"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// TestFitArrivalNear2To63IsAnError: a record arriving near 2^63 ns made
// the arrival fit panic (makeslice: len out of range, its bin count
// overflowed); it is now the error every reader gives such a row.
func TestFitArrivalNear2To63IsAnError(t *testing.T) {
	recs := make([]traces.Record, 20)
	for i := range recs {
		recs[i] = traces.NewRecord()
		recs[i].Seq, recs[i].ArrivalNs, recs[i].InputTokens, recs[i].OutputTokens = int64(i), int64(i)*1e9, 100, 10
	}
	recs[19].ArrivalNs = 1<<63 - 1000
	for name, fit := range map[string]func() (*Model, error){
		"FitSeq": func() (*Model, error) { return FitSeq(context.Background(), traces.Values(recs), DefaultFitOptions()) },
		"Fit":    func() (*Model, error) { return Fit(context.Background(), recs, DefaultFitOptions()) },
	} {
		_, err := fit()
		if err == nil || !strings.Contains(err.Error(), "record seq 19: out of range: arrival_ns") {
			t.Errorf("%s: %v, want the out-of-range arrival named", name, err)
		}
	}
}

// centuryTrace is sparse traffic over 100 years: bursts of requests a
// few times a decade.
func centuryTrace() []traces.Record {
	rng := rand.New(rand.NewPCG(3, 4))
	year := int64(365 * 24 * time.Hour)
	var recs []traces.Record
	for burst := range 40 {
		at := int64(burst) * (100 * year / 40)
		for i := range 10 {
			r := traces.NewRecord()
			r.Seq, r.ArrivalNs = int64(len(recs)), at+int64(i)*int64(time.Second)+rng.Int64N(int64(time.Second))
			r.InputTokens, r.OutputTokens = int32(100+rng.IntN(900)), int32(10+rng.IntN(90))
			recs = append(recs, r)
		}
	}
	return recs
}

// TestCenturySpanStaysBounded: a span that does not overflow but would
// take a bin per 4 s over 100 years (790 million bins, 6 GB) is fitted
// with a wider bin, which the model says; generating from it and checking
// it against the trace stay within a few hundred MB.
func TestCenturySpanStaysBounded(t *testing.T) {
	recs := centuryTrace()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	m := fitModel(t, recs)
	if n := len(m.Classes[0].Arrival.CountsPerBin); n > maxArrivalBins || m.BinNs <= int64(DefaultBin) {
		t.Errorf("%d bins of %v, want at most %d, wider than %v", n, time.Duration(m.BinNs), maxArrivalBins, DefaultBin)
	}
	if !slices.ContainsFunc(m.FittedOn.Approximations, func(s string) bool { return strings.Contains(s, "arrival-rate bin is") }) {
		t.Errorf("approximations %q do not say the bin was widened", m.FittedOn.Approximations)
	}
	syn := gen(t, m, genSeed(1))
	for _, r := range syn {
		if err := r.Validate(); err != nil {
			t.Fatalf("generated row seq %d: %v", r.Seq, err)
		}
	}
	rep := Check(recs, syn, DefaultThresholds())
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if mb := (after.TotalAlloc - before.TotalAlloc) >> 20; mb > 512 {
		t.Errorf("fit, gen and check of %d records over 100 years allocated %d MB", len(recs), mb)
	}
	if math.IsNaN(rep.RateError) || math.IsNaN(rep.KS.RatePerMinute) {
		t.Errorf("rate figures %v, %v", rep.RateError, rep.KS.RatePerMinute)
	}
}

// TestSparseRateMatchesDense: the per-minute rate figures and the
// dispersion counted from non-empty windows equal those counted window by
// window.
func TestSparseRateMatchesDense(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	arrivals := func(n int) []int64 {
		a := make([]int64, n)
		for i := range a {
			a[i] = rng.Int64N(int64(3 * time.Hour))
		}
		slices.Sort(a)
		return a
	}
	real, syn := arrivals(3000), arrivals(2500)
	end := min(real[len(real)-1], syn[len(syn)-1]) + 1
	var dense, sparse Report
	dense.rateDense(real, syn, end)
	sparse.rateSparse(real, syn, end)
	for _, c := range []struct {
		what string
		a, b float64
	}{
		{"rate_error", dense.RateError, sparse.RateError},
		{"ks.rate_per_minute", dense.KS.RatePerMinute, sparse.KS.RatePerMinute},
		{"wasserstein.rate_per_minute", dense.Wasserstein.RatePerMinute, sparse.Wasserstein.RatePerMinute},
	} {
		if math.Abs(c.a-c.b) > 1e-9*math.Max(1, math.Abs(c.a)) {
			t.Errorf("%s: dense %v, sparse %v", c.what, c.a, c.b)
		}
	}
	for _, w := range DispersionWindows {
		c := countsPer(real, int64(w), real[len(real)-1]+1)
		mean, variance := 0.0, 0.0
		for _, x := range c {
			mean += x
		}
		mean /= float64(len(c))
		for _, x := range c {
			variance += (x - mean) * (x - mean)
		}
		variance /= float64(len(c) - 1)
		if want, got := variance/mean, dispersion(real, int64(w)); math.Abs(want-got) > 1e-9*want {
			t.Errorf("dispersion at %v: %v, counted window by window %v", w, got, want)
		}
	}
}
