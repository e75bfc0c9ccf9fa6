package capture

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tokentrace/tokentrace/traces"
)

// vLLM request logs (--enable-log-requests, --enable-log-outputs):
//
//	INFO 07-24 10:15:32 [logger.py:43] Received request ID: prompt: '...', params: SamplingParams(...), prompt_token_ids: [...], prompt_embeds shape: None, lora_request: None.
//	INFO 11-20 10:00:00 [logger.py:40] Received request ID: params: SamplingParams(...), lora_request: None.
//	DEBUG 11-20 10:00:00 [logger.py:30] Request ID details: prompt: '...', prompt_token_ids: [...], prompt_embeds shape: None.
//	INFO 11-20 10:00:01 [logger.py:70] Generated response ID[ (streaming delta| (streaming complete)]: output: '...', output_token_ids: [...], finish_reason: stop
//	INFO ... Aborted request(s) ID.
//
// Lines may start with "(APIServer pid=N) " and carry ANSI colours. The
// timestamp has no year (Options.Year) and no zone (UTC assumed).

// vreq is a request in flight: its redacted fields so far and what its
// output lines said. The parser holds one per request id until the end of
// the input (vLLM logs interleave requests), and never any text.
type vreq struct {
	e         redacted
	line      int64
	havePr    bool
	outIDs    int32
	deltaSum  int32
	textToks  int32
	aborted   bool
	maxTokens int32
}

type vllmParser struct {
	em        *emitter
	pending   map[string]*vreq
	order     []*vreq
	lastMonth int
	yearAdd   int
}

func newVLLMParser(em *emitter) *vllmParser {
	return &vllmParser{em: em, pending: map[string]*vreq{}}
}

var vllmLevels = []string{"INFO", "DEBUG", "WARNING", "ERROR", "CRITICAL"}

// header splits a log line into its time and message; ok=false for lines
// that are not vLLM log records.
func (p *vllmParser) header(line []byte) (t int64, msg string, ok bool) {
	s := string(line)
	if strings.IndexByte(s, 0x1b) >= 0 {
		s = stripANSI(s)
	}
	s = strings.TrimLeft(s, " ")
	if strings.HasPrefix(s, "(") {
		i := strings.IndexByte(s, ')')
		if i < 0 {
			return 0, "", false
		}
		s = strings.TrimLeft(s[i+1:], " ")
	}
	level, rest, found := strings.Cut(s, " ")
	if !found || !slices.Contains(vllmLevels, level) {
		return 0, "", false
	}
	rest = strings.TrimLeft(rest, " ")
	if len(rest) < 14 || rest[2] != '-' || rest[5] != ' ' || rest[8] != ':' || rest[11] != ':' {
		return 0, "", false
	}
	mo, e1 := strconv.Atoi(rest[0:2])
	d, e2 := strconv.Atoi(rest[3:5])
	h, e3 := strconv.Atoi(rest[6:8])
	mi, e4 := strconv.Atoi(rest[9:11])
	sec, e5 := strconv.Atoi(rest[12:14])
	if e1 != nil || e2 != nil || e3 != nil || e4 != nil || e5 != nil || mo < 1 || mo > 12 || d < 1 || d > 31 {
		return 0, "", false
	}
	rest = rest[14:]
	var frac int64
	if len(rest) > 0 && (rest[0] == '.' || rest[0] == ',') {
		j := 1
		for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
			j++
		}
		if f, ok := decimalNs("0."+rest[1:j], 1e9); ok {
			frac = f
		}
		rest = rest[j:]
	}
	// "[file.py:12] msg" or "file.py:12] msg"
	i := strings.Index(rest, "] ")
	if i < 0 {
		return 0, "", false
	}
	msg = rest[i+2:]
	if p.lastMonth != 0 && mo < p.lastMonth {
		p.yearAdd++ // the log crossed New Year
	}
	p.lastMonth = mo
	year := p.em.rd.o.year() + p.yearAdd
	tm := time.Date(year, time.Month(mo), d, h, mi, sec, 0, time.UTC)
	return tm.UnixNano() + frac, msg, true
}

func stripANSI(s string) string {
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == 0x1b && i+1 < len(s) && s[i+1] == '[' {
			j := i + 2
			for j < len(s) && !(s[j] >= '@' && s[j] <= '~') {
				j++
			}
			i = j
			continue
		}
		sb.WriteByte(s[i])
	}
	return sb.String()
}

