package replay

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/tokentrace/tokentrace/replay/internal/h1"
	"github.com/tokentrace/tokentrace/traces"
)

// The event loop (h1.Loop) is how open-loop replays to plain-http targets
// send: the dispatcher's thread writes each request and reads the
// responses itself, between deadlines, so a request costs no other
// thread's wake-up. Each wake-up of a sleeping thread is most of a
// request's CPU (about 16 µs of system time on a 2-core VM, where the whole
// request cost 46-53 µs with a reader goroutine per connection). Responses
// that arrive within lazyRead of the next send are read after that send,
// in the same wake-up; their times are the kernel's receive timestamps,
// so reading late moves no chunk time.
//
// Closed sessions keep the reader goroutines: a follow-up is scheduled
// from its dependency's finish, which the loop would learn up to lazyRead
// late, and a follow-up's body (a grown context) can be long to render on
// the dispatcher's thread.

// lazyRead is how long before a deadline the dispatcher stops waking for
// responses (they wait for the send). It bounds how late a finished
// request is recorded, not its times.
const lazyRead = 500 * time.Microsecond

// openLoop starts the event loop when the run can use it: open loop, the
// plain-http client, no concurrency cap. Its spare connections are dialed
// from now on.
func (r *runner) openLoop(ctx context.Context) {
	if r.tr.h1 == nil || r.sem != nil || r.o.Sessions == SessionsClosed {
		return
	}
	l, err := r.tr.h1.NewLoop(ctx, r.o.Timeout, spareConns)
	if err != nil {
		return // the reader goroutines do it
	}
	r.loop = l
	r.atEnd(l.Close) // when the run ends before its dispatcher drove the loop; else drainLoop closed it
}

// loopClock is the run's clock when the dispatcher drives the event loop:
// its waits read responses.
type loopClock struct {
	runClock
	l *h1.Loop
}

// sleepUntil reads what arrived since the last send, then waits for
// responses (reading each as it comes) until lazyRead before the
// deadline, and sleeps the rest as runClock does. A long wait is loose
// until hold before the deadline (thread_linux.go).
func (c loopClock) sleepUntil(deadline, spin, hold time.Duration) {
	c.l.Wait(0, true)
	if c.th.beforeWait(deadline, hold) {
		c.read(deadline-hold, false)
		sleepUntil(c.t0, deadline-hold, 0, 0)
		c.th.tighten()
	}
	hold = c.th.keep(hold)
	c.read(deadline-spin-lazyRead, deadline-c.now() <= hold)
	sleepUntil(c.t0, deadline, spin, hold)
}

// read reads responses as they come until the run offset until or until
// none is in flight; keepP as for h1.Loop.Wait.
func (c loopClock) read(until time.Duration, keepP bool) {
	for c.l.Inflight() > 0 {
		rem := until - c.now()
		if rem <= 0 {
			return
		}
		c.l.Wait(rem, keepP)
	}
}

// idle reads responses while the dispatcher waits for the next batch,
// loose.
func (c loopClock) idle() {
	c.th.loosen()
	c.l.Wait(time.Millisecond, false)
}

// drainLoop reads the responses still in flight once sending is over,
// until they are done or abandoned (r.reqCtx), then closes the loop.
func (r *runner) drainLoop() {
	if r.loop == nil {
		return
	}
	defer r.loop.Close()
	for r.loop.Inflight() > 0 {
		if err := r.reqCtx.Err(); err != nil {
			r.loop.Abandon(err)
			return
		}
		r.loop.Wait(5*time.Millisecond, false)
	}
}

// loopReq is a request sent through the event loop. Its result row is
// built in place, on the loop's thread, and copied once, by the collector
// (collect.go), into the run's rows; then it comes back to the loop's
// thread (runner.loopBack, then runner.loopFree) for another request.
type loopReq struct {
	h1.LoopJob
	r       *runner
	it      *item
	rec     traces.Record
	st      stream
	sp      sseSplitter
	status  int
	head    bool   // the response's head arrived
	stopped bool   // the stream logic ended reading (rec.Status says why)
	errBody []byte // the start of a non-200 body
	lastAt  int64
	req     []byte
	// The chunk columns' room, kept from one request to the next: the
	// collector copies them into the row.
	ns   []int64
	toks []int32
	next *loopReq // in runner.loopFree, finishedQ or loopBack
}

