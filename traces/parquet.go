package traces

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"
)

// parquetMagic starts and ends every Parquet file.
const parquetMagic = "PAR1"

// parquetCodec compresses every column. SpeedBetterCompression (about zstd
// level 7) was measured against SpeedDefault and SpeedBestCompression on the
// shared traces (README, "Formats"): it keeps the Azure traces
// under 8 bytes per request (SpeedDefault: 7.79 for the code trace) and
// writes about 2x faster than SpeedBestCompression.
var parquetCodec = &zstd.Codec{Level: zstd.SpeedBetterCompression}

// parquetWriter buffers every record until Close, then sorts by
// (arrival_ns, seq) and writes row groups of at most RowGroupRows rows.
//
// Memory: the whole file is held in memory before it is written: about
// 336 bytes per record (the Record struct) plus 8 bytes per prefix block and
// per chunk, so 1 M trace rows cost about 340 MB. Stream to .jsonl(.zst) when
// that is too much.
type parquetWriter struct {
	out     io.Writer
	meta    Meta
	o       CreateOptions
	recs    []Record
	arena   []int64 // backing store for copied int64 lists
	arena32 []int32
	closed  bool
}

func newParquetWriter(w io.Writer, m Meta, o CreateOptions) (*parquetWriter, error) {
	if o.RowGroupRows == 0 {
		o.RowGroupRows = DefaultRowGroupRows
	}
	return &parquetWriter{out: w, meta: m, o: o}, nil
}

// Write copies recs (lists included) into the buffer.
func (w *parquetWriter) Write(recs []Record) (int, error) {
	if w.closed {
		return 0, errors.New("write to closed Parquet writer")
	}
	for i := range recs {
		r := recs[i]
		r.PrefixBlocks = w.copy64(r.PrefixBlocks)
		r.AfterSeqs = w.copy64(r.AfterSeqs)
		r.ChunkNs = w.copy64(r.ChunkNs)
		r.ChunkTokens = w.copy32(r.ChunkTokens)
		w.recs = append(w.recs, r)
	}
	return len(recs), nil
}

func (w *parquetWriter) copy64(v []int64) []int64 {
	if len(v) == 0 {
		return nil
	}
	if cap(w.arena)-len(w.arena) < len(v) {
		w.arena = make([]int64, 0, max(64<<10, len(v)))
	}
	start := len(w.arena)
	w.arena = append(w.arena, v...)
	return w.arena[start:len(w.arena):len(w.arena)]
}

func (w *parquetWriter) copy32(v []int32) []int32 {
	if len(v) == 0 {
		return nil
	}
	if cap(w.arena32)-len(w.arena32) < len(v) {
		w.arena32 = make([]int32, 0, max(64<<10, len(v)))
	}
	start := len(w.arena32)
	w.arena32 = append(w.arena32, v...)
	return w.arena32[start:len(w.arena32):len(w.arena32)]
}

func (w *parquetWriter) Close() (err error) {
	if w.closed {
		return nil
	}
	w.closed = true
	defer func() {
		if c, ok := w.out.(io.Closer); ok {
			if cerr := c.Close(); err == nil {
				err = cerr
			}
		}
	}()
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("write Parquet: %v", p)
		}
	}()
	slices.SortStableFunc(w.recs, func(a, b Record) int {
		if c := cmp.Compare(a.ArrivalNs, b.ArrivalNs); c != 0 {
			return c
		}
		return cmp.Compare(a.Seq, b.Seq)
	})
	bw := bufio.NewWriterSize(w.out, 1<<20)
	opts := []parquet.WriterOption{
		parquet.Compression(parquetCodec),
		parquet.MaxRowsPerRowGroup(int64(w.o.RowGroupRows)),
		parquet.CreatedBy("tokentrace", SchemaVersion, ""),
		parquet.SortingWriterConfig(parquet.SortingColumns(parquet.Ascending("arrival_ns"), parquet.Ascending("seq"))),
	}
	for _, kv := range w.meta.KeyValues() {
		opts = append(opts, parquet.KeyValueMetadata(kv[0], kv[1]))
	}
	pw := parquet.NewGenericWriter[Record](bw, opts...)
	for len(w.recs) > 0 {
		n := min(len(w.recs), 8192)
		if _, err := pw.Write(w.recs[:n]); err != nil {
			return fmt.Errorf("write Parquet: %w", err)
		}
		w.recs = w.recs[n:]
	}
	w.recs, w.arena, w.arena32 = nil, nil, nil
	if err := pw.Close(); err != nil {
		return fmt.Errorf("write Parquet footer: %w", err)
	}
	return bw.Flush()
}

