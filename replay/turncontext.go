package replay

import (
	"bytes"
	"math"
	"sync"

	"github.com/tokentrace/tokentrace/traces"
)

// Context growth (closed sessions): a follow-up is sent as the prompt of
// the call whose context it continues (contextFrom), then what the server
// returned for that call, then new tokens that bring the total to the
// trace's input_tokens. The server's prefix cache then sees the context
// production's did, not the trace's prefix blocks alone. A fan-out's
// children all continue their parent's context, so their prompts share it
// as a prefix.
//
// State lives only while a session is open: the item of a call that a
// follow-up continues keeps its prompt (a slice of its own request body)
// and what came back (turnCtx); each follow-up's item that continues it
// takes it (read only, shared by a fan-out's children) when its body is
// built, at its dependencies' finish, and a call nothing continues keeps
// none.

// turnCtx is one turn's context as its follow-up extends it.
type turnCtx struct {
	api string
	// prompt is the JSON array the turn sent: the "prompt" token ids on
	// /v1/completions, the "messages" on chat. It aliases the turn's body.
	prompt []byte
	// promptTokens is the prompt's length in tokens: the ids sent, or on
	// chat the server's prompt_tokens (the turn's target when not reported).
	promptTokens int
	// outText is the returned text, still JSON-escaped (chat); outIDs the
	// returned token ids, comma-separated (vLLM's return_token_ids on
	// /v1/completions), nOutIDs how many, badIDs set when a token_ids value
	// could not be read.
	outText []byte
	// outTokens is the output's length as the server counted it (the
	// requested length when it did not say).
	outTokens int
	outIDs    []byte
	nOutIDs   int
	badIDs    bool
}

// capture keeps what one streamed chunk returned.
func (t *turnCtx) capture(c *chunk) {
	if t.api == traces.APIChat {
		t.outText = append(t.outText, c.text...)
		return
	}
	if len(c.ids) == 0 {
		return
	}
	in := bytes.TrimSpace(c.ids)
	if len(in) < 2 || in[0] != '[' || in[len(in)-1] != ']' {
		t.badIDs = true
		return
	}
	in = bytes.TrimSpace(in[1 : len(in)-1])
	if len(in) == 0 {
		return
	}
	n := 1
	for _, ch := range in {
		switch {
		case ch == ',':
			n++
		case ch >= '0' && ch <= '9', ch == ' ', ch == '\n', ch == '\t', ch == '\r':
		default:
			t.badIDs = true // negative, fractional or not a number
			return
		}
	}
	if len(t.outIDs) > 0 {
		t.outIDs = append(t.outIDs, ',')
	}
	t.outIDs = append(t.outIDs, in...)
	t.nOutIDs += n
}

// contextFrom is the dependency whose context c continues, of deps (c's
// dependencies in the selection): the only one; for a join, its
// parent_seq, or without one the dependency sent first (the call that
// spawned the others is sent before them). The others' work reaches c as
// new tokens (tool results), not as its conversation.
func contextFrom(c *traces.Record, deps []*traces.Record) *traces.Record {
	if len(deps) == 1 {
		return deps[0]
	}
	var first *traces.Record
	for _, d := range deps {
		if d.Seq == c.ParentSeq {
			return d
		}
		if first == nil || d.ArrivalNs < first.ArrivalNs || d.ArrivalNs == first.ArrivalNs && d.Seq < first.Seq {
			first = d
		}
	}
	return first
}

// grownFrom is the call whose context c continues (nil when context growth
// is off or c is not a follow-up).
func (r *runner) grownFrom(c *traces.Record) *traces.Record {
	if r.graph == nil || r.o.NoContextGrowth {
		return nil
	}
	r.graph.mu.Lock()
	defer r.graph.mu.Unlock()
	return r.graph.from[c]
}

// keepsContext says some follow-up continues rec's context, so rec's item
// keeps its prompt and what the server returned.
func (r *runner) keepsContext(rec *traces.Record) bool {
	return r.graph != nil && !r.o.NoContextGrowth && r.graph.continuedBy(rec) > 0
}

// heldCtx is a finished call's context while follow-ups that continue it
// have not taken it: ctx (nil when the call failed) and how many are left.
type heldCtx struct {
	ctx  *turnCtx
	left int
}

// holdContext keeps rec's context (nil when rec failed) for the follow-ups
// that continue it.
func (r *runner) holdContext(rec *traces.Record, c *turnCtx) {
	r.ctxMu.Lock()
	r.ctxOf[rec] = &heldCtx{ctx: c, left: r.graph.continuedBy(rec)}
	r.ctxMu.Unlock()
}

// releaseContext hands c the context it continues (nil when none or its
// call failed); the last follow-up to take it frees it.
func (r *runner) releaseContext(c *traces.Record) *turnCtx {
	from := r.grownFrom(c)
	if from == nil {
		return nil
	}
	r.ctxMu.Lock()
	defer r.ctxMu.Unlock()
	h := r.ctxOf[from]
	if h == nil {
		return nil
	}
	if h.left--; h.left <= 0 {
		delete(r.ctxOf, from)
	}
	return h.ctx
}

