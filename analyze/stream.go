package analyze

import (
	"fmt"
	"math"
	"slices"

	"github.com/tokentrace/tokentrace/internal/minheap"
	"github.com/tokentrace/tokentrace/traces"
)

// Past Options.ExactRows rows the Analyzer streams: every row feeds the
// exact counters and the metric sketches of an acc (one for the run, one
// per --by group), and only a deterministic uniform sample of rows is kept
// for the row-based analyses. A row is in the sample at level k when the
// low k bits of a hash of its seq and send time are zero (1 in 2^k); when
// the sample would pass the budget, k grows by one and the rows that no
// longer qualify are dropped in place, so the sample never holds more than
// ExactRows rows and is the same whatever order the rows came in.

// Sampling says that the report's row-based sections come from a sample
// (null when every row was kept).
type Sampling struct {
	// ExactRows is the budget (Options.ExactRows) the input passed.
	ExactRows int `json:"exact_rows"`
	// Rows is the rows with an outcome; Kept those in the sample, 1 in
	// OneIn of them.
	Rows  int64 `json:"rows"`
	Kept  int   `json:"kept"`
	OneIn int64 `json:"one_in"`
	// RelativeError bounds the percentiles' error (Dist.Approx).
	RelativeError float64 `json:"relative_error"`
	// Sampled lists the sections computed on the sample (counts in them
	// scaled by OneIn).
	Sampled []string `json:"sampled"`
	// terms say the option Note names (Options.Terms).
	terms traces.Terms
}

// sampledSections are the sections Sampling.Sampled names; peak
// concurrency joins them when the rows did not come in send order.
var sampledSections = []string{"attribution", "windows", "html_charts", "compare_bootstrap", "vllm_latencies"}

// peakSweep is the exact peak concurrency of rows that come in send order
// (results files are written so): a min-heap of the in-flight requests'
// end times, as large as the concurrency. A row sent before the previous
// one breaks it (the peak is then estimated on the sample).
type peakSweep struct {
	h      []int64
	last   int64
	peak   int
	broken bool
}

func (p *peakSweep) add(sent, end int64) {
	if p.broken {
		return
	}
	if sent < p.last {
		p.broken, p.h = true, nil
		return
	}
	p.last = sent
	for len(p.h) > 0 && p.h[0] <= sent { // requests ended by now
		minheap.Pop(&p.h, endsFirst)
	}
	minheap.Push(&p.h, end, endsFirst)
	p.peak = max(p.peak, len(p.h))
}

func endsFirst(a, b *int64) bool { return *a < *b }

// note is the one-line statement of the sampling for text and HTML.
func (s *Sampling) Note() string {
	what := "tail attribution, timeline and charts"
	if slices.Contains(s.Sampled, "peak_concurrency") {
		what = "tail attribution, timeline, peak concurrency and charts"
	}
	return fmt.Sprintf("%d rows passed %s %d: percentiles (~) from log histograms within %.2g%% (count, mean, std, min, max, tokens, throughput and goodput exact); %s from a 1-in-%d sample of %d rows, counts scaled by %d",
		s.Rows, traces.OptionRef("Options.ExactRows").Say(s.terms), s.ExactRows, 100*s.RelativeError, what, s.OneIn, s.Kept, s.OneIn)
}

// The latency figures of a row (row.figures): an acc's sketches, and
// summarize's samples.
const (
	mTTFT = iota
	mTTFTSched
	mTPOT
	mE2E
	mE2ESched
	mLate
	nMetrics
)

// figures calls add with each latency figure row r has, in nanoseconds:
// its lateness, and when it succeeded its TTFT, E2E (both also from the
// scheduled time) and TPOT.
func (r *row) figures(add func(m int, ns float64)) {
	if l, ok := r.lateness(); ok {
		add(mLate, l)
	}
	if !r.ok {
		return
	}
	if t, ok := r.ttft(); ok {
		add(mTTFT, t)
		if r.sched >= 0 {
			add(mTTFTSched, float64(r.first-r.sched))
		}
	}
	if e, ok := r.e2e(); ok {
		add(mE2E, e)
		if r.sched >= 0 {
			add(mE2ESched, float64(r.last-r.sched))
		}
	}
	if p, ok := r.tpot(); ok {
		add(mTPOT, p)
	}
}

// tally is a Summary's counts, accumulated row by row: the exact
// summarize and the streaming acc keep one each.
type tally struct {
	requests, completed, failed int
	byStatus                    []int // by status id
	start, end                  int64
	in, out                     int64
	good                        int
	goodOut                     int64
}

func newTally() tally { return tally{start: math.MaxInt64, end: math.MinInt64} }

