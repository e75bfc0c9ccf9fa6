package traces

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/tokentrace/tokentrace/internal/intern"
	"github.com/tokentrace/tokentrace/internal/lines"
)

// Reader streams Records from a trace or results file.
//
// Read fills recs and returns how many it filled; like io.Reader it may
// return n > 0 together with io.EOF, so consume recs[:n] before checking err.
type Reader interface {
	Read(recs []Record) (int, error)
	// Meta is the file's metadata (zero Meta with the current schema version
	// for files that carry none).
	Meta() Meta
	// Stats says how many rows were read and how many malformed rows were
	// skipped so far.
	Stats() ReadStats
	Close() error
}

// Writer streams Records to a file. Close is mandatory: Parquet writes its
// footer there and zstd its last frame.
type Writer interface {
	Write(recs []Record) (int, error)
	Close() error
}

// Flusher is implemented by Writers whose rows can be made durable before
// Close (JSONL and CSV; replay uses it to survive a kill).
type Flusher interface {
	Flush() error
}

// ReadStats counts what a Reader did.
type ReadStats struct {
	// Rows is the number of records returned.
	Rows int64
	// Skipped is the number of malformed rows skipped (non-strict mode).
	Skipped int64
	// FirstSkip describes the first skipped row (file and line, no content).
	FirstSkip error
	// Truncated is set when the file ended in the middle of a row or block
	// and the rows before the damage were returned.
	Truncated bool
	// Bad counts the bad rows by Problem (the index), with the first of
	// each: the skipped rows, and the rows out of arrival order, which
	// are kept.
	Bad [NumProblems]BadRows
}

// CountBad handles rerr, a row that failed to decode or validate (a
// *RowError): in strict mode it is the reader's error, returned as it is;
// otherwise the row is counted as skipped under its Problem, the first one
// kept for the report, and reading goes on (nil). Every Reader counts its
// bad rows through it, the importers of traces/formats too, so that
// ReadStats and its notes read alike whatever the file was.
func (s *ReadStats) CountBad(rerr error, strict bool) error {
	if strict {
		return rerr
	}
	s.Skipped++
	if s.FirstSkip == nil {
		s.FirstSkip = rerr
	}
	s.add(ProblemOf(rerr), rerr)
	return nil
}

// outOfOrder handles a valid row that arrives before the row above it:
// in strict mode it is the reader's error; otherwise it is counted and
// kept (nil). rerr makes the row's error, only when it is needed (the
// first such row, or strict mode): a file in completion order has many.
func (s *ReadStats) outOfOrder(rerr func() error, strict bool) error {
	if strict {
		return rerr()
	}
	b := &s.Bad[ProblemOutOfOrder]
	if b.First == nil {
		b.First = rerr()
	}
	b.Rows++
	return nil
}

// textReader is what the JSON-lines and CSV readers share: the file's name
// for errors, its metadata and counts, strictness, the sticky error and the
// label interner.
type textReader struct {
	name   string
	closer io.Closer
	meta   Meta
	stats  ReadStats
	strict bool
	err    error // sticky: Read returns it from then on
	intern intern.Strings
	order  orderCheck
}

func (r *textReader) Meta() Meta       { return r.meta }
func (r *textReader) Stats() ReadStats { return r.stats }
func (r *textReader) Close() error {
	if r.closer != nil {
		return r.closer.Close()
	}
	return nil
}

// row accounts for the row at line that decoded with err. A good row (err
// nil) is counted and kept (true). A malformed one is not kept: skipped and
// counted, or in strict mode it becomes r.err, which the next turn of the
// read loop returns.
func (r *textReader) row(line int64, rec *Record, err error) bool {
	if err == nil {
		if p := r.order.spans.check(rec.ArrivalNs); p != nil {
			err = p
		}
	}
	if err == nil {
		if back, late := r.order.check(rec.ArrivalNs); late {
			rerr := func() error { return &RowError{File: r.name, Line: line, Err: outOfOrder(rec.ArrivalNs, back)} }
			if stop := r.stats.outOfOrder(rerr, r.strict); stop != nil {
				r.err = stop
				return false
			}
		}
		r.stats.Rows++
		return true
	}
	if stop := r.stats.CountBad(&RowError{File: r.name, Line: line, Err: err}, r.strict); stop != nil {
		r.err = stop
	}
	return false
}

// OpenOptions tunes OpenWith. Start from DefaultOpenOptions: every
// field's zero is a value of its own, never its default.
type OpenOptions struct {
	// Strict fails on the first bad row (any Problem, a row out of
	// arrival order included) instead of skipping and counting it.
	// Defaults to false.
	Strict bool
	// Salvage reads a damaged (truncated) file up to the damage: the rows
	// before it, then the end of the stream, with ReadStats.Truncated set
	// (SalvageNote says it in the words every command uses). Without it
	// the damage is a *DamagedError naming the file and the rows before
	// it. Defaults to false.
	Salvage bool
	// Stdin is what the name "-" reads (nil: "-" cannot be read).
	// Defaults to os.Stdin.
	Stdin io.Reader
	// MaxLineBytes bounds one line of a text input (a JSON-lines row, a
	// CSV record, an importer's line or JSON document): a longer one is
	// read to its end without being held and is a bad row of its own
	// (ProblemTooLong), so one huge line costs time linear in its length
	// and memory within the bound. Defaults to DefaultMaxLineBytes.
	MaxLineBytes int
	// AllowDeferred opens a capture part whose k-anonymity is deferred
	// (Meta.KAnonDeferred) instead of failing with ErrKAnonDeferred: only
	// the step that finishes such parts (capture.Compose) and inspection
	// should. Defaults to false.
	AllowDeferred bool
}

