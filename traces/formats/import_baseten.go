package formats

import (
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/parquet-go/parquet-go"
	"github.com/tokentrace/tokentrace/internal/intern"
	"github.com/tokentrace/tokentrace/traces"
)

// NewBasetenReader reads a Baseten completion trace, the Parquet file
// AIPerf replays with --custom-dataset-type baseten_trace (schema:
// ai-dynamo/aiperf src/aiperf/dataset/loader/baseten_trace_models.py @
// 264464a): one row per request with the columns
//
//	timestamp_start_unix_ms, prompt, input_tokens, output_tokens (required by AIPerf)
//	total_hashes (list of KV block hashes), block_size, provided_session_id,
//	poor_man_session_id, duration_e2e_ms, duration_ttft_ms, request_canceled,
//	cached_tokens_reference, model_name, org_id, features, speculation_ratio,
//	output_text, __version__
//
// found by name. timestamp_start_unix_ms, input_tokens and output_tokens are
// required here; prompt and output_text are never read (tokentrace keeps no
// content), and the other unused columns are named in an import note.
//
// Rows map to Records as:
//   - ArrivalNs: timestamp_start_unix_ms as an offset from the earliest in
//     the file (a first pass reads that column alone); rows come out in file
//     order.
//   - InputTokens, OutputTokens; Model: model_name.
//   - PrefixBlocks: total_hashes; Meta.BlockSize: block_size of the first
//     row that has one (rows with another block size keep no blocks,
//     counted in a note).
//   - Session: provided_session_id (AIPerf's default session key), else
//     poor_man_session_id, numbered from 1 in order of first appearance;
//     Turn: the session's row count; ParentSeq: its previous row.
//   - The production outcome when the row has durations: Run "production",
//     SentNs = ArrivalNs, FirstTokenNs = + duration_ttft_ms, LastTokenNs =
//     FinishNs = + duration_e2e_ms, ServerPromptTokens/ServerOutputTokens =
//     the counts, ServerCachedTokens = cached_tokens_reference; Status ok,
//     or disconnect when request_canceled is 1.
//
// Parquet needs random access: a file opened by name is read in place; a
// stream (stdin, or a compressed file) is first copied to a temporary file,
// removed on Close. The importer reads one row group's needed columns at a
// time and holds one entry per session. A row with a null or negative
// count or time is malformed.
func NewBasetenReader(r io.Reader, name string, o traces.OpenOptions) (traces.Reader, error) {
	ra, size, cleanup, err := basetenReaderAt(r)
	if err != nil {
		return nil, err
	}
	d, err := newBasetenDecoder(ra, size, name)
	if err != nil {
		cleanup()
		return nil, err
	}
	d.cleanup = cleanup
	m := traces.NewMeta(importSource("baseten", name))
	m.BlockSize = d.blockSize
	return newImportReader(r, d, m, o), nil
}

// basetenReaderAt returns random access to r: r itself when it is a file,
// else a temporary copy; cleanup removes the copy.
func basetenReaderAt(r io.Reader) (io.ReaderAt, int64, func(), error) {
	if f, ok := r.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
			return f, st.Size(), func() {}, nil
		}
	}
	tmp, err := os.CreateTemp("", "tokentrace-baseten-*.parquet")
	if err != nil {
		return nil, 0, nil, err
	}
	cleanup := func() { tmp.Close(); os.Remove(tmp.Name()) }
	n, err := io.Copy(tmp, r)
	if err != nil {
		cleanup()
		return nil, 0, nil, err
	}
	return tmp, n, cleanup, nil
}

// basetenColumns are the leaf column indexes the importer reads (-1 =
// absent).
type basetenColumns struct {
	ts, in, out, hashes, blockSize, session, poorMan, e2e, ttft, canceled, cached, model int
}

type basetenDecoder struct {
	name      string
	pf        *parquet.File
	cols      basetenColumns
	baseMs    float64
	blockSize int
	cleanup   func()
	// the current row group, column by column
	rg      int
	row     int
	n       int
	vals    map[int][]parquet.Value // scalar columns: one value per row
	lists   [][]int64               // total_hashes per row
	session map[string]*basetenSession
	models  intern.Strings
	kept    int64
	tally   importTally
}

type basetenSession struct {
	num, last int64
	turns     int32
}

