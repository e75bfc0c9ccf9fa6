// Package h1 is replay's HTTP/1.1 client for plain-http targets: pooled
// keep-alive connections whose reader goroutine completes each request, so
// the dispatcher can send from its own goroutine without hand-offs and
// without allocating in the steady state. https targets and proxies go
// through net/http instead.
package h1

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Client is a minimal HTTP/1.1 client for plain-http targets, built so a
// request costs the dispatcher no goroutine hand-off.
//
// Every connection has one reader goroutine for its whole life, parked in a
// read while the connection is idle in the pool. A request (an Job) is
// written by whichever goroutine starts it (the dispatcher, on the fast
// path); the network then wakes the connection's reader, which reads the
// response and hands it to the job's done callback, on its own goroutine.
// net/http instead runs two goroutines per connection and hands every
// request and response between them and the caller: at thousands of
// requests per second those hand-offs (futex wake-ups, idle Ps spinning to
// steal the woken goroutine) cost more CPU than the requests. https targets
// and proxies go through net/http.
type Client struct {
	host string // host:port to dial
	hdr  string // "Host: ...\r\n"
	idle idleStack
	dial net.Dialer

	// sets holds one cancelSet per cancellable context (keyed by its Done
	// channel): one context.AfterFunc per context rather than one per
	// request, which cost a map insert and delete in the context tree and
	// a runtime timer per request.
	smu   sync.Mutex
	sets  map[<-chan struct{}]*cancelSet
	live  sync.Map      // every open connection (*conn keys), for cancelSet.cancel
	unset []func() bool // stops the sets' AfterFuncs (closeIdle)

	// spare idle connections are kept ready by a dialer goroutine (see
	// KeepSpare); want wakes it, quit (under mu) ends it.
	spare atomic.Int64
	want  atomic.Pointer[chan struct{}]
	mu    sync.Mutex
	quit  chan struct{}

	// keep are the response headers whose values a Response keeps
	// (KeepHeaders), lower case.
	keep []string
}

// MaxKeptHeaders bounds KeepHeaders.
const MaxKeptHeaders = 4

// KeepHeaders makes every response keep the values of the named headers
// (at most MaxKeptHeaders; Response.Kept(i) is names[i]'s). Call it
// before the first request.
func (h *Client) KeepHeaders(names ...string) {
	h.keep = h.keep[:0]
	for _, n := range names[:min(len(names), MaxKeptHeaders)] {
		h.keep = append(h.keep, strings.ToLower(n))
	}
}

type conn struct {
	c  net.Conn
	br *bufio.Reader
	h  *Client
	// job is the request the connection carries: nil while idle, deadJob
	// once its reader found it closed. Whoever swaps nil for a job owns the
	// connection until the response is done.
	job atomic.Pointer[Job]
	// cs is the cancel set of the job's context while it is registered.
	cs atomic.Pointer[cancelSet]
	// idleSince is when it last went idle (dialed, or its response done).
	idleSince time.Time
}

// newConn wraps a dialed connection and counts it live (see cancelSet).
func (h *Client) newConn(nc net.Conn) *conn {
	c := &conn{c: nc, br: bufio.NewReaderSize(nc, 4<<10), h: h, idleSince: time.Now()}
	h.live.Store(c, struct{}{})
	return c
}

// close closes c and forgets it.
func (c *conn) close() {
	c.h.live.Delete(c)
	c.c.Close()
}

// deadJob marks a connection its reader found closed while idle.
var deadJob = new(Job)

// Job is one request.
type Job struct {
	ctx     context.Context
	timeout time.Duration
	// t0 and sent: start stores the send offset from t0 in *sent (nil: not
	// wanted), once, before the first attempt.
	t0   time.Time
	sent *int64

	// head is the request head, or the whole request when body is nil.
	head, body []byte

	deadline time.Time
	reused   bool // the current attempt runs on a pooled connection
	attempt  int
	wrote    chan error // the writer's result for the current attempt
	cs       *cancelSet // where the connection is registered, if anywhere

	// done gets the response once its header arrived, or the error, on the
	// connection's reader goroutine. It must not keep the response after it
	// returns (the reader closes it then).
	done func(*Response, error)
	// recycle, when set, is called once nothing refers to the job any more
	// (after done and the response's Close), so it can be reused.
	recycle func()
}

