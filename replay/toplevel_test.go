package replay

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

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
