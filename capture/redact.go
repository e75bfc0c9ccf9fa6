package capture

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash"
	"hash/maphash"
	"strconv"

	"github.com/pkoukk/tiktoken-go"
	"github.com/tokentrace/tokentrace/traces"
)

// The redact stage is the only code that reads what a person wrote. It
// turns a parsed request, whose text aliases the log line, into a redacted
// request before the parser reads the next line.

// Token sources (Stats.TokensFrom keys besides the tokenizer's name).
const (
	SourceUsage    = "usage"
	SourceTokenIDs = "token_ids"
)

// redacted is one request after redaction. It cannot carry text: besides
// numbers it holds keyed digests (category, blocks), in-memory hashes
// (session field, message prefixes), the model name (which leaves capture by
// design) and words from fixed vocabularies (api, token source, and the
// outcome's status and error). TestRedactedHoldsNoText pins this.
type redacted struct {
	input  int32
	line   int64
	t      int64 // Unix ns
	model  string
	api    string
	inTok  int32
	outTok int32
	tokSrc string
	// cat is the keyed digest of the system messages and tools (hasCat);
	// prefixTokens is their token count as this request saw it.
	cat          [32]byte
	hasCat       bool
	prefixTokens int32
	// blocks are the first 64 bits of each prefix block's keyed digest.
	blocks []uint64
	// sessKey is the in-memory hash of a session or user field (0 none).
	sessKey uint64
	// sessDigest (Options.Part only) is the keyed 63-bit digest of the
	// session key: the session or user field, else the chat's messages up
	// to its first non-system one (0 none). It leaves capture as the
	// session id of a part.
	sessDigest uint64
	// span and parent are in-memory hashes of this call's span id and of
	// the span id of the call that spawned it (0 none); the records stage
	// turns parent into a seq.
	span, parent uint64
	// prefixes chain the hashes of the chat messages (in memory only); the
	// first nSys are system messages.
	prefixes []uint64
	nSys     int
	outcome
}

// outcome is what the log says happened to a request. Status and error are
// words capture chooses, never the server's text.
type outcome struct {
	has       bool
	ttft, e2e int64
	// finish is when the response ended, as an offset from the arrival
	// (the gateway's or span's end; -1 = not logged, then e2e).
	finish                   int64
	status                   string
	httpStatus               int32
	errMsg                   string
	srvIn, srvOut, srvCached int32
	queue, prefill, decode   int64
}

// noOutcome is an outcome with every measurement unreported.
func noOutcome() outcome {
	return outcome{ttft: -1, e2e: -1, finish: -1, srvIn: -1, srvOut: -1, srvCached: -1, queue: -1, prefill: -1, decode: -1}
}

// redactor holds the key, the tokenizer and caches bounded in size; it
// keeps no per-request state. Each parsing goroutine has its own.
type redactor struct {
	o       Options
	mac     hash.Hash
	seed    maphash.Seed
	enc     *tiktoken.Tiktoken
	encErr  error
	fast    *fastBPE
	fastErr error

	catTokens map[[32]byte]int32
	toolsMemo map[string]toolsInfo
	msgCount  map[uint64]int32
	msgIDs    map[uint64][]int
	nMsgIDs   int
	idsBuf    []int
	byteBuf   []byte
}

type toolsInfo struct {
	canon string
	ids   []int
}

// newRedactor returns a redactor keyed with key; seed keys the in-memory
// hashes, which must agree across the goroutines of one capture.
func newRedactor(o Options, key []byte, seed maphash.Seed) *redactor {
	return &redactor{
		o: o, mac: hmac.New(sha256.New, key), seed: seed,
		catTokens: map[[32]byte]int32{}, toolsMemo: map[string]toolsInfo{},
		msgCount: map[uint64]int32{}, msgIDs: map[uint64][]int{},
	}
}

// Prompt kinds of a parsed request.
const (
	promptNone       = iota // usage numbers only
	promptChat              // messages and tools
	promptCompletion        // a completions prompt
)

