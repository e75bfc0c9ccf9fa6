package replay

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
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

// Summary is the end-of-run summary. Latency percentiles are over
// successful requests; lateness is over every sent request.
type Summary struct {
	Sent, OK, Failed, NotSent int
	// FailedBy counts failures per status.
	FailedBy map[string]int
	// FailureReasons counts failures per reason ("http_error: HTTP 404 ...",
	// the error text cut to 100 bytes); TopFailureReasons orders them.
	FailureReasons map[string]int
	Duration       time.Duration
	// Lateness (sent − scheduled) percentiles and maximum.
	LatenessP50, LatenessP99, LatenessMax time.Duration
	// StartError is the lateness of the first request due (the first
	// dispatch minus the instant it was due: with Options.StartAt, StartAt
	// plus its offset); valid when a request was sent.
	StartError       time.Duration
	firstSent        bool
	TTFTP50, TTFTP99 time.Duration
	TPOTP50, TPOTP99 time.Duration
	E2EP50, E2EP99   time.Duration
	// OutputTokens is the sum of received output tokens.
	OutputTokens int64
	// TimingMatched is how many successful requests carried server timings;
	// TimingUnmatched how many did not.
	TimingMatched, TimingUnmatched int
	// Sessions counts the closed-session follow-ups (zero when open loop).
	Sessions SessionStats
	// Realtime is "" when the dispatcher ran in the real-time class, else
	// why it did not.
	Realtime string
	// CPUQuota is the replayer's cgroup CPU quota ("none (cgroup v2)",
	// "1.00 CPU (cgroup v1)", "" when unknown); ThrottledTime and
	// ThrottledPeriods say how long and in how many periods the cgroup
	// was throttled during the run.
	CPUQuota         string
	ThrottledTime    time.Duration
	ThrottledPeriods int64
	// StealTime is how long the hypervisor took the CPUs the replayer may
	// run on during the run (their steal, in 10 ms steps; 0 on bare metal
	// and where it cannot be read).
	StealTime time.Duration
	// ReplicaHeader is Options.ReplicaHeader; ReplicaNamed and
	// ReplicaMissing count the responses that carried it and those that
	// did not (every response when no header was asked for).
	ReplicaHeader                string
	ReplicaNamed, ReplicaMissing int
	// Approx is set when the percentiles come from a histogram with a
	// relative error of at most 0.5 %: past 64 Ki requests, so a long run's
	// memory stays flat.
	Approx bool
	// SimLateness is how far a simulator target's engine steps ran behind
	// wall-clock time (Target.Finish; nil for another target).
	SimLateness *traces.SimLateness
}

// Summarize computes a Summary over replayed records.
func Summarize(recs []traces.Record, d time.Duration) Summary {
	sum := newSummarizer()
	for i := range recs {
		sum.add(&recs[i])
	}
	return sum.summary(d)
}

// percentile is the p-th percentile of sorted x with linear interpolation
// (0 for an empty slice).
func percentile(x []time.Duration, p float64) time.Duration {
	if len(x) == 0 {
		return 0
	}
	pos := p / 100 * float64(len(x)-1)
	lo := int(math.Floor(pos))
	hi := int(math.Ceil(pos))
	if lo == hi {
		return x[lo]
	}
	f := pos - float64(lo)
	return time.Duration(float64(x[lo])*(1-f) + float64(x[hi])*f)
}

// FormatDuration says a duration as the summary and the progress line do:
// seconds or milliseconds to two decimals, else whole microseconds.
func FormatDuration(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.2fs", d.Seconds())
	case d >= time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/1e6)
	default:
		return fmt.Sprintf("%.0fµs", float64(d)/1e3)
	}
}

