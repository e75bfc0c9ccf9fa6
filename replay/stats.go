package replay

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// liveStats are the counters behind the progress line.
type liveStats struct {
	scheduled atomic.Int64
	inflight  atomic.Int64
	done      atomic.Int64
	errors    atomic.Int64
	tokens    atomic.Int64

	// total is how many trace records the run will send; last is when the
	// last one is due (both set before the clock starts).
	total int64
	last  time.Duration

	mu      sync.Mutex
	late    []time.Duration // lateness of requests finished since the last report
	reasons map[string]int  // failures by reason, for the progress line
}

func (l *liveStats) record(rec *traces.Record) {
	l.done.Add(1)
	if !rec.OK() {
		l.errors.Add(1)
		l.mu.Lock()
		if l.reasons == nil {
			l.reasons = map[string]int{}
		}
		if r := failureReason(rec); l.reasons[r] > 0 || len(l.reasons) < 64 {
			l.reasons[r]++
		}
		l.mu.Unlock()
	}
	if n, _ := rec.ReceivedOutputTokens(); n > 0 {
		l.tokens.Add(int64(n))
	}
	if d, ok := rec.Lateness(); ok {
		l.mu.Lock()
		if len(l.late) < 1<<16 {
			l.late = append(l.late, d)
		}
		l.mu.Unlock()
	}
}

// clause writes format with n (then more) when n > 0: the parts of a
// summary line that only some runs have.
func clause(w io.Writer, n int, format string, more ...any) {
	if n > 0 {
		fmt.Fprintf(w, format, append([]any{n}, more...)...)
	}
}

// failureReason is a failed request's status and error, cut to 100 bytes.
func failureReason(rec *traces.Record) string {
	if rec.Error == "" {
		return rec.Status
	}
	return rec.Status + ": " + rec.Error[:min(len(rec.Error), 100)]
}

// tickerOr ticks every period, or every def when period is not positive
// (an option left at zero).
func tickerOr(period, def time.Duration) *time.Ticker {
	if period <= 0 {
		period = def
	}
	return time.NewTicker(period)
}

// progressLoop writes a status every ProgressPeriod until done: one line
// rewritten in place on a terminal, else (Options.ProgressLines) a plain
// line each time, for logs.
func (r *runner) progressLoop(done <-chan struct{}) {
	t := tickerOr(r.o.ProgressPeriod, DefaultProgressPeriod)
	defer t.Stop()
	var lastTok int64
	last := time.Now()
	var p99 time.Duration
	for {
		select {
		case <-done:
			return
		case now := <-t.C:
			r.live.mu.Lock()
			late := r.live.late
			r.live.late = nil
			top, topN := "", 0
			for reason, n := range r.live.reasons {
				if n > topN || (n == topN && reason < top) {
					top, topN = reason, n
				}
			}
			r.live.mu.Unlock()
			if len(late) > 0 {
				slices.Sort(late)
				p99 = percentile(late, 99)
			}
			tok := r.live.tokens.Load()
			rate := float64(tok-lastTok) / now.Sub(last).Seconds()
			lastTok, last = tok, now
			r.writeProgress(now.Sub(r.t0), p99, rate, top, topN)
		}
	}
}

