package traces

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unsafe"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"
	"github.com/tokentrace/tokentrace/internal/kmerge"
	"github.com/tokentrace/tokentrace/internal/tempfile"
)

// parquetMagic starts and ends every Parquet file.
const parquetMagic = "PAR1"

// parquetCodec compresses every column. SpeedBetterCompression (about zstd
// level 7) was measured against SpeedDefault and SpeedBestCompression on the
// shared traces (README, "Formats"): it keeps the Azure traces
// under 8 bytes per request (SpeedDefault: 7.79 for the code trace) and
// writes about 2x faster than SpeedBestCompression.
var parquetCodec = &zstd.Codec{Level: zstd.SpeedBetterCompression}

// parquetWriter sorts by (arrival_ns, seq) and writes row groups of at most
// RowGroupRows rows.
//
// Records that arrive in order (capture, import, synth gen: the usual case)
// are written straight to a named output as they come, one row group in
// memory. At the first record out of order, what was written is set aside
// as the first run (atomicfile.SetAside) and the writer sorts instead.
//
// Sorting is bounded by CreateOptions.SortMemoryBytes: records are buffered
// (about 336 bytes each plus 8 per prefix block and per chunk) until the
// buffer reaches it, then sorted and spilled as a run, a temporary Parquet
// file in a directory of their own under TempDir; Close merges the runs into
// the output. Files that fit the budget are sorted in memory and never touch
// the disk. The temporary directory is removed on Close, on an error and on
// Abort.
type parquetWriter struct {
	// direct writes the output as records come while they are in order;
	// nil once they were not (or when the output cannot be set aside).
	direct   *parquet.GenericWriter[Record]
	directBW *bufio.Writer
	last     Record // the last record written directly (its keys)
	nDirect  int64
	setAside func() (string, error)
	aside    []string // set-aside output, removed when done

	out     io.Writer
	meta    Meta
	o       CreateOptions
	recs    []Record
	arena   []int64 // backing store for copied int64 lists
	arena32 []int32
	bytes   int64 // what recs hold, as counted against the budget
	tmpDir  string
	release func()   // the lock that marks tmpDir as in use
	runs    []string // spilled runs, in order
	merged  int      // runs merged by compact so far
	closed  bool
}

func newParquetWriter(w io.Writer, m Meta, o CreateOptions) (*parquetWriter, error) {
	// Runs of a sort that was killed are removed, whether or not this
	// writer spills (they are locked while in use: internal/tempfile).
	tempfile.Sweep(filepath.Join(cmp.Or(o.TempDir, os.TempDir()), SortDirPattern))
	pw := &parquetWriter{out: w, meta: m, o: o}
	if a, ok := w.(interface{ SetAside() (string, error) }); ok {
		pw.setAside = a.SetAside
	}
	return pw, nil
}

// writeDirect writes the leading records of recs that keep the order and
// returns how many; it stops direct mode at the first that does not.
func (w *parquetWriter) writeDirect(recs []Record) (n int, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("write Parquet: %v", p)
		}
	}()
	if w.direct == nil {
		w.directBW = bufio.NewWriterSize(w.out, 1<<20)
		w.direct = parquet.NewGenericWriter[Record](w.directBW, w.outputOptions()...)
	}
	for ; n < len(recs); n++ {
		if (w.nDirect > 0 || n > 0) && compareRecords(&recs[n], w.prev(recs, n)) < 0 {
			break
		}
	}
	if n > 0 {
		if _, err := w.direct.Write(recs[:n]); err != nil {
			return 0, fmt.Errorf("write Parquet: %w", err)
		}
		w.last = Record{ArrivalNs: recs[n-1].ArrivalNs, Seq: recs[n-1].Seq}
		w.nDirect += int64(n)
	}
	if n < len(recs) {
		return n, w.stopDirect()
	}
	return n, nil
}