// redact turns q into a redacted request; ok=false means q.prompt is not a
// valid completions prompt.
func (rd *redactor) redact(q *request) (e redacted, ok bool) {
	e = redacted{line: q.line, t: q.t, model: q.model, inTok: -1, outTok: -1, outcome: q.outcome}
	switch q.kind {
	case promptChat:
		rd.chatPrompt(&e, q.msgs, q.tools, q.usageIn)
	case promptCompletion:
		if !rd.completionPrompt(&e, q.prompt, q.usageIn) {
			return e, false
		}
	default:
		e.inTok, e.tokSrc = q.usageIn, SourceUsage
	}
	if q.sessID != "" && rd.o.Sessions != SessionsChat && rd.o.Sessions != SessionsNone {
		e.sessKey = rd.hashString(q.sessKind, q.sessID)
		if rd.o.Part {
			e.sessDigest = digest63(rd.keyedDigest("session", q.sessKind, q.sessID))
		}
	}
	if q.spanID != "" {
		e.span = rd.hashString("span", q.scope+"\x00"+q.spanID)
	}
	if q.parentID != "" {
		e.parent = rd.hashString("span", q.scope+"\x00"+q.parentID)
	}
	rd.output(&e, q)
	return e, true
}

// output sets e's output length from usage, the response text, or the
// request's max_tokens (successful requests only).
func (rd *redactor) output(e *redacted, q *request) {
	switch {
	case q.usageOut >= 0:
		e.outTok = q.usageOut
	case len(q.choices) > 0:
		n := 0
		for _, c := range q.choices {
			for _, raw := range []rawValue{c.Message.Content, c.Delta.Content, c.Text} {
				if t := contentText(raw); t != "" {
					n += len(rd.encode(t))
				}
			}
			for _, raw := range []rawValue{c.Message.ToolCalls, c.Delta.ToolCalls} {
				if len(raw) > 0 {
					n += len(rd.encode(string(raw)))
				}
			}
		}
		e.outTok = int32(n)
	case q.maxTok >= 0 && (e.status == "" || e.status == traces.StatusOK):
		e.outTok = q.maxTok
	default:
		e.outTok = 0
	}
}

func (rd *redactor) encoder() (*tiktoken.Tiktoken, error) {
	if rd.enc == nil && rd.encErr == nil {
		rd.enc, rd.encErr = encoder(rd.o.Tokenizer)
	}
	return rd.enc, rd.encErr
}

var errNoFast = errors.New("no fast encoder")

// testEncode replaces the tokenizer in fuzz tests (tiktoken under coverage
// instrumentation runs a few inputs per second).
var testEncode func(string) []int

// encode tokenizes text with the configured encoding.
func (rd *redactor) encode(text string) []int {
	if text == "" {
		return nil
	}
	if testEncode != nil {
		return testEncode(text)
	}
	if rd.fast == nil && rd.fastErr == nil {
		rd.fast, rd.fastErr = fastEncoder(rd.o.Tokenizer)
		if rd.fast == nil && rd.fastErr == nil {
			rd.fastErr = errNoFast
		}
	}
	if rd.fast != nil {
		return rd.fast.encode(nil, text)
	}
	enc, err := rd.encoder()
	if err != nil {
		return nil
	}
	return enc.EncodeOrdinary(text)
}

// keyedDigest is HMAC-SHA256(key, domain || 0 || parts joined by 0x1e).
func (rd *redactor) keyedDigest(domain string, parts ...string) [32]byte {
	rd.mac.Reset()
	rd.mac.Write([]byte(domain))
	rd.mac.Write([]byte{0})
	for i, p := range parts {
		if i > 0 {
			rd.mac.Write([]byte{0x1e})
		}
		rd.mac.Write([]byte(p))
	}
	var d [32]byte
	rd.mac.Sum(d[:0])
	return d
}

// digest63 is the first 63 bits of d, never 0: a session id of a part.
func digest63(d [32]byte) uint64 {
	return max(binary.BigEndian.Uint64(d[:8])>>1, 1)
}

// hashString is an in-memory hash of s (never 0).
func (rd *redactor) hashString(domain, s string) uint64 {
	var h maphash.Hash
	h.SetSeed(rd.seed)
	h.WriteString(domain)
	h.WriteByte(0)
	h.WriteString(s)
	return h.Sum64() | 1
}

// canonTools returns the canonical JSON of a tools/functions value (keys
// sorted, compact), memoized by raw bytes.
func (rd *redactor) canonTools(raw rawValue) toolsInfo {
	if len(raw) == 0 || string(raw) == "[]" {
		return toolsInfo{}
	}
	if ti, ok := rd.toolsMemo[string(raw)]; ok {
		return ti
	}
	var v any
	ti := toolsInfo{}
	if json.Unmarshal(raw, &v) == nil {
		b, _ := json.Marshal(v)
		ti.canon = string(b)
	}
	if len(rd.toolsMemo) > 4096 {
		clear(rd.toolsMemo)
	}
	rd.toolsMemo[string(raw)] = ti
	return ti
}

