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
