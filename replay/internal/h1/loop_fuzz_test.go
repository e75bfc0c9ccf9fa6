package h1

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"testing"
)

// bodyRec is a LoopHandler that keeps the body.
type bodyRec struct {
	status int
	body   []byte
}

func (b *bodyRec) Head(status int, _ []string)  { b.status = status }
func (b *bodyRec) Body(p []byte, at int64) bool { b.body = append(b.body, p...); return true }
func (b *bodyRec) Done(error)                   {}

// FuzzLoopResponse pushes a response to the event loop's parser in pieces
// and checks it against the reader path (readHead and its body readers):
// never a panic, and where the reader path reads a whole response, the
// same status and body, ended at the same point.
func FuzzLoopResponse(f *testing.F) {
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"), 3)
	f.Add([]byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;x=1\r\nabc\r\nA\r\n0123456789\r\n0\r\nT: 1\r\n\r\n"), 1)
	f.Add([]byte("HTTP/1.0 503 Busy\r\n\r\nuntil close"), 7)
	f.Fuzz(func(t *testing.T, data []byte, piece int) {
		if piece < 1 || piece > 64 {
			piece = 5
		}
		var r resp
		h := &bodyRec{}
		done, ended := false, 0
		var err error
		for i := 0; i < len(data) && !done && err == nil; i += piece {
			p := data[i:min(i+piece, len(data))]
			var rest bool
			done, rest, err = r.feed(p, 0, h)
			if done {
				ended = min(i+piece, len(data))
				if rest {
					ended = -1 // somewhere inside this piece
				}
			}
		}
		if !done && err == nil && r.eof() {
			done, ended = true, len(data)
		}

		// The reader path over the same bytes.
		c := &conn{br: bufio.NewReader(bytes.NewReader(data))}
		j := &Job{ctx: context.Background()}
		rr, rerr := (&Client{}).readHead(j, c)
		if rerr != nil {
			return
		}
		body, berr := io.ReadAll(rr.body)
		if berr != nil {
			return // the reader path found the response incomplete or bad
		}
		if !done && err == nil {
			return // the loop waits for more (the reader path takes the end of data for the end of a Content-Length body)
		}
		if !done {
			t.Fatalf("the reader path read a whole response (status %d, %d body bytes), the loop's parser did not end it (err %v)", rr.status, len(body), err)
		}
		if h.status != rr.status || !bytes.Equal(h.body, body) {
			t.Fatalf("loop: status %d body %q; reader: status %d body %q", h.status, h.body, rr.status, body)
		}
		if consumed := len(data) - c.br.Buffered(); ended >= 0 && ended < consumed {
			t.Fatalf("loop ended the response at byte %d, the reader at %d", ended, consumed)
		}
	})
}