// prev is the record before recs[n] in the stream.
func (w *parquetWriter) prev(recs []Record, n int) *Record {
	if n > 0 {
		return &recs[n-1]
	}
	return &w.last
}

// stopDirect completes what was written directly as a Parquet file, sets
// it aside as the first run and leaves direct mode.
func (w *parquetWriter) stopDirect() error {
	pw, bw, setAside := w.direct, w.directBW, w.setAside
	w.direct, w.directBW, w.setAside = nil, nil, nil
	if err := pw.Close(); err != nil {
		return fmt.Errorf("write Parquet footer: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if w.nDirect == 0 {
		return nil
	}
	name, err := setAside()
	if err != nil {
		return fmt.Errorf("records out of order: set the output aside to sort it: %w", err)
	}
	w.aside = append(w.aside, name)
	w.runs = append(w.runs, name)
	return nil
}

// recordBytes is what a buffered record costs: the struct and its lists.
const recordBytes = int64(unsafe.Sizeof(Record{}))

// Write copies recs (lists included) into the buffer, spilling a sorted run
// when the buffer reaches the memory budget.
func (w *parquetWriter) Write(recs []Record) (int, error) {
	if w.closed {
		return 0, errors.New("write to closed Parquet writer")
	}
	done := 0
	if w.setAside != nil {
		n, err := w.writeDirect(recs)
		if err != nil {
			w.discard()
			return n, err
		}
		if n == len(recs) {
			return n, nil
		}
		done = n
	}
	for i := done; i < len(recs); i++ {
		r := recs[i]
		r.PrefixBlocks = arenaCopy(&w.arena, r.PrefixBlocks)
		r.AfterSeqs = arenaCopy(&w.arena, r.AfterSeqs)
		r.ChunkNs = arenaCopy(&w.arena, r.ChunkNs)
		r.ChunkTokens = arenaCopy(&w.arena32, r.ChunkTokens)
		w.recs = append(w.recs, r)
		w.bytes += recordBytes + 8*int64(len(r.PrefixBlocks)+len(r.AfterSeqs)+len(r.ChunkNs)) + 4*int64(len(r.ChunkTokens))
		if w.bytes >= w.o.SortMemoryBytes {
			if err := w.spill(); err != nil {
				w.discard()
				return i, err
			}
		}
	}
	return len(recs), nil
}

// arenaCopy copies v into *arena (a fresh block of at least 64Ki values
// when it is full) and returns the copy, capped so that appending to it
// cannot overwrite the next one; an empty v is nil.
func arenaCopy[T int32 | int64](arena *[]T, v []T) []T {
	if len(v) == 0 {
		return nil
	}
	if cap(*arena)-len(*arena) < len(v) {
		*arena = make([]T, 0, max(64<<10, len(v)))
	}
	start := len(*arena)
	*arena = append(*arena, v...)
	return (*arena)[start:len(*arena):len(*arena)]
}

func compareRecords(a, b *Record) int {
	return cmp.Or(cmp.Compare(a.ArrivalNs, b.ArrivalNs), cmp.Compare(a.Seq, b.Seq))
}

// sortBuffer sorts the buffered records; ties keep their order.
func (w *parquetWriter) sortBuffer() {
	slices.SortStableFunc(w.recs, func(a, b Record) int { return compareRecords(&a, &b) })
}

// spill writes the buffer, sorted, as the next run and empties it.
func (w *parquetWriter) spill() error {
	if w.tmpDir == "" {
		d, release, err := tempfile.MkdirTemp(w.o.TempDir, SortDirPattern)
		if err != nil {
			return OptionErrorf("", "CreateOptions.TempDir", "spill sorted run: %w", err)
		}
		w.tmpDir, w.release = d, release
	}
	w.sortBuffer()
	name := filepath.Join(w.tmpDir, fmt.Sprintf("run-%05d.parquet", len(w.runs)))
	f, err := os.Create(name)
	if err != nil {
		return fmt.Errorf("spill sorted run: %w", err)
	}
	w.runs = append(w.runs, name)
	err = writeRunFile(f, func(out io.Writer) error { return writeParquetRows(out, w.recs, runOptions()...) })
	if err != nil {
		return fmt.Errorf("spill sorted run to %s: %w", w.tmpDir, err)
	}
	clear(w.recs)
	w.recs, w.bytes = w.recs[:0], 0
	// Keep the newest arenas for the next run; the records that pointed
	// into them are gone.
	w.arena, w.arena32 = w.arena[:0], w.arena32[:0]
	return w.compact()
}

// runOptions write temporary runs: fast compression and small pages, since
// the merge holds one page per column of every run.
func runOptions() []parquet.WriterOption {
	return []parquet.WriterOption{
		parquet.Compression(&zstd.Codec{Level: zstd.SpeedFastest}),
		parquet.PageBufferSize(16 << 10),
		parquet.MaxRowsPerRowGroup(64 << 10),
	}
}

// writeParquetRows writes recs as one Parquet file to out.
func writeParquetRows(out io.Writer, recs []Record, opts ...parquet.WriterOption) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("write Parquet: %v", p)
		}
	}()
	pw := parquet.NewGenericWriter[Record](out, opts...)
	for len(recs) > 0 {
		n := min(len(recs), 8192)
		if _, err := pw.Write(recs[:n]); err != nil {
			return fmt.Errorf("write Parquet: %w", err)
		}
		recs = recs[n:]
	}
	if err := pw.Close(); err != nil {
		return fmt.Errorf("write Parquet footer: %w", err)
	}
	return nil
}