func (rd *redactor) toolsIDs(ti *toolsInfo, raw rawValue) []int {
	if ti.ids == nil && ti.canon != "" {
		ti.ids = rd.encode(ti.canon)
		if ti.ids == nil {
			ti.ids = []int{}
		}
		rd.toolsMemo[string(raw)] = *ti
	}
	return ti.ids
}

// Pseudo token ids for chat-format overhead in block streams (never real
// ids: tiktoken vocabularies are far smaller).
const (
	markMsgStart = 1<<31 - 1 - iota
	markMsgRole
	markMsgSep
	markReply
)

// msgHash identifies a message's content (in memory only).
func (rd *redactor) msgHash(m *chatMsg) uint64 {
	var h maphash.Hash
	h.SetSeed(rd.seed)
	h.WriteString(m.Role)
	h.WriteByte(0)
	h.WriteString(m.Name)
	h.WriteByte(0)
	h.Write(m.Content)
	h.WriteByte(0)
	h.Write(m.ToolCalls)
	h.Write(m.FuncCall)
	return h.Sum64()
}

// msgTokens is the token stream of one message, OpenAI-style: three
// overhead tokens, the role, the content, tool calls, and the name (plus one).
// The count is memoized; the ids are memoized while under a memory bound.
func (rd *redactor) msgTokens(m *chatMsg, h uint64, wantIDs bool) (int, []int) {
	if !wantIDs {
		if n, ok := rd.msgCount[h]; ok {
			return int(n), nil
		}
	} else if ids, ok := rd.msgIDs[h]; ok {
		return len(ids), ids
	}
	ids := []int{markMsgStart, markMsgRole, markMsgSep}
	ids = append(ids, rd.encode(m.Role)...)
	ids = append(ids, rd.encode(contentText(m.Content))...)
	if len(m.ToolCalls) > 0 {
		ids = append(ids, rd.encode(string(m.ToolCalls))...)
	}
	if len(m.FuncCall) > 0 {
		ids = append(ids, rd.encode(string(m.FuncCall))...)
	}
	if m.Name != "" {
		ids = append(ids, markMsgSep)
		ids = append(ids, rd.encode(m.Name)...)
	}
	if len(rd.msgCount) > 1<<18 {
		clear(rd.msgCount)
	}
	rd.msgCount[h] = int32(len(ids))
	if wantIDs {
		if rd.nMsgIDs > 1<<20 {
			clear(rd.msgIDs)
			rd.nMsgIDs = 0
		}
		rd.msgIDs[h] = ids
		rd.nMsgIDs += len(ids)
	}
	return len(ids), ids
}

// chatPrompt fills e's api, category, prefix hashes, input tokens and blocks
// from a chat request. usageIn < 0 means the log has no prompt usage.
func (rd *redactor) chatPrompt(e *redacted, msgs []chatMsg, toolsRaw rawValue, usageIn int32) {
	e.api = traces.APIChat
	nSys := 0
	for nSys < len(msgs) && (msgs[nSys].Role == "system" || msgs[nSys].Role == "developer") {
		nSys++
	}
	e.nSys = nSys
	ti := rd.canonTools(toolsRaw)
	wantIDs := rd.o.BlockSize > 0
	if nSys > 0 || ti.canon != "" {
		parts := make([]string, 0, 2*nSys+1)
		for i := 0; i < nSys; i++ {
			parts = append(parts, msgs[i].Role, contentText(msgs[i].Content))
		}
		parts = append(parts, ti.canon)
		d := rd.keyedDigest("category", parts...)
		n, ok := rd.catTokens[d]
		if !ok {
			if ti.canon != "" {
				n += int32(len(rd.toolsIDs(&ti, toolsRaw)))
			}
			for i := 0; i < nSys; i++ {
				c, _ := rd.msgTokens(&msgs[i], rd.msgHash(&msgs[i]), false)
				n += int32(c)
			}
			if len(rd.catTokens) > 1<<16 {
				clear(rd.catTokens)
			}
			rd.catTokens[d] = n
		}
		e.cat, e.hasCat, e.prefixTokens = d, true, n
	}
	wantChat := rd.o.Sessions == SessionsAuto || rd.o.Sessions == SessionsChat
	if wantChat {
		e.prefixes = make([]uint64, len(msgs))
		if rd.o.Part && nSys < len(msgs) {
			// A conversation's root: every turn repeats it.
			root := make([]string, 0, 2*nSys+2)
			for i := 0; i <= nSys; i++ {
				root = append(root, msgs[i].Role, contentText(msgs[i].Content))
			}
			e.sessDigest = digest63(rd.keyedDigest("session-chat", root...))
		}
	}
	var hs [64]uint64
	hashes := hs[:0]
	var chain uint64 = 0x9e3779b97f4a7c15
	for i := range msgs {
		h := rd.msgHash(&msgs[i])
		hashes = append(hashes, h)
		if wantChat {
			chain = (chain^h)*0x100000001b3 + uint64(i)
			chain ^= chain >> 29
			e.prefixes[i] = chain
		}
	}
	needCount := usageIn < 0
	if !needCount && !wantIDs {
		e.inTok, e.tokSrc = usageIn, SourceUsage
		return
	}
	ids := rd.idsBuf[:0]
	n := 3 // reply priming
	if ti.canon != "" {
		t := rd.toolsIDs(&ti, toolsRaw)
		n += len(t)
		if wantIDs {
			ids = append(ids, t...)
		}
	}
	for i := range msgs {
		c, mids := rd.msgTokens(&msgs[i], hashes[i], wantIDs)
		n += c
		ids = append(ids, mids...)
	}
	if wantIDs {
		ids = append(ids, markReply, markReply, markReply)
		e.blocks = rd.blocksOf(ids)
	}
	rd.idsBuf = ids[:0]
	if needCount {
		e.inTok, e.tokSrc = int32(n), rd.o.Tokenizer
	} else {
		e.inTok, e.tokSrc = usageIn, SourceUsage
	}
}

