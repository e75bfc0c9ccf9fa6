package replay

import (
	"bytes"
	"errors"
	"io"
	"math"
	"strconv"

	"github.com/tokentrace/tokentrace/internal/jsonlex"
)

// sseReader splits a text/event-stream body into data payloads without
// copying. Each "data:" line is one payload (OpenAI-compatible servers never
// split a JSON chunk over several data lines); comment lines (":
// keep-alive"), other fields (event:, id:, retry:) and blank lines are
// skipped. Lines end in \n or \r\n.
type sseReader struct {
	r     io.Reader
	buf   []byte
	start int // first unread byte
	end   int // end of valid bytes
	err   error
	// reads counts Read calls that returned data; the caller timestamps a
	// payload with the time of the read that completed it.
	reads int
	// max bounds a single line.
	max int
}

// errLineTooLong is returned for a line longer than the reader's limit.
var errLineTooLong = errors.New("SSE line too long")

var dataPrefix = []byte("data:")

// next returns the next data payload (leading space removed). The slice is
// valid until the next call. fresh reports whether a Read call happened
// while looking for it (so the caller knows to take a new timestamp).
func (s *sseReader) next() (payload []byte, fresh bool, err error) {
	for {
		if i := bytes.IndexByte(s.buf[s.start:s.end], '\n'); i >= 0 {
			line := s.buf[s.start : s.start+i]
			s.start += i + 1
			if p, ok := dataPayload(line); ok {
				return p, fresh, nil
			}
			continue // blank, comment, event:, id:, retry:
		}
		if s.err != nil {
			// A last line without its newline still counts.
			if s.start < s.end {
				// Strip one \r, as for a complete line: "data:x\r\r" is
				// the payload "x\r" either way.
				line := bytes.TrimSuffix(s.buf[s.start:s.end], []byte{'\r'})
				s.start = s.end
				if bytes.HasPrefix(line, dataPrefix) {
					line = line[5:]
					if len(line) > 0 && line[0] == ' ' {
						line = line[1:]
					}
					return line, fresh, nil
				}
			}
			return nil, fresh, s.err
		}
		// Make room: move the partial line to the front, grow if full.
		if s.start > 0 {
			n := copy(s.buf, s.buf[s.start:s.end])
			s.start, s.end = 0, n
		}
		if s.end == len(s.buf) {
			if len(s.buf) >= s.max {
				return nil, fresh, errLineTooLong
			}
			nb := make([]byte, 2*len(s.buf))
			copy(nb, s.buf[:s.end])
			s.buf = nb
		}
		n, err := s.r.Read(s.buf[s.end:])
		if n > 0 {
			s.end += n
			s.reads++
			fresh = true
		}
		if err != nil {
			s.err = err
		}
	}
}

// dataPayload returns the payload of a "data:" line (its \n removed; one
// \r and one leading space are stripped); false for any other line.
func dataPayload(line []byte) ([]byte, bool) {
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	if len(line) < 5 || !bytes.HasPrefix(line, dataPrefix) {
		return nil, false
	}
	line = line[5:]
	if len(line) > 0 && line[0] == ' ' {
		line = line[1:]
	}
	return line, true
}

// sseSplitter is sseReader for bytes pushed to it as they arrive (the
// event loop's reads): it returns the data payloads of whole lines, in
// place where a line lies within one push, and keeps a line split over
// pushes until its end comes.
type sseSplitter struct {
	carry []byte
	max   int // bounds a single line
}

// next returns the next payload completed in *p and consumes *p up to its
// line's end; ok is false once *p holds no whole line more (its tail is
// kept). The payload is valid until the next call.
func (s *sseSplitter) next(p *[]byte) (payload []byte, ok bool, err error) {
	for {
		b := *p
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			if len(s.carry)+len(b) > s.max {
				return nil, false, errLineTooLong
			}
			s.carry = append(s.carry, b...)
			*p = b[len(b):]
			return nil, false, nil
		}
		line := b[:i]
		*p = b[i+1:]
		if len(s.carry) > 0 {
			if len(s.carry)+len(line) > s.max {
				return nil, false, errLineTooLong
			}
			s.carry = append(s.carry, line...)
			line = s.carry
			s.carry = s.carry[:0]
		}
		if pl, ok := dataPayload(line); ok {
			return pl, true, nil
		}
	}
}

