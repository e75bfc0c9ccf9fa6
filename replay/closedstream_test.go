package replay

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// TestClosedFeedHoldsSessionsUnderWay drives the closed-session feed
// without a server: each call handed out is finished at once, and so is
// every follow-up it makes ready. The feed hands out sessions' first calls
// in arrival order, every call is sent exactly once with the dependencies
// the in-memory graph gives it, and the graph forgets each session once
// its calls are done: at the end it holds nothing, and along the way no
// more sessions than were being read or under way.
func TestClosedFeedHoldsSessionsUnderWay(t *testing.T) {
	recs := agenticTrace(300, 5)
	// Interleave the sessions: each follow-up arrives after its last
	// dependency (a recorded service time and its think time later).
	for i := range recs {
		r := &recs[i]
		for _, d := range depsOf(r) {
			r.ArrivalNs = max(r.ArrivalNs, recs[d].ArrivalNs+int64(50*time.Millisecond)+r.ThinkNs)
		}
	}
	slices.SortStableFunc(recs, func(a, b traces.Record) int { return int(a.ArrivalNs - b.ArrivalNs) })

	o := DefaultOptions()
	o.URL, o.Model, o.Sessions = "http://127.0.0.1:1", "m", SessionsClosed
	p, err := Scan(context.Background(), Records(recs, traces.Meta{}), o)
	if err != nil {
		t.Fatal(err)
	}
	if p.InMemory || p.sessionCalls == nil {
		t.Fatalf("closed sessions in arrival order should stream (InMemory %v)", p.InMemory)
	}
	var sel []*traces.Record
	for i := range recs {
		sel = append(sel, &recs[i])
	}
	want, err := buildGraph(sel, recs, &o, traces.Meta{})
	if err != nil {
		t.Fatal(err)
	}
	wantDeps := map[int64][]int64{}
	for rec, ds := range want.deps {
		for _, d := range ds {
			wantDeps[rec.Seq] = append(wantDeps[rec.Seq], d.Seq)
		}
		slices.Sort(wantDeps[rec.Seq])
	}

	r := &runner{o: o, sched: newScheduler(true, 0)}
	next, closeFeed, err := r.openFeed(p)
	if err != nil {
		t.Fatal(err)
	}
	defer closeFeed()
	g := r.graph
	sent := map[int64]int{}
	var last *traces.Record
	maxHeld := 0
	finish := func(rec *traces.Record) []*item {
		sent[rec.Seq]++
		g.mu.Lock()
		var got []int64
		for _, d := range g.deps[rec] {
			got = append(got, d.Seq)
		}
		maxHeld = max(maxHeld, len(g.sessRecs))
		g.mu.Unlock()
		slices.Sort(got)
		if !slices.Equal(got, wantDeps[rec.Seq]) {
			t.Errorf("seq %d waits for %v, the in-memory graph says %v", rec.Seq, got, wantDeps[rec.Seq])
		}
		return g.finished(rec, doneAt{})
	}
	for it := range feedItems(t, next) {
		if last != nil && before(it.rec, last) {
			t.Fatalf("seq %d (arrival %d) handed out after seq %d (arrival %d)", it.rec.Seq, it.rec.ArrivalNs, last.Seq, last.ArrivalNs)
		}
		last = it.rec
		queue := finish(it.rec)
		for len(queue) > 0 {
			c := queue[0]
			queue = queue[1:]
			r.sched.outstanding.Add(-1)
			queue = append(queue, finish(c.rec)...)
		}
	}
	for i := range recs {
		if sent[recs[i].Seq] != 1 {
			t.Fatalf("seq %d sent %d times", recs[i].Seq, sent[recs[i].Seq])
		}
	}
	if n := r.sched.outstanding.Load(); n != 0 {
		t.Errorf("%d follow-ups still counted outstanding", n)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.deps)+len(g.children)+len(g.done)+len(g.from)+len(g.continued)+len(g.bySeq)+len(g.sessRecs)+len(g.sessLeft) != 0 {
		t.Errorf("the graph still holds %d deps, %d children, %d done, %d from, %d continued, %d calls, %d sessions",
			len(g.deps), len(g.children), len(g.done), len(g.from), len(g.continued), len(g.bySeq), len(g.sessRecs))
	}
	t.Logf("%d calls of 300 sessions; at most %d sessions in the graph at once", len(recs), maxHeld)
	if maxHeld >= 300 {
		t.Errorf("the graph held all %d sessions at once", maxHeld)
	}
}
