package traces

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// jsonlMetaKey is the key of the metadata object on a JSONL file's first line.
const jsonlMetaKey = "tokentrace_meta"

type jsonlWriter struct {
	bw     *bufio.Writer
	closer io.Closer
	enc    *json.Encoder
}

// NewJSONLWriter writes records as JSON lines to w, metadata first. Close
// flushes and closes w if it is an io.Closer.
func NewJSONLWriter(w io.Writer, m Meta) (Writer, error) {
	if m.SchemaVersion == "" {
		m.SchemaVersion = SchemaVersion
	}
	jw := &jsonlWriter{bw: bufio.NewWriterSize(w, 256<<10)}
	if c, ok := w.(io.Closer); ok {
		jw.closer = c
	}
	jw.enc = json.NewEncoder(jw.bw)
	if err := jw.enc.Encode(map[string]Meta{jsonlMetaKey: m}); err != nil {
		return nil, err
	}
	return jw, nil
}

func (w *jsonlWriter) Write(recs []Record) (int, error) {
	for i := range recs {
		if err := w.enc.Encode(&recs[i]); err != nil {
			return i, err
		}
	}
	return len(recs), nil
}

func (w *jsonlWriter) Flush() error { return w.bw.Flush() }

func (w *jsonlWriter) Close() error {
	err := w.bw.Flush()
	if w.closer != nil {
		if cerr := w.closer.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

type jsonlReader struct {
	name   string
	sc     *bufio.Scanner
	closer io.Closer
	meta   Meta
	line   int64
	stats  ReadStats
	strict bool
	peeked []byte
}

// NewJSONLReader reads JSON lines from r; name is used in error messages.
func NewJSONLReader(r io.Reader, name string, o OpenOptions) (Reader, error) {
	jr := &jsonlReader{name: name, sc: bufio.NewScanner(r), strict: o.Strict}
	jr.sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	if c, ok := r.(io.Closer); ok {
		jr.closer = c
	}
	jr.meta.SchemaVersion = SchemaVersion
	if jr.sc.Scan() {
		jr.line++
		line := jr.sc.Bytes()
		if bytes.Contains(line, []byte(`"`+jsonlMetaKey+`"`)) {
			var hdr map[string]Meta
			if err := json.Unmarshal(line, &hdr); err != nil {
				return nil, &RowError{File: name, Line: 1, Err: fmt.Errorf("metadata line: %w", err)}
			}
			jr.meta = hdr[jsonlMetaKey]
			if err := jr.meta.CheckVersion(); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
		} else {
			jr.peeked = append([]byte(nil), line...)
		}
	}
	return jr, nil
}

func (r *jsonlReader) Meta() Meta       { return r.meta }
func (r *jsonlReader) Stats() ReadStats { return r.stats }
func (r *jsonlReader) Close() error {
	if r.closer != nil {
		return r.closer.Close()
	}
	return nil
}

func (r *jsonlReader) Read(recs []Record) (int, error) {
	n := 0
	for n < len(recs) {
		var line []byte
		if r.peeked != nil {
			line, r.peeked = r.peeked, nil
		} else {
			if !r.sc.Scan() {
				if err := r.sc.Err(); err != nil {
					return n, &RowError{File: r.name, Line: r.line + 1, Err: err}
				}
				return n, io.EOF
			}
			r.line++
			line = r.sc.Bytes()
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		rec := NewRecord()
		if err := json.Unmarshal(line, &rec); err != nil {
			rerr := &RowError{File: r.name, Line: r.line, Err: fmt.Errorf("not a JSON record")}
			if r.strict {
				return n, rerr
			}
			r.stats.Skipped++
			if r.stats.FirstSkip == nil {
				r.stats.FirstSkip = rerr
			}
			continue
		}
		recs[n] = rec
		n++
		r.stats.Rows++
	}
	return n, nil
}

// Open opens a trace or results file for reading; "-" is stdin.
func Open(name string) (Reader, error) { return OpenWith(name, OpenOptions{}) }

// OpenWith is Open with options.
func OpenWith(name string, o OpenOptions) (Reader, error) {
	var f io.ReadCloser = os.Stdin
	if name != "-" {
		var err error
		if f, err = os.Open(name); err != nil {
			return nil, fmt.Errorf("open trace: %w", err)
		}
	}
	r, err := NewJSONLReader(f, name, o)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open trace %s: %w", name, err)
	}
	return r, nil
}

// Create creates the named file for writing with the codec chosen by its
// extension; "-" is stdout (JSONL).
func Create(name string, m Meta) (Writer, error) { return CreateWith(name, m, CreateOptions{}) }

// CreateWith is Create with options.
func CreateWith(name string, m Meta, o CreateOptions) (Writer, error) {
	var f io.WriteCloser = nopCloser{os.Stdout}
	if name != "-" {
		var err error
		if f, err = os.Create(name); err != nil {
			return nil, fmt.Errorf("create trace: %w", err)
		}
	}
	return NewJSONLWriter(f, m)
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
