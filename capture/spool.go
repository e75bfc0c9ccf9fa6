package capture

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"unsafe"

	"github.com/klauspost/compress/zstd"
	"github.com/tokentrace/tokentrace/internal/kmerge"
	"github.com/tokentrace/tokentrace/internal/tempfile"
	"github.com/tokentrace/tokentrace/traces"
)

// spool holds the redacted requests between the parse and the sessions
// stages, which need them in arrival order. Up to Options.SortMemoryBytes
// they stay in memory; beyond it each full buffer is sorted and written as
// a run (a zstd-compressed file of encoded requests) in a directory of its
// own under Options.TempDir, and every pass merges the runs. So memory is
// bounded by the budget plus one decoded request and one decoder per run,
// whatever the number of requests. close removes the directory.
type spool struct {
	budget  int64
	tmpRoot string
	dir     string
	release func() // the lock that marks dir as in use
	mem     []redacted
	bytes   int64
	runs    []string
	spilled int // runs written, merged ones included
	merged  int
	n       int64
	minT    int64
	scratch []byte
}

func newSpool(o Options) *spool {
	// A killed capture's runs are removed first, whether or not this one
	// spills (they are locked while in use: internal/tempfile).
	tempfile.Sweep(filepath.Join(cmp.Or(o.TempDir, os.TempDir()), spoolPattern))
	return &spool{budget: o.SortMemoryBytes, tmpRoot: o.TempDir}
}

// spoolPattern names a capture's temporary directory of spilled runs.
const spoolPattern = "tokentrace-capture-*"

// redactedBytes is what a buffered request costs besides its lists.
const redactedBytes = int64(unsafe.Sizeof(redacted{}))

// add keeps e (in input order), spilling a run when the budget is reached.
func (s *spool) add(e *redacted) error {
	if s.n == 0 || e.t < s.minT {
		s.minT = e.t
	}
	s.n++
	s.mem = append(s.mem, *e)
	s.bytes += redactedBytes + 8*int64(len(e.blocks)+len(e.prefixes))
	if s.bytes >= s.budget {
		return s.spill()
	}
	return nil
}

// compareRedacted orders by arrival, then input and line; the caller breaks
// the remaining ties (several spans on one line) by input order.
func compareRedacted(x, y *redacted) int {
	return cmp.Or(cmp.Compare(x.t, y.t), cmp.Compare(x.input, y.input), cmp.Compare(x.line, y.line))
}

func (s *spool) sortMem() {
	slices.SortStableFunc(s.mem, func(a, b redacted) int { return compareRedacted(&a, &b) })
}

// tempDir returns the capture's temporary directory, made on first use.
func (s *spool) tempDir() (string, error) {
	if s.dir == "" {
		d, release, err := tempfile.MkdirTemp(s.tmpRoot, spoolPattern)
		if err != nil {
			return "", traces.OptionErrorf("capture", "Options.TempDir", "spill sorted requests: %w", err)
		}
		s.dir, s.release = d, release
	}
	return s.dir, nil
}

// spill writes the buffer, sorted, as the next run.
func (s *spool) spill() error {
	if _, err := s.tempDir(); err != nil {
		return err
	}
	s.sortMem()
	name := filepath.Join(s.dir, fmt.Sprintf("run-%05d.bin.zst", len(s.runs)))
	if err := s.writeRun(name); err != nil {
		return fmt.Errorf("spill sorted requests to %s: %w", s.dir, err)
	}
	s.runs = append(s.runs, name)
	s.spilled++
	clear(s.mem)
	s.mem, s.bytes = s.mem[:0], 0
	return s.compact()
}

// maxOpenRuns bounds the runs a merge reads at once (each holds a decoder):
// at that many, the runs are merged into one.
const maxOpenRuns = 16

func (s *spool) compact() error {
	if len(s.runs) < maxOpenRuns {
		return nil
	}
	name := filepath.Join(s.dir, fmt.Sprintf("merged-%05d.bin.zst", s.merged))
	s.merged++
	err := s.writeRunFrom(name, func(emit func(*redacted) error) error {
		var eerr error
		err := mergeFiles(s.runs, func(e *redacted) bool {
			eerr = emit(e)
			return eerr == nil
		})
		return cmp.Or(err, eerr)
	})
	if err != nil {
		return fmt.Errorf("merge sorted requests in %s: %w", s.dir, err)
	}
	for _, r := range s.runs {
		os.Remove(r)
	}
	s.runs = append(s.runs[:0], name)
	return nil
}

// runWindow bounds a run's zstd window, and so each decoder's memory
// during a merge.
const runWindow = 256 << 10

