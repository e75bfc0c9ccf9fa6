package traces

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/tokentrace/tokentrace/internal/atomicfile"
	"github.com/tokentrace/tokentrace/internal/fserr"
)

// Format names a codec.
type Format string

// Formats Create and NewWriter know. Readers sniff the codec from the content
// instead (see OpenWith).
const (
	// FormatParquet is Apache Parquet: zstd-compressed columns, bounded row
	// groups, rows sorted by (arrival_ns, seq), metadata in the key/value
	// metadata under "tokentrace.*".
	FormatParquet Format = "parquet"
	// FormatJSONL is one JSON object per line, metadata on the first line as
	// {"tokentrace_meta":{...}}.
	FormatJSONL Format = "jsonl"
	// FormatJSONLZstd is FormatJSONL in a zstd stream.
	FormatJSONLZstd Format = "jsonl.zst"
	// FormatCSV is RFC 4180 CSV with a header of the Parquet column names and
	// a leading "#tokentrace {json}" metadata comment line.
	FormatCSV Format = "csv"
	// FormatCSVZstd is FormatCSV in a zstd stream.
	FormatCSVZstd Format = "csv.zst"
)

// Formats lists every Format, for flag help and error messages.
var Formats = []Format{FormatParquet, FormatJSONL, FormatJSONLZstd, FormatCSV, FormatCSVZstd}

// FormatOf returns the format implied by a file name's extension; "-"
// (stdout) and the null device (os.DevNull) are FormatJSONL.
func FormatOf(name string) (Format, error) {
	if name == "-" || name == os.DevNull {
		// Nothing written to the null device is kept (a run that only
		// validates its input): the cheapest codec will do.
		return FormatJSONL, nil
	}
	lower := strings.ToLower(name)
	switch {
	case strings.HasSuffix(lower, ".parquet"), strings.HasSuffix(lower, ".pq"):
		return FormatParquet, nil
	case strings.HasSuffix(lower, ".jsonl.zst"), strings.HasSuffix(lower, ".ndjson.zst"), strings.HasSuffix(lower, ".json.zst"):
		return FormatJSONLZstd, nil
	case strings.HasSuffix(lower, ".jsonl"), strings.HasSuffix(lower, ".ndjson"), strings.HasSuffix(lower, ".json"):
		return FormatJSONL, nil
	case strings.HasSuffix(lower, ".csv.zst"):
		return FormatCSVZstd, nil
	case strings.HasSuffix(lower, ".csv"):
		return FormatCSV, nil
	}
	return "", fmt.Errorf("%w: cannot tell the format of %q from its extension (want .parquet, .jsonl, .jsonl.zst, .csv or .csv.zst)", ErrUnknownFormat, name)
}

// displayName is how errors name a file.
func displayName(name string) string {
	if name == "-" {
		return "stdin"
	}
	return name
}

// Open opens a trace or results file for reading; "-" is stdin. The codec
// is chosen by content, whatever the name says.
func Open(name string) (Reader, error) { return OpenWith(name, DefaultOpenOptions()) }

// OpenWith is Open with options. A directory or a glob pattern opens a
// dataset: its part files read one after the other in name order (see
// DatasetParts). The codec is sniffed from the first bytes:
// Parquet magic "PAR1", zstd magic 28 B5 2F FD (JSONL or CSV inside), '{'
// (JSONL), otherwise a CSV header with our column names (optionally after a
// "#tokentrace" metadata line). An empty file is an empty trace. Parquet from
// stdin is spooled to a temporary file first, because Parquet needs random
// access.
//
// Every row is checked by Record.Validate and for arrival order; bad rows
// are skipped and counted (ReadStats.Bad), or with o.Strict the first is
// an error. A damaged file is an error unless o.Salvage; a file with rows
// but no valid record is an error (ErrNoValidRows).
func OpenWith(name string, o OpenOptions) (Reader, error) {
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("open trace %s: %w", displayName(name), err)
	}
	r, err := openWith(name, o)
	if err != nil {
		return nil, err
	}
	if m := r.Meta(); m.KAnonDeferred() && !o.AllowDeferred {
		r.Close()
		return nil, fmt.Errorf("open trace %s: %w", displayName(name), ErrKAnonDeferred)
	}
	return withChecks(r, name, o), nil
}

func openWith(name string, o OpenOptions) (Reader, error) {
	if name == "-" {
		if o.Stdin == nil {
			return nil, OptionErrorf("", "OpenOptions.Stdin", "nil: nothing to read %q from", name)
		}
		in := struct{ io.Reader }{o.Stdin} // stdin is not ours to close
		r, err := NewReader(in, "-", o)
		if err != nil {
			return nil, fmt.Errorf("open trace stdin: %w", err)
		}
		return r, nil
	}
	if parts, err := DatasetParts(name); err != nil {
		return nil, err
	} else if parts != nil {
		return openDataset(parts, o)
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, fserr.Wrap("open trace", name, err)
	}
	var magic [4]byte
	n, _ := io.ReadFull(f, magic[:])
	if n == 4 && string(magic[:]) == parquetMagic {
		r, err := newParquetFileReader(f, name, o, true)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("open trace %s: %w", name, err)
		}
		return r, nil
	}
	if n < 4 && strings.HasSuffix(strings.ToLower(name), ".parquet") {
		f.Close()
		return nil, fmt.Errorf("open trace %s: %w: %d bytes, no Parquet header or footer", name, ErrTruncated, n)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("open trace %s: %w", name, err)
	}
	r, err := newStreamReader(f, f, name, o)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open trace %s: %w", name, err)
	}
	return r, nil
}

