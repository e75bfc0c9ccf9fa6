package replay

import (
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/sim"
	"github.com/tokentrace/tokentrace/traces"
)

// growingTrace makes n chat-like sessions of turns turns each: turn k's
// input is turn k−1's input + its output + 40–100 new tokens, as a
// conversation's context grows; think times are 2–6 ms. shrink, when ≥ 1,
// makes that turn of every session shorter than the context before it.
func growingTrace(n, turns, shrink int, api string, seed uint64) []traces.Record {
	rng := rand.New(rand.NewPCG(seed, 18))
	var recs []traces.Record
	for s := 1; s <= n; s++ {
		start := int64(s) * int64(3*time.Millisecond)
		in, out := int32(0), int32(0)
		for k := range turns {
			r := traces.NewRecord()
			r.Seq, r.Session, r.API = int64(len(recs)), int64(s), api
			r.ArrivalNs = start
			r.InputTokens = in + out + int32(40+rng.IntN(61))
			if k == shrink {
				r.InputTokens = in / 2
			}
			r.OutputTokens = int32(8 + rng.IntN(40))
			if k > 0 {
				r.ThinkNs = int64(2+rng.IntN(5)) * int64(time.Millisecond)
			}
			in, out = r.InputTokens, r.OutputTokens
			recs = append(recs, r)
		}
	}
	return recs
}

