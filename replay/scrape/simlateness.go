package scrape

import (
	"math"
	"slices"

	dto "github.com/prometheus/client_model/go"

	"github.com/tokentrace/tokentrace/sim/engine"
	"github.com/tokentrace/tokentrace/traces"
)

// A served tokentrace sim says how far its engine steps ran behind
// wall-clock time (engine.StepLatenessFamily, a histogram of each step's
// lateness, and engine.StepModelFamily, the steps' modelled seconds);
// the scraper reads them over the run, so a replay against a simulator
// in another process can say it fell behind as one against the built-in
// simulator does.

// simLate is one scrape's step lateness, summed over the replicas.
type simLate struct {
	ok         bool
	steps, sum float64
	model      float64
	bounds     []float64 // finite upper bounds, ascending
	cum        []float64 // cumulative counts at bounds
}

// readSimLate reads fams' step lateness families (ok false when the
// endpoint is not a real-time simulator).
func readSimLate(fams map[string]*dto.MetricFamily) simLate {
	var s simLate
	hf, mf := fams[engine.StepLatenessFamily], fams[engine.StepModelFamily]
	if hf == nil || mf == nil {
		return s
	}
	at := map[float64]float64{}
	for _, m := range hf.GetMetric() {
		h := m.GetHistogram()
		if h == nil {
			continue
		}
		s.ok = true
		s.steps += float64(h.GetSampleCount())
		s.sum += h.GetSampleSum()
		for _, b := range h.GetBucket() {
			if u := b.GetUpperBound(); !math.IsInf(u, 1) {
				at[u] += float64(b.GetCumulativeCount())
			}
		}
	}
	for _, m := range mf.GetMetric() {
		if x, ok := metricsScalar(m); ok && !math.IsNaN(x) {
			s.model += x
		}
	}
	for u := range at {
		s.bounds = append(s.bounds, u)
	}
	slices.Sort(s.bounds)
	for _, u := range s.bounds {
		s.cum = append(s.cum, at[u])
	}
	return s
}

// simLateness is the lateness between two scrapes of a simulator (first,
// the run's first; last, its last): nil when the endpoint never said, or
// its counters went back (a restart). The worst step is known to within
// its bucket: StepMaxMs is that bucket's upper bound (the last finite
// one, for a step past it).
func simLateness(first, last simLate) *traces.SimLateness {
	if !last.ok {
		return nil
	}
	if !first.ok {
		first = simLate{}
	}
	steps, late, model := last.steps-first.steps, last.sum-first.sum, last.model-first.model
	if steps <= 0 || late < 0 || model < 0 {
		return nil
	}
	// The steps per bucket over the run.
	cum := make([]float64, len(last.cum))
	for i, u := range last.bounds {
		cum[i] = last.cum[i]
		if j, ok := slices.BinarySearch(first.bounds, u); ok {
			cum[i] -= first.cum[j]
		}
	}
	l := &traces.SimLateness{Steps: int64(steps), ModelS: model, LateS: late}
	q := func(rank float64) float64 {
		prev, lo := 0.0, 0.0
		for i, c := range cum {
			if c >= rank && c > prev {
				return lo + (last.bounds[i]-lo)*(rank-prev)/(c-prev)
			}
			prev, lo = c, last.bounds[i]
		}
		return lo
	}
	l.StepP99Ms = 1e3 * q(0.99*steps)
	l.StepMaxMs = 1e3 * q(steps)
	return l
}