// add counts row r.
func (s *tally) add(r *row, slo *traces.SLO) {
	s.requests++
	for int(r.status) >= len(s.byStatus) {
		s.byStatus = append(s.byStatus, 0)
	}
	s.byStatus[r.status]++
	if st := r.start(); st >= 0 {
		s.start = min(s.start, st)
	}
	s.end = max(s.end, r.end(), r.sent)
	if !r.ok {
		s.failed++
		return
	}
	s.completed++
	s.in += int64(r.in)
	s.out += int64(r.out)
	if !slo.IsZero() && slo.Met(r.latencies()) {
		s.good++
		s.goodOut += int64(r.out)
	}
}

// summary is the Summary of the counts: requests, statuses, duration,
// tokens, throughput and goodput.
func (s *tally) summary(statuses []string, slo traces.SLO) Summary {
	var x Summary
	x.Requests, x.Completed, x.Failed = s.requests, s.completed, s.failed
	x.ByStatus = map[string]int{}
	for id, c := range s.byStatus {
		if c > 0 {
			x.ByStatus[statuses[id]] += c
		}
	}
	if s.end > s.start {
		x.DurationS = float64(s.end-s.start) / 1e9
	}
	x.InputTokens, x.OutputTokens = s.in, s.out
	x.setRates(s.good, slo)
	return x
}

// acc is a Summary accumulated row by row in bounded memory: the counts,
// and a sketch of each latency figure.
type acc struct {
	tally
	m [nMetrics]sketch
}

func newAcc() *acc { return &acc{tally: newTally()} }

// add adds row r.
func (s *acc) add(r *row, slo *traces.SLO) {
	s.tally.add(r, slo)
	r.figures(s.addFigure)
}

func (s *acc) addFigure(m int, ns float64) { s.m[m].add(ns) }

// summary is the Summary of the rows added (ITL and the peaks are the
// caller's).
func (s *acc) summary(statuses []string, slo traces.SLO) Summary {
	x := s.tally.summary(statuses, slo)
	x.TTFT, x.TTFTScheduled = s.m[mTTFT].dist(), s.m[mTTFTSched].dist()
	x.TPOT, x.E2E, x.E2EScheduled = s.m[mTPOT].dist(), s.m[mE2E].dist(), s.m[mE2ESched].dist()
	x.Lateness = s.m[mLate].dist()
	return x
}

// sampleHash is splitmix64 of the row's seq and send time: the sample is
// chosen by the row's content, not its position.
func sampleHash(r *row) uint64 {
	z := uint64(r.seq)*0x9e3779b97f4a7c15 ^ uint64(r.sent)
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// inSample says whether r is kept at level k.
func inSample(r *row, k uint) bool { return sampleHash(r)&(1<<k-1) == 0 }

// startStreaming switches the Analyzer to streaming: the rows kept so far
// feed the accumulators, then the sample is thinned to level 1.
func (a *Analyzer) startStreaming() {
	a.all = newAcc()
	a.sess.approx()
	for i := range a.rows.n {
		a.accumulate(a.rows.at(i))
	}
	a.thin()
}

// accumulate feeds r to the run's and its group's accumulators.
func (a *Analyzer) accumulate(r *row) {
	a.all.add(r, &a.o.SLO)
	if a.o.By == "" {
		return
	}
	for int(r.group) >= len(a.gacc) {
		a.gacc = append(a.gacc, newAcc())
	}
	a.gacc[r.group].add(r, &a.o.SLO)
}

// thin raises the sample level by one and drops, in place, the rows (and
// request ids) that leave the sample.
func (a *Analyzer) thin() {
	a.level++
	s := &a.rows
	j := 0
	for i := range s.n {
		r := s.at(i)
		if !inSample(r, a.level) {
			continue
		}
		if i != j {
			*s.at(j) = *r
			if a.o.KeepRequests {
				a.reqIDs[j] = a.reqIDs[i]
			}
		}
		j++
	}
	s.truncate(j)
	if a.o.KeepRequests {
		clear(a.reqIDs[j:])
		a.reqIDs = a.reqIDs[:j]
	}
}

// addStreaming adds a row past the budget.
func (a *Analyzer) addStreaming(w *row, id string) {
	a.accumulate(w)
	if !inSample(w, a.level) {
		return
	}
	for a.rows.n >= a.o.ExactRows && a.level < 63 {
		a.thin()
		if !inSample(w, a.level) {
			return
		}
	}
	if a.o.KeepRequests {
		a.reqIDs = append(a.reqIDs, id)
	}
	a.rows.add(*w)
}

// truncate keeps the first n rows and frees the chunks past them.
func (s *rowStore) truncate(n int) {
	keep := (n + 1<<rowChunkBits - 1) >> rowChunkBits
	clear(s.chunks[keep:])
	s.chunks = s.chunks[:keep]
	if keep > 0 {
		c := &s.chunks[keep-1]
		*c = (*c)[:n-(keep-1)<<rowChunkBits]
	}
	s.n = n
}