// last returns the payload of a last line without its newline, at the
// end of the body.
func (s *sseSplitter) last() ([]byte, bool) {
	if len(s.carry) == 0 {
		return nil, false
	}
	line := s.carry
	s.carry = s.carry[:0]
	return dataPayload(line)
}

// chunk is what replay needs from one streamed JSON chunk.
type chunk struct {
	// choices: the chunk had a non-empty choices array.
	choices bool
	// content: some choice carried text, content, reasoning or token ids.
	content bool
	// text is the raw (still JSON-escaped) "text" or delta "content" of the
	// last choice that carried one, and ids the raw "token_ids" array of
	// vLLM's return_token_ids; both alias the payload (valid until the next
	// read). Context growth keeps them (turncontext.go).
	text, ids []byte
	// usage fields; -1 when absent.
	promptTokens, completionTokens, cachedTokens int64
	// per-request metrics (vLLM --enable-per-request-metrics), in ms; NaN
	// when absent.
	queueMs, ttftMs, genMs float64
	// isError: the chunk was an error object; errType/errCode are short and
	// content-free (no message text).
	isError          bool
	errType, errCode string
}

func (c *chunk) reset() {
	*c = chunk{promptTokens: -1, completionTokens: -1, cachedTokens: -1,
		queueMs: math.NaN(), ttftMs: math.NaN(), genMs: math.NaN()}
}

// hasMetrics reports whether the chunk carried vLLM's metrics object.
func (c *chunk) hasMetrics() bool {
	return !math.IsNaN(c.queueMs) || !math.IsNaN(c.ttftMs) || !math.IsNaN(c.genMs)
}

var errBadJSON = errors.New("malformed JSON chunk")

// parseChunk extracts the fields replay needs from one chunk without
// encoding/json: it walks the top-level object, descends into choices,
// usage, metrics and error, and skips everything else.
func parseChunk(b []byte, c *chunk) error {
	c.reset()
	p := scanner{jsonlex.Lexer{B: b}}
	if !p.Object(func(key []byte) bool {
		switch string(key) {
		case "choices":
			return p.choices(c)
		case "usage":
			return p.usage(c)
		case "metrics":
			return p.metrics(c)
		case "error":
			c.isError = true
			return p.errorValue(c)
		case "object":
			v, ok := p.RawString()
			if ok && string(v) == "error" {
				c.isError = true
			}
			return ok
		case "type", "code":
			// flat error shape {"object":"error","type":...}
			return p.errorKey(c, key)
		default:
			return p.Skip()
		}
	}) {
		return errBadJSON
	}
	p.WS()
	if p.I != len(p.B) {
		return errBadJSON
	}
	if !c.isError {
		c.errType, c.errCode = "", ""
	}
	return nil
}

// shortToken keeps an identifier-like string (error type) and drops anything
// that could be content.
func shortToken(v []byte) string {
	if len(v) > 40 {
		return ""
	}
	for _, ch := range v {
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '_' || ch == '-' || ch == '.') {
			return ""
		}
	}
	return string(v)
}

// scanner is the shared JSON lexer plus the readings replay needs from a
// chunk: usage integers and metrics floats where null means "absent".
type scanner struct {
	jsonlex.Lexer
}

// int reads an integer (null reads as -1; fractions are truncated and values
// clamp at MaxInt32, as usage counts never exceed it).
func (p *scanner) int() (int64, bool) {
	if p.Peek() == 'n' {
		return -1, p.Lit("null")
	}
	raw, ok := p.Number()
	if !ok {
		return 0, false
	}
	var v int64
	for _, ch := range raw {
		if ch < '0' || ch > '9' {
			f, err := strconv.ParseFloat(string(raw), 64)
			if err != nil {
				return 0, false
			}
			return int64(f), true
		}
		v = v*10 + int64(ch-'0')
		if v > math.MaxInt32 {
			v = math.MaxInt32
		}
	}
	return v, true
}

