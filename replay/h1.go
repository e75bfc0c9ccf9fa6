package replay

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
	"sync"
	"time"
)

// h1Client is a minimal HTTP/1.1 client for plain-http targets: the worker
// goroutine writes the request and reads the streamed response itself, on a
// pooled keep-alive connection. net/http runs two goroutines per connection
// and hands every request and response between them; at thousands of
// requests per second those hand-offs (and their futex wake-ups) cost more
// CPU than the requests. https targets and proxies go through net/http.
type h1Client struct {
	host string // host:port to dial
	hdr  string // "Host: ...\r\n"
	mu   sync.Mutex
	idle []*h1Conn
	dial net.Dialer
}

type h1Conn struct {
	c  net.Conn
	br *bufio.Reader
}

func newH1Client(base string) (*h1Client, error) {
	u, err := url.Parse(base)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return nil, errors.New("not a plain http URL")
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "80")
	}
	return &h1Client{host: host, hdr: "Host: " + u.Host + "\r\n",
		dial: net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}}, nil
}

func (h *h1Client) get() *h1Conn {
	h.mu.Lock()
	defer h.mu.Unlock()
	if n := len(h.idle); n > 0 {
		c := h.idle[n-1]
		h.idle = h.idle[:n-1]
		return c
	}
	return nil
}

func (h *h1Client) put(c *h1Conn) {
	c.c.SetDeadline(time.Time{})
	h.mu.Lock()
	h.idle = append(h.idle, c)
	h.mu.Unlock()
}

func (h *h1Client) closeIdle() {
	h.mu.Lock()
	idle := h.idle
	h.idle = nil
	h.mu.Unlock()
	for _, c := range idle {
		c.c.Close()
	}
}

// h1Response is a response being read.
type h1Response struct {
	status int
	body   io.Reader
	conn   *h1Conn
	client *h1Client
	reuse  bool
	stop   func() bool
	done   bool
}

// Read reads the body; at its end a reusable connection goes back to the
// pool.
func (r *h1Response) Read(p []byte) (int, error) {
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
func (r *h1Response) finish(atEOF bool) {
	if r.done {
		return
	}
	r.done = true
	stopped := r.stop()
	if atEOF && r.reuse && stopped {
		r.client.put(r.conn)
		return
	}
	r.conn.c.Close()
}

func (r *h1Response) Close() error { r.finish(false); return nil }

// errH1Stale marks a pooled connection the server had closed before our
// request reached it (safe to retry on a new one).
var errH1Stale = errors.New("stale keep-alive connection")

// do sends a POST and returns the response once its header arrived. The
// caller must Close the response.
func (h *h1Client) do(ctx context.Context, path string, hdr http.Header, extra [][2]string, body []byte) (*h1Response, error) {
	var head bytes.Buffer
	head.Grow(256)
	head.WriteString("POST ")
	head.WriteString(path)
	head.WriteString(" HTTP/1.1\r\n")
	head.WriteString(h.hdr)
	for k, vs := range hdr {
		for _, v := range vs {
			head.WriteString(k)
			head.WriteString(": ")
			head.WriteString(v)
			head.WriteString("\r\n")
		}
	}
	for _, kv := range extra {
		head.WriteString(kv[0])
		head.WriteString(": ")
		head.WriteString(kv[1])
		head.WriteString("\r\n")
	}
	head.WriteString("Content-Length: ")
	head.WriteString(strconv.Itoa(len(body)))
	head.WriteString("\r\n\r\n")
	for attempt := 0; ; attempt++ {
		c := h.get()
		reused := c != nil
		if c == nil {
			nc, err := h.dial.DialContext(ctx, "tcp", h.host)
			if err != nil {
				return nil, err
			}
			c = &h1Conn{c: nc, br: bufio.NewReaderSize(nc, 4<<10)}
		}
		resp, err := h.roundTrip(ctx, c, head.Bytes(), body)
		if err == nil {
			return resp, nil
		}
		c.c.Close()
		if reused && errors.Is(err, errH1Stale) && attempt < 2 && ctx.Err() == nil {
			continue
		}
		if errors.Is(err, errH1Stale) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
}

func (h *h1Client) roundTrip(ctx context.Context, c *h1Conn, head, body []byte) (*h1Response, error) {
	if dl, ok := ctx.Deadline(); ok {
		c.c.SetDeadline(dl)
	}
	// Cancellation (drain over) interrupts blocked reads and writes.
	stop := context.AfterFunc(ctx, func() { c.c.SetDeadline(time.Unix(1, 0)) })
	bufs := net.Buffers{head, body}
	if _, err := bufs.WriteTo(c.c); err != nil {
		stop()
		if ctx.Err() == nil && isReset(err) {
			return nil, fmt.Errorf("%w: %v", errH1Stale, err) // the server never got the whole request
		}
		return nil, ctxErr(ctx, err)
	}
	line, err := c.br.ReadSlice('\n')
	if err != nil {
		stop()
		if len(line) == 0 && (err == io.EOF || errors.Is(err, net.ErrClosed) || isReset(err)) {
			return nil, errH1Stale
		}
		return nil, ctxErr(ctx, err)
	}
	// "HTTP/1.1 200 OK"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		stop()
		return nil, errors.New("malformed HTTP status line")
	}
	status, err := strconv.Atoi(string(line[9:12]))
	if err != nil {
		stop()
		return nil, errors.New("malformed HTTP status line")
	}
	reuse := line[7] == '1'
	length := int64(-1)
	chunked := false
	for {
		l, err := c.br.ReadSlice('\n')
		if err != nil {
			stop()
			return nil, ctxErr(ctx, err)
		}
		l = bytes.TrimRight(l, "\r\n")
		if len(l) == 0 {
			break
		}
		k, v, ok := bytes.Cut(l, []byte(":"))
		if !ok {
			continue
		}
		v = bytes.TrimSpace(v)
		switch {
		case asciiEqualFold(k, "content-length"):
			if n, err := strconv.ParseInt(string(v), 10, 64); err == nil && n >= 0 {
				length = n
			}
		case asciiEqualFold(k, "transfer-encoding"):
			chunked = bytes.Contains(bytes.ToLower(v), []byte("chunked"))
		case asciiEqualFold(k, "connection"):
			if bytes.Contains(bytes.ToLower(v), []byte("close")) {
				reuse = false
			}
		}
	}
	r := &h1Response{status: status, conn: c, client: h, reuse: reuse, stop: stop}
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
		line = bytes.TrimRight(line, "\r\n")
		if i := bytes.IndexByte(line, ';'); i >= 0 {
			line = line[:i]
		}
		n, err := strconv.ParseInt(string(bytes.TrimSpace(line)), 16, 64)
		if err != nil || n < 0 {
			return 0, errors.New("malformed chunked encoding")
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
		// the CRLF after the chunk data
		if _, err := c.br.Discard(2); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return n, err
		}
	}
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}