func (d *basetenDecoder) notes() []traces.Text { return d.tally.notes() }

func (d *basetenDecoder) Close() error {
	if d.cleanup != nil {
		d.cleanup()
		d.cleanup = nil
	}
	return nil
}

func newBasetenDecoder(ra io.ReaderAt, size int64, name string) (d *basetenDecoder, err error) {
	defer func() {
		if p := recover(); p != nil {
			d, err = nil, fmt.Errorf("%w: damaged Parquet file: %v", traces.ErrMalformed, p)
		}
	}()
	pf, err := parquet.OpenFile(ra, size, parquet.SkipBloomFilters(true))
	if err != nil {
		return nil, fmt.Errorf("%w: not a Parquet file: %v", traces.ErrMalformed, err)
	}
	d = &basetenDecoder{name: name, pf: pf, session: map[string]*basetenSession{}}
	look := func(name string) int {
		if c, ok := pf.Schema().Lookup(name); ok {
			return c.ColumnIndex
		}
		if c, ok := pf.Schema().Lookup(name, "list", "element"); ok { // a LIST's element
			return c.ColumnIndex
		}
		if c, ok := pf.Schema().Lookup(name, "list", "item"); ok {
			return c.ColumnIndex
		}
		return -1
	}
	d.cols = basetenColumns{
		ts: look("timestamp_start_unix_ms"), in: look("input_tokens"), out: look("output_tokens"),
		hashes: look("total_hashes"), blockSize: look("block_size"), session: look("provided_session_id"),
		poorMan: look("poor_man_session_id"), e2e: look("duration_e2e_ms"), ttft: look("duration_ttft_ms"),
		canceled: look("request_canceled"), cached: look("cached_tokens_reference"), model: look("model_name"),
	}
	for _, req := range []struct {
		idx  int
		name string
	}{{d.cols.ts, "timestamp_start_unix_ms"}, {d.cols.in, "input_tokens"}, {d.cols.out, "output_tokens"}} {
		if req.idx < 0 {
			return nil, fmt.Errorf("%w: %s has no column %q (not a Baseten trace)", traces.ErrMalformed, importDisplay(name), req.name)
		}
	}
	var dropped []string
	for _, f := range pf.Schema().Fields() {
		switch f.Name() {
		case "timestamp_start_unix_ms", "input_tokens", "output_tokens", "total_hashes", "block_size", "provided_session_id",
			"poor_man_session_id", "duration_e2e_ms", "duration_ttft_ms", "request_canceled", "cached_tokens_reference", "model_name":
		case "prompt", "output_text":
			dropped = append(dropped, f.Name()+" (content, never kept)")
		default:
			dropped = append(dropped, f.Name())
		}
	}
	if len(dropped) > 0 {
		d.tally.say("columns not kept: " + strings.Join(dropped, ", "))
	}
	// First pass: the earliest timestamp and the first block size.
	d.baseMs = math.Inf(1)
	for _, g := range pf.RowGroups() {
		ts, err := basetenChunk(g, d.cols.ts)
		if err != nil {
			return nil, err
		}
		for _, v := range ts {
			if f, ok := basetenNumber(v); ok && f >= 0 && f < d.baseMs {
				d.baseMs = f
			}
		}
		if d.blockSize == 0 && d.cols.blockSize >= 0 {
			bs, err := basetenChunk(g, d.cols.blockSize)
			if err != nil {
				return nil, err
			}
			for _, v := range bs {
				if f, ok := basetenNumber(v); ok && f > 0 && f < 1<<31 && f == math.Trunc(f) {
					d.blockSize = int(f)
					break
				}
			}
		}
	}
	if math.IsInf(d.baseMs, 1) {
		d.baseMs = 0
	}
	d.rg = -1
	return d, nil
}

// basetenMaxPageValues bounds the values one page may claim, so a damaged
// header cannot make the importer allocate without limit (writers put far
// fewer in a page: a megabyte of 8-byte values is 131,072).
const basetenMaxPageValues = 1 << 24

