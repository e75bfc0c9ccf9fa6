package traces

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/tokentrace/tokentrace/internal/intern"
	"github.com/tokentrace/tokentrace/internal/jsonlex"
	"github.com/tokentrace/tokentrace/internal/lines"
	"github.com/tokentrace/tokentrace/internal/textsink"
)

// jsonlMetaKey is the key of the metadata object on a JSONL file's first line.
const jsonlMetaKey = "tokentrace_meta"

// JSONL rows are written by a hand-written, append-based encoder: one object
// per line, keys in Columns order, and a column left out when it holds the
// value a decoder starts from (NewRecord: 0 or "" for request columns except
// seq, arrival_ns, input_tokens and output_tokens, which are always written;
// NotReported for numeric outcome columns; empty lists). The decoder starts
// every row from NewRecord, so a left-out column reads back exactly.

type jsonlWriter struct {
	textsink.Sink
	buf []byte
	err error
}

// NewJSONLWriter writes records as JSON lines to w, metadata first. Close
// flushes and closes w if it is an io.Closer.
func NewJSONLWriter(w io.Writer, m Meta) (Writer, error) {
	if m.SchemaVersion == "" {
		m.SchemaVersion = SchemaVersion
	}
	jw := &jsonlWriter{Sink: textsink.New(w)}
	hdr, err := json.Marshal(map[string]Meta{jsonlMetaKey: m.Redacted()})
	if err != nil {
		return nil, fmt.Errorf("encode metadata: %w", err)
	}
	jw.Buf.Write(hdr)
	jw.Buf.WriteByte('\n')
	return jw, nil
}

func (w *jsonlWriter) Write(recs []Record) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	for i := range recs {
		w.buf = appendJSONRecord(w.buf[:0], &recs[i])
		w.buf = append(w.buf, '\n')
		if _, err := w.Buf.Write(w.buf); err != nil {
			w.err = err
			return i, err
		}
	}
	return len(recs), nil
}

// AppendJSONL appends r as one JSON object in the JSONL codec's row format
// (no newline), for writers that stream rows themselves (replay's journal).
func AppendJSONL(b []byte, r *Record) []byte { return appendJSONRecord(b, r) }

// appendJSONRecord appends r as one JSON object (no newline): keys in
// column order, a column left out at its default unless it is an "always"
// column. One switch per column does both the test and the append: this is
// the journal's hot path.
func appendJSONRecord(b []byte, r *Record) []byte {
	b = append(b, '{')
	open := len(b)
	cols := schema
	for i := range cols {
		c := &cols[i]
		switch c.kind {
		case kindInt64:
			v := *c.int64p(r)
			if v == c.absent && !c.always {
				continue
			}
			b = strconv.AppendInt(c.appendKey(b, open), v, 10)
		case kindInt32:
			v := int64(*c.int32p(r))
			if v == c.absent && !c.always {
				continue
			}
			b = strconv.AppendInt(c.appendKey(b, open), v, 10)
		case kindString:
			v := *c.strp(r)
			if v == "" && !c.always {
				continue
			}
			b = jsonlex.AppendString(c.appendKey(b, open), v)
		case kindList64:
			v := *c.list64p(r)
			if len(v) == 0 && !c.always {
				continue
			}
			b = append(appendInts(append(c.appendKey(b, open), '['), v, ','), ']')
		case kindList32:
			v := *c.list32p(r)
			if len(v) == 0 && !c.always {
				continue
			}
			b = append(appendInts(append(c.appendKey(b, open), '['), v, ','), ']')
		}
	}
	return append(b, '}')
}

// appendKey appends the column's JSON key, with a comma unless it comes
// first in the object that starts at open.
func (c *column) appendKey(b []byte, open int) []byte {
	if len(b) == open {
		return append(b, c.jsonKey[1:]...)
	}
	return append(b, c.jsonKey...)
}

type jsonlReader struct {
	textReader
	lr     *lines.Reader
	peeked []byte
	long   *lines.TooLongError // the first line, too long
}

// NewJSONLReader reads JSON lines from r; name is used in error messages.
// Close closes r if it is an io.Closer.
func NewJSONLReader(r io.Reader, name string, o OpenOptions) (Reader, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	var closer io.Closer
	if c, ok := r.(io.Closer); ok {
		closer = c
	}
	br, ok := r.(*bufio.Reader)
	if !ok {
		br = bufio.NewReaderSize(r, 256<<10)
	}
	return newJSONLReader(br, closer, name, o, false)
}