// unregister takes c out of j's cancel set; false when the context was
// cancelled meanwhile (c's deadline was moved to the past).
func (j *Job) unregister(c *conn) bool {
	if j.cs == nil {
		return true
	}
	cs := j.cs
	j.cs = nil
	return cs.remove(c)
}

// Init readies a job for reuse: done gets each response (or error) on the
// connection's reader goroutine; recycle, if set, is called once nothing
// refers to the job any more.
func (j *Job) Init(done func(*Response, error), recycle func()) {
	j.wrote = make(chan error, 1)
	j.done, j.recycle = done, recycle
}

// Prepare sets a recycled job's request: req is the whole rendered request
// (head and body, see AppendHead and EndHead); the send offset from t0 is
// stored in *sent (nil: not wanted) before the first attempt.
func (j *Job) Prepare(ctx context.Context, timeout time.Duration, t0 time.Time, sent *int64, req []byte) {
	j.reset()
	j.ctx, j.timeout, j.t0, j.sent = ctx, timeout, t0, sent
	j.head, j.body = req, nil
}

// StatusCode is the response's HTTP status.
func (r *Response) StatusCode() int { return r.status }

// reset readies a recycled job for a new request.
func (j *Job) reset() {
	j.deadline = time.Time{}
	j.reused, j.attempt, j.cs = false, 0, nil
}

// cancelSet interrupts the connections in use by the requests of one
// context when it is cancelled. It takes no lock: a connection registers
// by pointing at the set (conn.cs), and cancel looks through the client's
// live connections for those that do. A sync.Mutex here, held by a reader
// the real-time dispatcher had preempted, parked the dispatcher for up to
// 2.9 ms (execution trace of a 10k req/s one-core run).
type cancelSet struct {
	h    *Client
	done atomic.Bool
}

// add registers c; false when the context is already cancelled.
func (s *cancelSet) add(c *conn) bool {
	c.cs.Store(s)
	if s.done.Load() {
		c.cs.CompareAndSwap(s, nil)
		return false
	}
	return true
}

// remove unregisters c; false when the context was cancelled while c was
// registered (its deadline may have been moved to the past: not
// reusable). cancel sets done before it looks at c.cs, and remove clears
// c.cs before it looks at done, so one of them sees the other.
func (s *cancelSet) remove(c *conn) bool {
	c.cs.CompareAndSwap(s, nil)
	return !s.done.Load()
}

func (s *cancelSet) cancel() {
	s.done.Store(true)
	s.h.live.Range(func(k, _ any) bool {
		if c := k.(*conn); c.cs.Load() == s {
			c.c.SetDeadline(time.Unix(1, 0))
		}
		return true
	})
}

// cancelSet returns the set for ctx, nil when ctx cannot be cancelled.
func (h *Client) cancelSet(ctx context.Context) *cancelSet {
	done := ctx.Done()
	if done == nil {
		return nil
	}
	h.smu.Lock()
	defer h.smu.Unlock()
	s := h.sets[done]
	if s == nil {
		if h.sets == nil {
			h.sets = map[<-chan struct{}]*cancelSet{}
		}
		s = &cancelSet{h: h}
		h.sets[done] = s
		h.unset = append(h.unset, context.AfterFunc(ctx, s.cancel))
	}
	return s
}

func New(base string) (*Client, error) {
	u, err := url.Parse(base)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return nil, errors.New("not a plain http URL")
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "80")
	}
	return &Client{host: host, hdr: "Host: " + u.Host + "\r\n",
		dial: net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}}, nil
}

func (h *Client) get() *conn {
	if w := h.want.Load(); w != nil && h.idle.len() <= h.spare.Load() {
		select {
		case *w <- struct{}{}:
		default:
		}
	}
	return h.idle.pop()
}

// KeepSpare keeps at least n idle connections ready, dialed by a goroutine
// of their own whenever a request leaves n or fewer in the pool, until
// CloseIdle. Without spares, a request that finds the pool empty dials on
// the caller's path: at 10k req/s one stall of the dispatcher put more
// requests in flight than the pool held, and each new connection cost the
// dispatcher a hand-off to a worker (up to 1.8 ms in an execution trace).
// The dialer gives up until the next request when a dial fails.
func (h *Client) KeepSpare(n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if n <= 0 || h.quit != nil {
		return
	}
	h.spare.Store(int64(n))
	want := make(chan struct{}, 1)
	h.quit = make(chan struct{})
	h.want.Store(&want)
	go h.dialSpares(want, h.quit)
}