func (p *vllmParser) req(id string, t int64, lineNo int64) *vreq {
	if r, ok := p.pending[id]; ok {
		return r
	}
	r := &vreq{line: lineNo, outIDs: -1, textToks: -1, maxTokens: -1}
	r.e = redacted{line: lineNo, t: t, inTok: -1, outTok: -1, outcome: noOutcome()}
	r.e.has, r.e.status = true, traces.StatusOK
	p.pending[id] = r
	p.order = append(p.order, r)
	return r
}

func (p *vllmParser) parse(line []byte, lineNo int64) (string, string) {
	if !bytes.Contains(line, []byte("equest")) && !bytes.Contains(line, []byte("Generated response")) {
		p.em.ignored++
		return "", ""
	}
	t, msg, ok := p.header(line)
	if !ok {
		p.em.ignored++
		return "", ""
	}
	switch {
	case strings.HasPrefix(msg, "Received request "):
		id, rest, ok := strings.Cut(msg[len("Received request "):], ": ")
		if !ok || id == "" {
			return KindBadLogLine, ""
		}
		old := strings.HasPrefix(rest, "prompt: ")
		if !old && !strings.HasPrefix(rest, "params: ") {
			return KindBadLogLine, ""
		}
		if _, _, ok := pyString(rest[len("prompt: "):]); old && !ok {
			return KindBadLogLine, ""
		}
		r := p.req(id, t, lineNo)
		r.line = lineNo
		r.e.t = t
		if old {
			return p.prompt(r, rest)
		}
		if m := maxTokensOf(rest); m >= 0 {
			r.maxTokens = m
		}
		return "", ""
	case strings.HasPrefix(msg, "Request ") && strings.Contains(msg, " details: prompt: "):
		id, rest, _ := strings.Cut(msg[len("Request "):], " details: ")
		if _, _, ok := pyString(strings.TrimPrefix(rest, "prompt: ")); !ok || id == "" {
			return KindBadLogLine, ""
		}
		r := p.req(id, t, lineNo)
		return p.prompt(r, rest)
	case strings.HasPrefix(msg, "Generated response "):
		return p.output(msg[len("Generated response "):])
	case strings.HasPrefix(msg, "Aborted request"):
		rest := strings.TrimPrefix(strings.TrimPrefix(msg, "Aborted request(s) "), "Aborted request ")
		rest = strings.TrimSuffix(rest, ".")
		for _, id := range strings.Split(rest, ",") {
			if r, ok := p.pending[strings.TrimSpace(id)]; ok {
				r.aborted = true
			}
		}
		return "", ""
	}
	p.em.ignored++
	return "", ""
}

// prompt parses "prompt: R, params: P, prompt_token_ids: L, ..." (old) or
// "prompt: R, prompt_token_ids: L, ..." (details line).
func (p *vllmParser) prompt(r *vreq, rest string) (string, string) {
	text, after, ok := pyString(strings.TrimPrefix(rest, "prompt: "))
	if !ok {
		return KindBadLogLine, ""
	}
	if m := maxTokensOf(after); m >= 0 {
		r.maxTokens = m
	}
	var ids []int
	haveIDs := false
	if i := strings.LastIndex(after, "prompt_token_ids: "); i >= 0 {
		ids, haveIDs = pyIntList(after[i+len("prompt_token_ids: "):])
	}
	rd := p.em.rd
	e := &r.e
	e.api = traces.APICompletions
	switch {
	case haveIDs:
		e.inTok, e.tokSrc = int32(len(ids)), SourceTokenIDs
		e.srvIn = int32(len(ids))
	case text != "":
		ids = rd.encode(text)
		e.inTok, e.tokSrc = int32(len(ids)), rd.o.Tokenizer
	default:
		return "", ""
	}
	e.blocks = rd.blocksOf(ids)
	r.havePr = true
	return "", ""
}

