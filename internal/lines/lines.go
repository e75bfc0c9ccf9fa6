// Package lines reads text one line at a time with a limit on a line's
// length, for every reader of line-oriented input (the trace codecs'
// JSON lines, the importers of other tools' formats). A line over the
// limit is not an error that ends the input: it is read to its end in
// pieces, never held, and reported as a *TooLongError, after which the
// next line reads as usual. The work per line is linear in its length,
// and a reader given a context stops within a buffer's read of it being
// done, however long the line.
package lines

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
)

// TooLongError is a line longer than the reader's limit. The line was
// read to its end and dropped; the reader goes on with the next.
type TooLongError struct {
	// Line is the line's 1-based number.
	Line int64
	// Bytes is the line's length (without its newline); at least Max+1.
	Bytes int64
	// Max is the limit.
	Max int
	// Last is set when the line was the input's last and had no newline.
	Last bool
}

func (e *TooLongError) Error() string {
	return fmt.Sprintf("line of %s, over the limit of %s", Size(e.Bytes), Size(int64(e.Max)))
}

// Size says n bytes in the largest whole binary unit ("64 MiB",
// "100000199 bytes").
func Size(n int64) string {
	for _, u := range []struct {
		shift uint
		name  string
	}{{30, "GiB"}, {20, "MiB"}, {10, "KiB"}} {
		if n >= 1<<u.shift && n%(1<<u.shift) == 0 {
			return fmt.Sprintf("%d %s", n>>u.shift, u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}

// Reader reads lines of at most Max bytes.
type Reader struct {
	br      *bufio.Reader
	max     int
	ctx     context.Context
	long    []byte
	line    int64
	partial bool
}

// NewReader reads lines from br, each at most max bytes (without the
// newline); max must be positive.
func NewReader(br *bufio.Reader, max int) *Reader {
	return &Reader{br: br, max: max}
}

// WithContext makes Next return ctx's error once ctx is done, checked
// before each line and between the pieces of a long one.
func (r *Reader) WithContext(ctx context.Context) *Reader {
	r.ctx = ctx
	return r
}

// Line is the 1-based number of the line Next returned (or reported too
// long) last; 0 before the first.
func (r *Reader) Line() int64 { return r.line }

// Partial reports whether the line Next returned last ended without a
// newline (the input's last line).
func (r *Reader) Partial() bool { return r.partial }

// Max is the limit.
func (r *Reader) Max() int { return r.max }

// isCancel reports whether err is a context's, passed up by the source.
func isCancel(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

func (r *Reader) done() error {
	if r.ctx == nil {
		return nil
	}
	return r.ctx.Err()
}

// Next returns the next line without its "\n" or "\r\n"; the slice is
// valid until the next call. At the end it returns io.EOF; a line over
// the limit is a *TooLongError (the line counted, the reader past it); a
// read error is returned with the data before it, as a partial line (a
// truncated compressed stream), or alone.
func (r *Reader) Next() ([]byte, error) {
	if err := r.done(); err != nil {
		return nil, err
	}
	r.long = r.long[:0]
	for {
		frag, err := r.br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			if len(r.long)+len(frag) > r.max {
				return nil, r.skip(int64(len(r.long) + len(frag)))
			}
			r.long = grow(r.long, len(frag), r.max)
			r.long = append(r.long, frag...)
			if err := r.done(); err != nil {
				return nil, err
			}
			continue
		}
		line := frag
		if len(r.long) > 0 {
			r.long = append(r.long, frag...)
			line = r.long
		}
		if err != nil {
			if len(line) == 0 || isCancel(err) {
				return nil, err // a cancel: the line is not wanted
			}
			r.line++
			r.partial = true
			if len(line) > r.max {
				return nil, &TooLongError{Line: r.line, Bytes: int64(len(line)), Max: r.max, Last: true}
			}
			if err != io.EOF {
				return line, err // data before a read error
			}
			return bytes.TrimSuffix(line, []byte{'\r'}), nil
		}
		r.line++
		r.partial = false
		line = bytes.TrimSuffix(line[:len(line)-1], []byte{'\r'})
		if len(line) > r.max {
			return nil, &TooLongError{Line: r.line, Bytes: int64(len(line)), Max: r.max}
		}
		return line, nil
	}
}

// grow makes room for n more bytes in b, doubling (append grows large
// slices by a quarter, which for a line near the limit would copy it
// several times over), up to limit+n.
func grow(b []byte, n, limit int) []byte {
	if len(b)+n <= cap(b) {
		return b
	}
	c := min(max(2*cap(b), len(b)+n, 4096), limit+n)
	nb := make([]byte, len(b), max(c, len(b)+n))
	copy(nb, b)
	return nb
}

// skip reads the rest of a line of which n bytes are already read, holding
// none of it, and returns its *TooLongError (or the read error that cut
// it, or ctx's).
func (r *Reader) skip(n int64) error {
	r.long = r.long[:0]
	if cap(r.long) > r.max {
		r.long = nil // let a near-limit buffer go
	}
	for {
		if err := r.done(); err != nil {
			return err
		}
		frag, err := r.br.ReadSlice('\n')
		n += int64(len(frag))
		if err == bufio.ErrBufferFull {
			continue
		}
		r.line++
		if err == nil {
			r.partial = false
			n-- // the newline
			return &TooLongError{Line: r.line, Bytes: n, Max: r.max}
		}
		r.partial = true
		if err != io.EOF {
			return err
		}
		return &TooLongError{Line: r.line, Bytes: n, Max: r.max, Last: true}
	}
}

// Filter passes its input through line by line with each line over the
// limit replaced by an empty line (its newline kept, so that line numbers
// hold), for readers that frame records themselves (encoding/csv). The
// lines it dropped are reported by Dropped, in order.
type Filter struct {
	r       *Reader
	buf     []byte
	out     []byte // the rest of the line being passed on (in buf)
	err     error  // sticky: returned once out is drained
	dropped []*TooLongError
}

// NewFilter filters br with the limit max.
func NewFilter(br *bufio.Reader, max int) *Filter {
	return &Filter{r: NewReader(br, max)}
}

// WithContext is Reader.WithContext for the filter's reads.
func (f *Filter) WithContext(ctx context.Context) *Filter {
	f.r.WithContext(ctx)
	return f
}

func (f *Filter) Read(p []byte) (int, error) {
	for len(f.out) == 0 {
		if f.err != nil {
			return 0, f.err
		}
		line, err := f.r.Next()
		var tl *TooLongError
		switch {
		case errorsAs(err, &tl):
			f.dropped = append(f.dropped, tl)
			if !tl.Last {
				f.buf = append(f.buf[:0], '\n')
				f.out = f.buf
			}
			continue
		case err != nil:
			f.err = err
		}
		f.buf = append(f.buf[:0], line...)
		if err == nil && !f.r.Partial() {
			f.buf = append(f.buf, '\n')
		}
		f.out = f.buf
	}
	n := copy(p, f.out)
	f.out = f.out[n:]
	return n, nil
}

// Dropped removes and returns the dropped lines numbered below before (all
// of them for a before of -1).
func (f *Filter) Dropped(before int64) []*TooLongError {
	k := 0
	for k < len(f.dropped) && (before < 0 || f.dropped[k].Line < before) {
		k++
	}
	d := f.dropped[:k:k]
	f.dropped = f.dropped[k:]
	return d
}

func errorsAs(err error, tl **TooLongError) bool {
	t, ok := err.(*TooLongError)
	if ok {
		*tl = t
	}
	return ok
}
