package traces

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"
)

// jsonlMetaKey is the key of the metadata object on a JSONL file's first line.
const jsonlMetaKey = "tokentrace_meta"

// maxLineBytes bounds one JSONL or CSV line.
const maxLineBytes = 64 << 20

// JSONL rows are written by a hand-written, append-based encoder: one object
// per line, keys in Columns order, and a column left out when it holds the
// value a decoder starts from (NewRecord: 0 or "" for request columns except
// seq, arrival_ns, input_tokens and output_tokens, which are always written;
// NotReported for numeric outcome columns; empty lists). The decoder starts
// every row from NewRecord, so a left-out column reads back exactly.

type jsonlWriter struct {
	textSink
	buf []byte
	err error
}

// NewJSONLWriter writes records as JSON lines to w, metadata first. Close
// flushes and closes w if it is an io.Closer.
func NewJSONLWriter(w io.Writer, m Meta) (Writer, error) {
	if m.SchemaVersion == "" {
		m.SchemaVersion = SchemaVersion
	}
	jw := &jsonlWriter{textSink: newTextSink(w)}
	hdr, err := json.Marshal(map[string]Meta{jsonlMetaKey: m})
	if err != nil {
		return nil, fmt.Errorf("encode metadata: %w", err)
	}
	jw.bw.Write(hdr)
	jw.bw.WriteByte('\n')
	return jw, nil
}

func (w *jsonlWriter) Write(recs []Record) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	for i := range recs {
		w.buf = appendJSONRecord(w.buf[:0], &recs[i])
		w.buf = append(w.buf, '\n')
		if _, err := w.bw.Write(w.buf); err != nil {
			w.err = err
			return i, err
		}
	}
	return len(recs), nil
}

// AppendJSONL appends r as one JSON object in the JSONL codec's row format
// (no newline), for writers that stream rows themselves (replay's journal).
func AppendJSONL(b []byte, r *Record) []byte { return appendJSONRecord(b, r) }

// appendJSONRecord appends r as one JSON object (no newline).
func appendJSONRecord(b []byte, r *Record) []byte {
	b = append(b, `{"seq":`...)
	b = strconv.AppendInt(b, r.Seq, 10)
	b = append(b, `,"arrival_ns":`...)
	b = strconv.AppendInt(b, r.ArrivalNs, 10)
	if r.Session != 0 {
		b = append(b, `,"session":`...)
		b = strconv.AppendInt(b, r.Session, 10)
	}
	if r.Turn != 0 {
		b = append(b, `,"turn":`...)
		b = strconv.AppendInt(b, int64(r.Turn), 10)
	}
	b = appendJSONStringField(b, `,"category":`, r.Category)
	if r.PrefixTokens != 0 {
		b = append(b, `,"prefix_tokens":`...)
		b = strconv.AppendInt(b, int64(r.PrefixTokens), 10)
	}
	if len(r.PrefixBlocks) > 0 {
		b = append(b, `,"prefix_blocks":[`...)
		b = appendInts64(b, r.PrefixBlocks, ',')
		b = append(b, ']')
	}
	b = append(b, `,"input_tokens":`...)
	b = strconv.AppendInt(b, int64(r.InputTokens), 10)
	b = append(b, `,"output_tokens":`...)
	b = strconv.AppendInt(b, int64(r.OutputTokens), 10)
	b = appendJSONStringField(b, `,"model":`, r.Model)
	b = appendJSONStringField(b, `,"api":`, r.API)
	b = appendJSONStringField(b, `,"class":`, r.Class)
	b = appendJSONStringField(b, `,"run":`, r.Run)
	b = appendJSONIntField(b, `,"scheduled_ns":`, r.ScheduledNs)
	b = appendJSONIntField(b, `,"sent_ns":`, r.SentNs)
	b = appendJSONIntField(b, `,"first_token_ns":`, r.FirstTokenNs)
	b = appendJSONIntField(b, `,"last_token_ns":`, r.LastTokenNs)
	if len(r.ChunkNs) > 0 {
		b = append(b, `,"chunk_ns":[`...)
		b = appendInts64(b, r.ChunkNs, ',')
		b = append(b, ']')
	}
	if len(r.ChunkTokens) > 0 {
		b = append(b, `,"chunk_tokens":[`...)
		b = appendInts32(b, r.ChunkTokens, ',')
		b = append(b, ']')
	}
	b = appendJSONIntField(b, `,"server_prompt_tokens":`, int64(r.ServerPromptTokens))
	b = appendJSONIntField(b, `,"server_output_tokens":`, int64(r.ServerOutputTokens))
	b = appendJSONIntField(b, `,"server_cached_tokens":`, int64(r.ServerCachedTokens))
	b = appendJSONIntField(b, `,"server_queue_ns":`, r.ServerQueueNs)
	b = appendJSONIntField(b, `,"server_prefill_ns":`, r.ServerPrefillNs)
	b = appendJSONIntField(b, `,"server_decode_ns":`, r.ServerDecodeNs)
	b = appendJSONIntField(b, `,"server_preemptions":`, int64(r.ServerPreemptions))
	b = appendJSONStringField(b, `,"status":`, r.Status)
	if r.HTTPStatus != 0 {
		b = append(b, `,"http_status":`...)
		b = strconv.AppendInt(b, int64(r.HTTPStatus), 10)
	}
	b = appendJSONStringField(b, `,"error":`, r.Error)
	b = appendJSONStringField(b, `,"request_id":`, r.RequestID)
	return append(b, '}')
}