// sendLoop sends it through the event loop; false, having sent nothing,
// when the loop is off, the body is large or no connection could be
// started.
func (r *runner) sendLoop(it *item) bool {
	if r.loop == nil || len(it.body) > fastBodyMax {
		return false
	}
	if r.loopFree == nil {
		r.loopFree = r.loopBack.takeAll() // what the collector recorded
	}
	q := r.loopFree
	if q != nil {
		r.loopFree, q.next = q.next, nil
	} else {
		q = &loopReq{r: r}
	}
	q.it = it
	q.req = r.renderRequest(q.req[:0], r.tr.h1, it)
	r.beginRow(&q.rec, it)
	// Room for every chunk asked for, kept from the request before: no
	// allocation per chunk, nor per request.
	if n := min(max(int(it.rec.OutputTokens), 1), 4096) + 1; cap(q.ns) < n {
		q.ns, q.toks = make([]int64, 0, n), make([]int32, 0, n)
	}
	q.rec.ChunkNs, q.rec.ChunkTokens = q.ns[:0], q.toks[:0]
	q.st.start(&q.rec, nil)
	q.sp = sseSplitter{carry: q.sp.carry[:0], max: 16 << 20}
	q.status, q.head, q.stopped, q.errBody, q.lastAt = 0, false, false, q.errBody[:0], 0
	q.Prepare(q, q.req)
	r.live.inflight.Add(1)
	if !r.loop.Send(&q.LoopJob) {
		r.live.inflight.Add(-1)
		q.it, q.rec = nil, traces.Record{}
		q.next, r.loopFree = r.loopFree, q
		return false
	}
	return true
}

func (q *loopReq) Head(status int, kept []string) {
	q.status, q.head = status, true
	q.rec.HTTPStatus = int32(status)
	keepFleetColumns(&q.rec, q.r.keep, func(i int) string { return kept[i] }) // replica.go
}

func (q *loopReq) Body(p []byte, at int64) bool {
	q.lastAt = at
	if q.status != http.StatusOK {
		if room := 8<<10 - len(q.errBody); room > 0 {
			q.errBody = append(q.errBody, p[:min(len(p), room)]...)
		}
		return true
	}
	for {
		pl, ok, err := q.sp.next(&p)
		if err != nil {
			q.st.fail(err, q.r.reqCtx, q.r.reqCtx)
			q.stopped = true
			return false
		}
		if !ok {
			return true
		}
		if !q.st.payload(pl, at) {
			q.stopped = true
			return false
		}
	}
}

// Done completes the request as handleResponse and readStream do on the
// other path.
func (q *loopReq) Done(err error) {
	r, rec := q.r, &q.rec
	rec.SentNs = q.Sent
	switch {
	case !q.head:
		rec.Status, rec.Error = classify(err, r.reqCtx, r.reqCtx)
	case q.status != http.StatusOK:
		rec.Status = traces.StatusHTTPError
		rec.Error = "HTTP " + strconv.Itoa(q.status)
		var c chunk
		if parseChunk(bytes.TrimSpace(q.errBody), &c) == nil && c.isError {
			rec.Error += errSuffix(&c)
		}
	default:
		if !q.stopped {
			if err == nil {
				if pl, ok := q.sp.last(); ok && !q.st.payload(pl, q.lastAt) {
					err = h1.ErrStopped
				} else {
					err = io.EOF
				}
			}
			if err != h1.ErrStopped {
				q.st.fail(err, r.reqCtx, r.reqCtx)
			}
		}
		q.st.end()
		decodeSide(rec) // replica.go
	}
	if cap(rec.ChunkNs) > cap(q.ns) {
		q.ns = rec.ChunkNs[:0] // a stream longer than asked for
	}
	if cap(rec.ChunkTokens) > cap(q.toks) {
		q.toks = rec.ChunkTokens[:0]
	}
	if len(rec.ChunkNs) == 0 {
		rec.ChunkNs, rec.ChunkTokens = nil, nil // as appending to nil leaves them
	}
	r.live.inflight.Add(-1)
	r.finishedQ.push(q) // the collector records it (collect.go)
}

// slab hands out chunk-time slices from large shared arrays, so a result
// row's columns cost no allocation of their own. The arrays are never
// reused: rows keep what they were given. The collector alone uses it.
type slab struct {
	i64 []int64
	i32 []int32
}

const slabLen = 16 << 10

func (s *slab) int64s(n int) []int64 { return carve(&s.i64, n) }

func (s *slab) int32s(n int) []int32 { return carve(&s.i32, n) }

// carve cuts an empty slice of capacity n from the front of *pool,
// refilling the pool with a new slab when n does not fit; an n past an
// eighth of a slab gets an allocation of its own.
func carve[T any](pool *[]T, n int) []T {
	if n > len(*pool) {
		if n > slabLen/8 {
			return make([]T, 0, n)
		}
		*pool = make([]T, slabLen)
	}
	b := (*pool)[:0:n]
	*pool = (*pool)[n:]
	return b
}