func (h *Client) dialSpares(want, quit <-chan struct{}) {
	for {
		select {
		case <-want:
		case <-quit:
			return
		}
		for h.idle.len() < 2*h.spare.Load() {
			d := h.dial
			d.Deadline = time.Now().Add(5 * time.Second)
			nc, err := d.Dial("tcp", h.host)
			if err != nil {
				break
			}
			c := h.newConn(nc)
			h.mu.Lock()
			closed := h.quit == nil // CloseIdle ran meanwhile
			if !closed {
				h.idle.push(c)
			}
			h.mu.Unlock()
			if closed {
				c.close()
				return
			}
			go c.loop()
		}
	}
}

func (h *Client) put(c *conn) {
	c.c.SetDeadline(time.Time{})
	c.idleSince = time.Now()
	c.job.Store(nil)
	h.idle.push(c)
}

// peekIdle is how long a connection sits idle before it is looked at
// (connClosed) before a request is written on it: a server closes a silent
// connection on a timer (net/http's ReadHeaderTimeout, uvicorn's
// keep-alive timeout), spares dialed together all at once, and a request
// written on one that its reader has not yet seen closed would fail. A
// connection reused sooner costs no look.
const peekIdle = 200 * time.Millisecond

// idleStack is the pool of idle connections, newest on top (the warmest,
// and the least likely to have hit the server's keep-alive timeout). It
// takes no lock: the dispatcher pops from it on a real-time thread, and a
// sync.Mutex that a connection reader held when the dispatcher preempted it
// parked the dispatcher for up to 1.7 ms (the Go scheduler has to hand its
// P back). Every push has a node of its own, so a node is never reused
// while a pop may still hold it (no ABA). A connection its reader found
// closed stays in the stack until popped: its job is deadJob, so Start
// skips it.
type idleStack struct {
	head atomic.Pointer[idleNode]
	n    atomic.Int64
}

type idleNode struct {
	c    *conn
	next *idleNode
}

func (s *idleStack) push(c *conn) {
	nd := &idleNode{c: c}
	for {
		nd.next = s.head.Load()
		if s.head.CompareAndSwap(nd.next, nd) {
			s.n.Add(1)
			return
		}
	}
}

func (s *idleStack) pop() *conn {
	for {
		top := s.head.Load()
		if top == nil {
			return nil
		}
		if s.head.CompareAndSwap(top, top.next) {
			s.n.Add(-1)
			return top.c
		}
	}
}

// len is how many connections the stack holds (closed ones included).
func (s *idleStack) len() int64 { return s.n.Load() }

// CloseIdle closes the idle connections and detaches the client from the
// contexts it watched (a long-lived parent context must not keep it).
func (h *Client) CloseIdle() {
	h.mu.Lock()
	if h.quit != nil {
		close(h.quit)
		h.quit = nil
		h.want.Store(nil)
	}
	h.mu.Unlock()
	h.smu.Lock()
	for _, stop := range h.unset {
		stop()
	}
	h.unset = nil
	h.smu.Unlock()
	for c := h.idle.pop(); c != nil; c = h.idle.pop() {
		c.close()
	}
}

// Response is a response being read.
type Response struct {
	status int
	body   io.Reader
	conn   *conn
	client *Client
	reuse  bool
	job    *Job
	done   bool
	pooled bool // finish put the connection back in the pool
	// release, when set, is closed by finish (the synchronous do waits on it).
	release chan struct{}
	// kept are the values of the client's KeepHeaders ("" = absent).
	kept [MaxKeptHeaders]string
}

// Kept is the value of the i-th header of the client's KeepHeaders ("" when
// the response did not carry it).
func (r *Response) Kept(i int) string {
	if i < 0 || i >= MaxKeptHeaders {
		return ""
	}
	return r.kept[i]
}

