package formats

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/klauspost/compress/zstd"
	"github.com/tokentrace/tokentrace/internal/lines"
	"github.com/tokentrace/tokentrace/traces"
)

// ImportFormat is one public trace format Import reads: the registry
// behind Importer, ImportFormats and `tokentrace import --help`, so a new
// importer is one entry here and every list of formats follows.
type ImportFormat struct {
	// Name is the format's name (import --format).
	Name string
	// Doc says in a sentence or two what the file holds and what
	// becomes of it, for --help (plain text, unwrapped).
	Doc string
	// New is the constructor.
	New ImportFunc
}

// importFormats is the registry, sorted by name.
var importFormats = []ImportFormat{
	{"aiperf", "AIPerf mooncake_trace JSONL with session_id and delay (ms): sessions become chains, delay their think times, hash_ids prefix_blocks (block size 512)", NewAIPerfReader},
	{"aiperf-dag", "AIPerf dag_jsonl conversations (forks, spawns with join_at, orchestrator rounds): a session graph with joins and think times; inputs estimated from the message text (4 bytes per token, said in a note)", NewAIPerfDAGReader},
	{"azure", "Azure LLM inference CSV TIMESTAMP,ContextTokens,GeneratedTokens (2023: CRLF, 7-digit fractions; 2024: +00:00 offsets; 2025: NumImages counted in a note, not kept); arrivals are exact offsets from the first row", NewAzureReader},
	{"bailian", "Alibaba Qwen-Bailian usage JSONL {chat_id, parent_chat_id, timestamp (s), input_length, output_length, type, turn, hash_ids of 16-token blocks}: follow-up turns become sessions, hash_ids prefix_blocks", NewBailianReader},
	{"baseten", "AIPerf's Baseten Parquet trace: arrivals, counts, total_hashes, sessions (provided_session_id, else poor_man_session_id) and the recorded TTFT/E2E as the production outcome; prompt text never read", NewBasetenReader},
	{"burstgpt", "BurstGPT CSV (v1 with 6 columns, v2, and v3 with Session ID and Elapsed time): model, class (conversation/api), sessions and turns; failed rows (0 response tokens) are kept with status http_error and counted", NewBurstGPTReader},
	{"dynamo", "Dynamo request trace JSONL (dynamo.request.trace.v1, bare or in the file sinks' envelope): agent trees as sessions with subagent parents, sequence hashes, and the timings Dynamo measured; read whole and ordered by arrival", NewDynamoReader},
	{"guidellm", "GuideLLM trace_synthetic JSONL {timestamp (s), input_length, output_length, hash_ids}", NewGuideLLMReader},
	{"inference-perf", "inference-perf OTel trace-replay files (a {spans} document per trace, back to back): a session per trace, calls from chat spans, dependencies from span timing as inference-perf infers them (joins included)", NewOTelReader},
	{"mooncake", "JSONL {timestamp (ms), input_length, output_length, hash_ids}: hash_ids become prefix_blocks (block size 512); the leading blocks a row shares with earlier rows give its category \"prefix-<id>\" and prefix_tokens (shared blocks x 512, capped at the prompt)", NewMooncakeReader},
	{"sagemaker", "SageMaker data capture JSONL: arrivals from inferenceTime, counts from the response's usage (else estimated, said in a note); content never kept", NewSageMakerReader},
	{"sglang-agentic", "SGLang bench_serving agentic trace {conversations: [[{messages, prompt_tokens}]]}: a session per conversation, chained turns, no times", NewSGLangAgenticReader},
	{"sglang-tokens", "SGLang bench_serving token trace JSONL {input_tokens, output_tokens | num_output_tokens, ts (ms)}: counts, and the ids hashed into chained 16-token prefix blocks (never kept)", NewSGLangTokenTraceReader},
	{"splitwise", "Vidur's processed CSVs (arrived_at s, num_prefill_tokens, num_decode_tokens); files without arrived_at read as lengths only, every row at 0", NewSplitwiseReader},
	{"tracelab", "SyFI TraceLab round JSONL (Claude Code and Codex sessions): one record per LLM round, sent at its last user message or tool result, in sessions; or its replay CSV (csv_export), sniffed: sessions with tool waits as think times", NewTraceLabReader},
	{"vllm", "vllm bench serve timed trace JSONL {timestamp (s), input_length, output_length, hash_ids of 16 tokens}", NewVLLMReader},
	{"weka", "WEKA kv-cache-tester agentic traces (JSON, one document per conversation, subagents nested): calls become sessions with parents and think times, hash_ids prefix_blocks", NewWekaReader},
}