// grownPrompt appends the prompt array of rec, which continues prev's
// context, as prev's prompt, what the server returned for prev and new units
// making rec's input_tokens. ok is false (nothing appended) when the
// context is already longer than rec's input; the caller then sends a fresh
// prompt. guessed reports that the server returned no token ids, so the
// output's place holds as many ids of the run's own (the server's cache
// then misses the output part).
//
// On chat the returned text is counted as r.textTokens estimates the
// server's tokenizer reads it; it.textEst and it.textOut record that
// estimate, which the turn's prompt_tokens then corrects (observeText).
func (r *runner) grownPrompt(dst []byte, it *item, prev *turnCtx, api string) (b []byte, ok, guessed bool) {
	rec := it.rec
	in := max(int(rec.InputTokens), 1)
	if api == traces.APIChat {
		// The template adds about one calibration overhead per new
		// exchange (the assistant message's end, the user message's
		// header, the generation prompt), as it did for the first turn.
		text := r.textTokens(prev.outTokens)
		room := in - prev.promptTokens - text - r.chat.overhead
		if room < 1 {
			return dst, false, false
		}
		it.textEst, it.textOut = text, prev.outTokens
		dst = append(dst, prev.prompt[:len(prev.prompt)-1]...)
		dst = append(dst, `,{"role":"assistant","content":"`...)
		dst = append(dst, prev.outText...)
		dst = append(dst, `"},{"role":"user","content":"`...)
		dst = r.prompts.appendFreshWords(dst, rec, r.chat.words(room+r.chat.overhead))
		return append(dst, `"}]`...), true, false
	}
	out := prev.outTokens
	guessed = prev.nOutIDs == 0 || prev.badIDs
	if !guessed {
		out = prev.nOutIDs
	}
	room := in - prev.promptTokens - out
	if room < 0 {
		return dst, false, false
	}
	dst = append(dst, prev.prompt[:len(prev.prompt)-1]...)
	if guessed {
		if out > 0 {
			dst = append(dst, ',')
			dst = r.prompts.appendFreshIDs(dst, rec, out, saltOutput)
		}
	} else {
		dst = append(dst, ',')
		dst = append(dst, prev.outIDs...)
	}
	if room > 0 {
		dst = append(dst, ',')
		dst = r.prompts.appendFreshIDs(dst, rec, room, 0)
	}
	return append(dst, ']'), true, guessed
}

const saltOutput = 0x6f75747075740000 // "output"

// textRatio learns, over the run, how many prompt tokens the server makes
// of the text it returned per output token: a tokenizer need not read its
// own output back as the same tokens (the built-in simulator's filler
// words are one output token each but up to three prompt tokens).
type textRatio struct {
	mu        sync.Mutex
	text, out float64
}

// textTokens estimates the prompt tokens of the text of out output tokens.
func (r *runner) textTokens(out int) int {
	t := &r.textRatio
	t.mu.Lock()
	ratio := 1.0
	if t.out > 0 {
		ratio = t.text / t.out
	}
	t.mu.Unlock()
	return int(math.Round(float64(out) * ratio))
}

// observeText corrects the estimate from a grown chat turn (it) that came
// back with the server's prompt_tokens: what the prompt had beyond its
// input_tokens (or lacked) is put down to the returned text it carried.
func (r *runner) observeText(it *item, rec *traces.Record) {
	if it.textOut <= 0 || rec.ServerPromptTokens <= 0 || !rec.OK() {
		return
	}
	text := it.textEst + int(rec.ServerPromptTokens) - max(int(rec.InputTokens), 1)
	if text < 0 {
		return
	}
	t := &r.textRatio
	t.mu.Lock()
	t.text += float64(text)
	t.out += float64(it.textOut)
	t.mu.Unlock()
}

// freshUnits calls emit for n units unique to rec (no prefix blocks, no
// category prefix), salted by unique.
func (b *promptBuilder) freshUnits(rec *traces.Record, n int, unique uint64, emit func(u uint64)) {
	base := splitmix64(b.runSalt ^ splitmix64(uint64(rec.Seq)^saltUnique) ^ unique ^ 0x67726f77) // "grow"
	for j := 0; j < n; j++ {
		emit(splitmix64(base + uint64(j)))
	}
}

// appendFreshIDs appends n comma-separated token ids unique to rec.
func (b *promptBuilder) appendFreshIDs(dst []byte, rec *traces.Record, n int, unique uint64) []byte {
	return b.appendUnits(dst, b.freshUnits, rec, n, unique, true)
}

// appendFreshWords appends n space-separated words unique to rec.
func (b *promptBuilder) appendFreshWords(dst []byte, rec *traces.Record, n int) []byte {
	return b.appendUnits(dst, b.freshUnits, rec, n, 0, false)
}
