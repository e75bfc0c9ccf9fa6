package twin

import (
	"math"

	"github.com/tokentrace/tokentrace/traces"
)

// sketch is a log-bucketed histogram of durations (ns) from 1 ns to
// about 3 hours: its quantiles are within 0.2 % of the exact ones, in
// bounded memory.
type sketch struct {
	counts []int64
	n      int64
}

// sketchGamma is the ratio of consecutive bucket bounds.
const sketchGamma = 1.004

// sketchBuckets covers 1 ns to sketchGamma^sketchBuckets ns (~3 h).
const sketchBuckets = 8192

var logGamma = math.Log(sketchGamma)

func (s *sketch) add(v float64) {
	if s.counts == nil {
		s.counts = make([]int64, sketchBuckets)
	}
	k := 0
	if v > 1 && !math.IsNaN(v) {
		k = min(int(math.Log(v)/logGamma), sketchBuckets-1)
	}
	s.counts[k]++
	s.n++
}

// quantile is the p-quantile (p in [0, 1]), NaN when empty: the midpoint
// of its bucket.
func (s *sketch) quantile(p float64) float64 {
	if s.n == 0 {
		return math.NaN()
	}
	rank := int64(math.Ceil(p * float64(s.n)))
	rank = min(max(rank, 1), s.n)
	var c int64
	for k, n := range s.counts {
		if c += n; c >= rank {
			return math.Exp((float64(k) + 0.5) * logGamma)
		}
	}
	return math.NaN()
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
