package traces

import (
	"errors"
	"fmt"
	"io"

	"github.com/parquet-go/parquet-go"
	"github.com/tokentrace/tokentrace/internal/intern"
)

// The fast Parquet path decodes our own files (schema exactly Record's)
// column by column straight from the pages' typed buffers into the caller's
// Records, skipping parquet-go's reflection-based row reconstruction, which
// measured about 3x slower. Files with any other schema (written by other
// tools, older minor versions) go through parquet.GenericReader instead.

// recordSchema is the Parquet schema of Record.
var recordSchema = parquet.SchemaOf(Record{})

// colCursor walks one column chunk's pages.
type colCursor struct {
	col   int
	pages parquet.Pages
	page  parquet.Page
	eof   bool

	i64    []int64
	i32    []int32
	idx    []int32  // dictionary indexes
	data   []byte   // plain byte arrays
	offs   []uint32 // plain byte array offsets
	dict   []string // decoded dictionary of the current page
	dictOf parquet.Dictionary
	pos    int // next value
	nval   int // values in the page

	rep, def []byte
	lpos     int
}

// next loads the next page; it returns false at the end of the chunk.
func (c *colCursor) next(in *intern.Strings) (bool, error) {
	if c.eof {
		return false, nil
	}
	if c.page != nil {
		parquet.Release(c.page)
		c.page = nil
	}
	p, err := c.pages.ReadPage()
	if err == io.EOF {
		c.eof = true
		return false, nil
	}
	if err != nil {
		return false, err
	}
	c.page = p
	c.pos, c.lpos = 0, 0
	c.rep, c.def = p.RepetitionLevels(), p.DefinitionLevels()
	v := p.Data()
	switch schema[c.col].kind {
	case kindInt64, kindList64:
		c.i64 = v.Int64()
		c.nval = len(c.i64)
	case kindInt32, kindList32:
		c.i32 = v.Int32()
		c.nval = len(c.i32)
	default: // strings
		if d := p.Dictionary(); d != nil {
			c.idx = v.Int32()
			c.nval = len(c.idx)
			if d != c.dictOf {
				c.dictOf = d
				dv := d.Page().Data()
				data, offs := dv.ByteArray()
				c.dict = c.dict[:0]
				for i := 0; i+1 < len(offs); i++ {
					c.dict = append(c.dict, in.OfBytes(data[offs[i]:offs[i+1]]))
				}
			}
		} else {
			c.idx = nil
			c.data, c.offs = v.ByteArray()
			c.nval = max(len(c.offs)-1, 0)
		}
	}
	return true, nil
}

var errShortColumn = errors.New("column has fewer values than the row group has rows")

// ensure makes a value available at c.pos, loading pages as needed.
func (c *colCursor) ensure(in *intern.Strings) error {
	for c.pos >= c.nval {
		ok, err := c.next(in)
		if err != nil {
			return err
		}
		if !ok {
			return errShortColumn
		}
	}
	return nil
}

// fill decodes len(recs) rows of a flat column.
func (c *colCursor) fill(recs []Record, in *intern.Strings) error {
	i := 0
	for i < len(recs) {
		if err := c.ensure(in); err != nil {
			return err
		}
		k := min(len(recs)-i, c.nval-c.pos)
		sc := &schema[c.col]
		switch {
		case sc.kind == kindInt64:
			for j, v := range c.i64[c.pos : c.pos+k] {
				*sc.int64p(&recs[i+j]) = v
			}
		case sc.kind == kindInt32:
			for j, v := range c.i32[c.pos : c.pos+k] {
				*sc.int32p(&recs[i+j]) = v
			}
		case c.idx != nil:
			for j, x := range c.idx[c.pos : c.pos+k] {
				if x < 0 || int(x) >= len(c.dict) {
					return fmt.Errorf("column %s: dictionary index %d out of range", Columns[c.col], x)
				}
				*sc.strp(&recs[i+j]) = c.dict[x]
			}
		default:
			for j := range k {
				a, b := c.offs[c.pos+j], c.offs[c.pos+j+1]
				if a > b || int(b) > len(c.data) {
					return fmt.Errorf("column %s: bad byte array offsets", Columns[c.col])
				}
				if a == b {
					*sc.strp(&recs[i+j]) = ""
				} else {
					*sc.strp(&recs[i+j]) = string(c.data[a:b])
				}
			}
		}
		c.pos += k
		i += k
	}
	return nil
}

