package capture

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/maphash"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/pkoukk/tiktoken-go"
	"github.com/tokentrace/tokentrace/traces"
)

// Token sources (Stats.TokensFrom keys besides the tokenizer's name).
const (
	SourceUsage    = "usage"
	SourceTokenIDs = "token_ids"
)

// entry is one parsed request before redaction is finished. It holds no
// text: only counts, times, provisional ids and in-memory hashes.
type entry struct {
	input  int32
	line   int64
	t      int64 // Unix ns
	model  string
	api    string
	dead   bool
	inTok  int32
	outTok int32
	tokSrc string
	// provisional category (-1 none), blocks, field session (0 none)
	cat      int32
	blocks   []int32
	sessKey  uint64
	prefixes []uint64 // chat message prefix hashes (in memory only)
	nSys     int
	// outcome
	ttft, e2e                int64
	status                   string
	httpStatus               int32
	errMsg                   string
	srvIn, srvOut, srvCached int32
	queue, prefill, decode   int64
	hasOutcome               bool
}

func newEntry(st *state, lineNo int64) *entry {
	st.entries = append(st.entries, entry{
		input: st.curInput, line: lineNo, cat: -1, inTok: -1, outTok: -1,
		ttft: -1, e2e: -1, srvIn: -1, srvOut: -1, srvCached: -1, queue: -1, prefill: -1, decode: -1,
	})
	return &st.entries[len(st.entries)-1]
}

type category struct {
	digest       [32]byte
	prefixTokens int32
}

