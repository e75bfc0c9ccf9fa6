package replay

import (
	"fmt"
	"io"
	"runtime"

	"github.com/tokentrace/tokentrace/internal/minheap"
	"github.com/tokentrace/tokentrace/traces"
)

// Closed sessions stream: Scan counts each session's selected calls, and
// the run reads the trace again in arrival order, holding a session's
// calls until the last of them is read. The whole session then goes into
// the session graph (addSession: the same rules as for a trace in
// memory), its first calls are scheduled and its follow-ups wait for their
// dependencies; once every call of it has finished, the graph forgets it.
// So the client holds the sessions under way and the calls read ahead of
// the schedule, not the trace. A session's calls are all read before its
// first is sent: the reader runs ahead by the longest session's span (on
// the arrival clock), and memory follows the calls that arrive within it.

// openFeed is the run's feed for a plan that is not in memory: closed
// sessions stream through closedFeed, anything else through streamFeed.
func (r *runner) openFeed(p *Plan) (feed, func(), error) {
	if p.sessionCalls == nil {
		return p.streamFeed(&r.o)
	}
	return r.closedFeed(p)
}

// sessionBuf is a session whose selected calls are not all read yet.
type sessionBuf struct {
	id       int64
	recs     []*traces.Record // selected, read so far, in arrival order (owned copies)
	skipped  map[int64]bool   // seqs of its calls outside the selection, read so far
	left     int32            // selected calls still to read
	complete bool
	queued   bool // in the heap of sessions being read
}

// firstCallFirst orders the sessions being read by their first selected
// call: no call is released before a session whose first call comes
// earlier is complete (its first call may be due first).
func firstCallFirst(a, b **sessionBuf) bool { return before((*a).recs[0], (*b).recs[0]) }

// recBefore orders the calls scheduled from the trace's clock, in the
// heap of those ready to go: by before.
func recBefore(a, b **traces.Record) bool { return before(*a, *b) }

// before is the trace's order: arrival, then seq.
func before(a, b *traces.Record) bool {
	return a.ArrivalNs < b.ArrivalNs || a.ArrivalNs == b.ArrivalNs && a.Seq < b.Seq
}

// closedFeed reads the trace again and hands out the calls scheduled from
// its clock (sessions' first calls, and every call of a session replayed
// open loop), building the session graph a whole session at a time.
func (r *runner) closedFeed(p *Plan) (f feed, close func(), err error) {
	rd, err := p.src()
	if err != nil {
		return nil, nil, err
	}
	o := &r.o
	g := newGraph(o, p.Meta)
	g.streaming = true
	r.graph = g
	r.ctxOf = map[*traces.Record]*heldCtx{}
	pending := map[int64]*sessionBuf{}
	var waiting []*sessionBuf  // being read, a min-heap by firstCallFirst
	var ready []*traces.Record // a min-heap by recBefore
	buf := make([]traces.Record, 256)
	var rows []traces.Record
	eof := false
	var rerr error
	read := 0

	complete := func(sb *sessionBuf) {
		sb.complete = true
		delete(pending, sb.id)
		if len(sb.recs) == 0 {
			return
		}
		static, followUps := g.addStreamed(sb)
		r.sched.outstanding.Add(int64(followUps))
		for _, rec := range static {
			minheap.Push(&ready, rec, recBefore)
		}
	}
	// releasable says the earliest ready call can go: no session still
	// being read starts before it.
	releasable := func() bool {
		for len(waiting) > 0 && waiting[0].complete {
			minheap.Pop(&waiting, firstCallFirst)
		}
		return len(ready) > 0 && (len(waiting) == 0 || before(ready[0], waiting[0].recs[0]))
	}
	f = func() (*item, error) {
		for {
			if releasable() {
				rec := minheap.Pop(&ready, recBefore)
				return &item{rec: rec, sched: o.at(rec)}, nil
			}
			if eof && len(rows) == 0 {
				if len(pending) > 0 {
					// A trace read with salvage ended at its damage before
					// some sessions' last calls: replay what was read of them.
					for _, sb := range pending {
						complete(sb)
					}
					continue
				}
				if len(ready) > 0 {
					continue
				}
				return nil, rerr
			}
			if len(rows) == 0 && !eof {
				n, err := rd.Read(buf)
				rows = buf[:n]
				switch {
				case err == io.EOF:
					eof = true
				case err != nil:
					eof, rerr = true, fmt.Errorf("read trace: %w", err)
				}
				continue
			}
			rec := &rows[0]
			rows = rows[1:]
			if read++; read%64 == 0 {
				// Reading ahead is bursty (up to a session's span at once):
				// let the connections' readers in, whose times would wait.
				runtime.Gosched()
			}
			want := p.sessionCalls[rec.Session]
			if !o.selects(rec) {
				if rec.Session != 0 && want > 0 {
					sb := pending[rec.Session]
					if sb == nil {
						sb = &sessionBuf{id: rec.Session, left: want}
						pending[rec.Session] = sb
					}
					if sb.skipped == nil {
						sb.skipped = map[int64]bool{}
					}
					sb.skipped[rec.Seq] = true
				}
				continue
			}
			c := rec.Clone()
			if rec.Session == 0 || want == 0 {
				g.noteProblems(sessionless(&c))
				minheap.Push(&ready, &c, recBefore)
				continue
			}
			sb := pending[rec.Session]
			if sb == nil {
				sb = &sessionBuf{id: rec.Session, left: want}
				pending[rec.Session] = sb
			}
			sb.recs = append(sb.recs, &c)
			if !sb.queued {
				sb.queued = true
				minheap.Push(&waiting, sb, firstCallFirst)
			}
			if sb.left--; sb.left <= 0 {
				complete(sb)
			}
		}
	}
	return f, func() { rd.Close() }, nil
}