// float reads a number (null reads as NaN).
func (p *scanner) float() (float64, bool) {
	if p.Peek() == 'n' {
		return math.NaN(), p.Lit("null")
	}
	return p.Float()
}

// shortScalar reads a string, number or null and returns a short
// content-free form ("\x00" on a syntax error).
func (p *scanner) shortScalar() string {
	switch p.Peek() {
	case '"':
		v, ok := p.RawString()
		if !ok {
			return "\x00"
		}
		return shortToken(v)
	case 'n':
		if !p.Lit("null") {
			return "\x00"
		}
		return ""
	case '{', '[', 't', 'f':
		if !p.Skip() {
			return "\x00"
		}
		return ""
	default:
		raw, ok := p.Number()
		if !ok {
			return "\x00"
		}
		return shortToken(raw)
	}
}

func (p *scanner) choices(c *chunk) bool {
	return p.Null() || p.Array(func() bool {
		c.choices = true
		return p.Object(func(key []byte) bool {
			switch string(key) {
			case "text":
				return p.contentStr(c, true)
			case "delta", "message":
				return p.Object(func(key []byte) bool {
					switch string(key) {
					case "content":
						return p.contentStr(c, true)
					case "reasoning_content", "reasoning":
						return p.contentStr(c, false)
					case "token_ids":
						return p.tokenIDs(c)
					default:
						return p.Skip()
					}
				})
			case "token_ids":
				return p.tokenIDs(c)
			default:
				return p.Skip()
			}
		})
	})
}

// contentStr reads a choice's text; answer marks the text of the answer
// (not reasoning), which c.text keeps.
func (p *scanner) contentStr(c *chunk, answer bool) bool {
	if p.Peek() == '"' {
		v, ok := p.RawString()
		if len(v) > 0 {
			c.content = true
			if answer {
				c.text = v
			}
		}
		return ok
	}
	return p.Skip()
}

func (p *scanner) tokenIDs(c *chunk) bool {
	if p.Peek() == '[' {
		start := p.I
		if !p.Skip() {
			return false
		}
		if p.I-start > 2 && bytes.ContainsAny(p.B[start:p.I], "0123456789") {
			c.content = true
			c.ids = p.B[start:p.I]
		}
		return true
	}
	return p.Skip()
}

func (p *scanner) usage(c *chunk) bool {
	return p.Null() || p.Object(func(key []byte) bool {
		var ok bool
		switch string(key) {
		case "prompt_tokens":
			c.promptTokens, ok = p.int()
		case "completion_tokens":
			c.completionTokens, ok = p.int()
		case "prompt_tokens_details":
			return p.Null() || p.Object(func(key []byte) bool {
				if string(key) == "cached_tokens" {
					var ok bool
					c.cachedTokens, ok = p.int()
					return ok
				}
				return p.Skip()
			})
		case "metrics":
			return p.metrics(c)
		default:
			return p.Skip()
		}
		return ok
	})
}

func (p *scanner) metrics(c *chunk) bool {
	return p.Null() || p.Object(func(key []byte) bool {
		var ok bool
		switch string(key) {
		case "queue_time_ms":
			c.queueMs, ok = p.float()
		case "time_to_first_token_ms":
			c.ttftMs, ok = p.float()
		case "generation_time_ms":
			c.genMs, ok = p.float()
		default:
			return p.Skip()
		}
		return ok
	})
}

func (p *scanner) errorValue(c *chunk) bool {
	if p.Peek() != '{' {
		return p.Skip()
	}
	return p.Object(func(key []byte) bool { return p.errorKey(c, key) })
}

// errorKey reads one key of an error object: type and code are kept in
// short, content-free form, anything else is skipped.
func (p *scanner) errorKey(c *chunk, key []byte) bool {
	switch string(key) {
	case "type":
		if p.Peek() == '"' {
			v, ok := p.RawString()
			c.errType = shortToken(v)
			return ok
		}
	case "code":
		c.errCode = p.shortScalar()
		return c.errCode != "\x00"
	}
	return p.Skip()
}