// growthSim is an uncontended simulator with prefix caching (the default)
// and room for every session's context.
func growthSim(t *testing.T) *sim.Server {
	t.Helper()
	o := sim.DefaultOptions()
	o.NumGPUBlocks = 50000
	srv, err := sim.Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

// prevTurns maps each result row's seq to the row of the turn before it in
// its session (by seq; sessions are chains here).
func prevTurns(res *Result) map[int64]*traces.Record {
	last := map[int64]*traces.Record{}
	prev := map[int64]*traces.Record{}
	rows := slices.Clone(res.Records)
	slices.SortFunc(rows, func(a, b traces.Record) int { return int(a.Seq - b.Seq) })
	for i := range rows {
		r := &rows[i]
		if p, ok := last[r.Session]; ok {
			prev[r.Seq] = p
		}
		last[r.Session] = r
	}
	return prev
}

// On an uncontended simulator with prefix caching, every follow-up turn
// of a growing conversation hits the cache for what the trace implies it
// reuses, within one block: on /v1/completions the previous turn's prompt
// and output (the simulator returns the output's token ids and caches
// generated tokens' blocks, as vLLM does), on chat the previous prompt
// (the server re-tokenizes the returned text into other ids than it
// generated, so the output's part misses there); without context growth
// the same trace hits almost nothing.
func TestContextGrowthHitsPreviousPrompt(t *testing.T) {
	const bs = 16 // the simulator's block size
	for _, tc := range []struct {
		name, api string
	}{
		{"completions with token ids: the previous prompt's ids are the next prompt's first ids", traces.APICompletions},
		{"chat: the previous messages, the returned text as an assistant message, a new user message", traces.APIChat},
	} {
		t.Run(tc.api, func(t *testing.T) {
			srv := growthSim(t)
			recs := growingTrace(30, 5, -1, tc.api, 7)
			for _, growth := range []bool{true, false} {
				res := closedRun(t, srv.URL, recs, func(o *Options) {
					o.NoContextGrowth = !growth
					o.Run = "grow" + tc.api + map[bool]string{true: "on", false: "off"}[growth]
				})
				prev := prevTurns(res)
				hit, n := 0, 0
				var dev []int
				for i := range res.Records {
					r := &res.Records[i]
					p, ok := prev[r.Seq]
					if !ok {
						continue
					}
					n++
					dev = append(dev, abs(int(r.ServerPromptTokens-r.InputTokens)))
					ctx := int(p.InputTokens + p.ServerOutputTokens)
					if tc.api == traces.APIChat {
						ctx = int(p.ServerPromptTokens)
					}
					if abs(int(r.ServerCachedTokens)-ctx/bs*bs) <= bs {
						hit++
					}
					if growth && tc.api == traces.APICompletions && r.ServerPromptTokens != r.InputTokens {
						t.Errorf("seq %d: the server counted %d prompt tokens, the trace says %d", r.Seq, r.ServerPromptTokens, r.InputTokens)
					}
				}
				ss := res.Summary.Sessions
				slices.Sort(dev)
				t.Logf("%s growth=%v: %d of %d follow-ups hit the implied reuse within a block; prompt_tokens − input_tokens: |p50| %d, |max| %d; %+v", tc.name, growth, hit, n, dev[len(dev)/2], dev[len(dev)-1], ss)
				if n != 120 {
					t.Fatalf("%d follow-ups, want 120", n)
				}
				if !growth {
					if hit > n/10 || ss.ContextGrown != 0 {
						t.Errorf("without growth %d of %d follow-ups hit the implied reuse (%d grown): the test would not tell growth from none", hit, n, ss.ContextGrown)
					}
					continue
				}
				// The server re-tokenizes the returned text; the run learns by
				// how much, so the median prompt is within 2 tokens of the trace.
				if d := dev[len(dev)/2]; d > 2 {
					t.Errorf("median |prompt_tokens − input_tokens| %d, want ≤ 2", d)
				}
				if hit*100 < 99*n {
					t.Errorf("%d of %d follow-ups hit the implied reuse within a block, want ≥ 99 %%", hit, n)
				}
				if ss.ContextGrown != n || ss.ContextFresh != 0 || ss.ContextLost != 0 {
					t.Errorf("counts %+v, want %d grown and none fresh or lost", ss, n)
				}
				if ss.ContextOutputGuessed != 0 {
					t.Errorf("%d turns guessed the output's ids, want none (the simulator returns token ids)", ss.ContextOutputGuessed)
				}
			}
		})
	}
}

// A turn whose trace input is shorter than the context before it (the
// previous prompt + output) is sent a fresh prompt and counted; the turn
// after it grows from that fresh prompt again.
func TestContextGrowthShorterInputFallsBack(t *testing.T) {
	const bs = 16
	for _, api := range []string{traces.APICompletions, traces.APIChat} {
		t.Run(api, func(t *testing.T) {
			srv := growthSim(t)
			recs := growingTrace(10, 5, 2, api, 9)
			res := closedRun(t, srv.URL, recs, func(o *Options) { o.Run = "shrink" + api })
			ss := res.Summary.Sessions
			if ss.ContextFresh != 10 || ss.ContextGrown != 30 {
				t.Errorf("counts %+v, want 10 fresh (turn 3 of each session) and 30 grown", ss)
			}
			prev := prevTurns(res)
			for i := range res.Records {
				r := &res.Records[i]
				p, ok := prev[r.Seq]
				if !ok {
					continue
				}
				turn := r.Seq % 5
				switch {
				case turn == 2 && r.ServerCachedTokens >= bs:
					t.Errorf("seq %d (fresh prompt): %d cached tokens, want under a block", r.Seq, r.ServerCachedTokens)
				case turn == 3 && int(r.ServerCachedTokens) < int(p.ServerPromptTokens)/bs*bs-bs:
					t.Errorf("seq %d (grown from the fresh prompt): %d cached tokens, want ≥ %d", r.Seq, r.ServerCachedTokens, int(p.ServerPromptTokens)/bs*bs-bs)
				}
			}
			var text strings.Builder
			res.Summary.WriteText(&text)
			if !strings.Contains(text.String(), "10 fresh because the trace's input was shorter than the context") {
				t.Errorf("the summary does not say so:\n%s", text.String())
			}
		})
	}
}

// Against a server that returns the output's token ids (vLLM's
// return_token_ids), a follow-up's prompt is exactly the previous prompt,
// those ids and new ids, as long as the trace's input; only turns with a
// follow-up ask for the ids.
func TestContextGrowthUsesReturnedTokenIDs(t *testing.T) {
	f := newFake(0)
	defer f.Close()
	recs := growingTrace(2, 3, -1, traces.APICompletions, 11)
	res := closedRun(t, f.srv.URL, recs, func(o *Options) { o.Model = "fake-model" })
	if ss := res.Summary.Sessions; ss.ContextGrown != 4 || ss.ContextOutputGuessed != 0 {
		t.Errorf("counts %+v, want 4 grown, none guessed", ss)
	}
	bySeq := map[int64]fakeReq{}
	for _, q := range f.requests() {
		seq, err := strconv.ParseInt(q.ID[strings.LastIndexByte(q.ID, '-')+1:], 10, 64)
		if err != nil {
			t.Fatalf("request id %q", q.ID)
		}
		bySeq[seq] = q
	}
	for _, r := range recs {
		q := bySeq[r.Seq]
		if len(q.Prompt) != int(r.InputTokens) {
			t.Errorf("seq %d: %d prompt ids, want %d", r.Seq, len(q.Prompt), r.InputTokens)
		}
		last := r.Seq%3 == 2
		if q.ReturnTokenIDs == last {
			t.Errorf("seq %d: return_token_ids %v, want %v", r.Seq, q.ReturnTokenIDs, !last)
		}
		if r.Seq%3 == 0 {
			continue
		}
		p := bySeq[r.Seq-1]
		want := slices.Clone(p.Prompt)
		for k := range p.MaxTokens {
			want = append(want, 500+k)
		}
		if len(q.Prompt) < len(want) || !slices.Equal(q.Prompt[:len(want)], want) {
			t.Errorf("seq %d: the prompt does not start with the previous prompt and the returned ids", r.Seq)
		}
	}
}

// turnCtx.capture keeps what a turn returned: the answer's text on chat,
// the output's token ids on completions, and marks ids it cannot trust.
func TestTurnCtxCapture(t *testing.T) {
	tests := []struct {
		name   string
		api    string
		chunks []string
		text   string
		ids    string
		n      int
		badIDs bool
	}{
		{
			// Chat text accumulates over chunks, escapes kept as sent.
			name: "chat text", api: traces.APIChat,
			chunks: []string{`{"choices":[{"delta":{"role":"assistant","content":""}}]}`, `{"choices":[{"delta":{"content":"a \"b\""}}]}`, `{"choices":[{"delta":{"content":" c\n"}}]}`},
			text:   `a \"b\" c\n`,
		},
		{
			// Completions ids accumulate over chunks, several per chunk too.
			name: "completions ids", api: traces.APICompletions,
			chunks: []string{`{"choices":[{"text":" a","token_ids":[11]}]}`, `{"choices":[{"text":" b c","token_ids":[ 12 , 13 ]}]}`},
			ids:    "11,12 , 13", n: 3,
		},
		{
			// A completions stream without ids leaves none: the follow-up
			// then guesses the output's place.
			name: "completions without ids", api: traces.APICompletions,
			chunks: []string{`{"choices":[{"text":" a"}]}`},
		},
		{
			// A negative or fractional id is not an id of the vocabulary.
			name: "bad ids", api: traces.APICompletions,
			chunks: []string{`{"choices":[{"text":" a","token_ids":[-1]}]}`, `{"choices":[{"text":" a","token_ids":[1.5]}]}`},
			badIDs: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc := &turnCtx{api: tt.api}
			for _, s := range tt.chunks {
				var c chunk
				if err := parseChunk([]byte(s), &c); err != nil {
					t.Fatalf("parseChunk(%s): %v", s, err)
				}
				tc.capture(&c)
			}
			if string(tc.outText) != tt.text || string(tc.outIDs) != tt.ids || tc.nOutIDs != tt.n || tc.badIDs != tt.badIDs {
				t.Errorf("text %q ids %q (%d, bad %v), want %q %q (%d, bad %v)", tc.outText, tc.outIDs, tc.nOutIDs, tc.badIDs, tt.text, tt.ids, tt.n, tt.badIDs)
			}
		})
	}
}

