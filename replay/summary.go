package replay

import (
	"maps"
	"math"
	"slices"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// summarizer accumulates a Summary one finished record at a time, so a
// run's summary does not need its records kept.
type summarizer struct {
	s                     Summary
	records               int64 // every record added, sent or not
	firstSched            int64 // scheduled_ns of the first request due
	late, ttft, tpot, e2e durations
}

func newSummarizer() *summarizer {
	return &summarizer{s: Summary{FailedBy: map[string]int{}, FailureReasons: map[string]int{}}}
}

func (m *summarizer) add(rec *traces.Record) {
	m.records++
	if rec.SentNs < 0 {
		return
	}
	s := &m.s
	s.Sent++
	if rec.HTTPStatus > 0 { // a response, which could name its replica
		if rec.Replica != "" {
			s.ReplicaNamed++
		} else {
			s.ReplicaMissing++
		}
	}
	if !s.firstSent || rec.ScheduledNs < m.firstSched {
		m.firstSched, s.firstSent = rec.ScheduledNs, true
		s.StartError = time.Duration(rec.SentNs - rec.ScheduledNs)
	}
	if l, ok := rec.Lateness(); ok {
		m.late.add(l)
	}
	if n, _ := rec.ReceivedOutputTokens(); n > 0 {
		s.OutputTokens += int64(n)
	}
	if !rec.OK() {
		s.Failed++
		s.FailedBy[rec.Status]++
		s.FailureReasons[failureReason(rec)]++
		return
	}
	s.OK++
	if rec.ServerQueueNs >= 0 || rec.ServerPrefillNs >= 0 || rec.ServerDecodeNs >= 0 {
		s.TimingMatched++
	} else {
		s.TimingUnmatched++
	}
	if v, ok := rec.TTFT(); ok {
		m.ttft.add(v)
	}
	if v, ok := rec.TPOT(); ok {
		m.tpot.add(v)
	}
	if v, ok := rec.E2E(); ok {
		m.e2e.add(v)
	}
}

// summary is the Summary of what was added, for a run that lasted d.
func (m *summarizer) summary(d time.Duration) Summary {
	s := m.s
	s.Duration = d
	s.FailedBy = maps.Clone(m.s.FailedBy)
	s.FailureReasons = maps.Clone(m.s.FailureReasons)
	s.LatenessP50, s.LatenessP99, s.LatenessMax = m.late.percentile(50), m.late.percentile(99), m.late.max
	s.TTFTP50, s.TTFTP99 = m.ttft.percentile(50), m.ttft.percentile(99)
	s.TPOTP50, s.TPOTP99 = m.tpot.percentile(50), m.tpot.percentile(99)
	s.E2EP50, s.E2EP99 = m.e2e.percentile(50), m.e2e.percentile(99)
	s.Approx = m.late.hist != nil || m.ttft.hist != nil || m.tpot.hist != nil || m.e2e.hist != nil
	return s
}

// exactDurations is how many values a durations keeps exactly (512 KiB)
// before it moves them into its histogram: small enough that a long run's
// memory is flat from its first minute on.
var exactDurations = 1 << 16

// histGamma is the histogram's bucket ratio: a bucket's representative
// value is within (γ−1)/(γ+1) ≈ 0.5 % of every value in it.
const histGamma = 1.01

// durations holds a sample of durations for percentiles: exact up to
// exactDurations values, then a log-bucket histogram (positive and
// negative values mirrored, so early sends keep their sign) whose
// percentiles are within 0.5 % of the exact ones' bucket.
type durations struct {
	exact    []time.Duration
	sorted   bool
	hist     map[int32]int64 // bucket → count; nil while exact
	n        int64
	max      time.Duration
	hasValue bool
}

var logGamma = math.Log(histGamma)

func (d *durations) add(v time.Duration) {
	if !d.hasValue || v > d.max {
		d.max = v
	}
	d.hasValue = true
	d.n++
	if d.hist == nil {
		d.exact = append(d.exact, v)
		d.sorted = false
		if len(d.exact) <= exactDurations {
			return
		}
		d.hist = map[int32]int64{}
		for _, x := range d.exact {
			d.hist[bucketOf(x)]++
		}
		d.exact = nil
		return
	}
	d.hist[bucketOf(v)]++
}

// bucketOf maps v to its bucket: 0 for |v| < 1 ns, ±(1+⌊log_γ|v|⌋) else.
func bucketOf(v time.Duration) int32 {
	a := math.Abs(float64(v))
	if a < 1 {
		return 0
	}
	b := int32(math.Floor(math.Log(a)/logGamma)) + 1
	if v < 0 {
		return -b
	}
	return b
}

// valueOf is the representative value of bucket b: the point whose
// relative distance to the bucket's two ends is equal.
func valueOf(b int32) float64 {
	if b == 0 {
		return 0
	}
	k := float64(max(b, -b) - 1)
	v := 2 * math.Pow(histGamma, k+1) / (histGamma + 1)
	if b < 0 {
		return -v
	}
	return v
}

// percentile is the p-th percentile (linear interpolation between exact
// values; the bucket's value past the exact limit); 0 when empty.
func (d *durations) percentile(p float64) time.Duration {
	if d.hist == nil {
		if !d.sorted {
			slices.Sort(d.exact)
			d.sorted = true
		}
		return percentile(d.exact, p)
	}
	keys := make([]int32, 0, len(d.hist))
	for k := range d.hist {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	rank := int64(math.Round(p / 100 * float64(d.n-1)))
	var seen int64
	for _, k := range keys {
		seen += d.hist[k]
		if seen > rank {
			return time.Duration(valueOf(k))
		}
	}
	return d.max
}