// ImportFormatList returns the import formats, sorted by name.
func ImportFormatList() []ImportFormat { return slices.Clone(importFormats) }

// ImportFormats lists the names of the public trace formats Import reads.
var ImportFormats = func() []string {
	names := make([]string, len(importFormats))
	for i, f := range importFormats {
		names[i] = f.Name
	}
	return names
}()

// An ImportFunc returns a Reader of Records decoded from r in one public
// trace format. name is the file name used in Meta.Source and in error
// messages ("-" reads as "stdin"). Close closes r if it is an io.Closer.
type ImportFunc func(r io.Reader, name string, o traces.OpenOptions) (traces.Reader, error)

// Importer returns the constructor of the named import format.
func Importer(format string) (ImportFunc, error) {
	for _, f := range importFormats {
		if f.Name == format {
			return f.New, nil
		}
	}
	return nil, fmt.Errorf("%w %q: import formats are %s", traces.ErrUnknownFormat, format, strings.Join(ImportFormats, ", "))
}

// Import opens the named file ("-" = o.Stdin) and returns a
// Reader of its rows decoded in the given import format (see ImportFrom).
// Close the Reader to close the file.
func Import(ctx context.Context, format, name string, o traces.OpenOptions) (traces.Reader, error) {
	if _, err := Importer(format); err != nil {
		return nil, err
	}
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("import %s: %w", format, err)
	}
	var f io.Reader
	if name == "-" {
		if o.Stdin == nil {
			return nil, fmt.Errorf("import %s: %w", format, traces.OptionErrorf("", "OpenOptions.Stdin", "nil: nothing to read %q from", name))
		}
		f = struct{ io.Reader }{o.Stdin} // stdin is not ours to close
	} else {
		file, err := os.Open(name)
		if err != nil {
			return nil, fmt.Errorf("import %s: %w", format, err)
		}
		f = file
	}
	return ImportFrom(ctx, format, f, name, o)
}

// ImportFrom returns a Reader of the rows of r decoded in the given import
// format; name is used in Meta.Source and error messages. gzip- and
// zstd-compressed content is decompressed transparently (sniffed by magic
// bytes). Reads stop with ctx.Err() once ctx is done. Close closes r if it is
// an io.Closer other than os.Stdin; so does a failing ImportFrom.
func ImportFrom(ctx context.Context, format string, r io.Reader, name string, o traces.OpenOptions) (traces.Reader, error) {
	fn, err := Importer(format)
	if err != nil {
		return nil, err
	}
	if err := o.Validate(); err != nil {
		if c, ok := r.(io.Closer); ok && r != io.Reader(os.Stdin) {
			c.Close()
		}
		return nil, fmt.Errorf("import %s: %w", format, err)
	}
	var rc io.ReadCloser = io.NopCloser(r)
	if c, ok := r.(io.ReadCloser); ok && r != io.Reader(os.Stdin) {
		rc = c
	}
	var in io.ReadCloser
	if f, ok := r.(*os.File); ok && format == "baseten" {
		in = f // Parquet needs the file itself (random access)
	} else if in, err = importDecompress(ctxReadCloser{rc, ctx}); err != nil {
		rc.Close()
		return nil, fmt.Errorf("import %s %s: %w", format, importDisplay(name), err)
	}
	ir, err := fn(in, name, o)
	if err != nil {
		in.Close()
		return nil, fmt.Errorf("import %s %s: %w", format, importDisplay(name), err)
	}
	imp, _ := ir.(*importReader)
	if imp != nil {
		imp.name = importDisplay(name)
	}
	// A file with no valid row is import's to explain (the wrong format is
	// the likely cause), so only the damage rule applies here.
	return &importCtxReader{Reader: traces.CheckDamage(ir, name, o), ctx: ctx, imp: imp}, nil
}

// ImportAll reads every row of the named file in the given import format.
func ImportAll(ctx context.Context, format, name string, o traces.OpenOptions) ([]traces.Record, traces.Meta, traces.ReadStats, error) {
	r, err := Import(ctx, format, name, o)
	if err != nil {
		return nil, traces.Meta{}, traces.ReadStats{}, err
	}
	defer r.Close()
	recs, err := traces.ReadFrom(r)
	return recs, r.Meta(), r.Stats(), err
}

