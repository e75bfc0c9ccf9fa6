package traces

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// parquet-go's thrift decoder allocates whatever length a footer or page
// header claims (up to 2 GiB) before it notices the data is not there, so a
// damaged file could exhaust memory before failing. checkParquet walks the
// footer and every page header with a bounds-checking compact-thrift scanner
// first and rejects implausible sizes, so damaged files fail fast and cheap.

// Bounds on what one page may claim.
const (
	maxPageUncompressed = 64 << 20
	maxPageValues       = 1 << 24
)

var errThrift = errors.New("damaged thrift metadata")

// thriftScanner walks compact-protocol thrift without allocating.
type thriftScanner struct {
	b   []byte
	pos int
	// onInt is called with (parent field id, field id, value) for integer
	// fields of the top-level struct (parent 0) and its direct children.
	onInt func(parent, id int16, v int64)
}

func (s *thriftScanner) byte1() (byte, error) {
	if s.pos >= len(s.b) {
		return 0, errThrift
	}
	c := s.b[s.pos]
	s.pos++
	return c, nil
}

func (s *thriftScanner) uvarint() (uint64, error) {
	v, n := binary.Uvarint(s.b[s.pos:])
	if n <= 0 {
		return 0, errThrift
	}
	s.pos += n
	return v, nil
}

func (s *thriftScanner) zigzag() (int64, error) {
	u, err := s.uvarint()
	return int64(u>>1) ^ -int64(u&1), err
}

func (s *thriftScanner) remaining() uint64 { return uint64(len(s.b) - s.pos) }

// value skips one value of compact type t.
func (s *thriftScanner) value(t byte, parent, id int16, depth int) error {
	if depth > 32 {
		return errThrift
	}
	switch t {
	case 1, 2: // bool in a struct field: no payload
		return nil
	case 3:
		_, err := s.byte1()
		return err
	case 4, 5, 6:
		v, err := s.zigzag()
		if err == nil && s.onInt != nil && depth <= 2 {
			s.onInt(parent, id, v)
		}
		return err
	case 7:
		if s.remaining() < 8 {
			return errThrift
		}
		s.pos += 8
		return nil
	case 8:
		n, err := s.uvarint()
		if err != nil || n > s.remaining() {
			return errThrift
		}
		s.pos += int(n)
		return nil
	case 9, 10:
		h, err := s.byte1()
		if err != nil {
			return err
		}
		n := uint64(h >> 4)
		if n == 15 {
			if n, err = s.uvarint(); err != nil {
				return err
			}
		}
		if n > s.remaining() {
			return errThrift
		}
		et := h & 0x0F
		for range n {
			if et == 1 || et == 2 { // bools in a list take one byte
				if _, err := s.byte1(); err != nil {
					return err
				}
				continue
			}
			if err := s.value(et, -1, -1, depth+1); err != nil {
				return err
			}
		}
		return nil
	case 11:
		n, err := s.uvarint()
		if err != nil || n > s.remaining() {
			return errThrift
		}
		if n == 0 {
			return nil
		}
		kv, err := s.byte1()
		if err != nil {
			return err
		}
		for range n {
			if err := s.value(kv>>4, -1, -1, depth+1); err != nil {
				return err
			}
			if err := s.value(kv&0x0F, -1, -1, depth+1); err != nil {
				return err
			}
		}
		return nil
	case 12:
		return s.structure(id, depth+1)
	}
	return errThrift
}

// structure skips a struct whose own field id is self.
func (s *thriftScanner) structure(self int16, depth int) error {
	var last int16
	for {
		h, err := s.byte1()
		if err != nil {
			return err
		}
		if h == 0 {
			return nil
		}
		t, delta := h&0x0F, int16(h>>4)
		id := last + delta
		if delta == 0 {
			v, err := s.zigzag()
			if err != nil {
				return err
			}
			id = int16(v)
		}
		last = id
		if err := s.value(t, self, id, depth); err != nil {
			return err
		}
	}
}

// checkParquetFooter validates the thrift footer of a Parquet file of the
// given size before parquet-go decodes it.
func checkParquetFooter(f io.ReaderAt, size int64) error {
	if size < 12 {
		return fmt.Errorf("%w: %d bytes, too short for a Parquet footer", ErrTruncated, size)
	}
	var tail [8]byte
	if _, err := f.ReadAt(tail[:], size-8); err != nil {
		return err
	}
	if string(tail[4:]) != parquetMagic {
		return fmt.Errorf("%w: no Parquet footer magic at the end (%d bytes; a writer that was not closed leaves none)", ErrTruncated, size)
	}
	n := int64(binary.LittleEndian.Uint32(tail[:4]))
	if n <= 0 || n > size-12 {
		return fmt.Errorf("%w: Parquet footer length %d does not fit in %d bytes", ErrTruncated, n, size)
	}
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, size-8-n); err != nil {
		return err
	}
	s := thriftScanner{b: buf}
	if err := s.structure(0, 1); err != nil {
		return fmt.Errorf("%w: Parquet footer: %w", ErrMalformed, err)
	}
	return nil
}

// checkParquetPages walks the page headers of one column chunk
// [start, end) and bounds what each claims.
func checkParquetPages(f *os.File, start, end, size int64) error {
	if start < 4 || end < start || end > size-8 {
		return fmt.Errorf("%w: column chunk [%d, %d) outside the file", ErrMalformed, start, end)
	}
	buf := make([]byte, 4096)
	for off := start; off < end; {
		window := min(int64(4096), end-off)
		var hlen int
		var compressed, uncompressed, values int64 = -1, 0, 0
		for {
			if int64(len(buf)) < window {
				buf = make([]byte, window)
			}
			b := buf[:window]
			if _, err := f.ReadAt(b, off); err != nil {
				return fmt.Errorf("%w: page header at %d: %v", ErrMalformed, off, err)
			}
			compressed, uncompressed, values = -1, 0, 0
			s := thriftScanner{b: b, onInt: func(parent, id int16, v int64) {
				switch {
				case parent == 0 && id == 2:
					uncompressed = v
				case parent == 0 && id == 3:
					compressed = v
				case (parent == 5 || parent == 7 || parent == 8) && id == 1:
					values = v
				}
			}}
			err := s.structure(0, 1)
			if err == nil {
				hlen = s.pos
				break
			}
			if window == end-off || window >= 16<<20 {
				return fmt.Errorf("%w: page header at %d: %w", ErrMalformed, off, err)
			}
			window = min(window*16, end-off)
		}
		switch {
		case compressed < 0 || compressed > end-off-int64(hlen):
			return fmt.Errorf("%w: page at %d claims %d compressed bytes, the column chunk has %d", ErrMalformed, off, compressed, end-off-int64(hlen))
		case uncompressed < 0 || uncompressed > maxPageUncompressed:
			return fmt.Errorf("%w: page at %d claims %d uncompressed bytes", ErrMalformed, off, uncompressed)
		case values < 0 || values > maxPageValues:
			return fmt.Errorf("%w: page at %d claims %d values", ErrMalformed, off, values)
		}
		off += int64(hlen) + compressed
	}
	return nil
}
