package traces

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/tokentrace/tokentrace/internal/lines"
	"github.com/tokentrace/tokentrace/internal/textsink"
)

// CSV layout: an optional first line "#tokentrace {json Meta}", then a header
// of column names (Columns, the Parquet names), then one row per record.
// Numbers are decimal; lists are space-separated decimals ("3 4 5"; readers
// also accept ';'); strings are quoted per RFC 4180 when needed. An empty
// cell, or a column missing from the header, reads as the column's NewRecord
// value (NotReported for numeric outcome columns), and the writer leaves
// outcome cells holding that value empty, so traces without outcomes stay
// small.

// csvMetaPrefix starts the metadata comment line of a CSV file.
const csvMetaPrefix = "#tokentrace"

type csvWriter struct {
	textsink.Sink
	buf  []byte
	cell []byte
	err  error
}

func newCSVWriter(w io.Writer, m Meta) (*csvWriter, error) {
	cw := &csvWriter{Sink: textsink.New(w)}
	js, err := json.Marshal(m.Redacted())
	if err != nil {
		return nil, fmt.Errorf("encode metadata: %w", err)
	}
	cw.Buf.WriteString(csvMetaPrefix + " ")
	cw.Buf.Write(js)
	cw.Buf.WriteString("\n" + strings.Join(Columns, ",") + "\n")
	return cw, nil
}

func (w *csvWriter) Write(recs []Record) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	for i := range recs {
		r := &recs[i]
		b := w.buf[:0]
		for col := range schema {
			c := &schema[col]
			if col > 0 {
				b = append(b, ',')
			}
			if !c.request && c.isDefault(r) {
				continue
			}
			w.cell = c.appendValue(w.cell[:0], r, ' ', false)
			b = appendCSVCell(b, w.cell)
		}
		b = append(b, '\n')
		w.buf = b
		if _, err := w.Buf.Write(b); err != nil {
			w.err = err
			return i, err
		}
	}
	return len(recs), nil
}

// appendCSVCell quotes a cell when it holds a comma, quote, CR or LF, or
// leading/trailing space.
func appendCSVCell(b, cell []byte) []byte {
	if len(cell) == 0 {
		// An empty string must differ from "default": quote it. Empty
		// strings are defaults for every string column, so this never
		// happens for strings; lists and numbers are never empty.
		return b
	}
	if bytes.ContainsAny(cell, ",\"\r\n") || cell[0] == ' ' || cell[0] == '\t' || cell[0] == '#' {
		b = append(b, '"')
		for _, c := range cell {
			if c == '"' {
				b = append(b, '"')
			}
			b = append(b, c)
		}
		return append(b, '"')
	}
	return append(b, cell...)
}

// eofTracker remembers the last byte read and whether the source hit EOF,
// so the CSV reader can tell a truncated last row from a malformed one.
type eofTracker struct {
	r    io.Reader
	last byte
	eof  bool
	err  error
}

func (t *eofTracker) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if n > 0 {
		t.last = p[n-1]
	}
	if err != nil {
		t.eof = true
		if err != io.EOF {
			t.err = err
			// Let encoding/csv see a clean EOF; the reader reports t.err.
			return n, io.EOF
		}
	}
	return n, err
}

type csvReader struct {
	textReader
	cr      *csv.Reader
	src     *eofTracker
	cols    []int // column index per header field, -1 = ignored
	ncols   int
	lineOff int64 // lines consumed before csv.Reader started
	filter  *lines.Filter
	long    []*lines.TooLongError // lines over the limit, due before the pending record
	pending []string
	pendErr error
	pendLn  int64
}

func newCSVReader(br *bufio.Reader, closer io.Closer, name string, o OpenOptions, zst bool) (*csvReader, error) {
	r := &csvReader{textReader: textReader{name: displayName(name), closer: closer, strict: o.Strict}}
	r.meta.SchemaVersion = SchemaVersion
	if head, _ := br.Peek(len(csvMetaPrefix)); string(head) == csvMetaPrefix {
		line, err := br.ReadSlice('\n')
		if err != nil && err != io.EOF {
			return nil, &RowError{File: r.name, Line: 1, Err: fmt.Errorf("metadata line: %w", truncErr(err))}
		}
		r.lineOff = 1
		js := bytes.TrimSpace(line[len(csvMetaPrefix):])
		if len(js) > 0 {
			var m Meta
			if err := json.Unmarshal(js, &m); err != nil {
				return nil, &RowError{File: r.name, Line: 1, Err: fmt.Errorf("%w: metadata line is not valid JSON", ErrMalformed)}
			}
			if err := m.CheckVersion(); err != nil {
				return nil, err
			}
			if m.SchemaVersion == "" {
				m.SchemaVersion = SchemaVersion
			}
			r.meta = m.Redacted()
		}
	}
	r.order.off = !checksOrder(r.meta)
	r.filter = lines.NewFilter(br, o.MaxLineBytes)
	r.src = &eofTracker{r: r.filter}
	r.cr = csv.NewReader(r.src)
	r.cr.FieldsPerRecord = -1
	r.cr.ReuseRecord = true
	header, err := r.cr.Read()
	before := int64(-1)
	if err == nil {
		before = r.recordLine(nil) - r.lineOff
	}
	if long := r.filter.Dropped(before); len(long) > 0 {
		return nil, &RowError{File: r.name, Line: long[0].Line + r.lineOff, Err: fmt.Errorf("%w: CSV header: %v", ErrMalformed, long[0])}
	}
	if err != nil {
		if err == io.EOF {
			if r.src.err != nil {
				return nil, &RowError{File: r.name, Line: r.lineOff + 1, Err: truncErr(r.src.err)}
			}
			// Metadata only, or empty: no rows.
			r.err = io.EOF
			return r, nil
		}
		return nil, &RowError{File: r.name, Line: r.lineOff + 1, Err: fmt.Errorf("%w: CSV header: %v", ErrMalformed, err)}
	}
	r.ncols = len(header)
	known := 0
	for i, h := range header {
		h = strings.TrimSpace(h)
		if i == 0 {
			h = strings.TrimPrefix(h, "\ufeff")
		}
		col, ok := columnIndex[h]
		if !ok {
			col = -1
		} else {
			known++
		}
		r.cols = append(r.cols, col)
	}
	if known == 0 {
		return nil, fmt.Errorf("%w: CSV header names none of the tokentrace columns (%s, ...)", ErrUnknownFormat, strings.Join(Columns[:4], ", "))
	}
	return r, nil
}