// discard drops the buffer and the temporary runs.
func (w *parquetWriter) discard() {
	w.closed = true
	w.recs, w.arena, w.arena32 = nil, nil, nil
	for _, a := range w.aside {
		os.Remove(a)
	}
	w.aside = nil
	if w.tmpDir != "" {
		os.RemoveAll(w.tmpDir)
		w.release()
		w.tmpDir = ""
	}
}

// abort discards what was written without merging it (traces.Abort).
func (w *parquetWriter) abort() {
	w.discard()
	if c, ok := w.out.(io.Closer); ok {
		c.Close()
	}
}

func (w *parquetWriter) outputOptions() []parquet.WriterOption {
	return parquetOutputOptions(w.meta, w.o)
}

// parquetOutputOptions write the files a user gets.
func parquetOutputOptions(m Meta, o CreateOptions) []parquet.WriterOption {
	opts := []parquet.WriterOption{
		parquet.Compression(parquetCodec),
		parquet.MaxRowsPerRowGroup(int64(o.RowGroupRows)),
		parquet.CreatedBy("tokentrace", SchemaVersion, ""),
		parquet.SortingWriterConfig(parquet.SortingColumns(parquet.Ascending("arrival_ns"), parquet.Ascending("seq"))),
	}
	for _, kv := range m.KeyValues() {
		opts = append(opts, parquet.KeyValueMetadata(kv[0], kv[1]))
	}
	return opts
}

func (w *parquetWriter) Close() (err error) {
	if w.closed {
		return nil
	}
	defer w.discard()
	w.closed = true
	defer func() {
		if c, ok := w.out.(io.Closer); ok {
			if cerr := c.Close(); err == nil {
				err = cerr
			}
		}
	}()
	if w.direct != nil {
		if err := w.direct.Close(); err != nil {
			return fmt.Errorf("write Parquet footer: %w", err)
		}
		return w.directBW.Flush()
	}
	bw := bufio.NewWriterSize(w.out, 1<<20)
	if len(w.runs) == 0 {
		w.sortBuffer()
		if err := writeParquetRows(bw, w.recs, w.outputOptions()...); err != nil {
			return err
		}
		return bw.Flush()
	}
	if len(w.recs) > 0 {
		if err := w.spill(); err != nil {
			return err
		}
	}
	w.recs, w.arena, w.arena32 = nil, nil, nil
	if err := mergeRuns(w.runs, bw, w.outputOptions()); err != nil {
		return err
	}
	return bw.Flush()
}

