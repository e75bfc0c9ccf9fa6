//go:build linux

package h1

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/internal/tcptest"
)

// rec is a LoopHandler that keeps what it got.
type rec struct {
	status int
	body   strings.Builder
	ats    []int64
	done   bool
	err    error
	stopAt int // Body returns false once the body is this long (0: never)
}

func (r *rec) Head(status int, _ []string) { r.status = status }
func (r *rec) Body(p []byte, at int64) bool {
	r.body.Write(p)
	r.ats = append(r.ats, at)
	return r.stopAt == 0 || r.body.Len() < r.stopAt
}
func (r *rec) Done(err error) { r.done, r.err = true, err }

// run sends req on l for each handler in turn, driving the loop until
// each is done (or 5 s pass).
func run(t *testing.T, l *Loop, req []byte, hs ...*rec) {
	t.Helper()
	for i, h := range hs {
		var j LoopJob
		j.Prepare(h, req)
		deadline := time.Now().Add(5 * time.Second)
		for !l.Send(&j) {
			if time.Now().After(deadline) {
				t.Fatalf("request %d: no idle connection in 5 s", i)
			}
			time.Sleep(time.Millisecond)
		}
		for !h.done && time.Now().Before(deadline) {
			l.Wait(10*time.Millisecond, false)
		}
		if !h.done {
			t.Fatalf("request %d: no response in 5 s", i)
		}
	}
}

// xServer answers every request with one event, "data: x\n\n"; set (nil =
// nothing) adjusts its http.Server before it starts, e.g. the timeouts
// after which it closes connections. It closes when the test ends.
func xServer(t *testing.T, set func(*http.Server)) *httptest.Server {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "data: x\n\n")
	}))
	if set != nil {
		set(srv.Config)
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// runX sends req on l and fails the test unless it reads xServer's event.
func runX(t *testing.T, l *Loop, req []byte, i int) {
	t.Helper()
	h := &rec{}
	run(t, l, req, h)
	if h.err != nil || h.body.String() != "data: x\n\n" {
		t.Fatalf("request %d: err %v body %q", i, h.err, h.body.String())
	}
}

// wantIdle fails the test if l still holds a request.
func wantIdle(t *testing.T, l *Loop) {
	t.Helper()
	if l.Inflight() != 0 {
		t.Errorf("%d requests still in flight", l.Inflight())
	}
}

func newLoop(t *testing.T, url string, timeout time.Duration) (*Loop, []byte) {
	t.Helper()
	c, err := New(url)
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.NewLoop(context.Background(), timeout, 2)
	if err != nil {
		t.Fatal(err)
	}
	l.Start(time.Now())
	t.Cleanup(l.Close)
	req := EndHead(c.AppendHead(nil, "/x", http.Header{"Accept": {"text/event-stream"}}), 2)
	return l, append(req, "{}"...)
}

// TestLoopResponses reads the response shapes a server sends through the
// loop: chunked streams flushed chunk by chunk, fixed lengths (also
// empty), a body until close, an error status; keep-alive connections
// are reused and receive times never run backwards nor before the send.
func TestLoopResponses(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		switch r.URL.Query().Get("m") {
		case "length":
			w.Header().Set("Content-Length", "5")
			io.WriteString(w, "hello")
		case "empty":
			w.Header().Set("Content-Length", "0")
		case "close":
			w.Header().Set("Connection", "close")
			w.Header().Set("Content-Length", "3")
			io.WriteString(w, "bye")
		case "error":
			w.WriteHeader(503)
			io.WriteString(w, `{"error":{"type":"overloaded"}}`)
		default:
			for i := range 5 {
				fmt.Fprintf(w, "data: %d\n\n", i)
				w.(http.Flusher).Flush()
				time.Sleep(2 * time.Millisecond)
			}
		}
	}))
	defer srv.Close()
	l, _ := newLoop(t, srv.URL, time.Minute)
	c, _ := New(srv.URL)
	reqFor := func(m string) []byte {
		b := EndHead(c.AppendHead(nil, "/x?m="+m, nil), 0)
		return b
	}
	cases := []struct {
		m, body string
		status  int
	}{
		{"stream", "data: 0\n\ndata: 1\n\ndata: 2\n\ndata: 3\n\ndata: 4\n\n", 200},
		{"length", "hello", 200},
		{"empty", "", 200},
		{"close", "bye", 200},
		{"error", `{"error":{"type":"overloaded"}}`, 503},
		{"stream", "data: 0\n\ndata: 1\n\ndata: 2\n\ndata: 3\n\ndata: 4\n\n", 200},
	}
	for _, tc := range cases {
		h := &rec{}
		var j LoopJob
		j.Prepare(h, reqFor(tc.m))
		run2 := func() {
			deadline := time.Now().Add(5 * time.Second)
			for !l.Send(&j) && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			for !h.done && time.Now().Before(deadline) {
				l.Wait(10*time.Millisecond, false)
			}
		}
		run2()
		if !h.done || h.err != nil || h.status != tc.status || h.body.String() != tc.body {
			t.Fatalf("%s: done %v err %v status %d body %q; want status %d body %q", tc.m, h.done, h.err, h.status, h.body.String(), tc.status, tc.body)
		}
		prev := j.Sent
		for _, at := range h.ats {
			if at < prev {
				t.Fatalf("%s: receive time %d before the previous one (or the send) %d", tc.m, at, prev)
			}
			prev = at
		}
		if tc.m == "stream" && len(h.ats) > 1 && h.ats[len(h.ats)-1]-h.ats[0] < int64(4*time.Millisecond) {
			t.Errorf("stream: chunks sent 2 ms apart were timed %v apart in all", time.Duration(h.ats[len(h.ats)-1]-h.ats[0]))
		}
	}
	wantIdle(t, l)
}