func abs(x int) int { return max(x, -x) }

// dagTrace is one session drawn as a depth-3 graph: a main call fans out to
// subagents A and B; A spawns its own subagent (two calls); A joins it
// (parent_seq A, after_seqs its subagent's last call); the main call joins
// A and B (after_seqs only, itself listed first). B's input is shorter than
// the main call's context, so it cannot grow from it.
func dagTrace() []traces.Record {
	mk := func(seq, parent int64, after []int64, in, out int32) traces.Record {
		r := traces.NewRecord()
		r.Seq, r.Session, r.ParentSeq, r.AfterSeqs = seq, 1, parent, after
		r.API = traces.APICompletions
		r.InputTokens, r.OutputTokens = in, out
		if parent >= 0 || len(after) > 0 {
			r.ThinkNs = int64(time.Millisecond)
		}
		return r
	}
	return []traces.Record{
		mk(0, -1, nil, 100, 5),              // main
		mk(1, 0, nil, 140, 6),               // subagent A
		mk(2, 0, nil, 50, 7),                // subagent B: shorter than main's context
		mk(3, 1, nil, 170, 8),               // A's own subagent (depth 3)
		mk(4, 3, nil, 200, 9),               // its second call
		mk(5, 1, []int64{4}, 200, 10),       // A joins its subagent
		mk(6, -1, []int64{0, 5, 2}, 300, 3), // main joins A and B
	}
}

