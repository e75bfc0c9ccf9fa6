// Package jsonlex is the one hand-written JSON lexer of tokentrace, shared by
// the readers that need more speed than encoding/json gives: the trace
// codec's JSONL rows (traces) and the streamed chunks of a vLLM response
// (replay). It walks a byte slice in place, allocates nothing on the common
// path, and hands back strings and numbers as slices of the input.
//
// Every method leaves the lexer just past what it read and reports false (or
// an error) on malformed input; callers then give up on the whole value, so
// no method has to restore the position.
package jsonlex

import (
	"errors"
	"strconv"
	"unicode/utf8"
)

// maxDepth bounds the nesting Skip follows, so a hostile value cannot blow
// the stack.
const maxDepth = 64

// Lexer reads JSON from B starting at offset I.
type Lexer struct {
	B []byte
	I int
	// tmp holds the last string that needed unescaping.
	tmp []byte
}

// WS skips white space.
func (l *Lexer) WS() {
	for l.I < len(l.B) {
		switch l.B[l.I] {
		case ' ', '\t', '\r', '\n':
			l.I++
		default:
			return
		}
	}
}

// Peek skips white space and returns the next byte (0 at the end).
func (l *Lexer) Peek() byte {
	l.WS()
	if l.I < len(l.B) {
		return l.B[l.I]
	}
	return 0
}

// End skips white space and reports whether the input is used up.
func (l *Lexer) End() bool {
	l.WS()
	return l.I == len(l.B)
}

// Lit consumes the literal s (true, false, null) if it comes next.
func (l *Lexer) Lit(s string) bool {
	if len(l.B)-l.I >= len(s) && string(l.B[l.I:l.I+len(s)]) == s {
		l.I += len(s)
		return true
	}
	return false
}

// Null consumes a null if it comes next.
func (l *Lexer) Null() bool { return l.Peek() == 'n' && l.Lit("null") }

// Object walks an object, calling field with each key (unescaped; valid
// until the next string is read) and the lexer at the value. field must
// consume the value and return false on a syntax error.
func (l *Lexer) Object(field func(key []byte) bool) bool {
	if more, ok := l.open('{', '}'); !more {
		return ok
	}
	for {
		k, ok := l.String()
		if !ok || l.Peek() != ':' {
			return false
		}
		l.I++
		l.WS()
		if !field(k) {
			return false
		}
		if more, ok := l.next('}'); !more {
			return ok
		}
	}
}

// Array walks an array, calling elem with the lexer at each element; elem
// must consume it.
func (l *Lexer) Array(elem func() bool) bool {
	if more, ok := l.open('[', ']'); !more {
		return ok
	}
	for {
		l.WS()
		if !elem() {
			return false
		}
		if more, ok := l.next(']'); !more {
			return ok
		}
	}
}

// open consumes the opening byte of an object or array: more says items
// follow, ok false on a syntax error; an empty one is consumed whole.
func (l *Lexer) open(opening, closing byte) (more, ok bool) {
	if l.Peek() != opening {
		return false, false
	}
	l.I++
	if l.Peek() == closing {
		l.I++
		return false, true
	}
	return true, true
}

// next consumes what follows an item of an object or array: a comma
// (more items follow) or the closing byte; ok false on a syntax error.
func (l *Lexer) next(closing byte) (more, ok bool) {
	switch l.Peek() {
	case ',':
		l.I++
		return true, true
	case closing:
		l.I++
		return false, true
	}
	return false, false
}

// RawString reads a string and returns its bytes with escapes left as they
// are: the fast path for callers that only need to know whether text came.
func (l *Lexer) RawString() ([]byte, bool) {
	if l.Peek() != '"' {
		return nil, false
	}
	l.I++
	start := l.I
	for l.I < len(l.B) {
		switch c := l.B[l.I]; {
		case c == '"':
			s := l.B[start:l.I]
			l.I++
			return s, true
		case c == '\\':
			l.I += 2
		case c < 0x20:
			return nil, false
		default:
			l.I++
		}
	}
	return nil, false
}

// String reads a string and returns it unescaped. The result aliases B, or
// the lexer's scratch buffer when the string held escapes (valid until the
// next escaped string).
func (l *Lexer) String() ([]byte, bool) {
	if l.Peek() != '"' {
		return nil, false
	}
	l.I++
	start := l.I
	for l.I < len(l.B) {
		c := l.B[l.I]
		if c == '"' {
			s := l.B[start:l.I]
			l.I++
			return s, true
		}
		if c == '\\' {
			return l.unescape(start)
		}
		if c < 0x20 {
			return nil, false
		}
		l.I++
	}
	return nil, false
}