// appendJSONIntField writes an outcome number unless it is NotReported.
func appendJSONIntField(b []byte, key string, v int64) []byte {
	if v == NotReported {
		return b
	}
	b = append(b, key...)
	return strconv.AppendInt(b, v, 10)
}

func appendJSONStringField(b []byte, key, v string) []byte {
	if v == "" {
		return b
	}
	b = append(b, key...)
	return appendJSONString(b, v)
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string; invalid UTF-8 becomes U+FFFD
// as with encoding/json.
func appendJSONString(b []byte, s string) []byte {
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

// lineReader reads lines of any length up to maxLineBytes and tells whether
// the last one ended without a newline.
type lineReader struct {
	br      *bufio.Reader
	long    []byte
	line    int64 // 1-based number of the line last returned
	partial bool  // the last line returned had no trailing newline
}

// next returns the next line without its "\n" or "\r\n". err is io.EOF at
// the end, or the underlying error (io.ErrUnexpectedEOF for a truncated zstd
// stream).
func (l *lineReader) next() ([]byte, error) {
	l.long = l.long[:0]
	for {
		frag, err := l.br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			if len(l.long)+len(frag) > maxLineBytes {
				l.line++
				return nil, fmt.Errorf("line longer than %d bytes", maxLineBytes)
			}
			l.long = append(l.long, frag...)
			continue
		}
		line := frag
		if len(l.long) > 0 {
			l.long = append(l.long, frag...)
			line = l.long
		}
		if err != nil {
			if len(line) == 0 {
				return nil, err
			}
			if err != io.EOF {
				// Data before a read error (truncated zstd): a partial line.
				l.line++
				l.partial = true
				return line, err
			}
			l.line++
			l.partial = true
			return bytes.TrimSuffix(line, []byte{'\r'}), nil
		}
		l.line++
		line = line[:len(line)-1]
		return bytes.TrimSuffix(line, []byte{'\r'}), nil
	}
}

type jsonlReader struct {
	name   string
	lr     lineReader
	closer io.Closer
	meta   Meta
	stats  ReadStats
	strict bool
	peeked []byte
	err    error // sticky
	intern interner
}

// NewJSONLReader reads JSON lines from r; name is used in error messages.
// Close closes r if it is an io.Closer.
func NewJSONLReader(r io.Reader, name string, o OpenOptions) (Reader, error) {
	var closer io.Closer
	if c, ok := r.(io.Closer); ok {
		closer = c
	}
	br, ok := r.(*bufio.Reader)
	if !ok {
		br = bufio.NewReaderSize(r, 256<<10)
	}
	return newJSONLReader(br, closer, name, o, false)
}

func newJSONLReader(br *bufio.Reader, closer io.Closer, name string, o OpenOptions, zst bool) (*jsonlReader, error) {
	jr := &jsonlReader{name: displayName(name), lr: lineReader{br: br}, strict: o.Strict, closer: closer}
	jr.meta.SchemaVersion = SchemaVersion
	line, err := jr.lr.next()
	if err != nil && err != io.EOF {
		if len(line) == 0 {
			return nil, fmt.Errorf("read: %w", truncErr(err))
		}
	}
	line = bytes.TrimPrefix(line, utf8BOM)
	if err == nil && bytes.Contains(line, []byte(`"`+jsonlMetaKey+`"`)) {
		var hdr map[string]Meta
		if err := json.Unmarshal(line, &hdr); err != nil {
			return nil, &RowError{File: jr.name, Line: 1, Err: fmt.Errorf("%w: metadata line is not valid JSON", ErrMalformed)}
		}
		jr.meta = hdr[jsonlMetaKey]
		if err := jr.meta.CheckVersion(); err != nil {
			return nil, err
		}
		if jr.meta.SchemaVersion == "" {
			jr.meta.SchemaVersion = SchemaVersion
		}
	} else if line != nil || err != nil {
		jr.peeked = append([]byte{}, line...)
		if err != nil && err != io.EOF {
			jr.err = jr.truncated(err)
		}
	}
	return jr, nil
}

// truncErr maps a decompressor's unexpected EOF to ErrTruncated.
func truncErr(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w (%v)", ErrTruncated, err)
	}
	return err
}

