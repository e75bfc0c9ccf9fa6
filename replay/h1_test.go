package replay

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/internal/tcptest"
	"github.com/tokentrace/tokentrace/replay/internal/h1"
	"github.com/tokentrace/tokentrace/traces"
)

// rawServer answers each request on a connection with resp(i) (i counts
// requests across connections); after closeAfter requests on one connection
// it closes it without a word (a keep-alive timeout on the server side).
func rawServer(t *testing.T, closeAfter int, resp func(i int) string) (url string, conns *atomic.Int64) {
	t.Helper()
	conns = new(atomic.Int64)
	var reqs atomic.Int64
	addr := tcptest.Serve(t, func(c net.Conn) {
		conns.Add(1)
		br := bufio.NewReader(c)
		for n := 0; n < closeAfter; n++ {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			io.Copy(io.Discard, req.Body)
			io.WriteString(c, resp(int(reqs.Add(1)-1)))
		}
	})
	return "http://" + addr, conns
}

const sseBody = "data: {\"choices\":[{\"text\":\"a\"}]}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1}}\n\ndata: [DONE]\n\n"

func chunkedResp(extraHeader string) string {
	// split the body over two chunks, with a chunk extension and a trailer
	a, b := sseBody[:20], sseBody[20:]
	return "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n" + extraHeader + "\r\n" +
		fmt.Sprintf("%x;ext=1\r\n%s\r\n%X\r\n%s\r\n0\r\nX-Trailer: 1\r\n\r\n", len(a), a, len(b), b)
}

// h1Transport is a transport on an HTTP/1.1 client of url whose idle
// connections close with the test.
func h1Transport(t *testing.T, url string) *transport {
	t.Helper()
	h, err := h1.New(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.CloseIdle)
	return &transport{base: url, h1: h}
}

func TestH1Client(t *testing.T) {
	tests := []struct {
		name       string
		closeAfter int
		resp       func(i int) string
		wantConns  int64 // upper bound on connections for 3 sequential requests
	}{
		// Chunked keep-alive responses reuse one connection.
		{"chunked keep-alive", 100, func(int) string { return chunkedResp("") }, 1},
		// Content-Length responses reuse it too.
		{"content-length", 100, func(int) string {
			return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(sseBody), sseBody)
		}, 1},
		// Connection: close is honoured: a new connection per request.
		{"connection close", 100, func(int) string { return chunkedResp("Connection: close\r\n") }, 3},
		// The server closes idle connections after each answer: the stale
		// pooled connection is retried on a new one.
		{"stale keep-alive", 1, func(int) string { return chunkedResp("") }, 3},
		// HTTP/1.0 responses without a length: read to EOF, not reused.
		{"http/1.0 to eof", 1, func(int) string { return "HTTP/1.0 200 OK\r\n\r\n" + sseBody }, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url, conns := rawServer(t, tt.closeAfter, tt.resp)
			tr := h1Transport(t, url)
			for i := 0; i < 3; i++ {
				rec := traces.NewRecord()
				rec.RequestID = fmt.Sprint("r-", i)
				sendOne(context.Background(), tr, "/v1/completions", []byte(`{}`), http.Header{"A": {"b"}}, 2*time.Second, time.Now(), extras{traceParent: true}, &rec, nil)
				if rec.Status != traces.StatusOK || len(rec.ChunkNs) != 1 || rec.ServerPromptTokens != 3 {
					t.Fatalf("request %d: %s %q chunks %d prompt %d", i, rec.Status, rec.Error, len(rec.ChunkNs), rec.ServerPromptTokens)
				}
				time.Sleep(5 * time.Millisecond) // let the server close idle connections
			}
			if got := conns.Load(); got > tt.wantConns {
				t.Errorf("%d connections for 3 requests, want <= %d", got, tt.wantConns)
			}
		})
	}
}

func TestH1MalformedResponses(t *testing.T) {
	for _, resp := range []string{
		"garbage\r\n\r\n",
		"HTTP/1.1 2x0 OK\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nshort",
	} {
		url, _ := rawServer(t, 1, func(int) string { return resp })
		rec := traces.NewRecord()
		sendOne(context.Background(), h1Transport(t, url), "/", nil, http.Header{}, time.Second, time.Now(), extras{}, &rec, nil)
		if rec.Status == traces.StatusOK {
			t.Errorf("response %q: status ok, want a failure", resp)
		}
		if strings.Contains(rec.Error, "garbage") {
			t.Errorf("error leaks response bytes: %q", rec.Error)
		}
	}
}

