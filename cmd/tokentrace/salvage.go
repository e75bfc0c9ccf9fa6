package main

import (
	"fmt"
	"io"
	"strconv"
	"sync"

	"github.com/tokentrace/tokentrace/replay"
	"github.com/tokentrace/tokentrace/traces"
	"github.com/urfave/cli/v2"
)

// Every command reads a trace the same way (traces.OpenWith): bad rows are
// skipped, counted and named on stderr in the words of traces.ReadStats
// (--strict fails on the first), rows out of arrival order are counted and
// the command says what it does with them, a damaged file is an error
// unless --salvage asks for the rows before the damage, and a file with no
// valid row is an error.

// readFlags are --strict and --salvage, shared by every command that
// reads traces.
type readFlags struct{ o traces.OpenOptions }

// flags binds the flags to the options, starting from their defaults
// (traces.DefaultOpenOptions), as every command's flags do.
func (f *readFlags) flags() []cli.Flag {
	f.o = traces.DefaultOpenOptions()
	return readFlagsInto(&f.o)
}

// readFlagsInto are the flags, setting o (for a command whose library
// options hold the traces.OpenOptions).
func readFlagsInto(o *traces.OpenOptions) []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "strict", Usage: "fail on the first bad row of an input (unreadable, negative, not an integer, out of range, list/count mismatch, out of arrival order) instead of skipping and counting it", Destination: &o.Strict},
		&cli.BoolFlag{Name: "salvage", Usage: "read a damaged (truncated) input up to the damage instead of failing", Destination: &o.Salvage},
		&cli.GenericFlag{Name: "max-line-mib", Value: mibValue{&o.MaxLineBytes}, DefaultText: fmt.Sprint(traces.DefaultMaxLineBytes >> 20),
			Usage: "the longest line (a row, a CSV record, a JSON document) an input may have; a longer one is read past and counted as a bad row (too long)"},
	}
}

// mibValue is a flag in MiB setting a byte count.
type mibValue struct{ p *int }

func (v mibValue) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 1<<20 {
		return fmt.Errorf("want a whole number of MiB in [1, 1048576], got %q", s)
	}
	*v.p = n << 20
	return nil
}

func (v mibValue) String() string {
	if v.p == nil || *v.p == 0 {
		return ""
	}
	return strconv.Itoa(*v.p >> 20)
}

// options are the traces.OpenOptions the flags ask for.
func (f *readFlags) options(c *cli.Context) traces.OpenOptions {
	o := f.o
	o.Stdin = stdio(c).in
	return o
}

// traceIn is how one command reads its traces: the options, what it does
// with rows out of arrival order (said after the count), and where it
// says so.
type traceIn struct {
	cmd    string
	o      traces.OpenOptions
	order  string
	stderr io.Writer

	mu   sync.Mutex
	said map[string]bool // notes already printed (replay reads a trace twice)
}

func newTraceIn(c *cli.Context, f *readFlags, cmd, order string) *traceIn {
	return traceInOf(stdio(c), f, cmd, order)
}

// traceInOf is newTraceIn for a command's body, which has its streams but
// no cli.Context (runReplay).
func traceInOf(s streams, f *readFlags, cmd, order string) *traceIn {
	o := f.o
	o.Stdin = s.in
	return &traceIn{cmd: cmd, o: o, order: order, stderr: s.err, said: map[string]bool{}}
}

// note prints what the reader of name has to say about its rows, once.
func (t *traceIn) note(name string, st traces.ReadStats) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, n := range st.Notes(name, t.order) {
		if !t.said[n] {
			t.said[n] = true
			fmt.Fprintf(t.stderr, "tokentrace %s: warning: %s\n", t.cmd, n)
		}
	}
}

// open opens the named trace; its notes are printed when the stream ends
// (or the reader is closed before).
func (t *traceIn) open(name string) (traces.Reader, error) {
	r, err := traces.OpenWith(name, t.o)
	if err != nil {
		return nil, err // it names the trace ("open trace NAME: ...")
	}
	return &noting{Reader: r, in: t, name: name}, nil
}

// read reads the whole named trace.
func (t *traceIn) read(name string) ([]traces.Record, traces.Meta, error) {
	r, err := t.open(name)
	if err != nil {
		return nil, traces.Meta{}, err
	}
	defer r.Close()
	recs, err := traces.ReadFrom(r)
	if err != nil {
		return nil, r.Meta(), fmt.Errorf("read trace: %w", err)
	}
	return recs, r.Meta(), nil
}

// source is the trace name as replay reads it: a file is opened each time
// replay reads it (never held whole), stdin is read into memory once.
func (t *traceIn) source(name string) (replay.Source, error) {
	if name == "-" {
		recs, m, err := t.read(name)
		if err != nil {
			return nil, err
		}
		return replay.Records(recs, m), nil
	}
	return func() (traces.Reader, error) { return t.open(name) }, nil
}

// noting prints its reader's notes at the end of the stream.
type noting struct {
	traces.Reader
	in   *traceIn
	name string
	done bool
}

func (n *noting) Read(buf []traces.Record) (int, error) {
	k, err := n.Reader.Read(buf)
	if err != nil && !n.done {
		// A stream that ends in an error says so itself.
		n.done = true
		if err == io.EOF {
			n.in.note(n.name, n.Reader.Stats())
		}
	}
	return k, err
}

func (n *noting) Close() error {
	if !n.done {
		n.done = true
		n.in.note(n.name, n.Reader.Stats())
	}
	return n.Reader.Close()
}

// SortedByArrival passes on the wrapped reader's promise of arrival order.
func (n *noting) SortedByArrival() bool { return traces.IsSorted(n.Reader) }