func (p *vllmParser) output(s string) (string, string) {
	id, rest, ok := strings.Cut(s, ":")
	if !ok {
		return KindBadLogLine, ""
	}
	mode := ""
	if i := strings.IndexByte(id, ' '); i >= 0 {
		id, mode = id[:i], id[i+1:]
	}
	r, ok := p.pending[id]
	if !ok {
		return KindUnmatched, ""
	}
	rest = strings.TrimPrefix(rest, " ")
	var ids []int
	haveIDs := false
	if i := strings.LastIndex(rest, "output_token_ids: "); i >= 0 {
		ids, haveIDs = pyIntList(rest[i+len("output_token_ids: "):])
	}
	delta := strings.Contains(mode, "streaming delta")
	if strings.HasSuffix(mode, "details") {
		if haveIDs && !delta {
			r.outIDs = int32(len(ids))
		} else if haveIDs {
			r.deltaSum += int32(len(ids))
		}
		return "", ""
	}
	switch {
	case delta && haveIDs:
		r.deltaSum += int32(len(ids))
	case delta:
		if text, _, ok := pyString(strings.TrimPrefix(rest, "output: ")); ok {
			r.deltaSum += int32(len(p.em.rd.encode(text)))
		}
	case haveIDs:
		r.outIDs = int32(len(ids))
	default:
		if text, _, ok := pyString(strings.TrimPrefix(rest, "output: ")); ok {
			r.textToks = int32(len(p.em.rd.encode(text)))
		}
	}
	return "", ""
}

func (p *vllmParser) end() []LineError {
	var problems []LineError
	for _, r := range p.order {
		e := &r.e
		if !r.havePr {
			problems = append(problems, LineError{File: p.em.name, Line: r.line, Kind: KindNoPrompt})
			continue
		}
		switch {
		case r.outIDs >= 0:
			e.outTok, e.srvOut = r.outIDs, r.outIDs
		case r.deltaSum > 0:
			e.outTok = r.deltaSum
		case r.textToks >= 0:
			e.outTok = r.textToks
		case r.maxTokens >= 0:
			e.outTok = r.maxTokens
		default:
			e.outTok = 0
		}
		if r.aborted {
			e.status = traces.StatusDisconnect
		}
		p.em.add(*e)
	}
	p.pending, p.order = map[string]*vreq{}, nil
	return problems
}

// maxTokensOf finds "max_tokens=N" in a SamplingParams repr (the last one:
// stop strings come earlier in the repr).
func maxTokensOf(s string) int32 {
	i := strings.LastIndex(s, "max_tokens=")
	if i < 0 {
		return -1
	}
	s = s[i+len("max_tokens="):]
	j := 0
	for j < len(s) && s[j] >= '0' && s[j] <= '9' {
		j++
	}
	v, err := strconv.Atoi(s[:j])
	if err != nil || v > 1<<30 {
		return -1
	}
	return int32(v)
}

// pyString decodes a Python repr string literal at the start of s ('...'
// or "..."; None gives ""), returning the rest after it.
func pyString(s string) (val, rest string, ok bool) {
	if strings.HasPrefix(s, "None") {
		return "", s[4:], true
	}
	if len(s) == 0 || (s[0] != '\'' && s[0] != '"') {
		return "", s, false
	}
	q := s[0]
	var sb strings.Builder
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case c == q:
			return sb.String(), s[i+1:], true
		case c == '\\' && i+1 < len(s):
			i++
			switch s[i] {
			case 'n':
				sb.WriteByte('\n')
			case 't':
				sb.WriteByte('\t')
			case 'r':
				sb.WriteByte('\r')
			case '\\', '\'', '"':
				sb.WriteByte(s[i])
			case 'x', 'u', 'U':
				n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[s[i]]
				if i+n >= len(s) {
					return "", s, false
				}
				v, err := strconv.ParseUint(s[i+1:i+1+n], 16, 32)
				if err != nil || !utf8.ValidRune(rune(v)) {
					return "", s, false
				}
				sb.WriteRune(rune(v))
				i += n
			default:
				sb.WriteByte('\\')
				sb.WriteByte(s[i])
			}
		default:
			sb.WriteByte(c)
		}
	}
	return "", s, false
}

// pyIntList parses "[1, 2, 3]" (or "None": ok=false) at the start of s.
func pyIntList(s string) ([]int, bool) {
	if len(s) == 0 || s[0] != '[' {
		return nil, false
	}
	ids := make([]int, 0, 64)
	v, in := 0, false
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			if v > 1<<40 {
				return nil, false
			}
			v = v*10 + int(c-'0')
			in = true
		case c == ',' || c == ']':
			if in {
				ids = append(ids, v)
			}
			v, in = 0, false
			if c == ']' {
				return ids, true
			}
		case c == ' ':
		default:
			return nil, false
		}
	}
	return nil, false
}