func newJSONLReader(br *bufio.Reader, closer io.Closer, name string, o OpenOptions, zst bool) (*jsonlReader, error) {
	jr := &jsonlReader{textReader: textReader{name: displayName(name), closer: closer, strict: o.Strict}, lr: lines.NewReader(br, o.MaxLineBytes)}
	jr.meta.SchemaVersion = SchemaVersion
	line, err := jr.lr.Next()
	if errors.As(err, &jr.long) {
		return jr, nil // a row, not metadata: Read counts it
	}
	if err != nil && err != io.EOF {
		if len(line) == 0 {
			return nil, fmt.Errorf("read: %w", truncErr(err))
		}
	}
	line = bytes.TrimPrefix(line, utf8BOM)
	if err == nil && bytes.Contains(line, []byte(`"`+jsonlMetaKey+`"`)) {
		var hdr map[string]Meta
		if err := json.Unmarshal(line, &hdr); err != nil {
			return nil, &RowError{File: jr.name, Line: 1, Err: fmt.Errorf("%w: metadata line is not valid JSON", ErrMalformed)}
		}
		jr.meta = hdr[jsonlMetaKey].Redacted()
		if err := jr.meta.CheckVersion(); err != nil {
			return nil, err
		}
		if jr.meta.SchemaVersion == "" {
			jr.meta.SchemaVersion = SchemaVersion
		}
		jr.order.off = !checksOrder(jr.meta)
	} else if line != nil || err != nil {
		jr.peeked = append([]byte{}, line...)
		if err != nil && err != io.EOF {
			jr.err = jr.truncated(err)
		}
	}
	return jr, nil
}

// truncErr maps a decompressor's unexpected EOF to ErrTruncated.
func truncErr(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w (%v)", ErrTruncated, err)
	}
	return err
}

func (r *jsonlReader) truncated(err error) error {
	r.stats.Truncated = true
	if !errors.Is(err, ErrTruncated) {
		err = fmt.Errorf("%w: %w", ErrTruncated, err)
	}
	return &RowError{File: r.name, Line: r.lr.Line(), Err: err}
}