// importCtxReader stops reading when ctx is done.
type importCtxReader struct {
	traces.Reader
	ctx context.Context
	imp *importReader // the importer under the checks, for ImportNotes (nil if another Reader)
}

func (r *importCtxReader) Read(recs []traces.Record) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.Reader.Read(recs)
}

// ctxReadCloser fails its reads with ctx's error once ctx is done, so an
// importer stops within one buffer's read of a cancel, whatever it is
// doing with the bytes (a long line, a whole-input read).
type ctxReadCloser struct {
	io.ReadCloser
	ctx context.Context
}

func (r ctxReadCloser) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.ReadCloser.Read(p)
}

var (
	importZstdMagic = []byte{0x28, 0xB5, 0x2F, 0xFD}
	importGzipMagic = []byte{0x1F, 0x8B}
)

// importDecompress unwraps gzip or zstd content; Close closes f too.
func importDecompress(f io.ReadCloser) (io.ReadCloser, error) {
	br := bufio.NewReaderSize(f, 256<<10)
	head, _ := br.Peek(4)
	switch {
	case bytes.HasPrefix(head, importZstdMagic):
		zr, err := zstd.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("zstd: %w", err)
		}
		return importReadCloser{zr, func() error { zr.Close(); return f.Close() }}, nil
	case bytes.HasPrefix(head, importGzipMagic):
		gr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		return importReadCloser{gr, func() error { gr.Close(); return f.Close() }}, nil
	}
	return importReadCloser{br, f.Close}, nil
}

type importReadCloser struct {
	io.Reader
	close func() error
}

func (r importReadCloser) Close() error { return r.close() }

func importDisplay(name string) string {
	if name == "-" {
		return "stdin"
	}
	return name
}

// importSource is Meta.Source for an import: "format:basename".
func importSource(format, name string) string {
	base := name
	if name == "-" {
		base = "stdin"
	} else if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		base = name[i+1:]
	}
	return format + ":" + base
}

// rowDecoder decodes one row per call. It returns io.EOF at the end, a
// *RowError for a malformed row (the caller skips or stops), and any other
// error for a failure that ends the import (I/O).
type rowDecoder interface {
	next(rec *traces.Record) error
}

// importReader is the Reader shared by the importers: it numbers rows,
// applies strictness and counts skips.
type importReader struct {
	dec    rowDecoder
	meta   traces.Meta
	name   string // for errors
	strict bool
	closer io.Closer
	stats  traces.ReadStats
	span   traces.SpanCheck
	err    error // sticky
}

func newImportReader(r io.Reader, dec rowDecoder, m traces.Meta, o traces.OpenOptions) *importReader {
	// Rows keep the source's order (some formats group them by session);
	// the trace written is checked for arrival order when it is read.
	ir := &importReader{dec: dec, meta: m, strict: o.Strict, name: "stdin"}
	if _, base, ok := strings.Cut(m.Source, ":"); ok {
		ir.name = base
	}
	if c, ok := r.(io.Closer); ok {
		ir.closer = c
	}
	return ir
}

func (r *importReader) Meta() traces.Meta       { return r.meta }
func (r *importReader) Stats() traces.ReadStats { return r.stats }

func (r *importReader) Close() error {
	if c, ok := r.dec.(io.Closer); ok {
		c.Close() // a decoder's temporary files
	}
	if r.closer == nil {
		return nil
	}
	c := r.closer
	r.closer = nil
	return c.Close()
}

func (r *importReader) Read(recs []traces.Record) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	n := 0
	for n < len(recs) {
		rec := traces.NewRecord()
		err := r.dec.next(&rec)
		if err == nil {
			err = r.check(&rec)
		}
		if err == nil {
			rec.Seq = r.stats.Rows
			recs[n] = rec
			n++
			r.stats.Rows++
			continue
		}
		var re *traces.RowError
		if errors.As(err, &re) && err != io.EOF && r.stats.CountBad(err, r.strict) == nil {
			continue
		}
		if errors.Is(err, io.ErrUnexpectedEOF) && re == nil {
			// A compressed input cut short: the rows before are whole.
			r.stats.Truncated = true
			err = &traces.RowError{File: r.name, Line: r.stats.Rows + r.stats.Skipped + 1, Err: fmt.Errorf("%w (%v)", traces.ErrTruncated, err)}
			if l, ok := r.dec.(lineOf); ok {
				err.(*traces.RowError).Line = l.lastLine() + 1
			}
		}
		r.err = err
		return n, err
	}
	return n, nil
}