// Read reads the body; at its end a reusable connection goes back to the
// pool.
func (r *Response) Read(p []byte) (int, error) {
	if r.done {
		return 0, io.EOF
	}
	n, err := r.body.Read(p)
	if err == io.EOF {
		r.finish(true)
	}
	return n, err
}

// finish releases the connection: back to the pool when the body was read to
// its end and the server keeps the connection, else closed.
func (r *Response) finish(atEOF bool) {
	if r.done {
		return
	}
	r.done = true
	stopped := r.job.unregister(r.conn)
	if atEOF && r.reuse && stopped {
		r.pooled = true
		r.client.put(r.conn)
	} else {
		r.conn.close()
	}
	if r.release != nil {
		close(r.release)
	}
}

func (r *Response) Close() error { r.finish(false); return nil }

// errH1Stale marks a pooled connection the server had closed before our
// request reached it (safe to retry on a new one).
var errH1Stale = errors.New("stale keep-alive connection")

// newJob renders the request head of a POST.
func (h *Client) newJob(ctx context.Context, timeout time.Duration, path string, hdr http.Header, extra [][2]string, body []byte) *Job {
	head := h.AppendHead(make([]byte, 0, 256), path, hdr)
	for _, kv := range extra {
		head = append(head, kv[0]...)
		head = append(head, ": "...)
		head = append(head, kv[1]...)
		head = append(head, "\r\n"...)
	}
	head = EndHead(head, len(body))
	return &Job{ctx: ctx, timeout: timeout, head: head, body: body, wrote: make(chan error, 1)}
}

// AppendHead appends a POST's request line and headers, up to the
// per-request ones (see endHead).
func (h *Client) AppendHead(head []byte, path string, hdr http.Header) []byte {
	head = append(head, "POST "...)
	head = append(head, path...)
	head = append(head, " HTTP/1.1\r\n"...)
	head = append(head, h.hdr...)
	for k, vs := range hdr {
		for _, v := range vs {
			head = append(head, k...)
			head = append(head, ": "...)
			head = append(head, v...)
			head = append(head, "\r\n"...)
		}
	}
	return head
}

// EndHead appends the Content-Length header and the blank line.
func EndHead(head []byte, bodyLen int) []byte {
	head = append(head, "Content-Length: "...)
	head = strconv.AppendInt(head, int64(bodyLen), 10)
	return append(head, "\r\n\r\n"...)
}

// Do sends a POST and returns the response once its header arrived; the
// request times out after timeout and fails with ctx's error when ctx is
// cancelled. The caller must Close the response. It is start, waiting for
// the connection's reader to hand the response over.
func (h *Client) Do(ctx context.Context, timeout time.Duration, path string, hdr http.Header, extra [][2]string, body []byte) (*Response, error) {
	j := h.newJob(ctx, timeout, path, hdr, extra, body)
	type result struct {
		resp *Response
		err  error
	}
	ch := make(chan result, 1)
	j.done = func(resp *Response, err error) {
		if resp == nil {
			ch <- result{nil, err}
			return
		}
		release := make(chan struct{})
		resp.release = release
		ch <- result{resp, nil}
		<-release // the caller reads the body on its goroutine, then Closes
	}
	h.Start(j, true)
	res := <-ch
	return res.resp, res.err
}

// Start sends j on an idle connection, or on a new one when dial is true.
// It returns false, having done nothing, when no connection is idle and
// dial is false. Otherwise j.done is called exactly once, on a reader
// goroutine (or on this one when dialing fails).
func (h *Client) Start(j *Job, dial bool) bool {
	for {
		c := h.get()
		if c == nil && !dial {
			return false
		}
		if j.sent != nil && j.attempt == 0 {
			*j.sent = int64(time.Since(j.t0))
			j.sent = nil
		}
		if j.deadline.IsZero() {
			j.deadline = time.Now().Add(j.timeout)
			if dl, ok := j.ctx.Deadline(); ok && dl.Before(j.deadline) {
				j.deadline = dl
			}
		}
		j.reused = c != nil
		if c == nil {
			d := h.dial
			d.Deadline = j.deadline
			nc, err := d.DialContext(j.ctx, "tcp", h.host)
			if err != nil {
				j.done(nil, ctxErr(j.ctx, err))
				if j.recycle != nil {
					j.recycle()
				}
				return true
			}
			c = h.newConn(nc)
			c.job.Store(j)
			go c.loop()
		} else if time.Since(c.idleSince) > peekIdle && connClosed(c.c) {
			// The server closed it while idle: whoever marks it dead
			// first (here, or its reader) closes it.
			if c.job.CompareAndSwap(nil, deadJob) {
				c.close()
			}
			continue
		} else if !c.job.CompareAndSwap(nil, j) {
			continue // its reader found it closed
		}
		h.write(c, j)
		return true
	}
}