func (s *spool) writeRun(name string) error {
	return s.writeRunFrom(name, func(emit func(*redacted) error) error {
		for i := range s.mem {
			if err := emit(&s.mem[i]); err != nil {
				return err
			}
		}
		return nil
	})
}

// writeRunFrom writes the requests from yields, in its order, as a run.
func (s *spool) writeRunFrom(name string, from func(emit func(*redacted) error) error) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	zw, err := zstd.NewWriter(f, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(runWindow))
	if err != nil {
		f.Close()
		return err
	}
	bw := bufio.NewWriterSize(zw, 256<<10)
	err = from(func(e *redacted) error {
		s.scratch = encodeRedacted(s.scratch[:0], e)
		_, err := bw.Write(s.scratch)
		return err
	})
	if err == nil {
		err = bw.Flush()
	}
	if cerr := zw.Close(); err == nil {
		err = cerr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// finish sorts what is left in memory. When runs were spilled it spills
// the rest too, so that the passes that follow (and the output writer
// beside them) have the memory budget to themselves.
func (s *spool) finish() error {
	if len(s.runs) > 0 && len(s.mem) > 0 {
		err := s.spill()
		s.mem = nil
		return err
	}
	s.sortMem()
	return nil
}

// close removes the runs.
func (s *spool) close() {
	if s.dir != "" {
		os.RemoveAll(s.dir)
		s.release()
		s.dir = ""
	}
	s.mem = nil
}

// each yields every request in arrival order: from memory, or a merge of
// the runs. The request is valid until the next one; each may be
// called several times (one pass per stage that needs the order).
func (s *spool) each(yield func(*redacted) bool) error {
	if len(s.runs) == 0 {
		for i := range s.mem {
			if !yield(&s.mem[i]) {
				return nil
			}
		}
		return nil
	}
	return mergeFiles(s.runs, yield)
}

// mergeFiles yields the requests of the runs in arrival order; ties go to
// the earlier run (runs are in input order).
func mergeFiles(runs []string, yield func(*redacted) bool) error {
	var cs []*runCursor
	defer func() {
		for _, c := range cs {
			c.close()
		}
	}()
	srcs := make([]kmerge.Source[*redacted], 0, len(runs))
	for _, name := range runs {
		c, err := openRun(name)
		if err != nil {
			return fmt.Errorf("read sorted requests: %w", err)
		}
		cs = append(cs, c)
		srcs = append(srcs, c.next)
	}
	m, err := kmerge.New(srcs, compareRedacted)
	if err != nil {
		return err
	}
	for {
		e, ok, err := m.Next()
		if err != nil || !ok {
			return err
		}
		if !yield(e) {
			return nil
		}
	}
}

// runCursor reads one run file.
type runCursor struct {
	f    *os.File
	zr   *zstd.Decoder
	br   *bufio.Reader
	e    redacted
	dec  decoder
	name string
}

func openRun(name string) (*runCursor, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	zr, err := zstd.NewReader(f, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(runWindow), zstd.WithDecoderLowmem(true))
	if err != nil {
		f.Close()
		return nil, err
	}
	return &runCursor{f: f, zr: zr, br: bufio.NewReaderSize(zr, 64<<10), name: name, dec: decoder{strs: map[string]string{}}}, nil
}

// next decodes the run's next request (valid until the following call);
// false at its end.
func (c *runCursor) next() (*redacted, bool, error) {
	err := c.dec.decode(c.br, &c.e)
	if err == io.EOF {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read sorted requests %s: %w", c.name, err)
	}
	return &c.e, true, nil
}

func (c *runCursor) close() {
	if c.zr != nil {
		c.zr.Close()
		c.f.Close()
		c.zr = nil
	}
}

// The run encoding: unsigned and zigzag varints, strings as a length and
// bytes, 64-bit hashes as fixed 8 bytes. A flags byte says which optional
// parts follow. It lives only between the two ends of one capture.

const (
	flagCat = 1 << iota
	flagOutcome
	flagLinks
)

func encodeRedacted(b []byte, e *redacted) []byte {
	var flags byte
	if e.hasCat {
		flags |= flagCat
	}
	if e.has {
		flags |= flagOutcome
	}
	if e.span != 0 || e.parent != 0 {
		flags |= flagLinks
	}
	b = append(b, flags)
	b = binary.AppendUvarint(b, uint64(e.input))
	b = binary.AppendVarint(b, e.line)
	b = binary.AppendVarint(b, e.t)
	b = appendString(b, e.model)
	b = appendString(b, e.api)
	b = binary.AppendVarint(b, int64(e.inTok))
	b = binary.AppendVarint(b, int64(e.outTok))
	b = appendString(b, e.tokSrc)
	if e.hasCat {
		b = append(b, e.cat[:]...)
	}
	b = binary.AppendVarint(b, int64(e.prefixTokens))
	b = appendHashes(b, e.blocks)
	b = binary.LittleEndian.AppendUint64(b, e.sessKey)
	b = appendHashes(b, e.prefixes)
	b = binary.AppendUvarint(b, uint64(e.nSys))
	b = binary.AppendUvarint(b, e.sessDigest)
	if flags&flagLinks != 0 {
		b = binary.LittleEndian.AppendUint64(b, e.span)
		b = binary.LittleEndian.AppendUint64(b, e.parent)
	}
	if e.has {
		o := &e.outcome
		for _, v := range []int64{o.ttft, o.e2e, o.finish, int64(o.httpStatus), int64(o.srvIn), int64(o.srvOut), int64(o.srvCached), o.queue, o.prefill, o.decode} {
			b = binary.AppendVarint(b, v)
		}
		b = appendString(b, o.status)
		b = appendString(b, o.errMsg)
	}
	return b
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendHashes(b []byte, hs []uint64) []byte {
	b = binary.AppendUvarint(b, uint64(len(hs)))
	for _, h := range hs {
		b = binary.LittleEndian.AppendUint64(b, h)
	}
	return b
}

// decoder reads encoded requests, interning strings (models, API names,
// statuses: a small vocabulary) so that decoding does not allocate them.
type decoder struct {
	strs map[string]string
	buf  []byte
}

var errRunDamaged = errors.New("damaged sorted run")

func (d *decoder) decode(br *bufio.Reader, e *redacted) error {
	flags, err := br.ReadByte()
	if err != nil {
		return err // io.EOF at a clean end
	}
	blocks, prefixes := e.blocks[:0], e.prefixes[:0]
	*e = redacted{}
	rv := func() int64 {
		v, verr := binary.ReadVarint(br)
		if verr != nil && err == nil {
			err = verr
		}
		return v
	}
	ru := func() uint64 {
		v, uerr := binary.ReadUvarint(br)
		if uerr != nil && err == nil {
			err = uerr
		}
		return v
	}
	str := func() string {
		n := ru()
		if err != nil || n > 1<<20 {
			if err == nil {
				err = errRunDamaged
			}
			return ""
		}
		d.buf = slices.Grow(d.buf[:0], int(n))[:n]
		if _, rerr := io.ReadFull(br, d.buf); rerr != nil {
			err = rerr
			return ""
		}
		if s, ok := d.strs[string(d.buf)]; ok {
			return s
		}
		s := string(d.buf)
		if len(d.strs) < 1<<16 {
			d.strs[s] = s
		}
		return s
	}
	hashes := func(dst []uint64) []uint64 {
		n := ru()
		if err != nil || n > 1<<24 {
			if err == nil {
				err = errRunDamaged
			}
			return dst
		}
		var w [8]byte
		for range n {
			if _, rerr := io.ReadFull(br, w[:]); rerr != nil {
				err = rerr
				return dst
			}
			dst = append(dst, binary.LittleEndian.Uint64(w[:]))
		}
		return dst
	}
	e.input = int32(ru())
	e.line = rv()
	e.t = rv()
	e.model = str()
	e.api = str()
	e.inTok = int32(rv())
	e.outTok = int32(rv())
	e.tokSrc = str()
	if flags&flagCat != 0 {
		e.hasCat = true
		if _, rerr := io.ReadFull(br, e.cat[:]); rerr != nil && err == nil {
			err = rerr
		}
	}
	e.prefixTokens = int32(rv())
	e.blocks = hashes(blocks)
	var w [8]byte
	if _, rerr := io.ReadFull(br, w[:]); rerr != nil && err == nil {
		err = rerr
	}
	e.sessKey = binary.LittleEndian.Uint64(w[:])
	e.prefixes = hashes(prefixes)
	e.nSys = int(ru())
	e.sessDigest = ru()
	if flags&flagLinks != 0 {
		for _, h := range []*uint64{&e.span, &e.parent} {
			if _, rerr := io.ReadFull(br, w[:]); rerr != nil && err == nil {
				err = rerr
			}
			*h = binary.LittleEndian.Uint64(w[:])
		}
	}
	if flags&flagOutcome != 0 {
		o := &e.outcome
		o.has = true
		o.ttft, o.e2e, o.finish = rv(), rv(), rv()
		o.httpStatus, o.srvIn, o.srvOut, o.srvCached = int32(rv()), int32(rv()), int32(rv()), int32(rv())
		o.queue, o.prefill, o.decode = rv(), rv(), rv()
		o.status = str()
		o.errMsg = str()
	}
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return err
}
