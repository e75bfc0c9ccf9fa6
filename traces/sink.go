package traces

import (
	"bufio"
	"io"
)

// textSink is the buffered output shared by the line-oriented writers
// (JSONL, CSV, Mooncake): Flush pushes rows through to a reader, Close
// flushes and closes the underlying writer once.
type textSink struct {
	bw     *bufio.Writer
	under  io.Writer
	closer io.Closer
}

func newTextSink(w io.Writer) textSink {
	s := textSink{bw: bufio.NewWriterSize(w, 256<<10), under: w}
	if c, ok := w.(io.Closer); ok {
		s.closer = c
	}
	return s
}

// Flush writes buffered rows to the underlying writer, and flushes that too
// when it can (ending the zstd block of a .zst file), so a reader sees every
// row written so far.
func (s *textSink) Flush() error {
	if err := s.bw.Flush(); err != nil {
		return err
	}
	if f, ok := s.under.(Flusher); ok {
		return f.Flush()
	}
	return nil
}

// Close flushes and closes the underlying writer if it is an io.Closer.
// Closing twice is a no-op.
func (s *textSink) Close() error {
	err := s.bw.Flush()
	if s.closer != nil {
		if cerr := s.closer.Close(); err == nil {
			err = cerr
		}
		s.closer = nil
	}
	return err
}