// importRowError builds the error of a malformed row: file, line and a
// content-free reason, wrapping ErrMalformed.
func importRowError(name string, line int64, format string, a ...any) *traces.RowError {
	p := importProblem(a)
	detail := fmt.Sprintf(format, a...)
	if p != traces.ProblemUnreadable {
		detail = strings.TrimSuffix(detail, ": "+p.String()) // the problem says it first
	}
	return &traces.RowError{File: importDisplay(name), Line: line, Err: &traces.RowProblem{Problem: p, Detail: detail}}
}

// importCSV reads a CSV file with a header row and finds columns by name
// (case-insensitively, spaces trimmed). It accepts LF and CRLF line
// endings and a missing final newline.
type importCSV struct {
	name string
	cr   *csv.Reader
	lf   *lines.Filter         // blanks lines over the limit
	long []*lines.TooLongError // those due before the next record
	cols map[string]int
	hdr  []string // the header as written, for notes naming columns
	nhdr int
	line int64
	// pending is a record read past lines over the limit, returned after them.
	pending []string
	pendLn  int64
}

func newImportCSV(r io.Reader, name string, o traces.OpenOptions) (*importCSV, error) {
	br, ok := r.(*bufio.Reader)
	if !ok {
		br = bufio.NewReaderSize(r, 64<<10)
	}
	lf := lines.NewFilter(br, o.MaxLineBytes)
	cr := csv.NewReader(lf)
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	cr.TrimLeadingSpace = true
	c := &importCSV{name: name, cr: cr, lf: lf, cols: map[string]int{}}
	hdr, err := cr.Read()
	before := int64(-1)
	if err == nil {
		l, _ := cr.FieldPos(0)
		before = int64(l)
	}
	if long := lf.Dropped(before); len(long) > 0 {
		return nil, tooLong(name, long[0])
	}
	if err == io.EOF {
		return nil, importRowError(name, 1, "empty file: want a CSV header")
	}
	if err != nil {
		return nil, c.wrap(err)
	}
	hdr[0] = strings.TrimPrefix(hdr[0], "\ufeff")
	for i, h := range hdr {
		key := strings.ToLower(strings.TrimSpace(h))
		if _, dup := c.cols[key]; !dup {
			c.cols[key] = i
		}
	}
	c.nhdr = len(hdr)
	c.hdr = append([]string(nil), hdr...)
	return c, nil
}

// col returns the index of the first present column among names, or -1.
func (c *importCSV) col(names ...string) int {
	for _, n := range names {
		if i, ok := c.cols[strings.ToLower(n)]; ok {
			return i
		}
	}
	return -1
}

// require returns the index of a required column or a header error.
func (c *importCSV) require(names ...string) (int, error) {
	if i := c.col(names...); i >= 0 {
		return i, nil
	}
	return -1, importRowError(c.name, 1, "header has no column %q (has %d columns)", names[0], c.nhdr)
}

// row returns the next non-empty record; a record with fewer fields than
// the header, or a line over the limit (in its place in the file), is a
// *RowError.
func (c *importCSV) row() ([]string, error) {
	for {
		if len(c.long) > 0 {
			l := c.long[0]
			c.long = c.long[1:]
			c.line = l.Line
			return nil, tooLong(c.name, l)
		}
		rec, ln := c.pending, c.pendLn
		c.pending = nil
		if rec == nil {
			var err error
			rec, err = c.cr.Read()
			if err == io.EOF {
				if c.long = c.lf.Dropped(-1); len(c.long) > 0 {
					continue
				}
				return nil, io.EOF
			}
			if err != nil {
				return nil, c.wrap(err)
			}
			l, _ := c.cr.FieldPos(0)
			ln = int64(l)
			if c.long = c.lf.Dropped(ln); len(c.long) > 0 {
				c.pending, c.pendLn = append([]string(nil), rec...), ln
				continue
			}
		}
		c.line = ln
		if len(rec) == 1 && strings.TrimSpace(rec[0]) == "" {
			continue
		}
		if len(rec) < c.nhdr {
			return nil, importRowError(c.name, c.line, "%d columns, header has %d", len(rec), c.nhdr)
		}
		return rec, nil
	}
}

// importLengths are the columns of a CSV trace's input and output token
// counts, found by requireLengths.
type importLengths struct {
	c             *importCSV
	in, out       int
	inCol, outCol string
}