// write sends j's request on c (owned by j) and tells c's reader how it
// went.
func (h *Client) write(c *conn, j *Job) {
	c.c.SetDeadline(j.deadline)
	if cs := h.cancelSet(j.ctx); cs != nil {
		if !cs.add(c) {
			c.c.SetDeadline(time.Unix(1, 0)) // wake the reader
			j.wrote <- j.ctx.Err()
			return
		}
		j.cs = cs
	}
	var err error
	if j.body == nil {
		_, err = c.c.Write(j.head) // the whole request: no allocation
	} else {
		bufs := net.Buffers{j.head, j.body}
		_, err = bufs.WriteTo(c.c)
	}
	if err != nil {
		c.c.SetDeadline(time.Unix(1, 0)) // make sure the reader wakes
	}
	j.wrote <- err
}

// loop is c's reader goroutine: it waits for bytes (or an error), reads
// the response of the job c carries and hands it to the job, and goes on
// while c is kept alive.
func (c *conn) loop() {
	h := c.h
	for {
		c.br.Peek(1) // park until the server says something (or a deadline)
		j := c.job.Load()
		if j == nil {
			if c.job.CompareAndSwap(nil, deadJob) {
				// Idle: the server closed it, or sent bytes nobody asked for.
				// It stays in the pool until popped (see idleStack).
				c.close()
				return
			}
			j = c.job.Load()
		}
		if j == deadJob {
			return // Start found it closed by the server and closed it
		}
		var (
			resp *Response
			err  error
		)
		if werr := <-j.wrote; werr != nil {
			err = werr
			if j.ctx.Err() == nil && isReset(werr) {
				err = fmt.Errorf("%w: %v", errH1Stale, werr) // the server never got the whole request
			}
		} else {
			resp, err = h.readHead(j, c)
		}
		if err != nil {
			j.unregister(c)
			c.close()
			if j.reused && errors.Is(err, errH1Stale) && j.attempt < 2 && j.ctx.Err() == nil {
				j.attempt++
				h.Start(j, true) // on a new connection; this reader is done
				return
			}
			if errors.Is(err, errH1Stale) {
				err = io.ErrUnexpectedEOF
			}
			j.done(nil, ctxErr(j.ctx, err))
			if j.recycle != nil {
				j.recycle()
			}
			return
		}
		j.done(resp, nil)
		resp.Close()
		pooled := resp.pooled
		if j.recycle != nil {
			j.recycle()
		}
		if !pooled {
			return
		}
	}
}

// readHead reads the status line and headers of j's response on c.
func (h *Client) readHead(j *Job, c *conn) (*Response, error) {
	ctx := j.ctx
	line, err := c.br.ReadSlice('\n')
	if err != nil {
		if len(line) == 0 && (err == io.EOF || errors.Is(err, net.ErrClosed) || isReset(err)) && ctx.Err() == nil {
			return nil, errH1Stale
		}
		return nil, ctxErr(ctx, err)
	}
	var hd head
	if err := hd.statusLine(line); err != nil {
		return nil, err
	}
	for {
		l, err := c.br.ReadSlice('\n')
		if err != nil {
			return nil, ctxErr(ctx, err)
		}
		if !hd.header(l, h.keep) {
			break
		}
	}
	status, reuse, length, chunked := hd.status, hd.reuse, hd.length, hd.chunked
	r := &Response{status: status, conn: c, client: h, reuse: reuse, job: j, kept: hd.kept}
	switch {
	case chunked:
		r.body = &chunkedReader{br: c.br}
	case length >= 0:
		r.body = io.LimitReader(c.br, length)
	default:
		r.body = c.br // until the server closes
		r.reuse = false
	}
	r.body = &ctxReader{r: r.body, ctx: ctx}
	return r, nil
}

