package h1

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"time"
)

// A LoopHandler receives one response of a Loop, on the loop's thread.
type LoopHandler interface {
	// Head is called once the status line and headers arrived; kept are
	// the values of the client's KeepHeaders ("" = absent), valid during
	// the call.
	Head(status int, kept []string)
	// Body gets body bytes (chunked encoding removed) that reached the
	// socket at the run offset at; p is valid during the call only. It
	// returns false to stop reading: the connection is then closed and
	// Done gets ErrStopped.
	Body(p []byte, at int64) bool
	// Done ends the response: err is nil when the body arrived whole.
	Done(err error)
}

// LoopJob is one request of a Loop; embed it in a recycled struct so that
// sending allocates nothing.
type LoopJob struct {
	h        LoopHandler
	req      []byte
	deadline int64 // run offset at which the request times out
	attempt  int
	// Sent is the run offset just before the request was first written.
	Sent int64
}

// Prepare readies the job: req is the whole rendered request (see
// AppendHead and EndHead), h gets the response.
func (j *LoopJob) Prepare(h LoopHandler, req []byte) {
	j.h, j.req, j.attempt, j.Sent = h, req, 0, 0
}

// ErrStopped is what Done gets after Body returned false.
var ErrStopped = errors.New("response reading stopped by its handler")

// errTimeout is a request that outlived its timeout; it matches
// os.ErrDeadlineExceeded, as a connection deadline does on the other path.
var errTimeout = fmt.Errorf("request timed out: %w", os.ErrDeadlineExceeded)

// parser states of a loop connection's response.
const (
	stHead = iota
	stLength
	stChunkSize
	stChunkData
	stChunkEnd // the CRLF after a chunk's data
	stTrailer
	stUntilClose
)

// maxHead bounds a response head and a chunk-size or trailer line.
const maxHead = 64 << 10

// resp is the parse state of the response a loop connection is reading.
type resp struct {
	state int
	hd    head
	left  int64  // bytes left in the body (stLength) or the chunk (stChunkData, stChunkEnd)
	carry []byte // a head or line split over reads
	got   bool   // some bytes of this response arrived
	first bool   // the status line was read
	keep  []string
}

var errHeadTooLong = errors.New("HTTP response head too long")

// feed parses p, which arrived at at, handing body bytes to h. It returns
// done when the response ended (rest: whether bytes followed it, which
// makes the connection unusable), or an error.
func (r *resp) feed(p []byte, at int64, h LoopHandler) (done, rest bool, err error) {
	if len(p) > 0 {
		r.got = true
	}
	for len(p) > 0 {
		switch r.state {
		case stHead, stChunkSize, stTrailer:
			i := bytes.IndexByte(p, '\n')
			if i < 0 {
				if len(r.carry)+len(p) > maxHead {
					return false, false, errHeadTooLong
				}
				r.carry = append(r.carry, p...)
				return false, false, nil
			}
			line := p[:i+1]
			p = p[i+1:]
			if len(r.carry) > 0 {
				if len(r.carry)+len(line) > maxHead {
					return false, false, errHeadTooLong
				}
				r.carry = append(r.carry, line...)
				line = r.carry
			}
			done, err := r.line(line, h)
			r.carry = r.carry[:0]
			if err != nil || done {
				return done, len(p) > 0, err
			}
		case stLength, stChunkData, stUntilClose:
			n := len(p)
			if r.state != stUntilClose && int64(n) > r.left {
				n = int(r.left)
			}
			r.left -= int64(n)
			if !h.Body(p[:n], at) {
				return false, false, ErrStopped
			}
			p = p[n:]
			if r.state == stLength && r.left == 0 {
				return true, len(p) > 0, nil
			}
			if r.state == stChunkData && r.left == 0 {
				r.state, r.left = stChunkEnd, 2
			}
		case stChunkEnd:
			for r.left > 0 && len(p) > 0 {
				if want := "\r\n"[2-r.left]; p[0] != want {
					return false, false, errChunked
				}
				p = p[1:]
				r.left--
			}
			if r.left == 0 {
				r.state = stChunkSize
			}
		}
	}
	if r.state == stLength && r.left == 0 {
		return true, false, nil // Content-Length: 0
	}
	return false, false, nil
}

// line handles one whole line of the head, a chunk size or a trailer.
func (r *resp) line(line []byte, h LoopHandler) (done bool, err error) {
	switch r.state {
	case stHead:
		if !r.first {
			if err := r.hd.statusLine(line); err != nil {
				return false, err
			}
			r.first = true
			return false, nil
		}
		if r.hd.header(line, r.keep) {
			return false, nil
		}
		h.Head(r.hd.status, r.hd.kept[:])
		switch {
		case r.hd.chunked:
			r.state = stChunkSize
		case r.hd.length >= 0:
			r.state, r.left = stLength, r.hd.length
			return r.left == 0, nil
		default:
			r.state, r.hd.reuse = stUntilClose, false
		}
	case stChunkSize:
		n, err := chunkSize(line)
		if err != nil {
			return false, err
		}
		if n == 0 {
			r.state = stTrailer
		} else {
			r.state, r.left = stChunkData, n
		}
	case stTrailer:
		return len(bytes.TrimRight(line, "\r\n")) == 0, nil
	}
	return false, nil
}

// eof tells how a response ends when its connection closes: a body that
// runs until the close is whole, anything else was cut short.
func (r *resp) eof() (done bool) { return r.state == stUntilClose }

// runOffset converts a kernel receive timestamp (CLOCK_REALTIME, ns) into
// a run offset, with now the time just after the read and nowOff its run
// offset: the wall clock's relation to the monotonic one is taken at the
// read, so a step of the wall clock only matters if it fell between the
// bytes' arrival and their read. The result lies in [floor, nowOff]; a
// timestamp outside it (none, or a clock step) gives nowOff.
func runOffset(ts int64, now time.Time, nowOff, floor int64) int64 {
	if ts <= 0 {
		return nowOff
	}
	at := nowOff - (now.UnixNano() - ts)
	if at < floor || at > nowOff {
		return nowOff
	}
	return at
}
