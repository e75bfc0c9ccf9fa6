package traces

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// Salvage of a tokentrace Parquet file whose footer is missing (the writer
// was killed before Close): the column chunks of every complete row group are
// still in the file, one after the other, in schema order. We walk the page
// headers, split them into column chunks (every chunk of a group holds the
// same number of rows; the group size is found from the leading columns
// without dictionary pages), and synthesize a footer for the complete groups
// from a template written by our own writer. File metadata (Meta) is lost.

// parquetTemplate is the footer of a one-row file written by our writer:
// schema, column types, encodings and codec of every column.
var parquetTemplate = sync.OnceValues(func() (*format.FileMetaData, error) {
	var buf bytes.Buffer
	o := DefaultCreateOptions()
	if err := writeParquetRows(&buf, []Record{NewRecord()}, parquetOutputOptions(Meta{SchemaVersion: SchemaVersion}, o)...); err != nil {
		return nil, err
	}
	pf, err := parquet.OpenFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		return nil, err
	}
	md := *pf.Metadata()
	if len(md.RowGroups) != 1 || len(md.RowGroups[0].Columns) != numColumns {
		return nil, errors.New("unexpected template layout")
	}
	return &md, nil
})

// pageInfo is one page header found by the walk.
type pageInfo struct {
	off, hlen, csize, usize int64
	typ                     int64 // format.PageType
	values, rows            int64
}

const (
	pageData   = 0
	pageDict   = 2
	pageDataV2 = 3
)

// walkPages reads page headers from offset 4 until one does not parse or
// does not fit in the file.
func walkPages(f io.ReaderAt, size int64) []pageInfo {
	var pages []pageInfo
	buf := make([]byte, 4096)
	for off := int64(4); off < size; {
		window := min(int64(4096), size-off)
		var p pageInfo
		ok := false
		for {
			if int64(len(buf)) < window {
				buf = make([]byte, window)
			}
			b := buf[:window]
			if n, _ := f.ReadAt(b, off); int64(n) != window {
				return pages
			}
			p = pageInfo{off: off, csize: -1, rows: -1}
			s := thriftScanner{b: b, onInt: func(parent, id int16, v int64) {
				switch {
				case parent == 0 && id == 1:
					p.typ = v
				case parent == 0 && id == 2:
					p.usize = v
				case parent == 0 && id == 3:
					p.csize = v
				case (parent == 5 || parent == 7 || parent == 8) && id == 1:
					p.values = v
				case parent == 8 && id == 3:
					p.rows = v
				}
			}}
			if err := s.structure(0, 1); err == nil {
				p.hlen = int64(s.pos)
				ok = true
				break
			}
			if window == size-off || window >= 16<<20 {
				break
			}
			window = min(window*16, size-off)
		}
		if !ok || p.csize < 0 || p.usize < 0 || p.usize > maxPageUncompressed ||
			p.values < 0 || p.values > maxPageValues || off+p.hlen+p.csize > size {
			return pages
		}
		pages = append(pages, p)
		off += p.hlen + p.csize
	}
	return pages
}

