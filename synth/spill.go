package synth

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/tokentrace/tokentrace/internal/tempfile"
	"github.com/tokentrace/tokentrace/traces"
)

// varintLog is an append-only sequence of unsigned integers that the fit
// replays at the end of the stream, when what they are binned by is known
// (bin width, grid and load levels for session starts; a group's input
// ranges for output lengths and block reuse). Values are varints, kept in
// memory up to memLimit bytes and then in a temporary file under dir, so
// memory does not grow with the trace; the file is removed by close.
type varintLog struct {
	what     string // for errors: "session starts", "joint lengths"
	dir      string
	memLimit int

	buf []byte // while in memory
	f   *os.File
	w   *bufio.Writer
	n   int64 // values
	tmp [binary.MaxVarintLen64]byte
	err error // the first write error
}

// put appends x. A write error is kept and returned by replay (and close).
func (l *varintLog) put(x uint64) {
	l.n++
	if l.f == nil {
		l.buf = binary.AppendUvarint(l.buf, x)
		if len(l.buf) > l.memLimit && l.err == nil {
			l.spill()
		}
		return
	}
	k := binary.PutUvarint(l.tmp[:], x)
	if _, err := l.w.Write(l.tmp[:k]); err != nil && l.err == nil {
		l.err = fmt.Errorf("spill %s: %w", l.what, err)
	}
}

func (l *varintLog) spill() {
	// A killed fit's spill files are removed first (they are locked while
	// in use: internal/tempfile).
	const pattern = "tokentrace-fit-*.tmp"
	dir := l.dir
	if dir == "" {
		dir = os.TempDir()
	}
	tempfile.Sweep(filepath.Join(dir, pattern))
	f, err := tempfile.CreateTemp(l.dir, pattern)
	if err != nil {
		l.err = traces.OptionErrorf("synth", "FitOptions.TempDir", "spill %s: %w", l.what, err)
		return
	}
	l.f, l.w = f, bufio.NewWriterSize(f, 64<<10)
	if _, err := l.w.Write(l.buf); err != nil {
		l.err = fmt.Errorf("spill %s: %w", l.what, err)
	}
	l.buf = nil
}

// replay returns a reader of the values from the first; call it once per
// pass and read exactly l.n values.
func (l *varintLog) replay() (*logReader, error) {
	if l.err != nil {
		return nil, l.err
	}
	if l.f == nil {
		return &logReader{r: &byteReader{b: l.buf}, what: l.what}, nil
	}
	if err := l.w.Flush(); err != nil {
		return nil, fmt.Errorf("spill %s: %w", l.what, err)
	}
	if _, err := l.f.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("read back %s: %w", l.what, err)
	}
	return &logReader{r: bufio.NewReaderSize(l.f, 64<<10), what: l.what}, nil
}

// close removes the temporary file, if any.
func (l *varintLog) close() error {
	if l.f == nil {
		return nil
	}
	err := errors.Join(l.f.Close(), os.Remove(l.f.Name()))
	l.f = nil
	return err
}

// logReader reads a varintLog back; the first error sticks.
type logReader struct {
	r    io.ByteReader
	what string
	err  error
}

func (r *logReader) next() uint64 {
	if r.err != nil {
		return 0
	}
	x, err := binary.ReadUvarint(r.r)
	if err != nil {
		r.err = fmt.Errorf("read back %s: %w", r.what, err)
	}
	return x
}

type byteReader struct {
	b []byte
	i int
}

func (r *byteReader) ReadByte() (byte, error) {
	if r.i >= len(r.b) {
		return 0, io.ErrUnexpectedEOF
	}
	c := r.b[r.i]
	r.i++
	return c, nil
}