func (r *jsonlReader) truncated(err error) error {
	r.stats.Truncated = true
	if !errors.Is(err, ErrTruncated) {
		err = fmt.Errorf("%w: %w", ErrTruncated, err)
	}
	return &RowError{File: r.name, Line: r.lr.line, Err: err}
}

func (r *jsonlReader) Meta() Meta       { return r.meta }
func (r *jsonlReader) Stats() ReadStats { return r.stats }
func (r *jsonlReader) Close() error {
	if r.closer != nil {
		return r.closer.Close()
	}
	return nil
}

func (r *jsonlReader) Read(recs []Record) (int, error) {
	n := 0
	for n < len(recs) {
		var line []byte
		var rerr error
		if r.peeked != nil {
			line, r.peeked = r.peeked, nil
		} else {
			if r.err != nil {
				return n, r.err
			}
			line, rerr = r.lr.next()
			if rerr == io.EOF {
				r.err = io.EOF
				return n, io.EOF
			}
			if rerr != nil && len(line) == 0 {
				if errors.Is(rerr, io.ErrUnexpectedEOF) {
					r.err = r.truncated(truncErr(rerr))
				} else {
					r.err = &RowError{File: r.name, Line: r.lr.line + 1, Err: rerr}
				}
				return n, r.err
			}
		}
		if rerr != nil {
			// A partial line followed by a read error: the stream is cut.
			r.err = r.truncated(truncErr(rerr))
			return n, r.err
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		rec := &recs[n]
		rec.resetForDecode()
		if err := decodeJSONRecord(line, rec, &r.intern); err != nil {
			if err == errMetaLine {
				continue
			}
			if r.lr.partial && r.err == nil {
				// The last line, cut short: the file was truncated.
				r.err = r.truncated(fmt.Errorf("%w: last line is incomplete", ErrTruncated))
				return n, r.err
			}
			rerr := &RowError{File: r.name, Line: r.lr.line, Err: err}
			if r.strict {
				r.err = rerr
				return n, rerr
			}
			r.stats.Skipped++
			if r.stats.FirstSkip == nil {
				r.stats.FirstSkip = rerr
			}
			continue
		}
		n++
		r.stats.Rows++
	}
	return n, nil
}

// resetForDecode makes r a NewRecord, keeping list capacity.
func (r *Record) resetForDecode() {
	pb, cn, ct := r.PrefixBlocks[:0], r.ChunkNs[:0], r.ChunkTokens[:0]
	*r = Record{}
	r.ClearOutcome()
	r.PrefixBlocks, r.ChunkNs, r.ChunkTokens = pb, cn, ct
}

// interner shares one string per distinct label (model, category, ...).
type interner struct {
	m map[string]string
}

func (in *interner) bytes(b []byte) string {
	if s, ok := in.m[string(b)]; ok {
		return s
	}
	s := string(b)
	if in.m == nil {
		in.m = map[string]string{}
	}
	if len(in.m) < 4096 {
		in.m[s] = s
	}
	return s
}

func (in *interner) str(s string) string {
	if v, ok := in.m[s]; ok {
		return v
	}
	if in.m == nil {
		in.m = map[string]string{}
	}
	if len(in.m) < 4096 {
		in.m[s] = s
	}
	return s
}

// jsonDecoder is a small hand-written JSON parser for one flat record
// object: known keys go straight into the Record, unknown keys are skipped.
type jsonDecoder struct {
	b    []byte
	i    int
	tmp  []byte
	next int // column expected next (keys usually come in Columns order)
}

// column finds key's column: first by scanning forward from the expected
// position (our writer emits keys in Columns order, skipping defaults), then
// by map lookup.
func (d *jsonDecoder) column(key []byte) (int, bool) {
	for i := d.next; i < numColumns; i++ {
		if string(key) == Columns[i] {
			d.next = i + 1
			return i, true
		}
	}
	col, ok := columnIndex[string(key)]
	return col, ok
}

var errJSON = fmt.Errorf("%w: not a JSON record", ErrMalformed)

// errMetaLine marks a metadata line after the first (concatenated files):
// readers skip it.
var errMetaLine = errors.New("metadata line")

func (d *jsonDecoder) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\r', '\n':
			d.i++
		default:
			return
		}
	}
}