// writeRunFile writes the run file f with write, through a 1 MiB buffer,
// and closes it; the first error wins.
func writeRunFile(f *os.File, write func(io.Writer) error) error {
	bw := bufio.NewWriterSize(f, 1<<20)
	err := write(bw)
	if err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// compact merges the runs into one when there are kmerge.MaxRuns of them
// (each open run holds a page per column).
func (w *parquetWriter) compact() (err error) {
	name := func() string {
		w.merged++
		return filepath.Join(w.tmpDir, fmt.Sprintf("merged-%05d.parquet", w.merged-1))
	}
	w.runs, err = kmerge.Compact(w.runs, name, func(name string, runs []string) error {
		f, err := os.Create(name)
		if err != nil {
			return fmt.Errorf("merge sorted runs: %w", err)
		}
		err = writeRunFile(f, func(out io.Writer) error { return mergeRuns(runs, out, runOptions()) })
		if err != nil {
			return fmt.Errorf("merge sorted runs in %s: %w", w.tmpDir, err)
		}
		return nil
	})
	return err
}

// mergeRuns writes the runs to out in (arrival_ns, seq) order; ties go to
// the earlier run, as the in-memory stable sort would order them.
func mergeRuns(runs []string, out io.Writer, opts []parquet.WriterOption) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("write Parquet: %v", p)
		}
	}()
	var cs []*runCursor
	defer func() {
		for _, c := range cs {
			c.r.Close()
		}
	}()
	srcs := make([]kmerge.Source[*Record], 0, len(runs))
	for _, name := range runs {
		r, err := openRun(name)
		if err != nil {
			return fmt.Errorf("merge sorted runs: %w", err)
		}
		c := &runCursor{r: r, buf: make([]Record, 256)}
		cs = append(cs, c)
		srcs = append(srcs, c.next)
	}
	m, err := kmerge.New(srcs, compareRecords)
	if err != nil {
		return err
	}
	pw := parquet.NewGenericWriter[Record](out, opts...)
	batch := make([]Record, 0, 4096)
	flush := func() error {
		if _, err := pw.Write(batch); err != nil {
			return fmt.Errorf("write Parquet: %w", err)
		}
		clear(batch)
		batch = batch[:0]
		return nil
	}
	for {
		r, ok, err := m.Next()
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		if batch = append(batch, r.Clone()); len(batch) == cap(batch) {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if len(batch) > 0 {
		if err := flush(); err != nil {
			return err
		}
	}
	if err := pw.Close(); err != nil {
		return fmt.Errorf("write Parquet footer: %w", err)
	}
	return nil
}

// openRun opens a run for the merge: rows come back exactly as they were
// written, unvalidated (the writer never validated them).
func openRun(name string) (Reader, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	o := DefaultOpenOptions()
	o.Strict = true // a run is our own output: a bad row in it is a bug
	r, err := newParquetFileReader(f, name, o, true)
	if err != nil {
		f.Close()
		return nil, err
	}
	r.raw = true
	return r, nil
}

// runCursor reads one run in batches.
type runCursor struct {
	r      Reader
	buf    []Record
	pos, n int
	eof    bool
}

// next returns the run's next record, valid until the following call;
// false at the end of the run.
func (c *runCursor) next() (*Record, bool, error) {
	for c.pos == c.n {
		if c.eof {
			return nil, false, nil
		}
		n, err := c.r.Read(c.buf)
		if err == io.EOF {
			c.eof = true
		} else if err != nil {
			return nil, false, fmt.Errorf("merge sorted runs: %w", err)
		}
		c.pos, c.n = 0, n
	}
	c.pos++
	return &c.buf[c.pos-1], true, nil
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
	raw     bool  // no validation: a sort's own run
	missing []int // columns absent from the file that read as NotReported
	row     int64 // rows consumed from the file
	err     error
	// salvaged is the truncation error of a footer-less file whose complete
	// row groups are being read; returned after the last of them.
	salvaged error
	// sorted: the file promises its rows in (arrival_ns, seq) order.
	sorted bool
	order  orderCheck
}

// sortedByArrival reports whether pf is a file tokentrace's writer made
// (which sorts every file whole, stable by arrival_ns then seq) and says
// so in every row group's sorting columns. Sorting columns alone promise
// order only within a row group, so another writer's file is not taken
// as sorted.
func sortedByArrival(pf *parquet.File) bool {
	md := pf.Metadata()
	if !strings.HasPrefix(md.CreatedBy, "tokentrace ") || len(md.RowGroups) == 0 {
		return false
	}
	arr, ok1 := pf.Schema().Lookup("arrival_ns")
	seq, ok2 := pf.Schema().Lookup("seq")
	if !ok1 || !ok2 {
		return false
	}
	for _, rg := range md.RowGroups {
		sc := rg.SortingColumns
		if len(sc) < 2 || int(sc[0].ColumnIdx) != arr.ColumnIndex || int(sc[1].ColumnIdx) != seq.ColumnIndex || sc[0].Descending || sc[1].Descending {
			return false
		}
	}
	return true
}

// SortedByArrival is implemented by readers that can promise their rows in
// (arrival_ns, seq) order.
type SortedByArrival interface {
	SortedByArrival() bool
}

// IsSorted reports whether r promises its rows in (arrival_ns, seq) order
// (a Parquet file tokentrace wrote): a consumer may then skip its reorder
// window. Other readers, JSONL and CSV among them, promise nothing.
func IsSorted(r Reader) bool {
	s, ok := r.(SortedByArrival)
	return ok && s.SortedByArrival()
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
	r = &parquetReader{name: displayName(name), f: f, closeF: closeF, meta: meta, strict: o.Strict, sorted: sortedByArrival(pf)}
	r.order.off = !checksOrder(meta)
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

// Temporary names: a sort's spilled runs go to a directory named after
// SortDirPattern in CreateOptions.TempDir, Parquet read from stdin to a
// file named after StdinSpoolPattern in os.TempDir(). Both are locked
// while in use (internal/tempfile); the next writer that spills, or the
// next read of Parquet from stdin, removes those a killed run left.
const (
	SortDirPattern    = "tokentrace-sort-*"
	StdinSpoolPattern = "tokentrace-stdin-*.parquet"
)

// spoolParquet copies a Parquet stream (stdin) to a temporary file, which
// Close removes.
func spoolParquet(src io.Reader, name string, o OpenOptions) (Reader, error) {
	tempfile.Sweep(filepath.Join(os.TempDir(), StdinSpoolPattern))
	tmp, err := tempfile.CreateTemp("", StdinSpoolPattern)
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

// SortedByArrival implements the interface of that name.
func (r *parquetReader) SortedByArrival() bool { return r.sorted }

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
		if r.raw {
			n++
			continue
		}
		err := rec.Validate()
		if err == nil {
			if p := r.order.spans.check(rec.ArrivalNs); p != nil {
				err = p
			}
		}
		if err != nil {
			if err := r.stats.CountBad(&RowError{File: r.name, Line: r.row, Err: err}, r.strict); err != nil {
				return n, err
			}
			continue
		}
		if back, late := r.order.check(rec.ArrivalNs); late {
			rerr := func() error { return &RowError{File: r.name, Line: r.row, Err: outOfOrder(rec.ArrivalNs, back)} }
			if err := r.stats.outOfOrder(rerr, r.strict); err != nil {
				return n, err
			}
		}
		if n != i {
			recs[n], recs[i] = recs[i], recs[n]
		}
		n++
	}
	r.stats.Rows += int64(n)
	return n, nil
}