// TestH1StaleWithoutPause sends requests back to back to a server that
// closes every connection after one answer, so a pooled connection is often
// closed while (or just before) the next request is written on it: each
// must still succeed, retried on a new connection.
func TestH1StaleWithoutPause(t *testing.T) {
	url, conns := rawServer(t, 1, func(int) string { return chunkedResp("") })
	tr := h1Transport(t, url)
	for i := 0; i < 200; i++ {
		rec := traces.NewRecord()
		sendOne(context.Background(), tr, "/v1/completions", []byte(`{}`), http.Header{}, 2*time.Second, time.Now(), extras{}, &rec, nil)
		if rec.Status != traces.StatusOK {
			t.Fatalf("request %d: %s %q", i, rec.Status, rec.Error)
		}
	}
	if got := conns.Load(); got < 200 {
		t.Errorf("%d connections for 200 requests on one-shot connections, want >= 200", got)
	}
}

// TestH1CancelInterrupts checks that cancelling the context of a request
// waiting on a silent server ends it at once as cancelled, not as a timeout.
func TestH1CancelInterrupts(t *testing.T) {
	addr := tcptest.Serve(t, func(c net.Conn) {
		io.Copy(io.Discard, c) // answer nothing
	})
	tr := h1Transport(t, "http://"+addr)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	rec := traces.NewRecord()
	start := time.Now()
	sendOne(ctx, tr, "/", nil, http.Header{}, time.Minute, time.Now(), extras{}, &rec, nil)
	if rec.Status != traces.StatusClientError || rec.Error != "cancelled after drain" {
		t.Errorf("cancelled request: %s %q, want client_error \"cancelled after drain\"", rec.Status, rec.Error)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("cancel took %v to interrupt the request", d)
	}
}

// TestKeepSpareDialsAhead checks that a client keeping spares has idle
// connections ready before the first request and after requests took
// them, and that CloseIdle stops the dialer and closes them.
func TestKeepSpareDialsAhead(t *testing.T) {
	url, conns := rawServer(t, 1<<30, func(int) string {
		return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(sseBody), sseBody)
	})
	h, err := h1.New(url)
	if err != nil {
		t.Fatal(err)
	}
	waitConns := func(want int64) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); conns.Load() < want; {
			if time.Now().After(deadline) {
				t.Fatalf("%d connections dialed, want %d", conns.Load(), want)
			}
			time.Sleep(time.Millisecond)
		}
	}
	h.KeepSpare(2)
	// Nothing is dialed until a request looks into the pool.
	tr := &transport{base: url, h1: h}
	for range 3 {
		rec := traces.NewRecord()
		sendOne(context.Background(), tr, "/", nil, http.Header{}, time.Minute, time.Now(), extras{}, &rec, nil)
		if rec.Status != traces.StatusOK {
			t.Fatalf("request: %s %q", rec.Status, rec.Error)
		}
	}
	// The first request found the pool empty: the dialer fills it to twice
	// the spares while requests run one at a time on pooled connections.
	waitConns(4)
	time.Sleep(50 * time.Millisecond)
	if got := conns.Load(); got > 6 {
		t.Errorf("%d connections for 3 sequential requests with 2 spares, want at most 6", got)
	}
	h.CloseIdle()
	h.CloseIdle() // twice is harmless
}

// TestFastPathReusesConnections replays requests one at a time (each
// answered before the next is due) on the dispatcher's fast path: they all
// succeed on a handful of pooled connections instead of one each.
func TestFastPathReusesConnections(t *testing.T) {
	url, conns := rawServer(t, 1<<30, func(int) string {
		return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(sseBody), sseBody)
	})
	o := DefaultOptions()
	o.URL = url
	o.Model = "m"
	res := mustRun(t, testTrace(300, 2*time.Millisecond, 3, 1), traces.NewMeta("t"), o)
	if res.Summary.OK != 300 {
		t.Fatalf("%d of 300 ok: %v", res.Summary.OK, res.Summary.FailedBy)
	}
	// The spares (twice spareConns at most) plus a few: a loaded CI box
	// may slow answers and grow the pool a little; one connection per
	// request (300) means the pool is broken.
	t.Logf("connections: %d", conns.Load())
	if got, limit := conns.Load(), int64(2*spareConns+30); got > limit {
		t.Errorf("%d connections for 300 requests 2 ms apart, want at most %d (the spares and a few pooled ones)", got, limit)
	}
}