func (r *jsonlReader) Read(recs []Record) (int, error) {
	n := 0
	for n < len(recs) {
		var line []byte
		var rerr error
		if r.peeked != nil {
			line, r.peeked = r.peeked, nil
		} else {
			if r.err != nil {
				return n, r.err
			}
			if r.long != nil {
				rerr, r.long = r.long, nil
			} else {
				line, rerr = r.lr.Next()
			}
			var long *lines.TooLongError
			if errors.As(rerr, &long) {
				r.row(long.Line, nil, TooLong(long))
				continue
			}
			if rerr == io.EOF {
				r.err = io.EOF
				return n, io.EOF
			}
			if rerr != nil && len(line) == 0 {
				if errors.Is(rerr, io.ErrUnexpectedEOF) {
					r.err = r.truncated(truncErr(rerr))
				} else {
					r.err = &RowError{File: r.name, Line: r.lr.Line() + 1, Err: rerr}
				}
				return n, r.err
			}
		}
		if rerr != nil {
			// A partial line followed by a read error: the stream is cut.
			r.err = r.truncated(truncErr(rerr))
			return n, r.err
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		rec := &recs[n]
		rec.resetForDecode()
		err := decodeJSONRecord(line, rec, &r.intern)
		if err == errMetaLine {
			continue
		}
		if err != nil && r.lr.Partial() && r.err == nil {
			// The last line, cut short: the file was truncated.
			r.err = r.truncated(fmt.Errorf("%w: last line is incomplete", ErrTruncated))
			return n, r.err
		}
		if r.row(r.lr.Line(), rec, err) {
			n++
		}
	}
	return n, nil
}

// resetForDecode makes r a NewRecord, keeping list capacity.
func (r *Record) resetForDecode() {
	pb, as, cn, ct := r.PrefixBlocks[:0], r.AfterSeqs[:0], r.ChunkNs[:0], r.ChunkTokens[:0]
	*r = Record{}
	r.ClearOutcome()
	r.clearRequestAbsent()
	r.PrefixBlocks, r.AfterSeqs, r.ChunkNs, r.ChunkTokens = pb, as, cn, ct
}

// jsonDecoder reads one flat record object with the shared lexer: known
// keys go straight into the Record, unknown keys are skipped.
type jsonDecoder struct {
	jsonlex.Lexer
	next  int  // column expected next (keys usually come in Columns order)
	known bool // a key of a column was seen
}

// column finds key's column: first by scanning forward from the expected
// position (our writer emits keys in Columns order, skipping defaults), then
// by map lookup.
func (d *jsonDecoder) column(key []byte) (int, bool) {
	for i := d.next; i < numColumns; i++ {
		if string(key) == schema[i].name {
			d.next = i + 1
			return i, true
		}
	}
	col, ok := columnIndex[string(key)]
	return col, ok
}

var errJSON = unreadable("not a JSON object")

// errMetaLine marks a metadata line after the first (concatenated files):
// readers skip it.
var errMetaLine = errors.New("metadata line")

// decodeJSONRecord parses one JSON object into rec (which starts as
// NewRecord), then validates it.
func decodeJSONRecord(line []byte, rec *Record, in *intern.Strings) error {
	d := jsonDecoder{Lexer: jsonlex.Lexer{B: line}}
	var ferr error
	ok := d.Object(func(key []byte) bool {
		ferr = d.field(key, rec, in)
		return ferr == nil
	})
	if ferr != nil {
		return ferr
	}
	if !ok || !d.End() {
		return errJSON
	}
	if !d.known {
		// An object of other keys only (a log line of an unknown shape):
		// reading it as a row of defaults would make a trace of nothing.
		return errNoColumn
	}
	rec.normalizeLists()
	return rec.Validate()
}

var errNoColumn = unreadable("a JSON object with none of the tokentrace columns")

func (d *jsonDecoder) field(key []byte, r *Record, in *intern.Strings) error {
	col, ok := d.column(key)
	d.known = d.known || ok
	if !ok {
		if string(key) == jsonlMetaKey {
			return errMetaLine
		}
		if !d.Skip() {
			return errJSON
		}
		return nil
	}
	c := &schema[col]
	if d.Null() {
		if c.always {
			// seq, arrival_ns and the token counts have no "not
			// reported": a null is not a 0.
			return &RowProblem{Problem: ProblemUnreadable, Column: c.name, Detail: "is null (want a number)"}
		}
		return nil
	}
	var err *RowProblem
	switch c.kind {
	case kindInt64:
		*c.int64p(r), err = d.int64()
	case kindInt32:
		*c.int32p(r), err = d.int32()
	case kindString:
		s, ok := d.String()
		switch {
		case !ok:
			err = unreadable("is not a string")
		case c.label:
			*c.strp(r) = in.OfBytes(s)
		default:
			*c.strp(r) = string(s)
		}
	case kindList64:
		p := c.list64p(r)
		*p, err = decodeList(d, (*p)[:0], d.int64)
	default:
		p := c.list32p(r)
		*p, err = decodeList(d, (*p)[:0], d.int32)
	}
	return c.fault(err)
}

// int64 reads a whole number; its error says whether the value was a
// fraction, too large, or not a number (its Column is left to the caller).
func (d *jsonDecoder) int64() (int64, *RowProblem) {
	start := d.I
	v, err := d.Int64()
	if err == nil {
		return v, nil
	}
	text := bytes.TrimSpace(d.B[start:d.I])
	if len(text) == 0 {
		return 0, unreadable("is not a number")
	}
	return 0, numberProblem("", string(text))
}

func (d *jsonDecoder) int32() (int32, *RowProblem) {
	v, err := d.int64()
	if err != nil {
		return 0, err
	}
	if v < -1<<31 || v > 1<<31-1 {
		return 0, problemf(ProblemOutOfRange, "", "%d", v)
	}
	return int32(v), nil
}

// decodeList appends the integers of a JSON array to dst, each parsed by elem.
func decodeList[T int32 | int64](d *jsonDecoder, dst []T, elem func() (T, *RowProblem)) ([]T, *RowProblem) {
	if d.Peek() != '[' {
		return nil, unreadable("is not a list")
	}
	var err *RowProblem
	ok := d.Array(func() bool {
		var v T
		v, err = elem()
		dst = append(dst, v)
		return err == nil
	})
	if err != nil {
		err.Detail = "entry " + err.Detail
		return nil, err
	}
	if !ok {
		return nil, unreadable("is not a list of numbers")
	}
	return dst, nil
}
