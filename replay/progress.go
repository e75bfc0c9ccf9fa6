package replay

import (
	"fmt"
	"io"
	"slices"
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

	// keepLate: a progress line reads late (Options.Progress).
	keepLate bool
	mu       sync.Mutex
	late     []time.Duration // lateness of requests finished since the last report
	reasons  map[string]int  // failures by reason, for the progress line
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
	if d, ok := rec.Lateness(); ok && l.keepLate {
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

// progressLoop writes a status every ProgressPeriod until done: one line
// rewritten in place on a terminal, else (Options.ProgressLines) a plain
// line each time, for logs.
func (r *runner) progressLoop(done <-chan struct{}) {
	t := time.NewTicker(r.o.ProgressPeriod)
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
	fmt.Fprintf(&b, "%s  sent %d/%d (%.0f%%)  in flight %d  ok %d  failed %d", FormatDuration(elapsed.Round(time.Second)), sent, total,
		100*float64(sent)/float64(max(total, 1)), l.inflight.Load(), done-failed, failed)
	if topN > 0 {
		fmt.Fprintf(&b, " (%d× %s)", topN, top[:min(len(top), 60)])
	}
	fmt.Fprintf(&b, "  lateness p99 %s  %.0f tok/s", FormatDuration(p99), rate)
	if left := l.last - elapsed; left > 0 {
		fmt.Fprintf(&b, "  sending ends in %s", FormatDuration(left.Round(time.Second)))
	}
	if r.o.ProgressLines {
		b.WriteByte('\n')
	}
	io.WriteString(r.o.Progress, b.String())
}
