package capture

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/tokentrace/tokentrace/internal/kmerge"
)

// sessionID names a session before the records stage numbers it:
// 2×(arrival position of its first request + 1). 0 is no session.
type sessionID uint64

func firstOf(pos int) sessionID { return sessionID(2 * (uint64(pos) + 1)) }

// sessions is the sessions stage. Fed requests in arrival order, it finds
// each one's session: the session/user field when the log has one, else the
// chat conversation the request extends (its messages continue an earlier
// request's). A session ends when it has been idle for Options.SessionIdle:
// a later request with the same field, or extending the same conversation,
// starts a new one. So its state is what the last SessionIdle brought: per
// live field session and per chat request, one idleTable entry (about 30
// bytes).
// count holds the number of requests of the sessions the records stage has
// under way (see sessionCounter); done drops them after their last.
type sessions struct {
	mode string
	idle int64
	// v is the session (a sessionID), t the arrival of the last request.
	convEnd   idleTable // chat: hash of a whole message list → its session
	field     idleTable // field: session/user hash → its session
	nextSweep int64
	count     map[sessionID]int32
}

func newSessions(o Options) *sessions {
	return &sessions{mode: o.Sessions, idle: int64(o.SessionIdle), count: map[sessionID]int32{}}
}

// limit is the earliest time whose entries are still live at t.
func limitAt(t, idle int64) int64 {
	if l := t - idle; l <= t {
		return l
	}
	return math.MinInt64 // no limit this far back
}

// find returns the session of e, the request at arrival position pos.
func (s *sessions) find(e *redacted, pos int) sessionID {
	if s.mode == SessionsNone {
		return 0
	}
	limit := limitAt(e.t, s.idle)
	if e.t >= s.nextSweep {
		s.convEnd.sweep(limit, nil)
		s.field.sweep(limit, nil)
		s.nextSweep = e.t + sweepEvery(s.idle)
	}
	var id sessionID
	switch {
	case e.sessKey != 0:
		if f := s.field.find(e.sessKey); f != nil && f.t >= limit {
			id = sessionID(f.v)
		} else {
			id = firstOf(pos)
		}
		s.field.put(e.sessKey, uint64(id), e.t)
	case len(e.prefixes) > 0:
		// The longest earlier conversation this request extends, looking
		// no shorter than its system messages.
		for j := len(e.prefixes) - 2; j >= e.nSys && j >= 0; j-- {
			if p := s.convEnd.find(e.prefixes[j]); p != nil && p.t >= limit {
				id = sessionID(p.v)
				break
			}
		}
		if id == 0 {
			id = firstOf(pos)
		}
		s.convEnd.put(e.prefixes[len(e.prefixes)-1], uint64(id), e.t)
	}
	return id
}

// sweepEvery is how much arrival time passes between sweeps: a sixteenth
// of the idle limit, so an ended entry is kept at most 1/16 longer than the
// idle limit (memory is the sessions of the last SessionIdle + 6 %), at
// the cost of a pass over the table 16 times per SessionIdle of arrivals.
// Lookups ignore what a sweep has not yet removed, so the result does not
// depend on when sweeps run.
func sweepEvery(idle int64) int64 { return max(idle/16, 1) }

// kept reports whether session id has two or more requests: a single
// request is no session.
func (s *sessions) kept(id sessionID) bool { return id != 0 && s.count[id] >= 2 }

// done forgets session id after its last request.
func (s *sessions) done(id sessionID, turns int32) bool {
	if turns < s.count[id] {
		return false
	}
	delete(s.count, id)
	return true
}

// sessionCounter counts the requests of every session in a first pass, so
// that the second knows at a session's first request whether it will have
// more than one, and when its last has come. It holds the sessions under
// way (about 30 bytes each; ended once idle for SessionIdle, as in
// sessions) and writes each
// ended session with two or more requests to an ends store, which the
// second pass reads back in order of first request.
type sessionCounter struct {
	idle      int64
	live      idleTable // session → its count (v) and last arrival (t)
	nextSweep int64
	ends      *endsStore
}

func newSessionCounter(o Options, ends *endsStore) *sessionCounter {
	return &sessionCounter{idle: int64(o.SessionIdle), ends: ends}
}

// add counts a request of session id (not 0) at time t.
func (c *sessionCounter) add(id sessionID, t int64) error {
	if t >= c.nextSweep {
		// Sessions idle since before the limit have ended: no request can
		// join them any more (sessions.find ignores such entries).
		if err := c.live.sweep(limitAt(t, c.idle), c.end); err != nil {
			return err
		}
		c.nextSweep = t + sweepEvery(c.idle)
	}
	if ls := c.live.find(uint64(id)); ls != nil {
		ls.v++
		ls.t = t
	} else {
		c.live.put(uint64(id), 1, t)
	}
	return nil
}