func (l *Lexer) unescape(start int) ([]byte, bool) {
	out := append(l.tmp[:0], l.B[start:l.I]...)
	for l.I < len(l.B) {
		c := l.B[l.I]
		switch {
		case c == '"':
			l.I++
			l.tmp = out
			return out, true
		case c < 0x20:
			return nil, false
		case c != '\\':
			out = append(out, c)
			l.I++
			continue
		}
		l.I++
		if l.I >= len(l.B) {
			return nil, false
		}
		e := l.B[l.I]
		l.I++
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := l.hex4()
			if !ok {
				return nil, false
			}
			if 0xD800 <= r && r < 0xE000 {
				r2 := rune(-1)
				if l.I+1 < len(l.B) && l.B[l.I] == '\\' && l.B[l.I+1] == 'u' {
					save := l.I
					l.I += 2
					if x, ok := l.hex4(); ok {
						r2 = x
					} else {
						l.I = save
					}
				}
				r = utf16Decode(r, r2)
			}
			out = utf8.AppendRune(out, r)
		default:
			return nil, false
		}
	}
	return nil, false
}

func (l *Lexer) hex4() (rune, bool) {
	if l.I+4 > len(l.B) {
		return 0, false
	}
	var r rune
	for _, c := range l.B[l.I : l.I+4] {
		r <<= 4
		switch {
		case '0' <= c && c <= '9':
			r |= rune(c - '0')
		case 'a' <= c && c <= 'f':
			r |= rune(c - 'a' + 10)
		case 'A' <= c && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	l.I += 4
	return r, true
}

// utf16Decode joins a surrogate pair; a lone surrogate becomes U+FFFD as
// with encoding/json.
func utf16Decode(r1, r2 rune) rune {
	if 0xD800 <= r1 && r1 < 0xDC00 && 0xDC00 <= r2 && r2 < 0xE000 {
		return (r1-0xD800)<<10 | (r2 - 0xDC00) + 0x10000
	}
	return utf8.RuneError
}

// Number returns the bytes of a number, checked against JSON's grammar
// (-?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?); the caller parses them.
func (l *Lexer) Number() ([]byte, bool) {
	l.WS()
	start := l.I
	if l.I < len(l.B) && l.B[l.I] == '-' {
		l.I++
	}
	switch {
	case l.I < len(l.B) && l.B[l.I] == '0':
		l.I++
	case !l.digits():
		return nil, false
	}
	if l.I < len(l.B) && l.B[l.I] == '.' {
		l.I++
		if !l.digits() {
			return nil, false
		}
	}
	if l.I < len(l.B) && (l.B[l.I] == 'e' || l.B[l.I] == 'E') {
		l.I++
		if l.I < len(l.B) && (l.B[l.I] == '+' || l.B[l.I] == '-') {
			l.I++
		}
		if !l.digits() {
			return nil, false
		}
	}
	return l.B[start:l.I], true
}

// digits consumes one or more decimal digits.
func (l *Lexer) digits() bool {
	start := l.I
	for l.I < len(l.B) && '0' <= l.B[l.I] && l.B[l.I] <= '9' {
		l.I++
	}
	return l.I > start
}

// ErrNotInt is Int64's error for a value that is not an integer.
var ErrNotInt = errors.New("not an integer")

// Int64 reads an integer; integral floats such as 1e3 or 12.0 count.
func (l *Lexer) Int64() (int64, error) {
	l.WS()
	// Fast path, one pass: optional '-' then 1 to 18 digits without a
	// leading zero, not followed by a fraction or exponent.
	i, neg := l.I, false
	if i < len(l.B) && l.B[i] == '-' {
		i, neg = i+1, true
	}
	first, v := i, int64(0)
	for i < len(l.B) && '0' <= l.B[i] && l.B[i] <= '9' {
		v = v*10 + int64(l.B[i]-'0')
		i++
	}
	if n := i - first; n > 0 && n <= 18 && (n == 1 || l.B[first] != '0') &&
		(i == len(l.B) || (l.B[i] != '.' && l.B[i] != 'e' && l.B[i] != 'E')) {
		l.I = i
		if neg {
			v = -v
		}
		return v, nil
	}
	num, ok := l.Number()
	if !ok {
		return 0, ErrNotInt
	}
	if v, err := strconv.ParseInt(string(num), 10, 64); err == nil {
		return v, nil
	}
	f, err := strconv.ParseFloat(string(num), 64)
	if err != nil || f != float64(int64(f)) || f >= 9.2e18 || f <= -9.2e18 {
		return 0, ErrNotInt
	}
	return int64(f), nil
}

// Float reads a number.
func (l *Lexer) Float() (float64, bool) {
	num, ok := l.Number()
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(num), 64)
	return f, err == nil
}

// Skip consumes one value of any kind.
func (l *Lexer) Skip() bool { return l.skip(0) }

func (l *Lexer) skip(depth int) bool {
	if depth > maxDepth {
		return false
	}
	switch l.Peek() {
	case '"':
		_, ok := l.String()
		return ok
	case '{':
		return l.Object(func([]byte) bool { return l.skip(depth + 1) })
	case '[':
		return l.Array(func() bool { return l.skip(depth + 1) })
	case 't':
		return l.Lit("true")
	case 'f':
		return l.Lit("false")
	case 'n':
		return l.Lit("null")
	default:
		_, ok := l.Number()
		return ok
	}
}

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string. Control characters, quotes and
// backslashes are escaped; invalid UTF-8 becomes U+FFFD as with
// encoding/json; other UTF-8 is kept as is.
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