// parquetReader reads a Parquet file into reused Record buffers.
type parquetReader struct {
	name    string
	f       *os.File
	remove  string // temp file to delete on Close
	closeF  bool
	gr      *parquet.GenericReader[Record]
	fast    *fastParquet
	meta    Meta
	stats   ReadStats
	strict  bool
	missing []int // columns absent from the file that read as NotReported
	row     int64 // rows consumed from the file
	err     error
	// salvaged is the truncation error of a footer-less file whose complete
	// row groups are being read; returned after the last of them.
	salvaged error
}

// newParquetFileReader opens a Parquet file; closeF says whether Close
// closes f.
func newParquetFileReader(f *os.File, name string, o OpenOptions, closeF bool) (r *parquetReader, err error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	return newParquetReaderAt(f, fi.Size(), name, o, closeF)
}

func newParquetReaderAt(f *os.File, size int64, name string, o OpenOptions, closeF bool) (r *parquetReader, err error) {
	defer func() {
		if p := recover(); p != nil {
			r, err = nil, fmt.Errorf("%w: damaged Parquet file: %v", ErrMalformed, p)
		}
	}()
	var pf *parquet.File
	var salvaged error
	if err := checkParquetFooter(f, size); err != nil {
		if !errors.Is(err, ErrTruncated) {
			return nil, err
		}
		// No footer: recover the complete row groups, if any.
		spf, serr := salvageParquet(f, size)
		if serr != nil {
			return nil, fmt.Errorf("%w (nothing to salvage: %v)", err, serr)
		}
		pf, salvaged = spf, err
	} else if pf, err = parquet.OpenFile(f, size, parquet.SkipBloomFilters(true)); err != nil {
		return nil, fmt.Errorf("%w: no valid Parquet footer (%d bytes; a writer that was not closed leaves none): %v", ErrTruncated, size, err)
	}
	for _, rg := range pf.Metadata().RowGroups {
		for _, cc := range rg.Columns {
			md := &cc.MetaData
			start := md.DataPageOffset
			if md.DictionaryPageOffset > 0 && md.DictionaryPageOffset < start {
				start = md.DictionaryPageOffset
			}
			if err := checkParquetPages(f, start, start+md.TotalCompressedSize, pf.Size()); err != nil {
				return nil, err
			}
		}
	}
	var kv [][2]string
	for _, p := range pf.Metadata().KeyValueMetadata {
		kv = append(kv, [2]string{p.Key, p.Value})
	}
	meta, err := MetaFromKeyValues(kv)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if err := meta.CheckVersion(); err != nil {
		return nil, err
	}
	if meta.SchemaVersion == "" {
		meta.SchemaVersion = SchemaVersion
	}
	r = &parquetReader{name: displayName(name), f: f, closeF: closeF, meta: meta, strict: o.Strict}
	if salvaged != nil {
		r.salvaged = salvaged
		r.stats.Truncated = true
	}
	fields := map[string]bool{}
	for _, f := range pf.Schema().Fields() {
		fields[f.Name()] = true
	}
	known := 0
	for col, c := range schema {
		if fields[c.name] {
			known++
			continue
		}
		if c.absent != 0 {
			r.missing = append(r.missing, col)
		}
	}
	if known == 0 && len(fields) > 0 {
		return nil, fmt.Errorf("%w: Parquet file has none of the tokentrace columns", ErrUnknownFormat)
	}
	if fp, ok := newFastParquet(pf); ok {
		r.fast = fp
		return r, nil
	}
	r.gr = parquet.NewGenericReader[Record](pf)
	return r, nil
}