// TestLoopMatchesReaderPath replays one trace of odd responses twice: on
// the event loop (open loop, no concurrency cap) and on the reader path
// that a concurrency cap takes. Every row must come out the same, save
// its times: the loop's stream handling is the reader's.
func TestLoopMatchesReaderPath(t *testing.T) {
	tok := `data: {"choices":[{"text":"a"}]}` + "\n\n"
	usage := `data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":%d}}` + "\n\n"
	sse := func(body string) string {
		return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	}
	shapes := []string{
		chunkedResp(""),
		sse(tok + tok + fmt.Sprintf(usage, 2) + "data: [DONE]\n\n"),
		"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 40\r\n\r\n" + `{"error":{"type":"overloaded","code":503}}`[:40],
		sse(tok + `data: {"error":{"type":"server_error","code":500}}` + "\n\n"),
		sse(tok + "data: {\"choices\":[{\n\n"),
		"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + tok + tok,
		sse(strings.Repeat(tok, 30) + "data: [DONE]\n\n"),
		"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + tok + fmt.Sprintf(usage, 1) + "data: [DONE]",
		sse(fmt.Sprintf(usage, 0) + "data: [DONE]\n\n"),
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + oneByteChunks(tok+fmt.Sprintf(usage, 1)+"data: [DONE]\n\n") + "0\r\n\r\n",
	}
	addr := tcptest.Serve(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			io.Copy(io.Discard, req.Body)
			id := req.Header.Get("X-Request-Id")
			var seq int
			fmt.Sscanf(id[strings.LastIndexByte(id, '-')+1:], "%d", &seq)
			s := shapes[seq%len(shapes)]
			io.WriteString(c, s)
			if strings.Contains(s, "Connection: close") {
				return
			}
		}
	})
	run := func(maxConc int) map[int64]traces.Record {
		o := DefaultOptions()
		o.URL, o.Model, o.MaxConcurrency, o.NoPreflight = "http://"+addr, "m", maxConc, true
		res := mustRun(t, testTrace(3*len(shapes), time.Millisecond, 3, 2), traces.NewMeta("t"), o)
		m := map[int64]traces.Record{}
		for _, r := range res.Records {
			m[r.Seq] = r
		}
		return m
	}
	loop, reader := run(0), run(1000)
	if len(loop) != 3*len(shapes) || len(reader) != len(loop) {
		t.Fatalf("%d rows on the loop, %d on the reader path, want %d", len(loop), len(reader), 3*len(shapes))
	}
	statuses := map[string]bool{}
	for seq, a := range loop {
		b := reader[seq]
		statuses[a.Status] = true
		if a.Status != b.Status || a.Error != b.Error || a.HTTPStatus != b.HTTPStatus || a.ServerOutputTokens != b.ServerOutputTokens ||
			a.ServerPromptTokens != b.ServerPromptTokens || len(a.ChunkNs) != len(b.ChunkNs) || fmt.Sprint(a.ChunkTokens) != fmt.Sprint(b.ChunkTokens) ||
			(a.FirstTokenNs < 0) != (b.FirstTokenNs < 0) {
			t.Errorf("seq %d (shape %d): loop %s %q HTTP %d out %d chunks %d %v; reader %s %q HTTP %d out %d chunks %d %v", seq, seq%int64(len(shapes)),
				a.Status, a.Error, a.HTTPStatus, a.ServerOutputTokens, len(a.ChunkNs), a.ChunkTokens,
				b.Status, b.Error, b.HTTPStatus, b.ServerOutputTokens, len(b.ChunkNs), b.ChunkTokens)
		}
		if a.SentNs < 0 || a.FirstTokenNs >= 0 && a.FirstTokenNs < a.SentNs {
			t.Errorf("seq %d: first token at %d before the send at %d", seq, a.FirstTokenNs, a.SentNs)
		}
	}
	if len(statuses) < 4 {
		t.Errorf("only statuses %v: the shapes should give ok, http_error, stream_error and disconnect", statuses)
	}
}

// oneByteChunks is s in chunked encoding, one byte per chunk.
func oneByteChunks(s string) string {
	var b strings.Builder
	for i := range len(s) {
		fmt.Fprintf(&b, "1\r\n%c\r\n", s[i])
	}
	return b.String()
}