// decodeJSONRecord parses one JSON object into rec (which starts as
// NewRecord), then validates it.
func decodeJSONRecord(line []byte, rec *Record, in *interner) error {
	d := jsonDecoder{b: line}
	d.ws()
	if d.i >= len(d.b) || d.b[d.i] != '{' {
		return errJSON
	}
	d.i++
	d.ws()
	if d.i < len(d.b) && d.b[d.i] == '}' {
		d.i++
	} else {
		for {
			d.ws()
			key, ok := d.str()
			if !ok {
				return errJSON
			}
			d.ws()
			if d.i >= len(d.b) || d.b[d.i] != ':' {
				return errJSON
			}
			d.i++
			d.ws()
			if err := d.field(key, rec, in); err != nil {
				return err
			}
			d.ws()
			if d.i >= len(d.b) {
				return errJSON
			}
			if d.b[d.i] == ',' {
				d.i++
				continue
			}
			if d.b[d.i] == '}' {
				d.i++
				break
			}
			return errJSON
		}
	}
	d.ws()
	if d.i != len(d.b) {
		return errJSON
	}
	rec.normalizeLists()
	if err := rec.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return nil
}

func (d *jsonDecoder) null() bool {
	if bytes.HasPrefix(d.b[d.i:], []byte("null")) {
		d.i += 4
		return true
	}
	return false
}

