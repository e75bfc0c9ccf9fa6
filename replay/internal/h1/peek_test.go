//go:build unix

package h1

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// TestIdleClosedConnectionSkipped: a pooled connection the server closed
// while it sat idle, whose reader has not yet seen the close (here it has
// none), is found closed before a request is written on it and skipped:
// the request goes on a new connection. Without the look the request
// would be written into the closed connection and fail with unexpected
// EOF once its two retries met the same.
func TestIdleClosedConnectionSkipped(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if accepted.Add(1) == 1 {
				c.Close() // the server's idle timeout, before any request
				continue
			}
			go func(c net.Conn) {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					io.Copy(io.Discard, req.Body)
					io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
				}
			}(c)
		}
	}()
	h, err := New("http://" + ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer h.CloseIdle()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	for accepted.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond) // the close reaches the client
	stale := h.newConn(nc)
	stale.idleSince = time.Now().Add(-time.Second)
	h.idle.push(stale) // no reader: nobody has seen the close
	type result struct {
		body string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := h.Do(context.Background(), 5*time.Second, "/", http.Header{}, nil, []byte("{}"))
		if err != nil {
			done <- result{err: err}
			return
		}
		b, _ := io.ReadAll(resp)
		resp.Close()
		done <- result{body: string(b)}
	}()
	select {
	case r := <-done:
		if r.err != nil || r.body != "ok" || accepted.Load() != 2 {
			t.Errorf("request on a pool holding a closed connection: %q, %v after %d connections; want ok on a second one", r.body, r.err, accepted.Load())
		}
	case <-time.After(10 * time.Second):
		// Written into the closed connection, which no reader watches.
		t.Fatal("the request went on the closed connection and never ended")
	}
}