// TestLoopTimestampsAreArrivalTimes reads a response long after it
// arrived: the times handed to Body are when it reached the socket (the
// kernel's receive timestamp), not when it was read.
func TestLoopTimestampsAreArrivalTimes(t *testing.T) {
	srv := xServer(t, nil)
	l, req := newLoop(t, srv.URL, time.Minute)
	for l.idleN.Load() == 0 { // an idle connection: Send writes at once
		time.Sleep(time.Millisecond)
	}
	h := &rec{}
	var j LoopJob
	j.Prepare(h, req)
	if !l.Send(&j) || l.Connects() != 0 {
		t.Fatalf("not sent on the idle connection (%d connects)", l.Connects())
	}
	time.Sleep(50 * time.Millisecond) // the response arrives meanwhile
	readAt := l.now()
	for !h.done {
		l.Wait(10*time.Millisecond, false)
	}
	if h.err != nil || len(h.ats) == 0 {
		t.Fatalf("err %v, %d body reads", h.err, len(h.ats))
	}
	if lag := time.Duration(readAt - h.ats[0]); lag < 20*time.Millisecond {
		t.Errorf("body timed %v before it was read; want its arrival, about 50 ms before", lag)
	}
}

// TestLoopErrors: a server that closes mid-body, a malformed head, a
// handler that stops reading and a request past its timeout each end
// their request with an error and leave nothing in flight.
func TestLoopErrors(t *testing.T) {
	addr := tcptest.Serve(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			m, _, _ := strings.Cut(strings.TrimPrefix(line, "POST /x?m="), " ")
			for {
				l, err := br.ReadString('\n')
				if err != nil || l == "\r\n" {
					break
				}
			}
			switch m {
			case "cut":
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial")
				return
			case "junk":
				io.WriteString(c, "SPDY/9 what\r\n\r\n")
			case "long":
				io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
				for range 100 {
					io.WriteString(c, "5\r\nabcde\r\n")
				}
				io.WriteString(c, "0\r\n\r\n")
			case "hang":
				time.Sleep(2 * time.Second)
				return
			}
		}
	})
	url := "http://" + addr
	l, _ := newLoop(t, url, 300*time.Millisecond)
	c, _ := New(url)
	for _, tc := range []struct {
		m      string
		stopAt int
		want   func(error) bool
	}{
		{"cut", 0, func(err error) bool { return errors.Is(err, io.ErrUnexpectedEOF) }},
		{"junk", 0, func(err error) bool { return err != nil && strings.Contains(err.Error(), "status line") }},
		{"long", 50, func(err error) bool { return errors.Is(err, ErrStopped) }},
		{"hang", 0, func(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }},
	} {
		h := &rec{stopAt: tc.stopAt}
		run(t, l, EndHead(c.AppendHead(nil, "/x?m="+tc.m, nil), 0), h)
		if !tc.want(h.err) {
			t.Errorf("%s: Done got %v", tc.m, h.err)
		}
	}
	wantIdle(t, l)
}

// TestLoopStaleConnection: a keep-alive connection the server closed
// while it sat idle is dropped from the pool, and a request is never
// lost to one.
func TestLoopStaleConnection(t *testing.T) {
	srv := xServer(t, func(s *http.Server) { s.IdleTimeout = 20 * time.Millisecond })
	l, req := newLoop(t, srv.URL, 5*time.Second)
	for i := range 6 {
		runX(t, l, req, i)
		time.Sleep(30 * time.Millisecond) // the server closes the idle ones
		l.Wait(0, false)
	}
}

