package twin

import (
	"math"

	"github.com/tokentrace/tokentrace/internal/minheap"
)

// reqRow is what the request timeline keeps of a row in flight: a
// request with a first and a last token and no usable chunks (a
// production trace's logged latencies).
type reqRow struct {
	sent, first, last int64
	prompt, fresh     int
	out               int // output tokens
	// The timeline's integrals when its decode began.
	ib, ic, iu float64
	idle       bool
}

// reqEvent kinds, in their order at one time: an arrival, a first token
// (its prompt computed: the step's prefill), a last token, and the start
// of a decode's integrals, taken once every first token of that time is
// in.
const (
	evArrive = iota
	evFirst
	evLast
	evStart
)

type reqEvent struct {
	t    int64
	kind int
	row  *reqRow
}

// reqEventFirst orders the events: by time, then kind.
func reqEventFirst(a, b *reqEvent) bool {
	return a.t < b.t || a.t == b.t && a.kind < b.kind
}

// requests fits the step model from whole requests when their chunks are
// not known: a request's decode (first to last token) is n − 1 steps, and
// the requests decoding beside it, each assumed to advance at its own
// steady pace, say what was in them. The timeline integrates over time
// the decoding requests (B), their context tokens (C) and the prompt
// tokens computed (U, at each first token); a request's decode then gives
// one observation of the mean step:
//
//	(last − first)/(n − 1) = StepFixed + PrefillPerToken·ΔU/(n − 1)
//	                       + DecodePerSeq·B̄ + AttnPerContextToken·C̄
//
// with B̄ and C̄ the time means over its decode. A request that arrived at
// an idle server and was alone in its first step gives that step:
// first − sent.
type requests struct {
	events []reqEvent // a min-heap by reqEventFirst
	keep   func(obs)
	now    int64
	// B and C now, C's slope (tokens per ns), and the integrals.
	b, c, slope float64
	ib, ic, iu  float64
	active      int // arrived, not done
	kept, idle  int64
	lastFirst   int64 // the last first token (another one at its time shares the step)
	maxB        int   // the most requests decoding at once
}

func newRequests(keep func(obs)) *requests { return &requests{keep: keep, lastFirst: -1} }

func (q *requests) add(r *reqRow) {
	minheap.Push(&q.events, reqEvent{r.sent, evArrive, r}, reqEventFirst)
	minheap.Push(&q.events, reqEvent{r.first, evFirst, r}, reqEventFirst)
	minheap.Push(&q.events, reqEvent{r.first, evStart, r}, reqEventFirst)
	minheap.Push(&q.events, reqEvent{r.last, evLast, r}, reqEventFirst)
}

// advance handles every event before until.
func (q *requests) advance(until int64) {
	for len(q.events) > 0 && q.events[0].t < until {
		ev := minheap.Pop(&q.events, reqEventFirst)
		q.move(ev.t)
		r := ev.row
		switch ev.kind {
		case evArrive:
			r.idle = q.active == 0
			q.active++
		case evFirst:
			q.iu += float64(r.fresh)
			if r.idle && q.lastFirst != ev.t && q.alone(r) {
				var x [nFeat]float64
				x[featFixed], x[featPrefill], x[featAttn] = 1, float64(r.fresh), float64(r.prompt)
				q.keep(obs{y: float64(r.first - r.sent), x: x})
				q.idle++
			}
			q.lastFirst = ev.t
			if r.last > r.first && r.out > 1 {
				q.b++
				q.maxB = max(q.maxB, int(q.b))
				q.c += float64(r.prompt)
				q.slope += float64(r.out-1) / float64(r.last-r.first)
			}
		case evStart:
			r.ib, r.ic, r.iu = q.ib, q.ic, q.iu
		case evLast:
			q.active--
			if r.last > r.first && r.out > 1 {
				q.b--
				q.c -= float64(r.prompt + r.out - 1)
				q.slope -= float64(r.out-1) / float64(r.last-r.first)
				q.observe(r)
			}
		}
	}
}

// alone reports whether r is the only request whose first token comes at
// its time (no other such event is waiting).
func (q *requests) alone(r *reqRow) bool {
	for _, ev := range q.events {
		if ev.t == r.first && ev.kind == evFirst && ev.row != r {
			return false
		}
	}
	return true
}

// move advances the integrals to t.
func (q *requests) move(t int64) {
	if t <= q.now {
		return
	}
	dt := float64(t - q.now)
	q.ib += q.b * dt
	q.ic += q.c*dt + q.slope*dt*dt/2
	q.c += q.slope * dt
	q.now = t
	if q.b == 0 {
		q.c, q.slope = 0, 0 // no drift across idle times
	}
}

// observe turns r's decode into one observation of the mean step.
func (q *requests) observe(r *reqRow) {
	span := float64(r.last - r.first)
	steps := float64(r.out - 1)
	if span <= 0 || steps <= 0 || math.IsNaN(q.ic) {
		return
	}
	var x [nFeat]float64
	x[featFixed] = 1
	x[featPrefill] = (q.iu - r.iu) / steps
	x[featDecode] = (q.ib - r.ib) / span
	x[featAttn] = (q.ic - r.ic) / span
	q.keep(obs{y: span / steps, x: x})
	q.kept++
}

func (q *requests) flush() { q.advance(math.MaxInt64) }