// WriteText prints the summary block.
func (s *Summary) WriteText(w io.Writer) {
	fmt.Fprintf(w, "requests   %d sent, %d ok, %d failed", s.Sent, s.OK, s.Failed)
	if s.NotSent > 0 {
		fmt.Fprintf(w, ", %d not sent", s.NotSent)
	}
	fmt.Fprintln(w)
	if s.Failed > 0 {
		fmt.Fprint(w, "failures  ")
		for _, st := range traces.Statuses {
			if n := s.FailedBy[st]; n > 0 {
				fmt.Fprintf(w, " %s=%d", st, n)
			}
		}
		fmt.Fprintln(w)
		for _, r := range s.TopFailureReasons(3) {
			fmt.Fprintf(w, "  %6d × %s\n", s.FailureReasons[r], r)
		}
	}
	if ss := s.Sessions; ss.FollowUps > 0 || ss.SessionsOpenLoop > 0 || ss.SessionsCut > 0 {
		fmt.Fprintf(w, "sessions   %d follow-ups sent after their dependencies (think time recorded %d, estimated %d, capped %d)", ss.FollowUps, ss.ThinkRecorded, ss.ThinkEstimated, ss.ThinkCapped)
		clause(w, ss.ThinkFromResults, "; %d think times from the results file's last_token_ns (no finish_ns; its run clock is in its metadata)")
		if ss.TopLevelChained+ss.TopLevelOverlapped > 0 {
			fmt.Fprintf(w, "; %d top-level calls chained to the previous one", ss.TopLevelChained)
			clause(w, ss.TopLevelOverlapped, " (%d sent at their recorded times: they overlapped it in production)")
		}
		clause(w, ss.SessionsCut, "; %d sessions cut short when sending stopped")
		clause(w, ss.SessionsOpenLoop, "; %d sessions replayed open loop (%s)", strings.Join(ss.Problems, "; "))
		fmt.Fprintln(w)
		if ss.ContextGrown+ss.ContextFresh+ss.ContextLost > 0 {
			fmt.Fprintf(w, "context    %d turns grown from the prompt and output of the call they continue", ss.ContextGrown)
			clause(w, ss.ContextOutputGuessed, " (%d without the output's token ids: its place held by ids of the run's own)")
			clause(w, ss.ContextFresh, "; %d fresh because the trace's input was shorter than the context")
			clause(w, ss.ContextLost, "; %d fresh because the call they continue failed")
			fmt.Fprintln(w)
		}
	}
	fmt.Fprintf(w, "duration   %s, %.0f output tok/s\n", FormatDuration(s.Duration), float64(s.OutputTokens)/max(s.Duration.Seconds(), 1e-9))
	fmt.Fprintf(w, "lateness   p50 %s  p99 %s  max %s\n", FormatDuration(s.LatenessP50), FormatDuration(s.LatenessP99), FormatDuration(s.LatenessMax))
	fmt.Fprintf(w, "TTFT       p50 %s  p99 %s\n", FormatDuration(s.TTFTP50), FormatDuration(s.TTFTP99))
	fmt.Fprintf(w, "TPOT       p50 %s  p99 %s\n", FormatDuration(s.TPOTP50), FormatDuration(s.TPOTP99))
	fmt.Fprintf(w, "E2E        p50 %s  p99 %s\n", FormatDuration(s.E2EP50), FormatDuration(s.E2EP99))
	if s.Approx {
		fmt.Fprintln(w, "           (percentiles from a histogram, within 0.5 %; analyze the results for exact ones)")
	}
	if s.ThrottledTime > 0 {
		fmt.Fprintf(w, "client     throttled %s in %d periods by its cgroup's CPU quota (%s): every thread stalls then; late sends in those seconds are the quota's\n",
			FormatDuration(s.ThrottledTime), s.ThrottledPeriods, s.CPUQuota)
	}
	if s.StealTime > 0 {
		fmt.Fprintf(w, "client     the hypervisor took %s of the replayer's CPUs (steal): no thread of this machine runs then; late sends in those seconds are the host's\n",
			FormatDuration(s.StealTime))
	}
	if l := s.SimLateness; l != nil {
		if l.FellBehind() {
			fmt.Fprintf(w, "simulator  FELL BEHIND: it %s, so its latencies are the machine's as much as its model's (over %.2f× counts as behind)\n", l, traces.MaxSimSlowdown)
		} else {
			fmt.Fprintf(w, "simulator  kept up with its model: steps %.2f× their modelled time (one step %.2f ms late at p99)\n", l.Slowdown(), l.StepP99Ms)
		}
	}
	if s.ReplicaHeader != "" {
		fmt.Fprintf(w, "replicas   %d responses named their replica in %s, %d did not\n", s.ReplicaNamed, s.ReplicaHeader, s.ReplicaMissing)
	}
	if s.TimingMatched == 0 && s.TimingUnmatched > 0 {
		// Not a fault: most servers send no per-request timings by default.
		fmt.Fprintln(w, "server timings  none (no per-request metrics or spans from the server; analyze estimates queue, prefill and decode)")
	} else {
		fmt.Fprintf(w, "server timings  %d matched, %d unmatched\n", s.TimingMatched, s.TimingUnmatched)
	}
}

// TopFailureReasons returns up to n failure reasons, most frequent first.
func (s *Summary) TopFailureReasons(n int) []string {
	rs := make([]string, 0, len(s.FailureReasons))
	for r := range s.FailureReasons {
		rs = append(rs, r)
	}
	sort.Slice(rs, func(i, j int) bool {
		if a, b := s.FailureReasons[rs[i]], s.FailureReasons[rs[j]]; a != b {
			return a > b
		}
		return rs[i] < rs[j]
	})
	return rs[:min(n, len(rs))]
}

// FailedShare is the share of sent requests that failed (0 when none was
// sent).
func (s *Summary) FailedShare() float64 {
	if s.Sent == 0 {
		return 0
	}
	return float64(s.Failed) / float64(s.Sent)
}
