package capture

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/klauspost/compress/zstd"
	"github.com/tokentrace/tokentrace/internal/logshape"
)

// countingReader counts decompressed bytes.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// decompress sniffs gzip and zstd magic bytes and returns the plain stream.
func decompress(br *bufio.Reader) (io.Reader, func(), error) {
	magic, _ := br.Peek(4)
	switch {
	case len(magic) >= 2 && magic[0] == 0x1f && magic[1] == 0x8b:
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, nil, err
		}
		zr.Multistream(true)
		return zr, func() { zr.Close() }, nil
	case len(magic) == 4 && bytes.Equal(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		zr, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(1<<30))
		if err != nil {
			return nil, nil, err
		}
		return zr, zr.Close, nil
	}
	return br, func() {}, nil
}

// lineReader yields lines up to max bytes; longer lines are consumed and
// flagged, never buffered whole.
type lineReader struct {
	br   *bufio.Reader
	max  int
	buf  []byte
	line int64
}

// next returns the next line without its line ending. tooLong reports a line
// over the limit (line is then nil). err is io.EOF at a clean end, or the
// stream's error (the partial line is dropped).
func (r *lineReader) next() (line []byte, tooLong bool, err error) {
	r.buf = r.buf[:0]
	first := true
	for {
		frag, err := r.br.ReadSlice('\n')
		if first && err == nil && len(frag) <= r.max {
			r.line++
			return trimEOL(frag), false, nil
		}
		first = false
		if !tooLong {
			if len(r.buf)+len(frag) > r.max+2 {
				tooLong = true
				r.buf = r.buf[:0]
			} else {
				r.buf = append(r.buf, frag...)
			}
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == io.EOF {
			if len(r.buf) == 0 && !tooLong {
				return nil, false, io.EOF
			}
			r.line++
			if tooLong {
				return nil, true, nil
			}
			return trimEOL(r.buf), false, nil
		}
		if err != nil {
			return nil, false, err
		}
		r.line++
		if tooLong {
			return nil, true, nil
		}
		return trimEOL(r.buf), false, nil
	}
}

func trimEOL(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	if n := len(b); n > 0 && b[n-1] == '\r' {
		b = b[:n-1]
	}
	return b
}

// sniff guesses the format from the first bytes of a plain stream, by the
// rules the trace readers use to recognise logs (internal/logshape).
func sniff(head []byte) string {
	switch logshape.Guess(logshape.FirstLine(head)) {
	case logshape.VLLM:
		return FormatVLLM
	case logshape.OTLP:
		return FormatOTLP
	case logshape.LiteLLM:
		return FormatLiteLLM
	}
	return FormatOpenAI
}

// readInput runs the parse and redact stages over one input and hands the
// redacted requests to the pipeline in input order.
func (pl *pipeline) readInput(ctx context.Context, idx int, in Input) error {
	pl.stats.Inputs++
	name := in.Name
	if name == "" {
		name = fmt.Sprintf("input%d", idx+1)
	}
	raw := bufio.NewReaderSize(in.R, 256<<10)
	plain, closeFn, err := decompress(raw)
	if err != nil {
		// A damaged header: nothing readable.
		return pl.problems.add(name, 1, KindTruncated, "")
	}
	defer closeFn()
	cr := &countingReader{r: plain}
	br := bufio.NewReaderSize(cr, 1<<20)
	defer func() { pl.stats.Bytes += cr.n }()

	if magic, _ := br.Peek(4); string(magic) == "PAR1" {
		// Its binary "lines" would all be counted as malformed.
		return fmt.Errorf("%s: %w", name, ErrParquet)
	}
	format := pl.o.Format
	if format == FormatAuto {
		head, _ := br.Peek(64 << 10)
		format = sniff(head)
	}
	pl.formats = append(pl.formats, format)
	pl.names = append(pl.names, name)
	lr := &lineReader{br: br, max: pl.o.MaxLineBytes}
	if workers := pl.o.workers(); workers > 1 && format != FormatVLLM {
		return pl.readParallel(ctx, int32(idx), name, format, lr, workers)
	}
	em := &emitter{rd: pl.rd, input: int32(idx), name: name}
	p := parserFor(format, em)
	for {
		if lr.line&1023 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
			pl.tick("reading", 0)
		}
		line, tooLong, err := lr.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			// Damaged compressed stream or I/O error: keep what we have.
			if errors.Is(err, context.Canceled) {
				return err
			}
			if perr := pl.problems.add(name, lr.line+1, KindTruncated, ""); perr != nil {
				return perr
			}
			break
		}
		pl.stats.Lines++
		if tooLong {
			if perr := pl.problems.add(name, lr.line, KindTooLong, ""); perr != nil {
				return perr
			}
			continue
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if !utf8.Valid(line) {
			if perr := pl.problems.add(name, lr.line, KindNotUTF8, ""); perr != nil {
				return perr
			}
			continue
		}
		kind, field := p.parse(line, lr.line)
		if err := pl.collect(em); err != nil {
			return err
		}
		if kind != "" {
			if perr := pl.problems.add(name, lr.line, kind, field); perr != nil {
				return perr
			}
		}
	}
	for _, le := range p.end() {
		pl.problems.add(le.File, le.Line, le.Kind, le.Field)
	}
	if err := pl.collect(em); err != nil {
		return err
	}
	return pl.problems.err
}

// problems tallies malformed lines by kind.
type problems struct {
	strict bool
	byKind map[string]*Problem
	err    error // the first, with Options.Strict
}

// add records a malformed line; with Options.Strict it returns the error.
func (ps *problems) add(file string, line int64, kind, field string) error {
	if ps.byKind == nil {
		ps.byKind = map[string]*Problem{}
	}
	p := ps.byKind[kind]
	if p == nil {
		p = &Problem{Kind: kind, First: LineError{File: file, Line: line, Kind: kind, Field: field}}
		ps.byKind[kind] = p
	}
	p.Count++
	if ps.strict {
		e := &LineError{File: file, Line: line, Kind: kind, Field: field}
		if ps.err == nil {
			ps.err = e
		}
		return e
	}
	return nil
}

// list returns the problems sorted by kind.
func (ps *problems) list() []Problem {
	out := make([]Problem, 0, len(ps.byKind))
	for _, p := range ps.byKind {
		out = append(out, *p)
	}
	slices.SortFunc(out, func(a, b Problem) int { return strings.Compare(a.Kind, b.Kind) })
	return out
}