// writeProgress writes one progress line: elapsed, sent of total (share),
// in flight, ok and failed (the most frequent reason), lateness p99 of the
// last period, output tok/s and the time until the last request is due.
func (r *runner) writeProgress(elapsed, p99 time.Duration, rate float64, top string, topN int) {
	l := &r.live
	sent, total := l.scheduled.Load(), l.total
	done, failed := l.done.Load(), l.errors.Load()
	var b strings.Builder
	if !r.o.ProgressLines {
		b.WriteString("\r\033[K")
	} else {
		b.WriteString("replay: ")
	}
	fmt.Fprintf(&b, "%s  sent %d/%d (%.0f%%)  in flight %d  ok %d  failed %d", fmtDur(elapsed.Round(time.Second)), sent, total,
		100*float64(sent)/float64(max(total, 1)), l.inflight.Load(), done-failed, failed)
	if topN > 0 {
		fmt.Fprintf(&b, " (%d× %s)", topN, top[:min(len(top), 60)])
	}
	fmt.Fprintf(&b, "  lateness p99 %s  %.0f tok/s", fmtDur(p99), rate)
	if left := l.last - elapsed; left > 0 {
		fmt.Fprintf(&b, "  sending ends in %s", fmtDur(left.Round(time.Second)))
	}
	if r.o.ProgressLines {
		b.WriteByte('\n')
	}
	io.WriteString(r.o.Progress, b.String())
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

func fmtDur(d time.Duration) string {
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
	fmt.Fprintf(w, "duration   %s, %.0f output tok/s\n", fmtDur(s.Duration), float64(s.OutputTokens)/max(s.Duration.Seconds(), 1e-9))
	fmt.Fprintf(w, "lateness   p50 %s  p99 %s  max %s\n", fmtDur(s.LatenessP50), fmtDur(s.LatenessP99), fmtDur(s.LatenessMax))
	fmt.Fprintf(w, "TTFT       p50 %s  p99 %s\n", fmtDur(s.TTFTP50), fmtDur(s.TTFTP99))
	fmt.Fprintf(w, "TPOT       p50 %s  p99 %s\n", fmtDur(s.TPOTP50), fmtDur(s.TPOTP99))
	fmt.Fprintf(w, "E2E        p50 %s  p99 %s\n", fmtDur(s.E2EP50), fmtDur(s.E2EP99))
	if s.Approx {
		fmt.Fprintln(w, "           (percentiles from a histogram, within 0.5 %; analyze the results for exact ones)")
	}
	if s.ThrottledTime > 0 {
		fmt.Fprintf(w, "client     throttled %s in %d periods by its cgroup's CPU quota (%s): every thread stalls then; late sends in those seconds are the quota's\n",
			fmtDur(s.ThrottledTime), s.ThrottledPeriods, s.CPUQuota)
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

// resultMeta is the results file metadata (before the run's outcome).
func (r *runner) resultMeta(in traces.Meta) traces.Meta {
	m := in
	m.Extra = nil
	for k, v := range in.Extra {
		m.Set(k, v)
	}
	m.SchemaVersion = traces.SchemaVersion
	if m.Source == "" {
		m.Source = "replay"
	} else {
		m.Source = "replay:" + m.Source
	}
	if m.BlockSize == 0 {
		m.BlockSize = r.prompts.blockSize
	}
	m.Set(MetaTarget, RedactURL(r.o.URL))
	if r.o.SimSpec != "" {
		m.Set(MetaSim, r.o.SimSpec)
	}
	model := r.model
	if model == "" {
		model = r.defaultModel
		if model == "" {
			model = "(per record)"
		}
	}
	m.Set(MetaModel, model)
	m.Set(MetaSpeed, strconv.FormatFloat(r.o.Speed, 'g', -1, 64))
	m.Set(MetaRun, r.o.Run)
	m.Set(MetaShard, fmt.Sprintf("%d/%d", r.o.ShardIndex, r.o.ShardCount))
	if !r.t0.IsZero() {
		m.Set(MetaStartedAt, r.t0.UTC().Format(time.RFC3339Nano))
	}
	if r.chat.source != "" {
		m.Set(MetaChatCalibration, r.chat.source)
	}
	opts, _ := json.Marshal(r.o.public())
	m.Set(MetaOptions, string(opts))
	return m
}

func (r *runner) finishMeta(m *traces.Meta, s *Summary) {
	src := TimingSourceNone
	if s.TimingMatched > 0 {
		src = TimingSourceResponseMetrics
	}
	setTimingMeta(m, s, src)
	m.Set(MetaNotSent, strconv.Itoa(s.NotSent))
	if r.graph != nil {
		b, _ := json.Marshal(s.Sessions)
		m.Set(MetaSessions, string(b))
	}
	m.Set(MetaLatenessP99, strconv.FormatInt(int64(s.LatenessP99), 10))
	if s.Realtime == "" {
		m.Set(MetaRealtime, "SCHED_FIFO 1 (dispatcher thread)")
	} else {
		m.Set(MetaRealtime, "no: "+s.Realtime)
	}
	if s.CPUQuota != "" {
		m.Set(MetaCPUQuota, s.CPUQuota)
	}
	clockMeta(m, r.clock, s, r.o.StartAt) // clock.go
	r.replicaNote(m, s)                   // replica.go
}

func setTimingMeta(m *traces.Meta, s *Summary, src string) {
	m.Set(MetaTimingSource, src)
	m.Set(MetaTimingMatched, strconv.Itoa(s.TimingMatched))
	m.Set(MetaTimingUnmatched, strconv.Itoa(s.TimingUnmatched))
}

// AddTimingSource recounts the successful requests with and without server
// timings after another source (e.g. OTLPTimingSource, through
// OTLPReceiver.JoinRecords) filled more of them, and records the combined
// source ("response_metrics+otlp") and counts in the metadata.
func (res *Result) AddTimingSource(src string, joined int) {
	before := res.Summary.TimingMatched
	res.Summary.TimingMatched, res.Summary.TimingUnmatched = 0, 0
	for i := range res.Records {
		rec := &res.Records[i]
		if !rec.OK() || rec.SentNs < 0 {
			continue
		}
		if rec.ServerQueueNs >= 0 || rec.ServerPrefillNs >= 0 || rec.ServerDecodeNs >= 0 {
			res.Summary.TimingMatched++
		} else {
			res.Summary.TimingUnmatched++
		}
	}
	cur := res.Meta.Get(MetaTimingSource)
	switch {
	case joined == 0:
		// nothing new from src
	case cur == "" || cur == TimingSourceNone || before == 0:
		cur = src
	default:
		cur += "+" + src
	}
	if cur == "" {
		cur = TimingSourceNone
	}
	setTimingMeta(&res.Meta, &res.Summary, cur)
}

// publicOptions is what of Options goes in the metadata: no key, no header
// values, no URL credentials.
type publicOptions struct {
	API              string   `json:"api"`
	ForceAPI         bool     `json:"force_api,omitempty"`
	Speed            float64  `json:"speed"`
	WindowFrom       string   `json:"window_from,omitempty"`
	WindowTo         string   `json:"window_to,omitempty"`
	MaxConcurrency   int      `json:"max_concurrency,omitempty"`
	Warmup           int      `json:"warmup,omitempty"`
	Duration         string   `json:"duration,omitempty"`
	Sessions         string   `json:"sessions"`
	NoContextGrowth  bool     `json:"no_context_growth,omitempty"`
	Shard            string   `json:"shard"`
	StartAt          string   `json:"start_at,omitempty"`
	Timeout          string   `json:"timeout"`
	Drain            string   `json:"drain"`
	NoVLLMExtensions bool     `json:"no_vllm_extensions,omitempty"`
	ContinuousUsage  bool     `json:"continuous_usage,omitempty"`
	HeaderNames      []string `json:"header_names,omitempty"`
	APIKey           bool     `json:"api_key_set,omitempty"`
	BlockSize        int      `json:"block_size"`
	TokenIDs         string   `json:"token_ids"`
}

func (o *Options) public() publicOptions {
	p := publicOptions{
		API: o.API, ForceAPI: o.ForceAPI, Speed: o.Speed, MaxConcurrency: o.MaxConcurrency,
		Warmup: o.Warmup, Sessions: o.Sessions, NoContextGrowth: o.NoContextGrowth, Shard: fmt.Sprintf("%d/%d", o.ShardIndex, o.ShardCount),
		Timeout: o.Timeout.String(), Drain: o.Drain.String(), NoVLLMExtensions: o.NoVLLMExtensions,
		ContinuousUsage: o.ContinuousUsage, APIKey: o.APIKey != "", BlockSize: o.BlockSize,
		TokenIDs: fmt.Sprintf("%d,%d", o.TokenIDMin, o.TokenIDMax),
	}
	if o.WindowFrom != 0 || o.WindowTo != 0 {
		p.WindowFrom, p.WindowTo = o.WindowFrom.String(), o.WindowTo.String()
	}
	if o.Duration > 0 {
		p.Duration = o.Duration.String()
	}
	if !o.StartAt.IsZero() {
		p.StartAt = o.StartAt.UTC().Format(time.RFC3339Nano)
	}
	for k := range o.Headers {
		p.HeaderNames = append(p.HeaderNames, http.CanonicalHeaderKey(k))
	}
	slices.Sort(p.HeaderNames)
	return p
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
