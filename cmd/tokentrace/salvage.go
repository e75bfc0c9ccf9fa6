package main

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/tokentrace/tokentrace/replay"
	"github.com/tokentrace/tokentrace/traces"
)

// Every command treats a damaged (truncated) input the same way: it goes on
// with the rows before the damage and says so on stderr in the words of
// traces.SalvageNote. A file with no complete row is an error.

// readTrace reads the whole named trace for command cmd, salvaging damage.
func readTrace(stderr io.Writer, cmd, name string) ([]traces.Record, traces.Meta, error) {
	recs, m, err := traces.ReadAll(name)
	if errors.Is(err, traces.ErrTruncated) && len(recs) > 0 {
		fmt.Fprintf(stderr, "tokentrace %s: warning: %s\n", cmd, traces.SalvageNote(name, int64(len(recs))))
		return recs, m, nil
	}
	if err != nil {
		return nil, m, fmt.Errorf("read trace: %w", err)
	}
	return recs, m, nil
}

// traceSource is the trace name as replay reads it: a file is opened each
// time replay reads it (never held whole), stdin is read into memory once.
// A damaged file is read up to the damage, with one warning.
func traceSource(stderr io.Writer, cmd, name string) (replay.Source, error) {
	if name == "-" {
		recs, m, err := readTrace(stderr, cmd, name)
		if err != nil {
			return nil, err
		}
		return replay.Records(recs, m), nil
	}
	var once sync.Once
	return func() (traces.Reader, error) {
		r, err := traces.Open(name)
		if err != nil {
			return nil, fmt.Errorf("read trace: %w", err)
		}
		warn := io.Discard
		once.Do(func() { warn = stderr })
		return salvage(r, warn, cmd, name), nil
	}, nil
}

// salvaging ends a reader's stream at the damage, with the warning, instead
// of failing.
type salvaging struct {
	traces.Reader
	stderr    io.Writer
	cmd, name string
}

func salvage(r traces.Reader, stderr io.Writer, cmd, name string) traces.Reader {
	return &salvaging{Reader: r, stderr: stderr, cmd: cmd, name: name}
}

func (s *salvaging) Read(buf []traces.Record) (int, error) {
	n, err := s.Reader.Read(buf)
	if err != nil && errors.Is(err, traces.ErrTruncated) {
		if rows := s.Reader.Stats().Rows; rows > 0 {
			fmt.Fprintf(s.stderr, "tokentrace %s: warning: %s\n", s.cmd, traces.SalvageNote(s.name, rows))
			return n, io.EOF
		}
	}
	return n, err
}

// SortedByArrival passes on the wrapped reader's promise of arrival order.
func (s *salvaging) SortedByArrival() bool { return traces.IsSorted(s.Reader) }