// addStreamed adds a whole session to a streaming graph and returns its
// calls scheduled from the trace's clock and how many others wait for
// their dependencies (the caller tells the scheduler).
func (g *graph) addStreamed(sb *sessionBuf) (static []*traces.Record, followUps int) {
	g.mu.Lock()
	own := make(map[int64]*traces.Record, len(sb.recs))
	for _, rec := range sb.recs {
		own[rec.Seq] = rec
	}
	bySeq := func(seq int64) (*traces.Record, bool) {
		if d, ok := own[seq]; ok {
			return d, true
		}
		d, ok := g.bySeq[seq] // another session's call, still in the graph
		return d, ok
	}
	bad := g.addSession(sb.id, sb.recs, bySeq, func(seq int64) bool { return sb.skipped[seq] })
	g.link(sb.recs)
	for _, rec := range sb.recs {
		g.bySeq[rec.Seq] = rec
		if len(g.deps[rec]) > 0 {
			followUps++
		} else {
			static = append(static, rec)
		}
	}
	g.sessRecs[sb.id] = sb.recs
	g.sessLeft[sb.id] = len(sb.recs)
	g.mu.Unlock()
	g.noteProblems(bad)
	return static, followUps
}

// noteProblems keeps the first few problems of a streaming graph and
// counts the rest.
func (g *graph) noteProblems(bad []string) {
	if len(bad) == 0 {
		return
	}
	g.mu.Lock()
	for _, b := range bad {
		if len(g.stats.Problems) < 5 {
			g.stats.Problems = append(g.stats.Problems, b)
		} else {
			g.moreProblems++
		}
	}
	g.mu.Unlock()
}

// ended counts one more call of rec's session finished or dropped; after
// the last, a streaming graph forgets the session. Called with g.mu held.
func (g *graph) ended(rec *traces.Record) {
	if !g.streaming {
		return
	}
	n, ok := g.sessLeft[rec.Session]
	if !ok {
		return
	}
	if n--; n > 0 {
		g.sessLeft[rec.Session] = n
		return
	}
	for _, r := range g.sessRecs[rec.Session] {
		delete(g.deps, r)
		delete(g.children, r)
		delete(g.waiting, r)
		delete(g.done, r)
		delete(g.dropped, r)
		delete(g.from, r)
		delete(g.continued, r)
		delete(g.bySeq, r.Seq)
	}
	delete(g.sessRecs, rec.Session)
	delete(g.sessLeft, rec.Session)
}