// completionPrompt handles a completions request's prompt: a string, an
// array of token ids, or arrays of either (batched prompts count together).
// The prompt is decoded only when needed: with usage numbers and no blocks
// a malformed prompt is not noticed.
func (rd *redactor) completionPrompt(e *redacted, prompt rawValue, usageIn int32) bool {
	e.api = traces.APICompletions
	wantIDs := rd.o.BlockSize > 0
	if usageIn >= 0 && !wantIDs {
		e.inTok, e.tokSrc = usageIn, SourceUsage
		return true
	}
	var ids []int
	src := rd.o.Tokenizer
	switch {
	case len(prompt) > 0 && prompt[0] == '"':
		ids = rd.encode(unquoteJSON(prompt))
	case len(prompt) > 0 && prompt[0] == '[':
		var arr []json.RawMessage
		if json.Unmarshal(prompt, &arr) != nil {
			return false
		}
		for _, a := range arr {
			switch {
			case len(a) > 0 && a[0] == '"':
				ids = append(ids, rd.encode(unquoteJSON(a))...)
			case len(a) > 0 && a[0] == '[':
				var sub []int
				if json.Unmarshal(a, &sub) != nil {
					return false
				}
				ids = append(ids, sub...)
				src = SourceTokenIDs
			default:
				v, err := strconv.Atoi(string(a))
				if err != nil {
					return false
				}
				ids = append(ids, v)
				src = SourceTokenIDs
			}
		}
	default:
		return false
	}
	if wantIDs {
		e.blocks = rd.blocksOf(ids)
	}
	if usageIn >= 0 {
		e.inTok, e.tokSrc = usageIn, SourceUsage
	} else {
		e.inTok, e.tokSrc = int32(len(ids)), src
	}
	return true
}

// blocksOf chains keyed hashes over BlockSize-token blocks of ids (the last
// block may be partial) and returns the first 64 bits of each digest: two
// blocks are the same when these agree, and KeepHashes writes them.
func (rd *redactor) blocksOf(ids []int) []uint64 {
	bs := rd.o.BlockSize
	if bs <= 0 || len(ids) == 0 {
		return nil
	}
	out := make([]uint64, 0, (len(ids)+bs-1)/bs)
	var prev [32]byte
	for i := 0; i < len(ids); i += bs {
		blk := ids[i:min(i+bs, len(ids))]
		buf := rd.byteBuf[:0]
		buf = append(buf, "block\x00"...)
		buf = append(buf, prev[:]...)
		for _, t := range blk {
			buf = binary.LittleEndian.AppendUint32(buf, uint32(t))
		}
		rd.byteBuf = buf
		rd.mac.Reset()
		rd.mac.Write(buf)
		rd.mac.Sum(prev[:0])
		out = append(out, binary.BigEndian.Uint64(prev[:8]))
	}
	return out
}