// In a fan-out/join graph every follow-up continues one call's context:
// a child its parent's (prompt, returned output ids, new ids), a join its
// parent_seq's, or without one its dependency recorded first (the main
// call, not a subagent's last call). Prompts are exactly input_tokens; B,
// whose input is shorter than its parent's context, gets a fresh prompt
// and is counted; no call is sent before every dependency finished.
func TestContextGrowthFanOutAndJoin(t *testing.T) {
	f := newFake(time.Millisecond)
	defer f.Close()
	recs := dagTrace()
	res := closedRun(t, f.srv.URL, recs, func(o *Options) { o.Model = "fake-model" })
	ss := res.Summary.Sessions
	if ss.ContextGrown != 5 || ss.ContextFresh != 1 || ss.ContextOutputGuessed != 0 || ss.ContextLost != 0 {
		t.Errorf("counts %+v, want 5 grown, 1 fresh (B), none guessed or lost", ss)
	}
	sent := map[int64][]int{}
	for _, q := range f.requests() {
		seq, err := strconv.ParseInt(q.ID[strings.LastIndexByte(q.ID, '-')+1:], 10, 64)
		if err != nil {
			t.Fatalf("request id %q", q.ID)
		}
		sent[seq] = q.Prompt
	}
	// context is what a call's follow-ups continue: its prompt, then the
	// fake's output ids (500+k).
	contextOf := func(seq int64) []int {
		c := slices.Clone(sent[seq])
		for k := range recs[seq].OutputTokens {
			c = append(c, 500+int(k))
		}
		return c
	}
	startsWith := func(seq, from int64) bool {
		p, c := sent[seq], contextOf(from)
		return len(p) > len(c) && slices.Equal(p[:len(c)], c)
	}
	for _, c := range []struct {
		seq, from int64
		want      bool
		why       string
	}{
		{1, 0, true, "subagent A starts from the main call's context"},
		{2, 0, false, "subagent B's input is shorter than the main call's context: fresh"},
		{3, 1, true, "A's subagent starts from A's context (depth 3)"},
		{4, 3, true, "its second call continues it"},
		{5, 1, true, "A's join continues its parent_seq, A"},
		{5, 4, false, "A's join does not continue the subagent it waited for"},
		{6, 0, true, "the main call's join (no parent_seq) continues the dependency recorded first, the main call"},
		{6, 5, false, "the main call's join does not continue A's join"},
	} {
		if got := startsWith(c.seq, c.from); got != c.want {
			t.Errorf("seq %d starts with seq %d's context: %v, want %v (%s)", c.seq, c.from, got, c.want, c.why)
		}
	}
	// The fan-out's children share the main call's prompt as a prefix.
	if p1, p6 := sent[1], sent[6]; !slices.Equal(p1[:100], p6[:100]) || !slices.Equal(p1[:100], sent[0]) {
		t.Error("A and the main call's join do not share the main call's prompt")
	}
	out := map[int64]traces.Record{}
	for _, r := range res.Records {
		out[r.Seq] = r
	}
	for _, r := range recs {
		if got := len(sent[r.Seq]); got != int(r.InputTokens) {
			t.Errorf("seq %d: %d prompt ids, want input_tokens %d", r.Seq, got, r.InputTokens)
		}
		for _, d := range depsOf(&r) {
			if out[r.Seq].SentNs < out[d].LastTokenNs {
				t.Errorf("seq %d sent at %d, before its dependency seq %d finished at %d", r.Seq, out[r.Seq].SentNs, d, out[d].LastTokenNs)
			}
		}
	}
}