// end keeps the count n of the ended session id.
func (c *sessionCounter) end(id, n uint64) error {
	if n < 2 {
		return nil // not a session: nothing for the second pass
	}
	return c.ends.add(sessionEnd{id: sessionID(id), count: int32(n)})
}

// finish ends every session still under way.
func (c *sessionCounter) finish() error {
	if err := c.live.each(c.end); err != nil {
		return err
	}
	c.live.reset()
	return c.ends.finish()
}

// sessionEnd is a session of two or more requests and their number.
type sessionEnd struct {
	id    sessionID
	count int32
}

// endsStore keeps sessionEnds for reading back by id (= order of first
// request): in memory up to maxEnds, beyond that in sorted runs in dir().
type endsStore struct {
	dir   func() (string, error)
	mem   []sessionEnd
	runs  []string
	max   int
	cur   *endsReader
	memAt int
}

// endsPerRun bounds the sessionEnds held in memory (16 MB); a variable so
// that tests can make the store spill.
var endsPerRun = 1 << 20

func newEndsStore(dir func() (string, error)) *endsStore {
	return &endsStore{dir: dir, max: endsPerRun}
}

func (es *endsStore) add(e sessionEnd) error {
	es.mem = append(es.mem, e)
	if len(es.mem) >= es.max {
		return es.spill()
	}
	return nil
}

func (es *endsStore) sortMem() {
	slices.SortFunc(es.mem, func(a, b sessionEnd) int { return cmp.Compare(a.id, b.id) })
}

func (es *endsStore) spill() error {
	dir, err := es.dir()
	if err != nil {
		return err
	}
	es.sortMem()
	name := filepath.Join(dir, fmt.Sprintf("sessions-%05d.bin", len(es.runs)))
	f, err := os.Create(name)
	if err != nil {
		return fmt.Errorf("spill session counts: %w", err)
	}
	es.runs = append(es.runs, name)
	bw := bufio.NewWriterSize(f, 64<<10)
	var b []byte
	for _, e := range es.mem {
		b = binary.AppendUvarint(b[:0], uint64(e.id))
		b = binary.AppendUvarint(b, uint64(e.count))
		if _, err = bw.Write(b); err != nil {
			break
		}
	}
	if err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("spill session counts: %w", err)
	}
	es.mem = es.mem[:0]
	return nil
}

// finish makes the store ready for reading.
func (es *endsStore) finish() error {
	if len(es.runs) > 0 && len(es.mem) > 0 {
		if err := es.spill(); err != nil {
			return err
		}
	}
	es.sortMem()
	if len(es.runs) > 0 {
		r, err := openEnds(es.runs)
		if err != nil {
			return err
		}
		es.cur = r
	}
	return nil
}

// take returns the count of session id if it is the next one stored, and
// moves past it. Call it with ids in increasing order.
func (es *endsStore) take(id sessionID) (int32, bool, error) {
	if es.cur != nil {
		return es.cur.take(id)
	}
	for es.memAt < len(es.mem) && es.mem[es.memAt].id < id {
		es.memAt++
	}
	if es.memAt < len(es.mem) && es.mem[es.memAt].id == id {
		es.memAt++
		return es.mem[es.memAt-1].count, true, nil
	}
	return 0, false, nil
}

func (es *endsStore) close() {
	if es.cur != nil {
		es.cur.close()
		es.cur = nil
	}
}

// endsReader merges the sorted runs of an endsStore.
type endsReader struct {
	files []*os.File
	m     *kmerge.Merger[sessionEnd]
}

func openEnds(names []string) (*endsReader, error) {
	r := &endsReader{}
	var srcs []kmerge.Source[sessionEnd]
	for _, n := range names {
		f, err := os.Open(n)
		if err != nil {
			r.close()
			return nil, fmt.Errorf("read session counts: %w", err)
		}
		r.files = append(r.files, f)
		br := bufio.NewReaderSize(f, 32<<10)
		srcs = append(srcs, func() (sessionEnd, bool, error) {
			id, err := binary.ReadUvarint(br)
			if err == io.EOF {
				return sessionEnd{}, false, nil
			}
			n, err2 := binary.ReadUvarint(br)
			if err = cmp.Or(err, err2); err != nil {
				return sessionEnd{}, false, fmt.Errorf("read session counts %s: %w", f.Name(), err)
			}
			return sessionEnd{id: sessionID(id), count: int32(n)}, true, nil
		})
	}
	m, err := kmerge.New(srcs, func(a, b sessionEnd) int { return cmp.Compare(a.id, b.id) })
	if err != nil {
		r.close()
		return nil, err
	}
	r.m = m
	return r, nil
}

func (r *endsReader) take(id sessionID) (int32, bool, error) {
	for {
		e, ok, err := r.m.Peek()
		if err != nil || !ok || e.id > id {
			return 0, false, err
		}
		r.m.Next()
		if e.id == id {
			return e.count, true, nil
		}
	}
}

func (r *endsReader) close() {
	for _, f := range r.files {
		f.Close()
	}
	r.files = nil
}