// basetenChunk reads every value of one column of a row group (with
// repetition levels for a list column).
func basetenChunk(g parquet.RowGroup, col int) ([]parquet.Value, error) {
	chunks := g.ColumnChunks()
	if col < 0 || col >= len(chunks) {
		return nil, nil
	}
	pages := chunks[col].Pages()
	defer pages.Close()
	var out []parquet.Value
	for {
		p, err := pages.ReadPage()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%w: damaged Parquet page: %v", traces.ErrMalformed, err)
		}
		if p.NumValues() > basetenMaxPageValues {
			parquet.Release(p)
			return nil, fmt.Errorf("%w: a Parquet page claims %d values (more than %d)", traces.ErrMalformed, p.NumValues(), basetenMaxPageValues)
		}
		buf := make([]parquet.Value, p.NumValues())
		n, err := p.Values().ReadValues(buf)
		for i := range buf[:n] {
			buf[i] = buf[i].Clone() // page buffers are released below
		}
		out = append(out, buf[:n]...)
		parquet.Release(p)
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("%w: damaged Parquet page: %v", traces.ErrMalformed, err)
		}
	}
}

// basetenNumber reads a numeric value (ints or floats); ok is false for a
// null or a non-number.
func basetenNumber(v parquet.Value) (float64, bool) {
	if v.IsNull() {
		return 0, false
	}
	switch v.Kind() {
	case parquet.Int32, parquet.Int64:
		return float64(v.Int64()), true
	case parquet.Float:
		return float64(v.Float()), true
	case parquet.Double:
		return v.Double(), true
	case parquet.Boolean:
		if v.Boolean() {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

// basetenInt reads an exact non-negative integer value.
func basetenInt(v parquet.Value) (int64, bool) {
	if v.IsNull() {
		return 0, false
	}
	switch v.Kind() {
	case parquet.Int32, parquet.Int64:
		n := v.Int64()
		return n, n >= 0
	case parquet.Float, parquet.Double:
		f, _ := basetenNumber(v)
		return int64(f), f >= 0 && f == math.Trunc(f) && f < 1<<62
	}
	return 0, false
}

// loadGroup reads the next row group's needed columns.
func (d *basetenDecoder) loadGroup() (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: damaged Parquet file: %v", traces.ErrMalformed, p)
		}
	}()
	d.rg++
	g := d.pf.RowGroups()[d.rg]
	d.n, d.row = int(g.NumRows()), 0
	d.vals = map[int][]parquet.Value{}
	for _, c := range []int{d.cols.ts, d.cols.in, d.cols.out, d.cols.blockSize, d.cols.session, d.cols.poorMan, d.cols.e2e, d.cols.ttft, d.cols.canceled, d.cols.cached, d.cols.model} {
		if c < 0 {
			continue
		}
		vs, err := basetenChunk(g, c)
		if err != nil {
			return err
		}
		if len(vs) != d.n {
			return fmt.Errorf("%w: %s: row group %d column %d has %d values for %d rows", traces.ErrMalformed, importDisplay(d.name), d.rg, c, len(vs), d.n)
		}
		d.vals[c] = vs
	}
	d.lists = d.lists[:0]
	if d.cols.hashes >= 0 {
		vs, err := basetenChunk(g, d.cols.hashes)
		if err != nil {
			return err
		}
		maxDef := 0
		for _, v := range vs {
			maxDef = max(maxDef, v.DefinitionLevel())
		}
		for _, v := range vs {
			if v.RepetitionLevel() == 0 {
				d.lists = append(d.lists, nil)
			}
			if len(d.lists) == 0 {
				return fmt.Errorf("%w: %s: total_hashes does not start a row", traces.ErrMalformed, importDisplay(d.name))
			}
			if v.IsNull() || v.DefinitionLevel() < maxDef {
				continue // a null or empty list
			}
			k := len(d.lists) - 1
			d.lists[k] = append(d.lists[k], v.Int64())
		}
		if len(d.lists) != d.n {
			return fmt.Errorf("%w: %s: total_hashes has %d rows for %d", traces.ErrMalformed, importDisplay(d.name), len(d.lists), d.n)
		}
	}
	return nil
}

func (d *basetenDecoder) next(rec *traces.Record) error {
	for d.row >= d.n {
		if d.rg+1 >= len(d.pf.RowGroups()) {
			return io.EOF
		}
		if err := d.loadGroup(); err != nil {
			return err
		}
	}
	i := d.row
	d.row++
	// Parquet has no lines: a malformed row is named by its 1-based row
	// number in the file (the "line" of the RowError).
	var before int64
	for _, g := range d.pf.RowGroups()[:d.rg] {
		before += g.NumRows()
	}
	bad := func(format string, a ...any) error {
		return importRowError(d.name, before+int64(i)+1, format, a...)
	}
	val := func(c int) (parquet.Value, bool) {
		if c < 0 {
			return parquet.Value{}, false
		}
		v := d.vals[c][i]
		return v, !v.IsNull()
	}
	tsv, _ := val(d.cols.ts)
	ts, ok := basetenNumber(tsv)
	if !ok || ts < 0 || ts-d.baseMs > 9e12 {
		return bad("timestamp_start_unix_ms: not a non-negative number")
	}
	rec.ArrivalNs = int64(math.Round((ts - d.baseMs) * 1e6))
	count := func(c int, what string) (int32, error) {
		v, _ := val(c)
		n, ok := basetenInt(v)
		if !ok || n > 1<<31-1 {
			return 0, bad("%s: not a token count", what)
		}
		return int32(n), nil
	}
	var err error
	if rec.InputTokens, err = count(d.cols.in, "input_tokens"); err != nil {
		return err
	}
	if rec.OutputTokens, err = count(d.cols.out, "output_tokens"); err != nil {
		return err
	}
	if v, ok := val(d.cols.model); ok && v.Kind() == parquet.ByteArray {
		rec.Model = d.models.OfBytes(v.ByteArray())
	}
	if d.cols.hashes >= 0 && len(d.lists[i]) > 0 {
		bs := int64(0)
		if v, ok := val(d.cols.blockSize); ok {
			bs, _ = basetenInt(v)
		}
		if bs != 0 && bs != int64(d.blockSize) {
			d.tally.add("%d rows with another block_size than the first row's keep no prefix blocks", 1)
		} else {
			rec.PrefixBlocks = append([]int64(nil), d.lists[i]...)
		}
	}
	key := ""
	if v, ok := val(d.cols.session); ok {
		key = "p" + basetenString(v)
	} else if v, ok := val(d.cols.poorMan); ok {
		key = "m" + basetenString(v)
	}
	if key != "" {
		s := d.session[key]
		if s == nil {
			s = &basetenSession{num: int64(len(d.session)) + 1, last: traces.NotReported}
			d.session[key] = s
		}
		s.turns++
		rec.Session, rec.Turn, rec.ParentSeq = s.num, s.turns, s.last
		s.last = d.kept
	}
	e2e, haveE2E := val(d.cols.e2e)
	ttft, haveTTFT := val(d.cols.ttft)
	if haveE2E || haveTTFT {
		rec.Run, rec.Status = "production", traces.StatusOK
		rec.ScheduledNs, rec.SentNs = rec.ArrivalNs, rec.ArrivalNs
		rec.ServerPromptTokens, rec.ServerOutputTokens = rec.InputTokens, rec.OutputTokens
		if f, ok := basetenNumber(e2e); haveE2E && ok && f >= 0 && f < 9e12 {
			rec.LastTokenNs = rec.ArrivalNs + int64(math.Round(f*1e6))
			rec.FinishNs = rec.LastTokenNs
		}
		if f, ok := basetenNumber(ttft); haveTTFT && ok && f >= 0 && f < 9e12 {
			rec.FirstTokenNs = rec.ArrivalNs + int64(math.Round(f*1e6))
		}
		if v, ok := val(d.cols.cached); ok {
			if n, ok := basetenInt(v); ok && n <= 1<<31-1 {
				rec.ServerCachedTokens = int32(n)
			}
		}
		if v, ok := val(d.cols.canceled); ok {
			if f, ok := basetenNumber(v); ok && f == 1 {
				rec.Status = traces.StatusDisconnect
				rec.Error = "canceled in the source trace"
			}
		}
	}
	d.kept++
	return nil
}

// basetenString renders a session key of any type.
func basetenString(v parquet.Value) string {
	switch v.Kind() {
	case parquet.ByteArray, parquet.FixedLenByteArray:
		return string(v.ByteArray())
	case parquet.Int32, parquet.Int64:
		return strconv.FormatInt(v.Int64(), 10)
	}
	return v.String()
}
