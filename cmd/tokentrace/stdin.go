package main

import (
	"bytes"
	"context"
	"io"
	"sync"

	"github.com/tokentrace/tokentrace/internal/redact"
)

// ctxStdin is the commands' standard input: a read blocked on a pipe or a
// terminal that sends nothing (a tail -f feeding capture, a stalled
// producer) ends with the context's error once the context is done, so
// Ctrl-C and SIGTERM stop a command whatever its input does. Standard
// input is read by a goroutine of its own through a pipe, started by the
// first read (a command that never reads it takes nothing from it); when
// the context is done the pipe is closed with its error, and that
// goroutine, blocked in its read, ends with the process.
type ctxStdin struct {
	ctx  context.Context
	in   io.Reader
	once sync.Once
	pr   *io.PipeReader
}

func newCtxStdin(ctx context.Context, in io.Reader) *ctxStdin {
	return &ctxStdin{ctx: ctx, in: in}
}

func (s *ctxStdin) Read(p []byte) (int, error) {
	s.once.Do(func() {
		pr, pw := io.Pipe()
		s.pr = pr
		stop := context.AfterFunc(s.ctx, func() { pw.CloseWithError(s.ctx.Err()) })
		go func() {
			_, err := io.CopyBuffer(pw, s.in, make([]byte, 256<<10))
			stop()
			pw.CloseWithError(err) // nil: io.EOF to the reader
		}()
	})
	return s.pr.Read(p)
}

// redactWriter is the commands' standard error: every write loses the
// credentials of the URLs in it (internal/redact), so that no message,
// warning or progress line repeats a secret, wherever its text came from
// (an HTTP client's error, a spec echoed back). A write is one message
// (fmt.Fprintf writes once), so a URL is never split between writes.
type redactWriter struct{ w io.Writer }

func (r redactWriter) Write(p []byte) (int, error) {
	if !bytes.Contains(p, []byte("://")) && !bytes.ContainsRune(p, '@') {
		return r.w.Write(p)
	}
	if _, err := io.WriteString(r.w, redact.URLs(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}
