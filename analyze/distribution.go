package analyze

import (
	"math"
	"runtime"
	"slices"
	"sync"

	"github.com/tokentrace/tokentrace/traces"
)

// Quantile returns the p-quantile (0 ≤ p ≤ 1) of the ascending-sorted xs with
// numpy's default "linear" interpolation (np.percentile(xs, 100·p)), NaN for
// an empty slice. It is traces.Quantile, the project's one implementation,
// re-exported where the statistics live.
func Quantile(sorted []float64, p float64) float64 { return traces.Quantile(sorted, p) }

// lerp is numpy's _lerp: a + (b−a)·t, computed from b when t ≥ 0.5 so that
// t = 1 returns b exactly (the histogram and bootstrap quantiles use it).
func lerp(a, b, t float64) float64 {
	d := b - a
	if t >= 0.5 {
		return b - d*(1-t)
	}
	return a + d*t
}

// Dist summarizes one latency metric in milliseconds. Percentiles use
// numpy's linear interpolation and Std is the population standard deviation
// (ddof = 0), as `vllm bench serve` computes them. An empty Dist has Count 0
// and zero values.
type Dist struct {
	Count int     `json:"count"`
	Mean  float64 `json:"mean"`
	Std   float64 `json:"std"`
	Min   float64 `json:"min"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P95   float64 `json:"p95"`
	P99   float64 `json:"p99"`
	P999  float64 `json:"p999"`
	Max   float64 `json:"max"`
	// Approx is set when the percentiles come from a log histogram
	// (relative error at most 2^-11, about 0.05 %, for values of 1 ns or
	// more; clamped to the exact min and max) because the sample was too
	// large to keep exactly: pooled ITL past Options.ITLExactLimit values,
	// every distribution past Options.ExactRows rows. Count, mean, std, min
	// and max stay exact.
	Approx bool `json:"approx,omitempty"`
}

// Percentile returns the p-th percentile (0–100) of an exact Dist's sample;
// it is only defined for the fixed set reported (50, 90, 95, 99, 99.9) and
// returns NaN otherwise.
func (d Dist) Percentile(p float64) float64 {
	switch p {
	case 50:
		return d.P50
	case 90:
		return d.P90
	case 95:
		return d.P95
	case 99:
		return d.P99
	case 99.9:
		return d.P999
	case 100:
		return d.Max
	case 0:
		return d.Min
	}
	return math.NaN()
}

// msPerNs converts nanoseconds to milliseconds.
const msPerNs = 1e-6

// sample is a metric's values in nanoseconds, sorted on demand.
type sample struct {
	v      []float64
	sorted bool
}

func (s *sample) add(ns float64) { s.v = append(s.v, ns); s.sorted = false }

func (s *sample) sort() []float64 {
	if !s.sorted {
		slices.Sort(s.v)
		s.sorted = true
	}
	return s.v
}

// sortAll sorts the samples on all CPUs.
func sortAll(ss ...*sample) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for _, s := range ss {
		if s.sorted || len(s.v) < 1<<14 {
			s.sort()
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			s.sort()
			<-sem
		}()
	}
	wg.Wait()
}

// dist summarizes the sample in milliseconds.
func (s *sample) dist() Dist { return distOf(s.sort()) }

// distOf summarizes ascending-sorted nanosecond values in milliseconds.
func distOf(v []float64) Dist {
	n := len(v)
	if n == 0 {
		return Dist{}
	}
	mean, std := meanStd(v)
	return Dist{
		Count: n,
		Mean:  mean * msPerNs,
		Std:   std * msPerNs,
		Min:   v[0] * msPerNs,
		P50:   Quantile(v, 0.50) * msPerNs,
		P90:   Quantile(v, 0.90) * msPerNs,
		P95:   Quantile(v, 0.95) * msPerNs,
		P99:   Quantile(v, 0.99) * msPerNs,
		P999:  Quantile(v, 0.999) * msPerNs,
		Max:   v[n-1] * msPerNs,
	}
}

// meanStd is the mean and population standard deviation, two-pass for
// accuracy.
func meanStd(v []float64) (mean, std float64) {
	if len(v) == 0 {
		return 0, 0
	}
	var s float64
	for _, x := range v {
		s += x
	}
	mean = s / float64(len(v))
	var ss, c float64
	for _, x := range v {
		d := x - mean
		ss += d * d
		c += d
	}
	// compensated: removes the rounding error left in mean.
	ss -= c * c / float64(len(v))
	if ss < 0 {
		ss = 0
	}
	return mean, math.Sqrt(ss / float64(len(v)))
}

// moments accumulates count, mean and variance in one pass (sums shifted
// by the first value, which keeps the variance accurate) plus min and max,
// for samples too large to keep.
type moments struct {
	n          int64
	k, s, ss   float64
	minV, maxV float64
}

func (m *moments) add(x float64) {
	if m.n == 0 {
		m.k, m.minV, m.maxV = x, x, x
	}
	m.n++
	d := x - m.k
	m.s += d
	m.ss += d * d
	m.minV = min(m.minV, x)
	m.maxV = max(m.maxV, x)
}

func (m *moments) mean() float64 {
	if m.n == 0 {
		return 0
	}
	return m.k + m.s/float64(m.n)
}

func (m *moments) std() float64 {
	if m.n == 0 {
		return 0
	}
	n := float64(m.n)
	return math.Sqrt(max(m.ss/n-(m.s/n)*(m.s/n), 0))
}

// logHist is a log-bucketed histogram (an HDR-style log-linear sketch):
// a value's bucket is its float64 exponent and top logHistBits mantissa
// bits, mirrored for negative values; values of magnitude below 1 (ns)
// share bucket 0, represented by 0. Every bucket of magnitude ≥ 1 spans a
// relative width of at most 2^-10 and is represented by its middle, so a
// value read back is within a relative error of logHistRelErr = 2^-11
// (about 0.05 %) of every value counted in its bucket, and a quantile
// within that error of the exact one (linear interpolation between two
// such values keeps the bound for same-sign values). Histograms merge by
// adding counts. The buckets span only the values seen, at most
// 2·64·2^10 of them for int64 nanoseconds (1 MiB).
type logHist struct {
	base   int     // bucket of counts[0]
	counts []int64 // buckets base … base+len−1
	n      int64
}

const (
	logHistBits   = 10
	logHistShift  = 52 - logHistBits
	logHistOffset = 1023 << logHistBits // bits>>shift of 1.0
)

// logHistRelErr bounds the relative error of a value read back from a
// logHist (magnitudes ≥ 1).
const logHistRelErr = 1.0 / (2 << logHistBits)

func (h *logHist) bucket(x float64) int {
	switch {
	case x >= 1:
		return int(math.Float64bits(x)>>logHistShift) - logHistOffset + 1
	case x <= -1:
		return -(int(math.Float64bits(-x)>>logHistShift) - logHistOffset + 1)
	}
	return 0
}

func (h *logHist) add(x float64) {
	b := h.bucket(x)
	switch {
	case len(h.counts) == 0:
		h.base, h.counts = b, make([]int64, 1, 256)
	case b < h.base:
		c := make([]int64, len(h.counts)+h.base-b, len(h.counts)+h.base-b+256)
		copy(c[h.base-b:], h.counts)
		h.base, h.counts = b, c
	case b-h.base >= len(h.counts):
		h.counts = append(h.counts, make([]int64, b-h.base+1-len(h.counts))...)
	}
	h.counts[b-h.base]++
	h.n++
}

// value is the representative value of bucket b (its middle).
func (h *logHist) value(b int) float64 {
	switch {
	case b == 0:
		return 0
	case b < 0:
		return -h.value(-b)
	}
	return math.Float64frombits(uint64(b-1+logHistOffset)<<logHistShift | 1<<(logHistShift-1))
}

// quantile approximates numpy's linear quantile from the buckets.
func (h *logHist) quantile(p float64) float64 {
	if h.n == 0 {
		return math.NaN()
	}
	rank := p * float64(h.n-1)
	lo := int64(math.Floor(rank))
	at := func(r int64) float64 {
		var c int64
		for i, k := range h.counts {
			c += k
			if c > r {
				return h.value(h.base + i)
			}
		}
		return h.value(h.base + len(h.counts) - 1)
	}
	a := at(lo)
	if lo+1 >= h.n {
		return a
	}
	return lerp(a, at(lo+1), rank-float64(lo))
}

// sketch is a metric's distribution past the exact budget: exact count,
// mean, std, min and max (moments) and logHist percentiles.
type sketch struct {
	mom  moments
	hist logHist
}

func (s *sketch) add(x float64) {
	s.mom.add(x)
	s.hist.add(x)
}

// quantile is the histogram's quantile clamped to the exact min and max.
func (s *sketch) quantile(p float64) float64 {
	return min(max(s.hist.quantile(p), s.mom.minV), s.mom.maxV)
}

// dist summarizes the sketch in milliseconds, flagged Approx.
func (s *sketch) dist() Dist {
	if s.mom.n == 0 {
		return Dist{}
	}
	return Dist{
		Count: int(s.mom.n), Mean: s.mom.mean() * msPerNs, Std: s.mom.std() * msPerNs,
		Min: s.mom.minV * msPerNs, Max: s.mom.maxV * msPerNs,
		P50: s.quantile(0.5) * msPerNs, P90: s.quantile(0.9) * msPerNs, P95: s.quantile(0.95) * msPerNs,
		P99: s.quantile(0.99) * msPerNs, P999: s.quantile(0.999) * msPerNs, Approx: true,
	}
}

// pooled is a pooled sample (ITL gaps): exact up to limit values, then a
// sketch (exact moments, logHist percentiles).
type pooled struct {
	exact  sample
	limit  int
	sk     *sketch
	approx bool
}

// add adds x and returns the change in exactly kept values (1, 0, or
// minus the values released on switching to the histogram, plus one).
func (p *pooled) add(x float64) int {
	if p.approx {
		p.sk.add(x)
		return 0
	}
	p.exact.v = append(p.exact.v, x)
	p.exact.sorted = false
	if p.limit > 0 && len(p.exact.v) > p.limit {
		return 1 - p.toHist()
	}
	return 1
}

// toHist moves the exact values into the sketch and returns how many
// were released.
func (p *pooled) toHist() int {
	if p.approx {
		return 0
	}
	n := len(p.exact.v)
	p.sk = &sketch{}
	for _, v := range p.exact.v {
		p.sk.add(v)
	}
	p.exact = sample{}
	p.approx = true
	return n
}

func (p *pooled) dist() Dist {
	if !p.approx {
		return p.exact.dist()
	}
	return p.sk.dist()
}