// fillList decodes len(recs) rows of a list column (max repetition and
// definition level 1: def 0 = empty list).
func (c *colCursor) fillList(recs []Record, in *intern.Strings) error {
	sc := &schema[c.col]
	for i := range recs {
		r := &recs[i]
		var l64 *[]int64
		var l32 *[]int32
		if sc.kind == kindList64 {
			l64 = sc.list64p(r)
			*l64 = (*l64)[:0]
		} else {
			l32 = sc.list32p(r)
			*l32 = (*l32)[:0]
		}
		// Fast path: a row that starts and ends inside the current page
		// is one scan of its levels and one copy of its values (prefix
		// block lists are most of a trace's decoding).
		if s := c.lpos; s < len(c.rep) && len(c.def) == len(c.rep) && c.rep[s] == 0 {
			e := s + 1
			for e < len(c.rep) && c.rep[e] != 0 {
				e++
			}
			n := e - s
			if c.def[s] == 0 {
				n = 0
			}
			// Anything unusual (a row running on into the next page, an
			// empty element, too few values) takes the general path.
			if e < len(c.rep) && (c.def[s] != 0 || e == s+1) && c.pos+n <= c.nval && allSet(c.def[s:s+n]) {
				if l64 != nil {
					*l64 = append(*l64, c.i64[c.pos:c.pos+n]...)
				} else {
					*l32 = append(*l32, c.i32[c.pos:c.pos+n]...)
				}
				c.pos += n
				c.lpos = e
				continue
			}
		}
		first := true
		for {
			for c.lpos >= len(c.rep) {
				if first {
					ok, err := c.next(in)
					if err != nil {
						return err
					}
					if !ok {
						return errShortColumn
					}
					continue
				}
				// End of page: the row may continue on the next one.
				ok, err := c.next(in)
				if err != nil {
					return err
				}
				if !ok || len(c.rep) == 0 || c.rep[0] == 0 {
					goto done
				}
			}
			if len(c.def) != len(c.rep) {
				return fmt.Errorf("column %s: %d definition levels for %d repetition levels", Columns[c.col], len(c.def), len(c.rep))
			}
			if !first && c.rep[c.lpos] == 0 {
				break
			}
			if first && c.rep[c.lpos] != 0 {
				return fmt.Errorf("column %s: row does not start at repetition level 0", Columns[c.col])
			}
			first = false
			d := c.def[c.lpos]
			c.lpos++
			if d == 0 {
				continue
			}
			if c.pos >= c.nval {
				return fmt.Errorf("column %s: more levels than values", Columns[c.col])
			}
			if l64 != nil {
				*l64 = append(*l64, c.i64[c.pos])
			} else {
				*l32 = append(*l32, c.i32[c.pos])
			}
			c.pos++
		}
	done:
	}
	return nil
}

// allSet reports whether every definition level is set (no empty element).
func allSet(def []byte) bool {
	for _, d := range def {
		if d == 0 {
			return false
		}
	}
	return true
}

// fastParquet reads row groups column by column.
type fastParquet struct {
	pf      *parquet.File
	rg      int // next row group
	left    int64
	cursors []*colCursor
	in      intern.Strings
}

func newFastParquet(pf *parquet.File) (*fastParquet, bool) {
	if !parquet.EqualNodes(pf.Schema(), recordSchema) {
		return nil, false
	}
	cols := pf.Schema().Columns()
	if len(cols) != numColumns {
		return nil, false
	}
	for i, path := range cols {
		if len(path) == 0 || path[0] != Columns[i] {
			return nil, false
		}
	}
	return &fastParquet{pf: pf}, true
}

func (f *fastParquet) closeGroup() {
	for _, c := range f.cursors {
		if c.page != nil {
			parquet.Release(c.page)
		}
		c.pages.Close()
	}
	f.cursors = nil
}

func (f *fastParquet) Close() error {
	f.closeGroup()
	return nil
}

// read fills recs; io.EOF once every row group is done.
func (f *fastParquet) read(recs []Record) (int, error) {
	for f.left == 0 {
		f.closeGroup()
		groups := f.pf.RowGroups()
		if f.rg >= len(groups) {
			return 0, io.EOF
		}
		g := groups[f.rg]
		f.rg++
		f.left = g.NumRows()
		chunks := g.ColumnChunks()
		if len(chunks) != numColumns {
			return 0, fmt.Errorf("row group %d has %d columns, want %d", f.rg-1, len(chunks), numColumns)
		}
		for i, ch := range chunks {
			f.cursors = append(f.cursors, &colCursor{col: i, pages: ch.Pages()})
		}
	}
	k := int(min(int64(len(recs)), f.left))
	recs = recs[:k]
	for _, c := range f.cursors {
		var err error
		if kd := schema[c.col].kind; kd == kindList64 || kd == kindList32 {
			err = c.fillList(recs, &f.in)
		} else {
			err = c.fill(recs, &f.in)
		}
		if err != nil {
			return 0, err
		}
	}
	f.left -= int64(k)
	return k, nil
}