// spoolParquet copies a Parquet stream (stdin) to a temporary file, which
// Close removes.
func spoolParquet(src io.Reader, name string, o OpenOptions) (Reader, error) {
	tmp, err := os.CreateTemp("", "tokentrace-*.parquet")
	if err != nil {
		return nil, fmt.Errorf("spool Parquet from %s: %w", displayName(name), err)
	}
	if _, err := io.Copy(tmp, src); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return nil, fmt.Errorf("spool Parquet from %s: %w", displayName(name), err)
	}
	r, err := newParquetFileReader(tmp, name, o, true)
	if err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return nil, err
	}
	r.remove = tmp.Name()
	return r, nil
}

func (r *parquetReader) Meta() Meta       { return r.meta }
func (r *parquetReader) Stats() ReadStats { return r.stats }

func (r *parquetReader) Close() error {
	var err error
	if r.gr != nil {
		err = r.gr.Close()
	}
	if r.fast != nil {
		r.fast.Close()
	}
	if r.closeF {
		if cerr := r.f.Close(); err == nil {
			err = cerr
		}
	}
	if r.remove != "" {
		os.Remove(r.remove)
	}
	return err
}

func (r *parquetReader) Read(recs []Record) (n int, err error) {
	if r.err != nil {
		return 0, r.err
	}
	defer func() {
		if p := recover(); p != nil {
			n, err = 0, &RowError{File: r.name, Line: r.row + 1, Err: fmt.Errorf("%w: damaged Parquet page: %v", ErrMalformed, p)}
			r.err = err
		}
	}()
	for n == 0 {
		var got int
		var rerr error
		if r.fast != nil {
			got, rerr = r.fast.read(recs)
		} else {
			got, rerr = r.gr.Read(recs)
		}
		if rerr != nil && rerr != io.EOF {
			r.err = &RowError{File: r.name, Line: r.row + 1, Err: fmt.Errorf("%w: %w", ErrMalformed, rerr)}
			return 0, r.err
		}
		n, err = r.filter(recs[:got])
		if err != nil {
			r.err = err
			return n, err
		}
		if rerr == io.EOF {
			r.err = io.EOF
			if r.salvaged != nil {
				r.err = &RowError{File: r.name, Line: r.row + 1, Err: fmt.Errorf("%w; read the %d rows of its complete row groups", r.salvaged, r.row)}
			}
			return n, r.err
		}
		if got == 0 {
			if len(recs) > 0 {
				// No progress without an error: treat as the end.
				r.err = io.EOF
				if r.salvaged != nil {
					r.err = &RowError{File: r.name, Line: r.row + 1, Err: fmt.Errorf("%w; read the %d rows of its complete row groups", r.salvaged, r.row)}
				}
				return n, r.err
			}
			break
		}
	}
	return n, nil
}

// filter fixes up missing columns, validates, and compacts away malformed
// rows (non-strict), returning how many remain.
func (r *parquetReader) filter(recs []Record) (int, error) {
	n := 0
	for i := range recs {
		r.row++
		rec := &recs[i]
		for _, col := range r.missing {
			schema[col].setAbsent(rec)
		}
		rec.normalizeLists()
		if err := rec.Validate(); err != nil {
			if err := r.stats.malformed(&RowError{File: r.name, Line: r.row, Err: fmt.Errorf("%w: %w", ErrMalformed, err)}, r.strict); err != nil {
				return n, err
			}
			continue
		}
		if n != i {
			recs[n], recs[i] = recs[i], recs[n]
		}
		n++
	}
	r.stats.Rows += int64(n)
	return n, nil
}