// salvageParquet returns a parquet.File over the complete row groups of a
// footer-less tokentrace Parquet file, or an error when none is complete.
func salvageParquet(f io.ReaderAt, size int64) (*parquet.File, error) {
	tmpl, err := parquetTemplate()
	if err != nil {
		return nil, err
	}
	tcols := tmpl.RowGroups[0].Columns
	hasDict := func(col int) bool { return tcols[col].MetaData.DictionaryPageOffset > 0 }
	pages := walkPages(f, size)

	// Group size: the k leading columns without a dictionary hold k·G rows
	// before the group's first dictionary page.
	k := 0
	for k < numColumns && !hasDict(k) {
		k++
	}
	if k == 0 || k == numColumns {
		return nil, errors.New("unexpected schema layout")
	}
	groupRows := func(i int) int64 {
		var lead int64
		for ; i < len(pages); i++ {
			p := pages[i]
			if p.typ == pageDict {
				if lead == 0 || lead%int64(k) != 0 {
					return 0
				}
				return lead / int64(k)
			}
			if p.typ != pageDataV2 || p.rows <= 0 {
				return 0
			}
			lead += p.rows
		}
		return 0
	}

	md := format.FileMetaData{Version: tmpl.Version, Schema: tmpl.Schema, CreatedBy: tmpl.CreatedBy}
	i := 0
	var end int64
groups:
	for {
		g := groupRows(i)
		if g == 0 {
			break
		}
		rg := format.RowGroup{NumRows: g}
		for col := range numColumns {
			cm := tcols[col].MetaData
			cm.Statistics, cm.EncodingStats, cm.SizeStatistics = format.Statistics{}, nil, format.SizeStatistics{}
			cm.NumValues, cm.TotalCompressedSize, cm.TotalUncompressedSize = 0, 0, 0
			cm.DictionaryPageOffset, cm.DataPageOffset, cm.IndexPageOffset = 0, 0, 0
			start := int64(-1)
			if hasDict(col) {
				if i >= len(pages) || pages[i].typ != pageDict {
					break groups
				}
				p := pages[i]
				start, cm.DictionaryPageOffset = p.off, p.off
				cm.TotalCompressedSize += p.hlen + p.csize
				cm.TotalUncompressedSize += p.hlen + p.usize
				i++
			}
			var rows int64
			for rows < g {
				if i >= len(pages) || pages[i].typ != pageDataV2 || pages[i].rows <= 0 {
					break groups
				}
				p := pages[i]
				if start < 0 {
					start = p.off
				}
				if cm.DataPageOffset == 0 {
					cm.DataPageOffset = p.off
				}
				rows += p.rows
				cm.NumValues += p.values
				cm.TotalCompressedSize += p.hlen + p.csize
				cm.TotalUncompressedSize += p.hlen + p.usize
				i++
			}
			if rows != g {
				break groups
			}
			rg.Columns = append(rg.Columns, format.ColumnChunk{FileOffset: start, MetaData: cm})
			rg.TotalByteSize += cm.TotalUncompressedSize
			rg.TotalCompressedSize += cm.TotalCompressedSize
			if col == 0 {
				rg.FileOffset = start
			}
			end = start + cm.TotalCompressedSize
		}
		rg.Ordinal = int16(len(md.RowGroups))
		md.RowGroups = append(md.RowGroups, rg)
		md.NumRows += g
		if i >= len(pages) {
			break
		}
	}
	if len(md.RowGroups) == 0 {
		return nil, errors.New("no complete row group")
	}
	// end may include a partial group's columns; cut at the last complete one.
	last := md.RowGroups[len(md.RowGroups)-1].Columns
	end = last[len(last)-1].FileOffset + last[len(last)-1].MetaData.TotalCompressedSize
	footer, err := thrift.Marshal(new(thrift.CompactProtocol), &md)
	if err != nil {
		return nil, err
	}
	tail := binary.LittleEndian.AppendUint32(footer, uint32(len(footer)))
	tail = append(tail, parquetMagic...)
	ra := &footerReaderAt{r: f, n: end, tail: tail}
	pf, err := parquet.OpenFile(ra, end+int64(len(tail)), parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err != nil {
		return nil, fmt.Errorf("open salvaged row groups: %w", err)
	}
	return pf, nil
}

// footerReaderAt is r's first n bytes followed by tail.
type footerReaderAt struct {
	r    io.ReaderAt
	n    int64
	tail []byte
}

func (a *footerReaderAt) ReadAt(p []byte, off int64) (int, error) {
	total := 0
	if off < a.n {
		k := min(int64(len(p)), a.n-off)
		m, err := a.r.ReadAt(p[:k], off)
		total += m
		if err != nil && !(err == io.EOF && int64(m) == k) {
			return total, err
		}
		p, off = p[k:], off+k
	}
	if len(p) == 0 {
		return total, nil
	}
	t := off - a.n
	if t >= int64(len(a.tail)) {
		return total, io.EOF
	}
	m := copy(p, a.tail[t:])
	total += m
	if m < len(p) {
		return total, io.EOF
	}
	return total, nil
}
