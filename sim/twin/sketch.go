package twin

import (
	"math"
	"slices"

	"github.com/tokentrace/tokentrace/traces"
)

// sketch is a log-bucketed histogram of positive durations (ns): its
// quantiles are within 0.2 % of the exact ones, in bounded memory.
type sketch struct {
	counts map[int32]int64
	n      int64
}

// sketchGamma is the ratio of consecutive bucket bounds.
const sketchGamma = 1.004

var logGamma = math.Log(sketchGamma)

func (s *sketch) add(v float64) {
	if v <= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		v = 1
	}
	if s.counts == nil {
		s.counts = map[int32]int64{}
	}
	s.counts[int32(math.Floor(math.Log(v)/logGamma))]++
	s.n++
}

// quantile is the p-quantile (p in [0, 1]), NaN when empty: the midpoint
// of its bucket.
func (s *sketch) quantile(p float64) float64 {
	if s.n == 0 {
		return math.NaN()
	}
	keys := make([]int32, 0, len(s.counts))
	for k := range s.counts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	rank := int64(math.Ceil(p * float64(s.n)))
	rank = min(max(rank, 1), s.n)
	var c int64
	for _, k := range keys {
		c += s.counts[k]
		if c >= rank {
			return math.Exp((float64(k) + 0.5) * logGamma)
		}
	}
	return math.Exp((float64(keys[len(keys)-1]) + 0.5) * logGamma)
}

// The metrics a check compares, in order.
var metricNames = [4]string{"ttft", "tpot", "itl", "e2e"}

// latencies are the sketches of a run's four metrics.
type latencies [4]sketch

// add takes a successful row's metrics (from its send time, so a
// simulated row and a measured one read alike).
func (l *latencies) add(r *traces.Record) {
	if !r.OK() || r.FirstTokenNs < 0 || r.SentNs < 0 {
		return
	}
	if v, ok := r.TTFT(); ok {
		l[0].add(float64(v))
	}
	if v, ok := r.TPOT(); ok {
		l[1].add(float64(v))
	}
	for i := 1; i < len(r.ChunkNs); i++ {
		l[2].add(float64(r.ChunkNs[i] - r.ChunkNs[i-1]))
	}
	if v, ok := r.E2E(); ok {
		l[3].add(float64(v))
	}
}

// quantiles are the checked percentiles.
var quantiles = [3]float64{0.5, 0.9, 0.99}