// TestLoopDialsByName reaches a server by host name ("localhost"), which
// may resolve to ::1 first while the server listens on 127.0.0.1 only:
// the dialer tries each address in turn.
func TestLoopDialsByName(t *testing.T) {
	srv := xServer(t, nil)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	l, req := newLoop(t, "http://localhost:"+port, 5*time.Second)
	runX(t, l, req, 0)
}

// TestLoopSparesGrowAfterABurst: requests that outnumber the spare
// connections drain the pool; the loop then keeps more ready, so the next
// burst finds them dialed.
func TestLoopSparesGrowAfterABurst(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(100 * time.Millisecond)
		io.WriteString(w, "data: x\n\n")
	}))
	defer srv.Close()
	l, req := newLoop(t, srv.URL, 5*time.Second) // 2 spares, 4 dialed
	deadline := time.Now().Add(5 * time.Second)
	for l.idleN.Load() < 4 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	// Until the pool is dry: then Send starts a connection of the
	// request's own, and more spares are kept from then on.
	var hs []*rec
	for l.Connects() < 2 && len(hs) < 1000 {
		h := &rec{}
		j := new(LoopJob)
		j.Prepare(h, req)
		if !l.Send(j) {
			t.Fatalf("request %d not sent", len(hs))
		}
		hs = append(hs, h)
	}
	if got := l.spare.Load(); got <= 2 {
		t.Fatalf("spare %d after %d requests drained the pool, want more than 2", got, len(hs))
	}
	for _, h := range hs {
		for !h.done && time.Now().Before(deadline) {
			l.Wait(10*time.Millisecond, false)
		}
		if h.err != nil {
			t.Fatal(h.err)
		}
	}
}

// TestLoopConnectRefused: a request that finds no idle connection starts
// its own without waiting; when the server refuses it, the request ends
// with the refusal, and nothing is left in flight.
func TestLoopConnectRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	l, req := newLoop(t, "http://"+addr, 5*time.Second)
	h := &rec{}
	var j LoopJob
	j.Prepare(h, req)
	if !l.Send(&j) {
		// Refused at once, before the loop took the request: the caller's
		// other path reports it.
		return
	}
	if l.Connects() != 1 {
		t.Fatalf("%d connects, want 1", l.Connects())
	}
	deadline := time.Now().Add(5 * time.Second)
	for !h.done && time.Now().Before(deadline) {
		l.Wait(10*time.Millisecond, false)
	}
	if !h.done || !errors.Is(h.err, syscall.ECONNREFUSED) {
		t.Fatalf("done %v err %v, want connection refused", h.done, h.err)
	}
	wantIdle(t, l)
}

// TestLoopSpareTimedOutByServer: a spare connection the server closed
// before it carried a request (net/http's ReadHeaderTimeout, uvicorn's
// keep-alive timeout close a fresh connection that stays silent) and
// whose close the loop has not read yet must not lose the request sent
// on it.
func TestLoopSpareTimedOutByServer(t *testing.T) {
	srv := xServer(t, func(s *http.Server) { s.ReadHeaderTimeout = 30 * time.Millisecond })
	l, req := newLoop(t, srv.URL, 5*time.Second)
	for i := range 5 {
		time.Sleep(100 * time.Millisecond) // the server closes the spares; the loop reads nothing meanwhile
		runX(t, l, req, i)
	}
}

// TestLoopRetryWaitsForAConnection: when every idle connection was timed
// out by the server, the retries outnumber the pool and wait for the
// dialer's new connections instead of failing.
func TestLoopRetryWaitsForAConnection(t *testing.T) {
	srv := xServer(t, func(s *http.Server) { s.ReadHeaderTimeout = 30 * time.Millisecond })
	l, req := newLoop(t, srv.URL, 5*time.Second)
	time.Sleep(100 * time.Millisecond) // the dialer's spares are dialed, and closed by the server
	hs := make([]*rec, 4)
	js := make([]LoopJob, len(hs))
	for i := range hs {
		hs[i] = &rec{}
		js[i].Prepare(hs[i], req)
		if !l.Send(&js[i]) {
			t.Fatalf("request %d: no idle connection", i)
		}
	}
	for deadline := time.Now().Add(5 * time.Second); l.Inflight() > 0 && time.Now().Before(deadline); {
		l.Wait(10*time.Millisecond, false)
	}
	for i, h := range hs {
		if !h.done || h.err != nil || h.body.String() != "data: x\n\n" {
			t.Errorf("request %d: done %v err %v body %q", i, h.done, h.err, h.body.String())
		}
	}
}