// contextFrom picks the call a follow-up continues.
func TestContextFrom(t *testing.T) {
	rec := func(seq, arrival, parent int64) *traces.Record {
		r := traces.NewRecord()
		r.Seq, r.ArrivalNs, r.ParentSeq = seq, arrival, parent
		return &r
	}
	a, b, c := rec(1, 30, -1), rec(2, 10, -1), rec(3, 10, -1)
	for _, tc := range []struct {
		name string
		c    *traces.Record
		deps []*traces.Record
		want *traces.Record
	}{
		{"a chain link or a fan-out child continues its one dependency", rec(9, 0, 1), []*traces.Record{a}, a},
		{"a join continues its parent_seq, even when recorded last", rec(9, 0, 1), []*traces.Record{b, a, c}, a},
		{"a join without parent_seq continues the dependency recorded first", rec(9, 0, -1), []*traces.Record{a, c, b}, b},
		{"a join whose parent_seq is not among its dependencies (outside the window) falls back to the first recorded", rec(9, 0, 7), []*traces.Record{a, c}, c},
	} {
		if got := contextFrom(tc.c, tc.deps); got != tc.want {
			t.Errorf("%s: seq %d, want %d", tc.name, got.Seq, tc.want.Seq)
		}
	}
}

// When the call a fan-out continues fails, every follow-up continuing it
// (both subagents and the main call's join) is sent a fresh prompt and
// counted as lost; the calls below a subagent still grow from it.
func TestContextGrowthParentFailed(t *testing.T) {
	f := newFakeMode(time.Millisecond, func(id string) string {
		if strings.HasSuffix(id, "-0") {
			return "500"
		}
		return ""
	})
	defer f.Close()
	o := DefaultOptions()
	o.URL, o.Model, o.Sessions, o.NoPreflight = f.srv.URL, "fake-model", SessionsClosed, true
	res, err := Run(t.Context(), dagTrace(), traces.NewMeta("t"), o)
	if err != nil {
		t.Fatal(err)
	}
	failed := 0
	for _, r := range res.Records {
		if !r.OK() {
			failed++
		}
	}
	ss := res.Summary.Sessions
	if failed != 1 || ss.ContextLost != 3 || ss.ContextGrown != 3 || ss.ContextFresh != 0 {
		t.Errorf("%d failed, counts %+v; want the main call failed, 3 lost (A, B, the main join), 3 grown (A's subagent's two calls, A's join)", failed, ss)
	}
}

// Against the simulator (prefix caching on, uncontended) every grown call
// of the depth-3 graph, fan-out children and joins included, hits the
// cache for the context it continues (prompt + output, to a whole block,
// within one block); B, sent a fresh prompt, hits less than a block.
func TestContextGrowthFanOutHitsParentCache(t *testing.T) {
	const bs = 16
	srv := growthSim(t)
	recs := dagTrace()
	res := closedRun(t, srv.URL, recs, func(o *Options) { o.Run = "dagsim" })
	out := map[int64]traces.Record{}
	for _, r := range res.Records {
		out[r.Seq] = r
	}
	from := map[int64]int64{1: 0, 3: 1, 4: 3, 5: 1, 6: 0}
	for seq, f := range from {
		p := out[f]
		want := int(p.InputTokens+p.ServerOutputTokens) / bs * bs
		if got := int(out[seq].ServerCachedTokens); got < want-bs || got > want {
			t.Errorf("seq %d cached %d tokens, want %d (seq %d's prompt %d + output %d) within a block", seq, got, want, f, p.InputTokens, p.ServerOutputTokens)
		}
	}
	if got := out[2].ServerCachedTokens; got >= bs {
		t.Errorf("B (fresh prompt) cached %d tokens, want under a block", got)
	}
}

