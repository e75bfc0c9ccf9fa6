package analyze

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// Sessions: the rows with a session (Session ≠ 0) give latency by turn
// index and per session. Turn latencies need no per-session state (the
// turn is a column); a session's makespan and call count do, and that
// state is dropped when the session ends. Rows come in send order, so a
// session has ended when none of its calls was sent or still streaming
// within Options.SessionIdle of the latest send (capture's session idle
// window); the rest end with the input. At most maxOpenSessions are open
// at once: past it the least recently active half is closed early (each
// counted in Sessions.ClosedEarly; a later call of one starts a new part).

// DefaultMaxOpenSessions bounds the sessions the analysis holds open
// (about 100 bytes each).
const DefaultMaxOpenSessions = 1 << 20

// turnBuckets is the turn indices reported one by one; higher turns are
// pooled in the last bucket ("≥ 8").
const turnBuckets = 8

// Sessions is the agentic-session section (null when no row has a
// session). Latencies in milliseconds, over successful calls.
type Sessions struct {
	// Sessions is the sessions seen (a session split by the idle window or
	// closed early counts once per part); Calls their analyzed calls.
	Sessions int64 `json:"sessions"`
	Calls    int64 `json:"calls"`
	// CallsPerSession is the calls per session: p50, p90 and max.
	CallsPerSession CountDist `json:"calls_per_session"`
	// ByTurn is TTFT and E2E by turn index (the turn column; the call's
	// order in its session where the turn is 0), the last entry pooling
	// every turn from 8 on.
	ByTurn []TurnLatency `json:"by_turn"`
	// Makespan is per session: its first send to the last token of its
	// last call (sessions with at least one token).
	Makespan Dist `json:"makespan_ms"`
	// IdleS is the idle window (Options.SessionIdle) in seconds;
	// ClosedEarly counts sessions closed before it passed because
	// MaxOpen sessions were open.
	IdleS       float64 `json:"idle_s"`
	MaxOpen     int     `json:"max_open"`
	ClosedEarly int64   `json:"closed_early,omitempty"`
}

// CountDist is a distribution of counts.
type CountDist struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	Max float64 `json:"max"`
}

// TurnLatency is the latency of the calls at one turn index.
type TurnLatency struct {
	// Turn is the turn index (1, 2, …); with AndAbove every turn from it on.
	Turn     int  `json:"turn"`
	AndAbove bool `json:"and_above,omitempty"`
	// Calls is the analyzed calls at this turn, successful or not.
	Calls int64 `json:"calls"`
	TTFT  Dist  `json:"ttft_ms"`
	E2E   Dist  `json:"e2e_ms"`
}

// Label is "3", or "≥ 8" for the pooled high turns.
func (t TurnLatency) Label() string {
	if t.AndAbove {
		return "≥ " + strconv.Itoa(t.Turn)
	}
	return strconv.Itoa(t.Turn)
}

// openSession is an open session's state.
type openSession struct {
	first, lastEnd, lastSent int64
	calls                    int32
}

func (s *openSession) active() int64 { return max(s.lastEnd, s.lastSent) }

// sessionAcc accumulates the Sessions section.
type sessionAcc struct {
	idle      int64
	maxOpen   int
	open      map[int64]*openSession
	clock     int64 // latest send seen
	nextSweep int64
	any       bool
	sessions  int64
	calls     int64
	early     int64
	perCall   pooled // calls per session
	makespan  pooled
	turnCalls [turnBuckets]int64
	ttft, e2e [turnBuckets]pooled
}

func newSessionAcc(idle time.Duration, maxOpen int) *sessionAcc {
	return &sessionAcc{idle: int64(idle), maxOpen: maxOpen, open: map[int64]*openSession{}}
}

// approx switches every distribution to its histogram (the analysis
// streams past Options.ExactRows).
func (s *sessionAcc) approx() {
	s.perCall.toHist()
	s.makespan.toHist()
	for i := range s.ttft {
		s.ttft[i].toHist()
		s.e2e[i].toHist()
	}
}

// add counts one analyzed row; w is its compact form.
func (s *sessionAcc) add(r *traces.Record, w *row) {
	if r.Session == 0 {
		return
	}
	s.any = true
	s.calls++
	st := w.start()
	if st > s.clock {
		s.clock = st
		if s.clock >= s.nextSweep {
			s.sweep(s.clock - s.idle)
			s.nextSweep = s.clock + max(s.idle/8, 1)
		}
	}
	o := s.open[r.Session]
	if o == nil {
		if len(s.open) >= s.maxOpen {
			s.closeOldest()
		}
		o = &openSession{first: math.MaxInt64, lastEnd: -1, lastSent: -1}
		s.open[r.Session] = o
	}
	o.calls++
	if st >= 0 {
		o.first = min(o.first, st)
		o.lastSent = max(o.lastSent, st)
	}
	o.lastEnd = max(o.lastEnd, w.end())
	turn := int(r.Turn)
	if turn <= 0 {
		turn = int(o.calls)
	}
	b := min(turn, turnBuckets) - 1
	s.turnCalls[b]++
	if !w.ok {
		return
	}
	if t, ok := w.ttft(); ok {
		s.ttft[b].add(t)
	}
	if e, ok := w.e2e(); ok {
		s.e2e[b].add(e)
	}
}

