package replay

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

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