// topLevelTrace is one agent session as capture writes it: top-level calls
// without parent_seq (T0–T4) and a subagent call hanging off T0 by
// parent_seq. Recorded service is 50–60 ms; T3 was sent before T2 finished
// (overlapping it), so production did not wait for T2 there.
func topLevelTrace() []traces.Record {
	ms := int64(time.Millisecond)
	mk := func(seq, parent, arrivalMs, finishMs int64, in int32) traces.Record {
		r := traces.NewRecord()
		r.Seq, r.Session, r.ParentSeq, r.API = seq, 1, parent, traces.APICompletions
		r.ArrivalNs, r.FinishNs = arrivalMs*ms, finishMs*ms
		r.InputTokens, r.OutputTokens = in, 4
		return r
	}
	return []traces.Record{
		mk(0, -1, 0, 50, 100),    // T0
		mk(1, 0, 60, 90, 120),    // its subagent
		mk(2, -1, 100, 150, 130), // T1: think 50 ms after T0
		mk(3, -1, 200, 260, 160), // T2: think 50 ms after T1
		mk(4, -1, 240, 300, 50),  // T3: sent while T2 ran
		mk(5, -1, 400, 460, 200), // T4: think 100 ms after T3
	}
}

// In a session with parent links, the calls without one are chained: each
// waits for the previous top-level call and is due at its finish in this
// replay plus the recorded think time (not at its recorded arrival, open
// loop), and continues its context; a call production sent before the
// previous one finished stays at its recorded time. The fake server is
// slower than production (80 ms per call), so open-loop sends would come
// before the previous call finished.
func TestTopLevelCallsChained(t *testing.T) {
	f := newFake(20 * time.Millisecond)
	defer f.Close()
	recs := topLevelTrace()
	res := closedRun(t, f.srv.URL, recs, func(o *Options) { o.Model = "fake-model" })
	out := map[int64]traces.Record{}
	for _, r := range res.Records {
		out[r.Seq] = r
	}
	ms := int64(time.Millisecond)
	for _, c := range []struct {
		seq, after, thinkMs int64
		why                 string
	}{
		{2, 0, 50, "T1 waits for T0"},
		{3, 2, 50, "T2 waits for T1"},
		{5, 4, 100, "T4 waits for T3"},
	} {
		r, d := out[c.seq], out[c.after]
		if want := d.LastTokenNs + c.thinkMs*ms; r.ScheduledNs != want || r.SentNs < d.LastTokenNs {
			t.Errorf("%s: seq %d due at %d ms, sent at %d ms; want due at %d ms (seq %d's finish %d ms + think %d ms)",
				c.why, c.seq, r.ScheduledNs/ms, r.SentNs/ms, want/ms, c.after, d.LastTokenNs/ms, c.thinkMs)
		}
	}
	if r := out[4]; r.ScheduledNs != 240*ms {
		t.Errorf("T3 (overlapping T2 in production) due at %d ms, want its recorded 240 ms", r.ScheduledNs/ms)
	}
	if r := out[1]; r.SentNs < out[0].LastTokenNs {
		t.Errorf("the subagent was sent at %d, before T0 finished at %d", r.SentNs, out[0].LastTokenNs)
	}
	ss := res.Summary.Sessions
	if ss.TopLevelChained != 3 || ss.TopLevelOverlapped != 1 || ss.FollowUps != 4 {
		t.Errorf("counts %+v, want 3 top-level calls chained, 1 overlapped, 4 follow-ups", ss)
	}
	// A chained top-level call continues the previous one's context.
	sent := map[int64][]int{}
	for _, q := range f.requests() {
		seq, _ := strconv.ParseInt(q.ID[strings.LastIndexByte(q.ID, '-')+1:], 10, 64)
		sent[seq] = q.Prompt
	}
	for _, c := range [][2]int64{{2, 0}, {3, 2}, {5, 4}} {
		want := slices.Clone(sent[c[1]])
		for k := range 4 {
			want = append(want, 500+k)
		}
		if p := sent[c[0]]; len(p) <= len(want) || !slices.Equal(p[:len(want)], want) {
			t.Errorf("seq %d does not start with seq %d's prompt and output", c[0], c[1])
		}
	}
	var text strings.Builder
	res.Summary.WriteText(&text)
	if !strings.Contains(text.String(), "3 top-level calls chained to the previous one (1 sent at their recorded times") {
		t.Errorf("the summary does not say so:\n%s", text.String())
	}
}