// sweep closes the sessions last active before cutoff.
func (s *sessionAcc) sweep(cutoff int64) {
	for id, o := range s.open {
		if o.active() < cutoff {
			s.close(id, o)
		}
	}
}

// closeOldest closes the least recently active half of the open sessions.
func (s *sessionAcc) closeOldest() {
	acts := make([]int64, 0, len(s.open))
	for _, o := range s.open {
		acts = append(acts, o.active())
	}
	slices.Sort(acts)
	cutoff := acts[len(acts)/2]
	n := len(s.open)
	for id, o := range s.open {
		if o.active() < cutoff {
			s.close(id, o)
		}
	}
	if len(s.open) == n { // all equally active: close them all
		for id, o := range s.open {
			s.close(id, o)
		}
	}
	s.early += int64(n - len(s.open))
}

func (s *sessionAcc) close(id int64, o *openSession) {
	delete(s.open, id)
	s.sessions++
	s.perCall.add(float64(o.calls))
	if o.first != math.MaxInt64 && o.lastEnd >= o.first {
		s.makespan.add(float64(o.lastEnd - o.first))
	}
}

// result closes the sessions still open and returns the section (nil
// without sessions).
func (s *sessionAcc) result() *Sessions {
	if !s.any {
		return nil
	}
	for id, o := range s.open {
		s.close(id, o)
	}
	x := &Sessions{Sessions: s.sessions, Calls: s.calls, IdleS: float64(s.idle) / 1e9, MaxOpen: s.maxOpen, ClosedEarly: s.early}
	x.CallsPerSession = CountDist{P50: s.perCall.quantile(0.5), P90: s.perCall.quantile(0.9), Max: s.perCall.quantile(1)}
	x.Makespan = s.makespan.dist()
	last := 0
	for b := range turnBuckets {
		if s.turnCalls[b] > 0 {
			last = b
		}
	}
	for b := 0; b <= last; b++ {
		x.ByTurn = append(x.ByTurn, TurnLatency{Turn: b + 1, AndAbove: b == turnBuckets-1,
			Calls: s.turnCalls[b], TTFT: s.ttft[b].dist(), E2E: s.e2e[b].dist()})
	}
	return x
}

// quantile is the raw p-quantile (0 ≤ p ≤ 1) of the pooled values (NaN
// when empty).
func (p *pooled) quantile(q float64) float64 {
	if p.approx {
		return p.sk.quantile(q)
	}
	return Quantile(p.exact.sort(), q)
}

// Note says how sessions were delimited (text and HTML).
func (x *Sessions) Note() string {
	s := fmt.Sprintf("a session ends %s after its last activity", time.Duration(x.IdleS*1e9))
	if x.ClosedEarly > 0 {
		s += fmt.Sprintf("; %d closed early (more than %d open at once), later calls of those start new parts", x.ClosedEarly, x.MaxOpen)
	}
	return s
}

// writeSessionsText writes the Sessions block of the text report.
func (rep *Report) writeSessionsText(p func(string, ...any)) {
	x := rep.Sessions
	if x == nil {
		return
	}
	approx := ""
	if x.Makespan.Approx {
		approx = "~"
	}
	c := x.CallsPerSession
	p("\nSessions      %d (%d calls; calls per session p50 %.0f, p90 %.0f, max %.0f; %s)\n", x.Sessions, x.Calls, c.P50, c.P90, c.Max, x.Note())
	p("  %-8s %8s %10s %10s %10s %10s %10s %10s\n", "turn", "calls", "ttft p50", "ttft p90", "ttft p99", "e2e p50", "e2e p90", "e2e p99")
	for _, t := range x.ByTurn {
		p("  %-8s %8d %10s %10s %10s %10s %10s %10s\n", t.Label(), t.Calls,
			distCell(t.TTFT, t.TTFT.P50), distCell(t.TTFT, t.TTFT.P90), distCell(t.TTFT, t.TTFT.P99),
			distCell(t.E2E, t.E2E.P50), distCell(t.E2E, t.E2E.P90), distCell(t.E2E, t.E2E.P99))
	}
	if m := x.Makespan; m.Count > 0 {
		p("  makespan%s  p50 %s, p90 %s, p99 %s, max %s (first send to the last token of the session's last call, %d sessions)\n",
			approx, fmtMs(m.P50), fmtMs(m.P90), fmtMs(m.P99), fmtMs(m.Max), m.Count)
	}
}