// requireLengths finds the required columns inCol and outCol.
func (c *importCSV) requireLengths(inCol, outCol string) (importLengths, error) {
	l := importLengths{c: c, inCol: inCol, outCol: outCol}
	var err error
	if l.in, err = c.require(inCol); err != nil {
		return l, err
	}
	l.out, err = c.require(outCol)
	return l, err
}

// parse reads the input and output token counts of the current row; the
// error names the column.
func (l importLengths) parse(row []string) (in, out int32, err error) {
	if in, err = parseCount(row[l.in]); err != nil {
		return 0, 0, importRowError(l.c.name, l.c.line, "%s: %v", l.inCol, err)
	}
	if out, err = parseCount(row[l.out]); err != nil {
		return 0, 0, importRowError(l.c.name, l.c.line, "%s: %v", l.outCol, err)
	}
	return in, out, nil
}

// importClock turns the timestamps in column col of a CSV trace sorted by
// time into offsets from its first row's.
type importClock struct {
	col     string
	t0      int64
	started bool
}

// offset returns t − the first row's timestamp; a row earlier than the
// first is malformed.
func (k *importClock) offset(c *importCSV, t int64) (int64, error) {
	if !k.started {
		k.t0, k.started = t, true
	}
	if t < k.t0 {
		return 0, importRowError(c.name, c.line, "%s before the first row's (the file must be sorted by time)", k.col)
	}
	return t - k.t0, nil
}

// wrap turns a csv.ParseError into a content-free RowError.
func (c *importCSV) wrap(err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return importRowError(c.name, int64(pe.Line), "CSV: %v", pe.Err)
	}
	return fmt.Errorf("read %s: %w", importDisplay(c.name), err)
}

// newLines is an importer's line reader: lines up to o.MaxLineBytes bytes,
// a longer one read to its end without being held and named a bad row.
func newLines(r io.Reader, o traces.OpenOptions) *lines.Reader {
	br, ok := r.(*bufio.Reader)
	if !ok {
		br = bufio.NewReaderSize(r, 64<<10)
	}
	return lines.NewReader(br, o.MaxLineBytes)
}

// tooLong is the bad row of a line over the limit.
func tooLong(name string, err *lines.TooLongError) *traces.RowError {
	return &traces.RowError{File: importDisplay(name), Line: err.Line, Err: traces.TooLong(err)}
}

// nextObjectLine returns the next non-blank line of a JSON-lines import,
// counting lines in *line; a line that does not start an object, or is
// over the limit, is an error naming it, the end of the input io.EOF.
func nextObjectLine(lr *lines.Reader, name string, line *int64) ([]byte, error) {
	for {
		l, err := lr.Next()
		*line = lr.Line()
		var long *lines.TooLongError
		if errors.As(err, &long) {
			return nil, tooLong(name, long)
		}
		if err != nil {
			return nil, err
		}
		if l := bytes.TrimSpace(l); len(l) > 0 {
			if l[0] != '{' {
				return nil, importRowError(name, *line, "not a JSON object")
			}
			return l, nil
		}
	}
}

// readObjectLines reads a whole JSON-lines input for the importers that
// see every row before they hand one out (to order rows by arrival or link
// sessions): it calls parse on each object line, counting lines in *line,
// and returns the errors of the malformed lines in order, ending with the
// failure that ended the input where there was one.
func readObjectLines(r io.Reader, o traces.OpenOptions, name string, line *int64, parse func([]byte) error) []error {
	lr := newLines(r, o)
	var errs []error
	for {
		l, err := nextObjectLine(lr, name, line)
		if err == io.EOF {
			return errs
		}
		if err == nil {
			err = parse(l)
		}
		if err != nil {
			errs = append(errs, err)
			var re *traces.RowError
			if !errors.As(err, &re) {
				return errs // not a malformed row: the input ends here
			}
		}
	}
}

// heldRows hands out what a whole-input importer kept: the errors of its
// malformed lines first, so strict mode fails before writing a row and the
// rows do not depend on where the malformed lines were, then the rows,
// each let go once handed out.
type heldRows[T any] struct {
	errs []error
	rows []T
	out  int
}

// take returns the next error, else the next row, else io.EOF.
func (h *heldRows[T]) take() (T, error) {
	var zero T
	if len(h.errs) > 0 {
		err := h.errs[0]
		h.errs = h.errs[1:]
		return zero, err
	}
	if h.out >= len(h.rows) {
		h.rows = nil
		return zero, io.EOF
	}
	row := h.rows[h.out]
	h.rows[h.out] = zero
	h.out++
	return row, nil
}