// publicTraceErr is ErrUnknownFormat for a public trace of import format
// f, with the import command that converts it.
func publicTraceErr(f string) error {
	imp := NewCommand("import").With(CommandFormat, f)
	return fmt.Errorf("%w: %w", ErrUnknownFormat, Textf("this looks like a public %s trace, not a tokentrace trace: convert it with %s", f, imp))
}

// NewReader sniffs the codec of r's content and returns a Reader over it;
// name is used in error messages ("-" reads as "stdin"). Parquet content is
// spooled to a temporary file (removed on Close). Close closes r if it is an
// io.Closer.
func NewReader(r io.Reader, name string, o OpenOptions) (Reader, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	var closer io.Closer
	if c, ok := r.(io.Closer); ok && r != os.Stdin {
		closer = c
	}
	br := bufio.NewReaderSize(r, 256<<10)
	head, _ := br.Peek(4)
	if string(head) == parquetMagic {
		pr, err := spoolParquet(br, name, o)
		if closer != nil {
			closer.Close()
		}
		return pr, err
	}
	return newStreamReader(br, closer, name, o)
}

// newStreamReader handles the streamable codecs: zstd (then JSONL or CSV),
// JSONL, CSV.
func newStreamReader(r io.Reader, closer io.Closer, name string, o OpenOptions) (Reader, error) {
	br, ok := r.(*bufio.Reader)
	if !ok {
		br = bufio.NewReaderSize(r, 256<<10)
	}
	head, _ := br.Peek(4)
	if bytes.HasPrefix(head, gzipMagic) {
		head, _ = br.Peek(br.Size())
		err := gzipError(head)
		if le, ok := err.(*LogsError); ok {
			le.File = displayName(name)
		}
		return nil, err
	}
	if bytes.Equal(head, zstdMagic) {
		zr, err := newZstdReader(br)
		if err != nil {
			return nil, err
		}
		inner := bufio.NewReaderSize(zr, 256<<10)
		cl := multiCloser{zr, closer}
		return sniffText(inner, cl, name, o, true)
	}
	return sniffText(br, closer, name, o, false)
}

// sniffText tells JSONL from CSV.
func sniffText(br *bufio.Reader, closer io.Closer, name string, o OpenOptions, zst bool) (Reader, error) {
	head, err := br.Peek(512)
	if err != nil && err != io.EOF && err != bufio.ErrBufferFull && len(head) == 0 {
		return nil, fmt.Errorf("read: %w", truncErr(err))
	}
	trimmed := bytes.TrimLeft(bytes.TrimPrefix(head, utf8BOM), " \t\r\n")
	switch {
	case len(trimmed) == 0 && len(head) < 512:
		// Empty (or blank) input: an empty JSONL trace.
		return newJSONLReader(br, closer, name, o, zst)
	case bytes.Contains(head, []byte(`"tokentrace-synth-model"`)):
		return nil, fmt.Errorf("%w: this is a synth model (the output of synth fit), not a trace: generate a trace from it with synth gen", ErrUnknownFormat)
	case trimmed[0] == '{':
		if shape := logShapeOf(trimmed); shape != "" {
			return nil, &LogsError{File: displayName(name), Shape: shape}
		}
		if f := importFormatOf(trimmed); f != "" {
			return nil, publicTraceErr(f)
		}
		return newJSONLReader(br, closer, name, o, zst)
	case bytes.HasPrefix(trimmed, []byte(csvMetaPrefix)) || looksLikeCSVHeader(trimmed):
		return newCSVReader(br, closer, name, o, zst)
	}
	if f := importFormatOf(trimmed); f != "" {
		return nil, publicTraceErr(f)
	}
	if shape := logShapeOf(trimmed); shape != "" {
		return nil, &LogsError{File: displayName(name), Shape: shape}
	}
	return nil, fmt.Errorf("%w: content is neither Parquet, zstd, JSON lines nor CSV with tokentrace column names", ErrUnknownFormat)
}