// ctxReader turns the deadline errors of a cancelled or timed-out request
// back into its context's error, so classify can tell them apart.
type ctxReader struct {
	r   io.Reader
	ctx context.Context
}

func (c *ctxReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if err != nil && err != io.EOF {
		err = ctxErr(c.ctx, err)
	}
	return n, err
}

func ctxErr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("%w (%v)", cerr, err)
	}
	return err
}

func isReset(err error) bool {
	var ne *net.OpError
	return errors.As(err, &ne) && !ne.Timeout()
}

// head is what a response's status line and headers say about it.
type head struct {
	status  int
	reuse   bool  // HTTP/1.1 and no "Connection: close"
	length  int64 // Content-Length, -1 when absent
	chunked bool
	kept    [MaxKeptHeaders]string // the values of the client's KeepHeaders
}

// statusLine reads "HTTP/1.1 200 OK".
func (hd *head) statusLine(line []byte) error {
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return errors.New("malformed HTTP status line")
	}
	status, err := strconv.Atoi(string(line[9:12]))
	if err != nil {
		return errors.New("malformed HTTP status line")
	}
	*hd = head{status: status, reuse: line[7] == '1', length: -1}
	return nil
}

// header reads one header line (its line end included), keeping the
// values of the headers named in keep (lower case); false at the blank
// line that ends the head.
func (hd *head) header(l []byte, keep []string) bool {
	l = bytes.TrimRight(l, "\r\n")
	if len(l) == 0 {
		return false
	}
	k, v, ok := bytes.Cut(l, []byte(":"))
	if !ok {
		return true
	}
	v = bytes.TrimSpace(v)
	switch {
	case asciiEqualFold(k, "content-length"):
		if n, err := strconv.ParseInt(string(v), 10, 64); err == nil && n >= 0 {
			hd.length = n
		}
	case asciiEqualFold(k, "transfer-encoding"):
		hd.chunked = bytes.Contains(bytes.ToLower(v), []byte("chunked"))
	case asciiEqualFold(k, "connection"):
		if bytes.Contains(bytes.ToLower(v), []byte("close")) {
			hd.reuse = false
		}
	default:
		for i, name := range keep {
			if hd.kept[i] == "" && asciiEqualFold(k, name) {
				hd.kept[i] = string(v)
			}
		}
	}
	return true
}

func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		c := b[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

var errChunked = errors.New("malformed chunked encoding")

// chunkSize reads a chunk-size line (extensions and line end included).
func chunkSize(line []byte) (int64, error) {
	line = bytes.TrimRight(line, "\r\n")
	if i := bytes.IndexByte(line, ';'); i >= 0 {
		line = line[:i]
	}
	n, err := strconv.ParseInt(string(bytes.TrimSpace(line)), 16, 64)
	if err != nil || n < 0 {
		return 0, errChunked
	}
	return n, nil
}

// chunkedReader decodes Transfer-Encoding: chunked.
type chunkedReader struct {
	br   *bufio.Reader
	left int64 // bytes left in the current chunk
	eof  bool
}

func (c *chunkedReader) Read(p []byte) (int, error) {
	if c.eof {
		return 0, io.EOF
	}
	for c.left == 0 {
		line, err := c.br.ReadSlice('\n')
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return 0, err
		}
		n, err := chunkSize(line)
		if err != nil {
			return 0, err
		}
		if n == 0 {
			// trailers, then the empty line
			for {
				l, err := c.br.ReadSlice('\n')
				if err != nil {
					if err == io.EOF {
						err = io.ErrUnexpectedEOF
					}
					return 0, err
				}
				if len(bytes.TrimRight(l, "\r\n")) == 0 {
					break
				}
			}
			c.eof = true
			return 0, io.EOF
		}
		c.left = n
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.br.Read(p)
	c.left -= int64(n)
	if c.left == 0 && err == nil {
		// the CRLF after the chunk data: anything else is a malformed
		// stream (as the event loop's parser and net/http say), not two
		// bytes to skip
		crlf, err := c.br.Peek(2)
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return n, err
		}
		if crlf[0] != '\r' || crlf[1] != '\n' {
			return n, errChunked
		}
		c.br.Discard(2)
	}
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}