type state struct {
	o         Options
	key       []byte
	ephemeral bool
	mac       hash.Hash
	seed      maphash.Seed
	enc       *tiktoken.Tiktoken
	encErr    error
	fast      *fastBPE
	fastErr   error

	entries      []entry
	problems     map[string]*Problem
	strictErr    error
	stats        Stats
	inputFormats []string
	curInput     int32
	curName      string
	models       map[string]string // interning

	cats      []category
	catIndex  map[[32]byte]int32
	blockDig  [][32]byte
	blockIdx  map[[32]byte]int32
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

func newState(o Options) (*state, error) {
	st := &state{
		o: o, key: o.Key, seed: maphash.MakeSeed(),
		problems: map[string]*Problem{}, models: map[string]string{},
		catIndex: map[[32]byte]int32{}, blockIdx: map[[32]byte]int32{},
		toolsMemo: map[string]toolsInfo{}, msgCount: map[uint64]int32{}, msgIDs: map[uint64][]int{},
	}
	if len(st.key) == 0 {
		st.key = make([]byte, 32)
		if _, err := rand.Read(st.key); err != nil {
			return nil, fmt.Errorf("generate ephemeral key: %w", err)
		}
		st.ephemeral = true
	}
	st.mac = st.newMAC()
	st.stats.TokensFrom = map[string]int64{}
	return st, nil
}

func (st *state) newMAC() hash.Hash { return hmac.New(sha256.New, st.key) }

func (st *state) encoder() (*tiktoken.Tiktoken, error) {
	if st.enc == nil && st.encErr == nil {
		st.enc, st.encErr = encoder(st.o.Tokenizer)
	}
	return st.enc, st.encErr
}

var errNoFast = errors.New("no fast encoder")

// testEncode replaces the tokenizer in fuzz tests (tiktoken under coverage
// instrumentation runs a few inputs per second).
var testEncode func(string) []int

// encode tokenizes text with the configured encoding.
func (st *state) encode(text string) []int {
	if text == "" {
		return nil
	}
	if testEncode != nil {
		return testEncode(text)
	}
	if st.fast == nil && st.fastErr == nil {
		st.fast, st.fastErr = fastEncoder(st.o.Tokenizer)
		if st.fast == nil && st.fastErr == nil {
			st.fastErr = errNoFast
		}
	}
	if st.fast != nil {
		return st.fast.encode(nil, text)
	}
	enc, err := st.encoder()
	if err != nil {
		return nil
	}
	return enc.EncodeOrdinary(text)
}

func (st *state) intern(s string) string {
	if v, ok := st.models[s]; ok {
		return v
	}
	if len(st.models) > 10000 {
		return s
	}
	st.models[s] = s
	return s
}

// keyedDigest is HMAC-SHA256(key, domain || 0 || parts joined by 0x1e).
func (st *state) keyedDigest(domain string, parts ...string) [32]byte {
	st.mac.Reset()
	st.mac.Write([]byte(domain))
	st.mac.Write([]byte{0})
	for i, p := range parts {
		if i > 0 {
			st.mac.Write([]byte{0x1e})
		}
		st.mac.Write([]byte(p))
	}
	var d [32]byte
	st.mac.Sum(d[:0])
	return d
}

func (st *state) hashString(domain, s string) uint64 {
	var h maphash.Hash
	h.SetSeed(st.seed)
	h.WriteString(domain)
	h.WriteByte(0)
	h.WriteString(s)
	return h.Sum64() | 1
}

// Chat request processing, shared by openai-jsonl and litellm.

// chatMsg is one message. Content and tool calls stay raw JSON (aliasing the
// line) until needed.
type chatMsg struct {
	Role      string   `json:"role"`
	Name      string   `json:"name"`
	Content   rawValue `json:"content"`
	ToolCalls rawValue `json:"tool_calls"`
	FuncCall  rawValue `json:"function_call"`
}

// rawValue keeps a JSON value's bytes without copying (valid while the line
// is being parsed).
type rawValue []byte

func (r *rawValue) UnmarshalJSON(b []byte) error {
	if len(b) == 4 && string(b) == "null" {
		*r = nil
		return nil
	}
	*r = b
	return nil
}

// text returns the text of a content value: a string, or the text parts of
// an array of content parts, joined by newlines. Non-text parts add nothing.
func contentText(r rawValue) string {
	if len(r) == 0 {
		return ""
	}
	switch r[0] {
	case '"':
		return unquoteJSON(r)
	case '[':
		var parts []struct {
			Type string   `json:"type"`
			Text rawValue `json:"text"`
		}
		if json.Unmarshal(r, &parts) != nil {
			return ""
		}
		var sb strings.Builder
		for i, p := range parts {
			if len(p.Text) > 0 && p.Text[0] == '"' {
				if i > 0 && sb.Len() > 0 {
					sb.WriteByte('\n')
				}
				sb.WriteString(unquoteJSON(p.Text))
			}
		}
		return sb.String()
	}
	return ""
}

// unquoteJSON decodes a JSON string literal (already validated).
func unquoteJSON(b []byte) string {
	if len(b) < 2 {
		return ""
	}
	inner := b[1 : len(b)-1]
	if !containsByte(inner, '\\') {
		return string(inner)
	}
	var s string
	if json.Unmarshal(b, &s) != nil {
		return ""
	}
	return s
}

func containsByte(b []byte, c byte) bool {
	for _, x := range b {
		if x == c {
			return true
		}
	}
	return false
}

// canonTools returns the canonical JSON of a tools/functions value (keys
// sorted, compact), memoized by raw bytes.
func (st *state) canonTools(raw rawValue) toolsInfo {
	if len(raw) == 0 || string(raw) == "[]" {
		return toolsInfo{}
	}
	if ti, ok := st.toolsMemo[string(raw)]; ok {
		return ti
	}
	var v any
	ti := toolsInfo{}
	if json.Unmarshal(raw, &v) == nil {
		b, _ := json.Marshal(v)
		ti.canon = string(b)
	}
	if len(st.toolsMemo) > 4096 {
		clear(st.toolsMemo)
	}
	st.toolsMemo[string(raw)] = ti
	return ti
}

func (st *state) toolsIDs(ti *toolsInfo, raw rawValue) []int {
	if ti.ids == nil && ti.canon != "" {
		ti.ids = st.encode(ti.canon)
		if ti.ids == nil {
			ti.ids = []int{}
		}
		st.toolsMemo[string(raw)] = *ti
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
func (st *state) msgHash(m *chatMsg) uint64 {
	var h maphash.Hash
	h.SetSeed(st.seed)
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
func (st *state) msgTokens(m *chatMsg, h uint64, wantIDs bool) (int, []int) {
	if !wantIDs {
		if n, ok := st.msgCount[h]; ok {
			return int(n), nil
		}
	} else if ids, ok := st.msgIDs[h]; ok {
		return len(ids), ids
	}
	ids := []int{markMsgStart, markMsgRole, markMsgSep}
	ids = append(ids, st.encode(m.Role)...)
	ids = append(ids, st.encode(contentText(m.Content))...)
	if len(m.ToolCalls) > 0 {
		ids = append(ids, st.encode(string(m.ToolCalls))...)
	}
	if len(m.FuncCall) > 0 {
		ids = append(ids, st.encode(string(m.FuncCall))...)
	}
	if m.Name != "" {
		ids = append(ids, markMsgSep)
		ids = append(ids, st.encode(m.Name)...)
	}
	if len(st.msgCount) > 1<<20 {
		clear(st.msgCount)
	}
	st.msgCount[h] = int32(len(ids))
	if wantIDs {
		if st.nMsgIDs > 32<<20 {
			clear(st.msgIDs)
			st.nMsgIDs = 0
		}
		st.msgIDs[h] = ids
		st.nMsgIDs += len(ids)
	}
	return len(ids), ids
}

// chatPrompt fills e's api, category, prefix hashes, input tokens and blocks
// from a chat request. usageIn < 0 means the log has no prompt usage.
func (st *state) chatPrompt(e *entry, msgs []chatMsg, toolsRaw rawValue, usageIn int32) {
	e.api = traces.APIChat
	nSys := 0
	for nSys < len(msgs) && (msgs[nSys].Role == "system" || msgs[nSys].Role == "developer") {
		nSys++
	}
	e.nSys = nSys
	ti := st.canonTools(toolsRaw)
	wantIDs := st.o.BlockSize > 0
	if nSys > 0 || ti.canon != "" {
		parts := make([]string, 0, 2*nSys+1)
		for i := 0; i < nSys; i++ {
			parts = append(parts, msgs[i].Role, contentText(msgs[i].Content))
		}
		parts = append(parts, ti.canon)
		d := st.keyedDigest("category", parts...)
		idx, ok := st.catIndex[d]
		if !ok {
			n := 0
			if ti.canon != "" {
				n += len(st.toolsIDs(&ti, toolsRaw))
			}
			for i := 0; i < nSys; i++ {
				c, _ := st.msgTokens(&msgs[i], st.msgHash(&msgs[i]), false)
				n += c
			}
			idx = int32(len(st.cats))
			st.cats = append(st.cats, category{digest: d, prefixTokens: int32(n)})
			st.catIndex[d] = idx
		}
		e.cat = idx
	}
	wantChat := st.o.Sessions == SessionsAuto || st.o.Sessions == SessionsChat
	if wantChat {
		e.prefixes = make([]uint64, len(msgs))
	}
	var hs [64]uint64
	hashes := hs[:0]
	var chain uint64 = 0x9e3779b97f4a7c15
	for i := range msgs {
		h := st.msgHash(&msgs[i])
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
	ids := st.idsBuf[:0]
	n := 3 // reply priming
	if ti.canon != "" {
		t := st.toolsIDs(&ti, toolsRaw)
		n += len(t)
		if wantIDs {
			ids = append(ids, t...)
		}
	}
	for i := range msgs {
		c, mids := st.msgTokens(&msgs[i], hashes[i], wantIDs)
		n += c
		ids = append(ids, mids...)
	}
	if wantIDs {
		ids = append(ids, markReply, markReply, markReply)
		e.blocks = st.blocksOf(ids)
	}
	st.idsBuf = ids[:0]
	if needCount {
		e.inTok, e.tokSrc = int32(n), st.o.Tokenizer
	} else {
		e.inTok, e.tokSrc = usageIn, SourceUsage
	}
}

// completionPrompt handles a completions request's prompt: a string, an
// array of token ids, or arrays of either (batched prompts count together).
func (st *state) completionPrompt(e *entry, prompt rawValue, usageIn int32) bool {
	e.api = traces.APICompletions
	wantIDs := st.o.BlockSize > 0
	if usageIn >= 0 && !wantIDs {
		e.inTok, e.tokSrc = usageIn, SourceUsage
		return true
	}
	var ids []int
	src := st.o.Tokenizer
	switch {
	case len(prompt) > 0 && prompt[0] == '"':
		ids = st.encode(unquoteJSON(prompt))
	case len(prompt) > 0 && prompt[0] == '[':
		var arr []json.RawMessage
		if json.Unmarshal(prompt, &arr) != nil {
			return false
		}
		for _, a := range arr {
			switch {
			case len(a) > 0 && a[0] == '"':
				ids = append(ids, st.encode(unquoteJSON(a))...)
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
		e.blocks = st.blocksOf(ids)
	}
	if usageIn >= 0 {
		e.inTok, e.tokSrc = usageIn, SourceUsage
	} else {
		e.inTok, e.tokSrc = int32(len(ids)), src
	}
	return true
}

// blocksOf chains keyed hashes over BlockSize-token blocks of ids (the last
// block may be partial) and returns provisional block ids.
func (st *state) blocksOf(ids []int) []int32 {
	bs := st.o.BlockSize
	if bs <= 0 || len(ids) == 0 {
		return nil
	}
	out := make([]int32, 0, (len(ids)+bs-1)/bs)
	var prev [32]byte
	for i := 0; i < len(ids); i += bs {
		blk := ids[i:min(i+bs, len(ids))]
		buf := st.byteBuf[:0]
		buf = append(buf, "block\x00"...)
		buf = append(buf, prev[:]...)
		for _, t := range blk {
			buf = binary.LittleEndian.AppendUint32(buf, uint32(t))
		}
		st.byteBuf = buf
		st.mac.Reset()
		st.mac.Write(buf)
		st.mac.Sum(prev[:0])
		idx, ok := st.blockIdx[prev]
		if !ok {
			idx = int32(len(st.blockDig))
			st.blockDig = append(st.blockDig, prev)
			st.blockIdx[prev] = idx
		}
		out = append(out, idx)
	}
	return out
}

// outputTokens sets e's output length from usage, or by tokenizing texts.
func (st *state) outputText(texts []string) int32 {
	n := 0
	for _, t := range texts {
		n += len(st.encode(t))
	}
	return int32(n)
}

// sessionField sets e's session key from a session or user id (hashed in
// memory, never written).
func (st *state) sessionField(e *entry, kind, id string) {
	if id == "" || st.o.Sessions == SessionsChat || st.o.Sessions == SessionsNone {
		return
	}
	e.sessKey = st.hashString(kind, id)
}

// finish redacts, renumbers and builds the records and metadata.
func (st *state) finish() (*Result, error) {
	live := make([]int, 0, len(st.entries))
	for i := range st.entries {
		if !st.entries[i].dead {
			live = append(live, i)
		}
	}
	E := st.entries
	sort.SliceStable(live, func(a, b int) bool {
		x, y := &E[live[a]], &E[live[b]]
		if x.t != y.t {
			return x.t < y.t
		}
		if x.input != y.input {
			return x.input < y.input
		}
		return x.line < y.line
	})
	k := st.o.MinCategorySize

	// Sessions: provisional ids in arrival order.
	prov := make([]int32, len(live))
	var nProv int32
	fieldSess := map[uint64]int32{}
	convEnd := map[uint64]int32{}
	for i, ei := range live {
		e := &E[ei]
		prov[i] = -1
		switch {
		case st.o.Sessions == SessionsNone:
		case e.sessKey != 0:
			id, ok := fieldSess[e.sessKey]
			if !ok {
				id = nProv
				nProv++
				fieldSess[e.sessKey] = id
			}
			prov[i] = id
		case len(e.prefixes) > 0:
			for j := len(e.prefixes) - 2; j >= e.nSys && j >= 0; j-- {
				if p, ok := convEnd[e.prefixes[j]]; ok {
					prov[i] = prov[p]
					break
				}
			}
			if prov[i] < 0 {
				prov[i] = nProv
				nProv++
			}
			convEnd[e.prefixes[len(e.prefixes)-1]] = int32(i)
		}
	}
	sessCount := make([]int32, nProv)
	for _, p := range prov {
		if p >= 0 {
			sessCount[p]++
		}
	}
	sessFinal := make([]int64, nProv)
	sessTurns := make([]int32, nProv)
	var nSess int64

	// Categories.
	catCount := make([]int32, len(st.cats))
	for _, ei := range live {
		if c := E[ei].cat; c >= 0 {
			catCount[c]++
		}
	}
	catLabel := make([]string, len(st.cats))
	nCat := 0
	for c := range catCount {
		if catCount[c] > 0 && catCount[c] < int32(k) {
			st.stats.CategoriesDropped++
		}
	}

	// Blocks: count requests per block.
	blockCount := make([]int32, len(st.blockDig))
	for _, ei := range live {
		for _, b := range E[ei].blocks {
			blockCount[b]++
		}
	}
	blockFinal := make([]int64, len(st.blockDig))
	var nextBlock int64

	recs := make([]traces.Record, len(live))
	t0 := int64(0)
	if len(live) > 0 {
		t0 = E[live[0]].t
	}
	tokensFrom := map[string]int64{}
	for i, ei := range live {
		e := &E[ei]
		r := traces.NewRecord()
		r.Seq = int64(i)
		r.ArrivalNs = e.t - t0
		if p := prov[i]; p >= 0 && sessCount[p] >= 2 {
			if sessFinal[p] == 0 {
				nSess++
				sessFinal[p] = nSess
			}
			sessTurns[p]++
			r.Session = sessFinal[p]
			r.Turn = sessTurns[p]
		}
		if c := e.cat; c >= 0 && catCount[c] >= int32(k) {
			if catLabel[c] == "" {
				nCat++
				if st.o.KeepHashes {
					catLabel[c] = hex.EncodeToString(st.cats[c].digest[:16])
				} else {
					catLabel[c] = "c" + strconv.Itoa(nCat)
				}
			}
			r.Category = catLabel[c]
			r.PrefixTokens = st.cats[c].prefixTokens
		}
		if len(e.blocks) > 0 {
			want := len(e.blocks)
			if bs := st.o.BlockSize; e.inTok >= 0 {
				// Follow the token count in use (usage may differ a little
				// from the tokenizer), bounded against absurd usage numbers.
				want = min((int(e.inTok)+bs-1)/bs, max(len(e.blocks), maxBlocks))
			}
			r.PrefixBlocks = make([]int64, 0, want)
			for j, b := range e.blocks {
				if j >= want {
					break
				}
				if blockCount[b] >= int32(k) {
					if blockFinal[b] == 0 {
						if st.o.KeepHashes {
							blockFinal[b] = int64(binary.BigEndian.Uint64(st.blockDig[b][:8]) >> 1)
						} else {
							nextBlock++
							blockFinal[b] = nextBlock
						}
					}
					r.PrefixBlocks = append(r.PrefixBlocks, blockFinal[b])
				} else {
					nextBlock++
					r.PrefixBlocks = append(r.PrefixBlocks, uniqueBlock(st.o.KeepHashes, nextBlock))
				}
			}
			for len(r.PrefixBlocks) < want {
				nextBlock++
				r.PrefixBlocks = append(r.PrefixBlocks, uniqueBlock(st.o.KeepHashes, nextBlock))
			}
		}
		r.InputTokens = max(e.inTok, 0)
		r.OutputTokens = max(e.outTok, 0)
		r.Model = e.model
		r.API = e.api
		tokensFrom[e.tokSrc]++
		if e.hasOutcome {
			r.Run = RunLabel
			r.ScheduledNs, r.SentNs = r.ArrivalNs, r.ArrivalNs
			if e.ttft >= 0 {
				r.FirstTokenNs = r.ArrivalNs + e.ttft
			}
			if e.e2e >= 0 {
				r.LastTokenNs = r.ArrivalNs + e.e2e
			}
			r.ServerPromptTokens, r.ServerOutputTokens, r.ServerCachedTokens = e.srvIn, e.srvOut, e.srvCached
			r.ServerQueueNs, r.ServerPrefillNs, r.ServerDecodeNs = e.queue, e.prefill, e.decode
			r.Status = e.status
			if r.Status == "" {
				r.Status = traces.StatusOK
			}
			r.HTTPStatus = e.httpStatus
			r.Error = e.errMsg
		}
		recs[i] = r
	}
	st.stats.Requests = int64(len(recs))
	st.stats.Categories = nCat
	st.stats.Sessions = int(nSess)
	st.stats.TokensFrom = tokensFrom
	st.stats.Problems = sortProblems(st.problems)

	// Metadata.
	m := traces.NewMeta("capture:" + strings.Join(uniq(st.inputFormats), "+"))
	srcs := make([]string, 0, len(tokensFrom))
	for s := range tokensFrom {
		srcs = append(srcs, s)
	}
	sort.Slice(srcs, func(a, b int) bool {
		return tokensFrom[srcs[a]] > tokensFrom[srcs[b]] || tokensFrom[srcs[a]] == tokensFrom[srcs[b]] && srcs[a] < srcs[b]
	})
	m.Tokenizer = strings.Join(srcs, "+")
	m.BlockSize = st.o.BlockSize
	m.KThreshold = k
	if st.ephemeral {
		m.KeyFingerprint = EphemeralFingerprint
	} else {
		m.KeyFingerprint = Fingerprint(st.key)
	}
	m.Set("capture.prefix_tokenizer", st.o.Tokenizer)
	m.Set("capture.sessions", st.o.Sessions)
	if st.o.KeepHashes {
		m.Set("capture.keep_hashes", "true")
	}
	if len(recs) > 0 {
		start := time.Unix(0, t0)
		m.Set("capture.start", startString(start, st.o.KeepStart))
		if st.o.KeepStart {
			m.Set("capture.start_precision", "exact")
		} else {
			m.Set("capture.start_precision", "hour")
		}
	}
	perInput := make([]map[string]int64, len(st.inputFormats))
	for _, ei := range live {
		e := &E[ei]
		if int(e.input) < len(perInput) {
			if perInput[e.input] == nil {
				perInput[e.input] = map[string]int64{}
			}
			perInput[e.input][e.tokSrc]++
		}
	}
	for i, f := range st.inputFormats {
		p := "capture.input." + strconv.Itoa(i+1)
		m.Set(p+".format", f)
		var ss []string
		for s := range perInput[i] {
			ss = append(ss, s)
		}
		sort.Strings(ss)
		m.Set(p+".tokens", strings.Join(ss, "+"))
		if f == FormatVLLM {
			m.Set(p+".time_precision", "1s")
			m.Set(p+".year", strconv.Itoa(st.year()))
			m.Set(p+".timezone", "UTC (assumed; vLLM logs carry none)")
		}
	}
	return &Result{Records: recs, Meta: m, Stats: st.stats}, nil
}

// maxBlocks bounds the padding of one request's prefix_blocks.
const maxBlocks = 1 << 14

func uniqueBlock(keepHashes bool, n int64) int64 {
	if keepHashes {
		return -n // never collides with a (non-negative) digest prefix
	}
	return n
}

func uniq(ss []string) []string {
	var out []string
	for _, s := range ss {
		if !contains(out, s) {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return []string{"none"}
	}
	return out
}

func (st *state) year() int {
	if st.o.Year > 0 {
		return st.o.Year
	}
	return time.Now().UTC().Year()
}