// importFormatOf recognizes the first line of a public trace that import
// reads (by the columns or keys its decoder requires), or returns "".
func importFormatOf(head []byte) string {
	line, _, _ := bytes.Cut(head, []byte{'\n'})
	has := func(s ...string) bool {
		for _, x := range s {
			if !bytes.Contains(line, []byte(x)) {
				return false
			}
		}
		return true
	}
	switch {
	case has("ContextTokens", "GeneratedTokens"):
		return "azure"
	case has("Request tokens", "Response tokens"):
		return "burstgpt"
	case has("num_prefill_tokens", "num_decode_tokens"):
		return "splitwise"
	case has(`"input_length"`, `"output_length"`) && !has(`"input_tokens"`):
		return "mooncake"
	}
	return ""
}

var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// looksLikeCSVHeader reports whether the first line names at least one of our
// columns and nothing that looks like JSON.
func looksLikeCSVHeader(b []byte) bool {
	line, _, _ := bytes.Cut(b, []byte{'\n'})
	line = bytes.TrimRight(line, "\r")
	for f := range bytes.SplitSeq(line, []byte{','}) {
		f = bytes.Trim(bytes.TrimSpace(f), `"`)
		if _, ok := columnIndex[string(f)]; ok {
			return true
		}
	}
	return false
}

type multiCloser []io.Closer

func (m multiCloser) Close() error {
	var err error
	for _, c := range m {
		if c == nil {
			continue
		}
		if cerr := c.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// Create creates the named file for writing with the codec chosen by its
// extension (see FormatOf); "-" is stdout (JSONL).
func Create(name string, m Meta) (Writer, error) {
	return CreateWith(name, m, DefaultCreateOptions())
}

// CreateWith is Create with options.
func CreateWith(name string, m Meta, o CreateOptions) (Writer, error) {
	format, err := FormatOf(name)
	if err != nil {
		return nil, fmt.Errorf("create trace: %w", err)
	}
	if err := o.validate(); err != nil {
		return nil, fmt.Errorf("create trace %s: %w", name, err)
	}
	var f io.WriteCloser
	if name == "-" {
		if o.Stdout == nil {
			return nil, fmt.Errorf("create trace: %w", OptionErrorf("", "CreateOptions.Stdout", "nil: nothing to write %q to", name))
		}
		f = nopCloser{o.Stdout}
	} else {
		// The final name only ever holds a complete file: a failed write
		// (a full disk) or a crash leaves it untouched.
		if f, err = atomicfile.Create(name); err != nil {
			return nil, fserr.Wrap("create trace", name, err)
		}
	}
	w, err := NewWriter(f, format, m, o)
	if err != nil {
		if a, ok := f.(*atomicfile.File); ok {
			a.Abort()
		}
		f.Close()
		return nil, fmt.Errorf("create trace %s: %w", name, err)
	}
	if a, ok := f.(*atomicfile.File); ok {
		return &fileWriter{Writer: w, file: a}, nil
	}
	return w, nil
}

// fileWriter is a Writer to a named file, which Abort can discard.
type fileWriter struct {
	Writer
	file *atomicfile.File
}

// Flush forwards to the codec when it can flush (JSONL, CSV).
func (w *fileWriter) Flush() error {
	if f, ok := w.Writer.(Flusher); ok {
		return f.Flush()
	}
	return nil
}

func (w *fileWriter) abort() {
	w.file.Abort()
	if a, ok := w.Writer.(interface{ abort() }); ok {
		a.abort() // drops its buffer and temporary files unwritten
		return
	}
	w.Writer.Close() // its final writes fail harmlessly: the file is gone
}

// Abort discards what w wrote, when w writes a named file from Create: the
// final name is left untouched (it never held a partial file). Other
// Writers are closed. Use it on the error paths of a writer's caller.
func Abort(w Writer) {
	if a, ok := w.(interface{ abort() }); ok {
		a.abort()
		return
	}
	w.Close()
}

func (o *CreateOptions) validate() error {
	if o.RowGroupRows <= 0 {
		return OptionErrorf("", "CreateOptions.RowGroupRows", "%d: must be positive", o.RowGroupRows)
	}
	if o.SortMemoryBytes <= 0 {
		return OptionErrorf("", "CreateOptions.SortMemoryBytes", "%d: must be positive", o.SortMemoryBytes)
	}
	return nil
}

// NewWriter returns a Writer of the given format over w. Close flushes and
// closes w if it is an io.Closer (wrap os.Stdout to keep it open).
func NewWriter(w io.Writer, format Format, m Meta, o CreateOptions) (Writer, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	if m.SchemaVersion == "" {
		m.SchemaVersion = SchemaVersion
	}
	switch format {
	case FormatParquet:
		return newParquetWriter(w, m, o)
	case FormatJSONL:
		return NewJSONLWriter(w, m)
	case FormatCSV:
		return newCSVWriter(w, m)
	case FormatJSONLZstd, FormatCSVZstd:
		zw, err := newZstdWriter(w)
		if err != nil {
			return nil, err
		}
		if format == FormatCSVZstd {
			return newCSVWriter(zw, m)
		}
		return NewJSONLWriter(zw, m)
	}
	return nil, fmt.Errorf("%w %q (want one of %v)", ErrUnknownFormat, format, Formats)
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
