package formats

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/tokentrace/tokentrace/internal/lines"
	"github.com/tokentrace/tokentrace/traces"
)

// jsonFramer cuts a stream of JSON text into values without decoding them
// (it follows strings and nesting byte by byte), for the importers of
// whole JSON documents (WEKA's conversations, inference-perf's traces,
// SGLang's agentic trace): a value over the limit (OpenOptions.MaxLineBytes,
// the same bound as a line's) is read to its end without being held, in
// time linear in its length, and the stream goes on after it; and every
// value's line is known.
type jsonFramer struct {
	br   *bufio.Reader
	max  int
	line int64 // the line of the position (1-based)
	buf  []byte
}

func newJSONFramer(r io.Reader, o traces.OpenOptions) *jsonFramer {
	br, ok := r.(*bufio.Reader)
	if !ok {
		br = bufio.NewReaderSize(r, 64<<10)
	}
	return &jsonFramer{br: br, max: o.MaxLineBytes, line: 1}
}

// peek skips white space and returns the next byte, or io.EOF at the end.
func (f *jsonFramer) peek() (byte, error) {
	for {
		c, err := f.br.ReadByte()
		if err != nil {
			return 0, err
		}
		switch c {
		case '\n':
			f.line++
			continue
		case ' ', '\t', '\r':
			continue
		}
		f.br.UnreadByte()
		return c, nil
	}
}

// take consumes the byte peek returned (a delimiter).
func (f *jsonFramer) take() { f.br.ReadByte() }

// value frames the value at the position (after white space): its bytes,
// valid until the next call, or nil when it is over the limit (size says
// how long it was); and the line it starts on. A value the input ends
// inside is io.ErrUnexpectedEOF; a read failure is returned as it is.
func (f *jsonFramer) value() (raw []byte, line, size int64, err error) {
	first, err := f.peek()
	if err != nil {
		return nil, f.line, 0, err
	}
	line = f.line
	f.buf = f.buf[:0]
	if cap(f.buf) > f.max {
		f.buf = nil // let a near-limit buffer go
	}
	s := frameState{scalar: first != '{' && first != '[' && first != '"'}
	for {
		chunk, err := f.br.Peek(1)
		if err != nil {
			if err == io.EOF && s.scalar && size > 0 {
				break // a number or literal ends with the input
			}
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, line, size, err
		}
		chunk, _ = f.br.Peek(f.br.Buffered())
		end, done := s.scan(chunk, size == 0)
		f.line += int64(bytes.Count(chunk[:end], []byte{'\n'}))
		if size+int64(end) <= int64(f.max) {
			if len(f.buf)+end > cap(f.buf) { // double: append would copy a large value many times
				f.buf = append(make([]byte, 0, min(max(2*cap(f.buf), len(f.buf)+end), f.max)), f.buf...)
			}
			f.buf = append(f.buf, chunk[:end]...)
		}
		size += int64(end)
		f.br.Discard(end)
		if done {
			break
		}
	}
	if size > int64(f.max) {
		return nil, line, size, nil
	}
	return f.buf, line, size, nil
}

// frameState is where the framing of one value is.
type frameState struct {
	depth      int
	inStr, esc bool
	scalar     bool // a number or literal: ends before a delimiter or blank
}

// scan follows chunk and returns how much of it belongs to the value and
// whether the value ends there; first says chunk starts the value.
func (s *frameState) scan(chunk []byte, first bool) (int, bool) {
	for i := 0; i < len(chunk); i++ {
		c := chunk[i]
		if s.scalar {
			switch c {
			case ' ', '\t', '\r', '\n', ',', ':', '[', ']', '{', '}', '"':
				if first && i == 0 {
					return 1, true // a stray delimiter: one byte, which does not parse
				}
				return i, true
			}
			continue
		}
		if s.inStr {
			if s.esc {
				s.esc = false
				continue
			}
			// Skip to the next quote or backslash.
			j := bytes.IndexAny(chunk[i:], "\"\\")
			if j < 0 {
				return len(chunk), false
			}
			i += j
			if chunk[i] == '\\' {
				s.esc = true
				continue
			}
			s.inStr = false
			if s.depth == 0 {
				return i + 1, true
			}
			continue
		}
		switch c {
		case '"':
			s.inStr = true
		case '{', '[':
			s.depth++
		case '}', ']':
			s.depth--
			if s.depth <= 0 {
				return i + 1, true
			}
		}
	}
	return len(chunk), false
}

// syntaxLine is the line of the first syntax error in raw, a value framed
// from line start, and whether raw has one.
func syntaxLine(raw []byte, start int64) (int64, bool) {
	var v json.RawMessage
	err := json.Unmarshal(raw, &v)
	var se *json.SyntaxError
	if errors.As(err, &se) {
		off := min(max(se.Offset-1, 0), int64(len(raw)))
		return start + int64(bytes.Count(raw[:off], []byte{'\n'})), true
	}
	return 0, err != nil
}

// tooLongValue is the bad row of a value over the limit.
func tooLongValue(name string, line, size int64, max int) *traces.RowError {
	return &traces.RowError{File: importDisplay(name), Line: line, Err: &traces.RowProblem{Problem: traces.ProblemTooLong,
		Detail: fmt.Sprintf("a document of %s, over the limit of %s", lines.Size(size), lines.Size(int64(max)))}}
}

// jsonDocs reads JSON documents written back to back (WEKA's and
// inference-perf's OTel trace files) and names the line each starts on.
type jsonDocs struct {
	name   string
	f      *jsonFramer
	broken bool // the stream cannot be framed any more
}

func newJSONDocs(r io.Reader, name string, o traces.OpenOptions) *jsonDocs {
	return &jsonDocs{name: name, f: newJSONFramer(r, o)}
}

// next returns the next document and the line it starts on, or io.EOF at
// the end. A document over the limit is a *RowError of its own, after
// which the next one reads. Text that is not JSON, or a document the input
// cuts short, is a *RowError after which next returns io.EOF: the rest
// cannot be framed.
func (s *jsonDocs) next() (json.RawMessage, int64, error) {
	if s.broken {
		return nil, 0, io.EOF
	}
	raw, line, size, err := s.f.value()
	switch {
	case err == io.EOF:
		return nil, 0, io.EOF
	case err == io.ErrUnexpectedEOF:
		s.broken = true
		return nil, 0, importRowError(s.name, s.f.line, "the input ends inside a document")
	case err != nil:
		s.broken = true
		return nil, 0, fmt.Errorf("read %s: %w", importDisplay(s.name), err)
	case raw == nil:
		return nil, line, tooLongValue(s.name, line, size, s.f.max)
	}
	if at, bad := syntaxLine(raw, line); bad {
		s.broken = true
		return nil, 0, importRowError(s.name, at, "not a JSON document (the rest of the input is not read)")
	}
	return raw, line, nil
}