func (d *jsonDecoder) field(key []byte, r *Record, in *interner) error {
	col, ok := d.column(key)
	if !ok {
		if string(key) == jsonlMetaKey {
			return errMetaLine
		}
		if !d.skip(0) {
			return errJSON
		}
		return nil
	}
	if d.null() {
		return nil
	}
	var err error
	switch col {
	case colSeq:
		r.Seq, err = d.int64()
	case colArrivalNs:
		r.ArrivalNs, err = d.int64()
	case colSession:
		r.Session, err = d.int64()
	case colTurn:
		r.Turn, err = d.int32()
	case colCategory:
		r.Category, err = d.label(in)
	case colPrefixTokens:
		r.PrefixTokens, err = d.int32()
	case colPrefixBlocks:
		r.PrefixBlocks, err = d.list64(r.PrefixBlocks[:0])
	case colInputTokens:
		r.InputTokens, err = d.int32()
	case colOutputTokens:
		r.OutputTokens, err = d.int32()
	case colModel:
		r.Model, err = d.label(in)
	case colAPI:
		r.API, err = d.label(in)
	case colClass:
		r.Class, err = d.label(in)
	case colRun:
		r.Run, err = d.label(in)
	case colScheduledNs:
		r.ScheduledNs, err = d.int64()
	case colSentNs:
		r.SentNs, err = d.int64()
	case colFirstTokenNs:
		r.FirstTokenNs, err = d.int64()
	case colLastTokenNs:
		r.LastTokenNs, err = d.int64()
	case colChunkNs:
		r.ChunkNs, err = d.list64(r.ChunkNs[:0])
	case colChunkTokens:
		r.ChunkTokens, err = d.list32(r.ChunkTokens[:0])
	case colServerPromptTokens:
		r.ServerPromptTokens, err = d.int32()
	case colServerOutputTokens:
		r.ServerOutputTokens, err = d.int32()
	case colServerCachedTokens:
		r.ServerCachedTokens, err = d.int32()
	case colServerQueueNs:
		r.ServerQueueNs, err = d.int64()
	case colServerPrefillNs:
		r.ServerPrefillNs, err = d.int64()
	case colServerDecodeNs:
		r.ServerDecodeNs, err = d.int64()
	case colServerPreemptions:
		r.ServerPreemptions, err = d.int32()
	case colStatus:
		r.Status, err = d.label(in)
	case colHTTPStatus:
		r.HTTPStatus, err = d.int32()
	case colError:
		r.Error, err = d.label(in)
	case colRequestID:
		var s []byte
		var ok bool
		if s, ok = d.str(); !ok {
			err = errJSON
		} else {
			r.RequestID = string(s)
		}
	}
	if err != nil {
		return fmt.Errorf("%w: column %s: %w", ErrMalformed, Columns[col], err)
	}
	return nil
}

var errNotString = errors.New("not a string")

func (d *jsonDecoder) label(in *interner) (string, error) {
	s, ok := d.str()
	if !ok {
		return "", errNotString
	}
	return in.bytes(s), nil
}

// str parses a JSON string; the result aliases the line or d.tmp.
func (d *jsonDecoder) str() ([]byte, bool) {
	if d.i >= len(d.b) || d.b[d.i] != '"' {
		return nil, false
	}
	d.i++
	start := d.i
	for d.i < len(d.b) {
		c := d.b[d.i]
		if c == '"' {
			s := d.b[start:d.i]
			d.i++
			return s, true
		}
		if c == '\\' {
			return d.strSlow(start)
		}
		if c < 0x20 {
			return nil, false
		}
		d.i++
	}
	return nil, false
}

