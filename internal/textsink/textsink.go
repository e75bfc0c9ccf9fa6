// Package textsink is the buffered output of the line-oriented trace
// writers: traces' JSONL and CSV codecs and the peer formats of
// traces/formats (Mooncake, AIPerf, WEKA, ...).
package textsink

import (
	"bufio"
	"io"
)

// Sink buffers rows on their way to an io.Writer: Flush pushes rows
// through to a reader, Close flushes and closes the underlying writer
// once.
type Sink struct {
	// Buf is where a writer puts its rows.
	Buf    *bufio.Writer
	under  io.Writer
	closer io.Closer
}

// New returns a Sink over w; Close closes w if it is an io.Closer.
func New(w io.Writer) Sink {
	s := Sink{Buf: bufio.NewWriterSize(w, 256<<10), under: w}
	if c, ok := w.(io.Closer); ok {
		s.closer = c
	}
	return s
}

// Flush writes buffered rows to the underlying writer, and flushes that too
// when it can (ending the zstd block of a .zst file), so a reader sees every
// row written so far.
func (s *Sink) Flush() error {
	if err := s.Buf.Flush(); err != nil {
		return err
	}
	if f, ok := s.under.(interface{ Flush() error }); ok {
		return f.Flush()
	}
	return nil
}

// Close flushes and closes the underlying writer if it is an io.Closer.
// Closing twice is a no-op.
func (s *Sink) Close() error {
	err := s.Buf.Flush()
	if s.closer != nil {
		if cerr := s.closer.Close(); err == nil {
			err = cerr
		}
		s.closer = nil
	}
	return err
}