// next returns the next CSV record with its 1-based file line. A line
// over the limit, which the filter blanked, comes in its place in the
// file's order, as a *RowProblem.
func (r *csvReader) next() ([]string, int64, error) {
	if len(r.long) > 0 {
		l := r.long[0]
		r.long = r.long[1:]
		return nil, l.Line + r.lineOff, TooLong(l)
	}
	var (
		f   []string
		ln  int64
		err error
	)
	if r.pending != nil || r.pendErr != nil {
		f, ln, err = r.pending, r.pendLn, r.pendErr
		r.pending, r.pendErr = nil, nil
	} else {
		f, err = r.cr.Read()
		ln = r.recordLine(err)
	}
	before := ln - r.lineOff
	if err == io.EOF {
		before = -1
	}
	if r.long = r.filter.Dropped(before); len(r.long) > 0 {
		r.pending, r.pendErr, r.pendLn = append([]string(nil), f...), err, ln
		return r.next()
	}
	return f, ln, err
}

// recordLine is the 1-based file line of the record csv.Reader just
// returned (FieldPos panics after an error, so errors use ParseError).
func (r *csvReader) recordLine(err error) int64 {
	line := 0
	if err == nil {
		line, _ = r.cr.FieldPos(0)
	} else {
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			line = pe.StartLine
		}
	}
	return int64(line) + r.lineOff
}

// atTruncatedEnd reports whether the record just read is the file's last
// and the file does not end with a newline (or the source failed).
func (r *csvReader) atTruncatedEnd() bool {
	if r.src.err != nil {
		return true
	}
	f, err := r.cr.Read()
	if err == io.EOF {
		return r.src.last != '\n'
	}
	// Not the end: keep the look-ahead for the next call.
	r.pending = append([]string(nil), f...)
	r.pendErr = err
	r.pendLn = r.recordLine(err)
	return false
}

func (r *csvReader) Read(recs []Record) (int, error) {
	n := 0
	for n < len(recs) {
		if r.err != nil {
			return n, r.err
		}
		fields, line, err := r.next()
		if err == io.EOF {
			if r.src.err != nil {
				r.stats.Truncated = true
				r.err = &RowError{File: r.name, Line: line, Err: fmt.Errorf("%w: %w", ErrTruncated, truncErr(r.src.err))}
				return n, r.err
			}
			r.err = io.EOF
			return n, io.EOF
		}
		rec := &recs[n]
		var long *RowProblem
		switch {
		case errors.As(err, &long) && long.Problem == ProblemTooLong:
			r.row(line, nil, err)
			continue
		case err == nil:
			rec.resetForDecode()
			err = r.decode(fields, rec)
		default:
			err = unreadable("%v", unwrapParseError(err))
		}
		if err != nil && r.atTruncatedEnd() {
			r.stats.Truncated = true
			r.err = &RowError{File: r.name, Line: line, Err: fmt.Errorf("%w: last row is incomplete", ErrTruncated)}
			if r.src.err != nil {
				r.err = &RowError{File: r.name, Line: line, Err: fmt.Errorf("%w: %w", ErrTruncated, truncErr(r.src.err))}
			}
			return n, r.err
		}
		if r.row(line, rec, err) {
			n++
		}
	}
	return n, nil
}

func unwrapParseError(err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func (r *csvReader) decode(fields []string, rec *Record) error {
	if len(fields) == 1 && fields[0] == "" {
		return unreadable("empty row")
	}
	if len(fields) != r.ncols {
		return unreadable("%d columns, header has %d", len(fields), r.ncols)
	}
	for i, f := range fields {
		col := r.cols[i]
		if col < 0 || f == "" {
			continue
		}
		if err := schema[col].setText(rec, f, r.intern.Of); err != nil {
			return err
		}
	}
	rec.normalizeLists()
	return rec.Validate()
}