func (d *jsonDecoder) strSlow(start int) ([]byte, bool) {
	out := append(d.tmp[:0], d.b[start:d.i]...)
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			d.i++
			d.tmp = out
			return out, true
		case c < 0x20:
			return nil, false
		case c != '\\':
			out = append(out, c)
			d.i++
			continue
		}
		d.i++
		if d.i >= len(d.b) {
			return nil, false
		}
		e := d.b[d.i]
		d.i++
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
			r, ok := d.hex4()
			if !ok {
				return nil, false
			}
			if utf16IsSurrogate(r) {
				r2 := rune(-1)
				if d.i+1 < len(d.b) && d.b[d.i] == '\\' && d.b[d.i+1] == 'u' {
					save := d.i
					d.i += 2
					if x, ok := d.hex4(); ok {
						r2 = x
					} else {
						d.i = save
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

func (d *jsonDecoder) hex4() (rune, bool) {
	if d.i+4 > len(d.b) {
		return 0, false
	}
	var r rune
	for _, c := range d.b[d.i : d.i+4] {
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
	d.i += 4
	return r, true
}

func utf16IsSurrogate(r rune) bool { return 0xD800 <= r && r < 0xE000 }

func utf16Decode(r1, r2 rune) rune {
	if 0xD800 <= r1 && r1 < 0xDC00 && 0xDC00 <= r2 && r2 < 0xE000 {
		return (r1-0xD800)<<10 | (r2 - 0xDC00) + 0x10000
	}
	return utf8.RuneError
}

var errNotInt = errors.New("not an integer")

// number returns the bytes of a JSON number.
func (d *jsonDecoder) number() []byte {
	start := d.i
	for d.i < len(d.b) {
		switch c := d.b[d.i]; {
		case '0' <= c && c <= '9', c == '-', c == '+', c == '.', c == 'e', c == 'E':
			d.i++
			continue
		}
		break
	}
	return d.b[start:d.i]
}

func (d *jsonDecoder) int64() (int64, error) {
	num := d.number()
	// Fast path: optional '-' then up to 18 digits.
	neg := false
	s := num
	if len(s) > 0 && s[0] == '-' {
		neg, s = true, s[1:]
	}
	if len(s) > 0 && len(s) <= 18 {
		var v int64
		ok := true
		for _, c := range s {
			if c < '0' || c > '9' {
				ok = false
				break
			}
			v = v*10 + int64(c-'0')
		}
		if ok {
			if neg {
				v = -v
			}
			return v, nil
		}
	}
	if v, err := strconv.ParseInt(string(num), 10, 64); err == nil {
		return v, nil
	}
	// Integral floats such as 1e3 or 12.0.
	f, err := strconv.ParseFloat(string(num), 64)
	if err != nil || f != float64(int64(f)) || f >= 9.2e18 || f <= -9.2e18 {
		return 0, errNotInt
	}
	return int64(f), nil
}

func (d *jsonDecoder) int32() (int32, error) {
	v, err := d.int64()
	if err != nil {
		return 0, err
	}
	if v < -1<<31 || v > 1<<31-1 {
		return 0, errors.New("out of int32 range")
	}
	return int32(v), nil
}

func (d *jsonDecoder) list64(dst []int64) ([]int64, error) { return decodeList(d, dst, d.int64) }

func (d *jsonDecoder) list32(dst []int32) ([]int32, error) { return decodeList(d, dst, d.int32) }

// decodeList appends the integers of a JSON array to dst, each parsed by elem.
func decodeList[T int32 | int64](d *jsonDecoder, dst []T, elem func() (T, error)) ([]T, error) {
	if d.i >= len(d.b) || d.b[d.i] != '[' {
		return nil, errors.New("not a list")
	}
	d.i++
	d.ws()
	if d.i < len(d.b) && d.b[d.i] == ']' {
		d.i++
		return dst, nil
	}
	for {
		d.ws()
		v, err := elem()
		if err != nil {
			return nil, err
		}
		dst = append(dst, v)
		d.ws()
		if d.i >= len(d.b) {
			return nil, errJSON
		}
		switch d.b[d.i] {
		case ',':
			d.i++
		case ']':
			d.i++
			return dst, nil
		default:
			return nil, errJSON
		}
	}
}

// skip skips one JSON value of any kind (for unknown keys).
func (d *jsonDecoder) skip(depth int) bool {
	if depth > 64 || d.i >= len(d.b) {
		return false
	}
	switch c := d.b[d.i]; {
	case c == '"':
		_, ok := d.str()
		return ok
	case c == '{' || c == '[':
		closeCh := byte('}')
		if c == '[' {
			closeCh = ']'
		}
		d.i++
		d.ws()
		if d.i < len(d.b) && d.b[d.i] == closeCh {
			d.i++
			return true
		}
		for {
			d.ws()
			if c == '{' {
				if _, ok := d.str(); !ok {
					return false
				}
				d.ws()
				if d.i >= len(d.b) || d.b[d.i] != ':' {
					return false
				}
				d.i++
				d.ws()
			}
			if !d.skip(depth + 1) {
				return false
			}
			d.ws()
			if d.i >= len(d.b) {
				return false
			}
			if d.b[d.i] == ',' {
				d.i++
				continue
			}
			if d.b[d.i] == closeCh {
				d.i++
				return true
			}
			return false
		}
	case c == 't':
		if bytes.HasPrefix(d.b[d.i:], []byte("true")) {
			d.i += 4
			return true
		}
	case c == 'f':
		if bytes.HasPrefix(d.b[d.i:], []byte("false")) {
			d.i += 5
			return true
		}
	case c == 'n':
		return d.null()
	case c == '-' || ('0' <= c && c <= '9'):
		num := d.number()
		_, err := strconv.ParseFloat(string(num), 64)
		return err == nil || errors.Is(err, strconv.ErrRange)
	}
	return false
}