// DefaultMaxLineBytes is the default OpenOptions.MaxLineBytes: 64 MiB,
// far over any real trace row (a Mooncake row of 128 k tokens' block ids
// is under 1 MiB).
const DefaultMaxLineBytes = 64 << 20

// DefaultOpenOptions returns every OpenOptions default: bad rows skipped
// and counted, a damaged file an error, "-" read from os.Stdin, lines up
// to DefaultMaxLineBytes.
func DefaultOpenOptions() OpenOptions {
	return OpenOptions{Strict: false, Salvage: false, Stdin: os.Stdin, MaxLineBytes: DefaultMaxLineBytes, AllowDeferred: false}
}

// Validate refuses options no reader can use: a line limit that is not
// positive (every line would be too long). A nil Stdin is refused only
// when "-" is opened.
func (o OpenOptions) Validate() error {
	if o.MaxLineBytes <= 0 {
		return OptionErrorf("", "OpenOptions.MaxLineBytes", "%d: must be positive", o.MaxLineBytes)
	}
	return nil
}

// TooLong is the problem of a line over the limit, as every reader and
// importer names it.
func TooLong(err *lines.TooLongError) *RowProblem {
	return &RowProblem{Problem: ProblemTooLong, Detail: err.Error()}
}

// CreateOptions tunes CreateWith and NewWriter. Start from
// DefaultCreateOptions: every field's zero is a value of its own, never
// its default.
type CreateOptions struct {
	// RowGroupRows bounds the rows per Parquet row group (at least 1).
	// Defaults to DefaultRowGroupRows.
	RowGroupRows int
	// Stdout is what the name "-" writes (JSON lines); it is not closed
	// (nil: "-" cannot be written). Defaults to os.Stdout.
	Stdout io.Writer
	// SortMemoryBytes bounds the records a Parquet writer holds to sort them
	// by arrival (at least 1); beyond it sorted runs are spilled to TempDir
	// and merged on Close. Defaults to DefaultSortMemoryBytes.
	SortMemoryBytes int64
	// TempDir is where a Parquet writer spills sorted runs (in a directory
	// of its own, removed on Close and Abort); "" is os.TempDir().
	// Defaults to "".
	TempDir string
}

// DefaultCreateOptions returns every CreateOptions default.
func DefaultCreateOptions() CreateOptions {
	return CreateOptions{RowGroupRows: DefaultRowGroupRows, Stdout: os.Stdout, SortMemoryBytes: DefaultSortMemoryBytes, TempDir: ""}
}

// DefaultSortMemoryBytes is the default CreateOptions.SortMemoryBytes:
// about 150 k trace rows.
const DefaultSortMemoryBytes = 48 << 20

// DefaultRowGroupRows is the default Parquet row-group size.
const DefaultRowGroupRows = 128 * 1024

// ErrUnknownFormat is returned when a file's codec cannot be told from its
// content or name.
var ErrUnknownFormat = errors.New("unknown trace format")

// ErrTruncated is wrapped by the error a Reader returns when the file ends in
// the middle of a row, block or footer. The rows before the damage are
// returned first and ReadStats.Truncated is set.
var ErrTruncated = errors.New("file is truncated")

// SalvageNote is what every command says when it goes on with the rows
// before the damage of a truncated file: the same words everywhere.
func SalvageNote(name string, rows int64) string {
	return fmt.Sprintf("%s is damaged (truncated): using the %d rows before the damage (tokentrace inspect %s says more)", name, rows, name)
}

// ErrMalformed is wrapped by RowErrors about rows that are not valid records
// (not JSON, a missing CSV column, a negative token count, ...).
var ErrMalformed = errors.New("malformed row")

// RowError is a malformed row: it names the file and the 1-based line (or
// row) number, never the row's content.
type RowError struct {
	File string
	Line int64
	Err  error
}

func (e *RowError) Error() string {
	return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err)
}

func (e *RowError) Unwrap() error { return e.Err }

// ReadAll reads every record of the named file (non-strict: malformed rows
// are skipped). On a truncated file it returns the rows before the damage
// together with an error wrapping ErrTruncated.
func ReadAll(name string) ([]Record, Meta, error) {
	r, err := Open(name)
	if err != nil {
		return nil, Meta{}, err
	}
	defer r.Close()
	recs, err := ReadFrom(r)
	return recs, r.Meta(), err
}

// ReadFrom drains r.
func ReadFrom(r Reader) ([]Record, error) {
	var out []Record
	buf := make([]Record, 1024)
	for {
		n, err := r.Read(buf)
		out = append(out, buf[:n]...)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		if n > 0 {
			buf = make([]Record, len(buf)) // the records' slices alias buf's
		}
	}
}

// WriteAll writes recs to the named file (codec by extension) with meta m.
func WriteAll(name string, m Meta, recs []Record) error {
	w, err := Create(name, m)
	if err != nil {
		return err
	}
	if _, err := w.Write(recs); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}
