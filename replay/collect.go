package replay

import (
	"runtime"
	"sync/atomic"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// The event loop's finished requests are recorded by a collector
// goroutine, not on the dispatcher's thread: there a finished request is
// only linked onto a lock-free stack (one compare-and-swap), and every
// collectEvery the collector makes each one's result row (its chunk
// columns copied into a slab of its own), records it (live counters, the
// summary, the run's rows) and links the request back for the loop to
// reuse. Whatever grows with the run (the rows, the summary's values, the
// journal's batch) is touched off the dispatcher's thread, and the
// dispatcher never waits for a lock the journal or the progress line
// holds. Recording on the dispatcher's thread made a sawtooth of late
// sends: the run's rows were one slice, and each time it grew (every
// 30-60 ms at 10k req/s) the thread copied the whole journal period's
// rows into fresh memory, up to 1 MB by the end of a 250 ms period.

// collectEvery is how often the collector records the event loop's
// finished requests. It bounds how late a finished request reaches the
// progress line and the journal, not its times.
const collectEvery = 5 * time.Millisecond

// reqStack is a lock-free stack of event-loop requests, linked through
// loopReq.next. Any goroutine may push; takeAll takes the whole stack, so
// no pop races another (no ABA).
type reqStack struct{ head atomic.Pointer[loopReq] }

func (s *reqStack) push(q *loopReq) { s.pushChain(q, q) }

// pushChain pushes the list first..last (linked through next) at once.
func (s *reqStack) pushChain(first, last *loopReq) {
	for {
		h := s.head.Load()
		last.next = h
		if s.head.CompareAndSwap(h, first) {
			return
		}
	}
}

// takeAll empties the stack and returns its requests, the last pushed
// first.
func (s *reqStack) takeAll() *loopReq { return s.head.Swap(nil) }

// startCollector starts recording the event loop's finished requests
// every collectEvery until stopCollector.
func (r *runner) startCollector() {
	r.collStop, r.collDone = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(r.collDone)
		t := time.NewTicker(collectEvery)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				r.collect()
			case <-r.collStop:
				r.collect()
				return
			}
		}
	}()
}

// stopCollector records what is left and stops the collector; the loop
// must finish no more requests.
func (r *runner) stopCollector() {
	if r.collStop == nil {
		return
	}
	close(r.collStop)
	<-r.collDone
	r.collStop = nil
}

// collect records the loop's finished requests in the order they
// finished and hands them back to the loop's thread.
func (r *runner) collect() {
	var first *loopReq
	for q := r.finishedQ.takeAll(); q != nil; {
		next := q.next
		q.next = first
		first, q = q, next
	}
	if first == nil {
		return
	}
	var last *loopReq
	n := 0
	for q := first; q != nil; q = q.next {
		if n++; n%collectPiece == 0 {
			runtime.Gosched() // see collectPiece
		}
		rec := q.rec
		rec.RequestID = requestID(r.o.Run, rec.Seq)
		if len(rec.ChunkNs) > 0 {
			rec.ChunkNs = append(r.slab.int64s(len(rec.ChunkNs)), rec.ChunkNs...)
		}
		if len(rec.ChunkTokens) > 0 {
			rec.ChunkTokens = append(r.slab.int32s(len(rec.ChunkTokens)), rec.ChunkTokens...)
		}
		r.complete(q.it, &rec)
		r.wg.Done()
		q.it = nil
		q.rec = traces.Record{}
		if cap(q.req) > 2*fastBodyMax {
			q.req = nil
		}
		last = q
	}
	r.loopBack.pushChain(first, last)
}

// collectPiece is how many finished requests collect records before it
// lets whatever waits for its P run: the collector may share a P with the
// dispatcher, which yields it at moments of its own choosing and must get
// it back within microseconds (thread_linux.go).
const collectPiece = 64

// recChunk is how many result rows one chunk of a run's rows holds (448
// bytes each).
const recChunk = 512

// maxSpareChunks bounds the written chunks kept for reuse.
const maxSpareChunks = 8

// rows is a run's finished result rows in chunks of recChunk: adding a
// row never moves the others, as appending to one slice did each time it
// grew. Chunks the journal wrote and let go (Options.RecordsInJournal)
// are reused, so a long run's rows stop taking fresh memory.
type rows struct {
	chunks [][]traces.Record
	n      int
	spare  [][]traces.Record
}

func (s *rows) add(rec *traces.Record) {
	k := len(s.chunks) - 1
	if k < 0 || len(s.chunks[k]) == cap(s.chunks[k]) {
		var c []traces.Record
		if m := len(s.spare); m > 0 {
			c, s.spare = s.spare[m-1], s.spare[:m-1]
		} else {
			c = make([]traces.Record, 0, recChunk)
		}
		s.chunks = append(s.chunks, c)
		k++
	}
	s.chunks[k] = append(s.chunks[k], *rec)
	s.n++
}

// since returns the rows from the i-th on as views of the chunks, valid
// while nothing is taken or put back; rows added meanwhile go past them.
func (s *rows) since(i int) [][]traces.Record {
	var out [][]traces.Record
	for _, c := range s.chunks {
		if i >= len(c) {
			i -= len(c)
			continue
		}
		out = append(out, c[i:len(c):len(c)])
		i = 0
	}
	return out
}

// take removes every row and returns their chunks.
func (s *rows) take() [][]traces.Record {
	c := s.chunks
	s.chunks, s.n = nil, 0
	return c
}

// putBack puts chunks that take returned back before the rows added since.
func (s *rows) putBack(c [][]traces.Record) {
	for _, x := range c {
		s.n += len(x)
	}
	s.chunks = append(c, s.chunks...)
}

// reuse keeps chunks that take returned, and that nobody reads any more,
// for the rows to come.
func (s *rows) reuse(c [][]traces.Record) {
	for _, x := range c {
		if len(s.spare) == maxSpareChunks {
			return
		}
		if cap(x) == recChunk {
			clear(x)
			s.spare = append(s.spare, x[:0])
		}
	}
}

// flat returns every row in one slice and empties s.
func (s *rows) flat() []traces.Record {
	if s.n == 0 {
		s.take()
		return nil
	}
	if len(s.chunks) == 1 {
		out := s.chunks[0]
		s.take()
		return out
	}
	out := make([]traces.Record, 0, s.n)
	for _, c := range s.take() {
		out = append(out, c...)
	}
	return out
}

// count is how many rows there are in chunks.
func count(chunks [][]traces.Record) int {
	n := 0
	for _, c := range chunks {
		n += len(c)
	}
	return n
}
