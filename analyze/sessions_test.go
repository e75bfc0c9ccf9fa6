package analyze

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// call is a successful session call: sent at sent, first token after ttft,
// last token after e2e.
func call(seq, session int64, turn int32, sent, ttft, e2e time.Duration) traces.Record {
	r := rec(seq, sent, 0, ttft, e2e, 100, 10, 1)
	r.Session, r.Turn = session, turn
	return r
}

// agentic is three sessions and one single-shot request, sent in order:
// session 1 (turns 1–3) at 0, 2 and 5 s with TTFT 100/200/300 ms and E2E
// 1/1.5/2 s (makespan 7 s); session 2 (turns 1–2) at 1 and 4 s, TTFT
// 110/220 ms, E2E 1 s (makespan 4 s); session 3 (turns 1–9) at 10 + i s,
// TTFT 50·turn ms, E2E 500 ms (makespan 8.5 s).
func agentic() []traces.Record {
	var rs []traces.Record
	add := func(session int64, turn int32, sent, ttft, e2e time.Duration) {
		rs = append(rs, call(int64(len(rs)), session, turn, sent, ttft, e2e))
	}
	add(1, 1, 0, 100*ms, 1000*ms)
	add(2, 1, 1000*ms, 110*ms, 1000*ms)
	add(1, 2, 2000*ms, 200*ms, 1500*ms)
	rs = append(rs, rec(int64(len(rs)), 3000*ms, 0, 5000*ms, 9000*ms, 100, 10, 1)) // single-shot: no session
	add(2, 2, 4000*ms, 220*ms, 1000*ms)
	add(1, 3, 5000*ms, 300*ms, 2000*ms)
	for i := range 9 {
		add(3, int32(i+1), 10*time.Second+time.Duration(i)*time.Second, time.Duration(50*(i+1))*ms, 500*ms)
	}
	return rs
}

func near(got, want float64) bool { return math.Abs(got-want) <= 1e-9*max(1, math.Abs(want)) }

func TestSessions(t *testing.T) {
	type want struct {
		sessions, early int64
		calls           CountDist
		turns           []string  // labels
		turnCalls       []int64   // per turn
		ttftP50         []float64 // per turn, ms
		makespan        [3]float64
		approx          bool
	}
	cases := []struct {
		doc  string
		recs []traces.Record
		opt  func(*Options)
		max  int // open-session bound (0 = the default)
		want want
	}{
		{
			doc:  "Three sessions: turns 1–7 one by one and 8–9 pooled as ≥ 8; makespans 7, 4 and 8.5 s; the single-shot request is no session.",
			recs: agentic(),
			want: want{sessions: 3, calls: CountDist{P50: 3, P90: 7.8, Max: 9},
				turns:     []string{"1", "2", "3", "4", "5", "6", "7", "≥ 8"},
				turnCalls: []int64{3, 3, 2, 1, 1, 1, 1, 2},
				// turn 1: 50, 100, 110; turn 2: 100, 200, 220; turn 3: 150, 300; ≥ 8: 400, 450.
				ttftP50:  []float64{100, 200, 225, 200, 250, 300, 350, 425},
				makespan: [3]float64{7000, 7000 + 0.8*1500, 7000 + 0.98*1500}},
		},
		{
			doc:  "Past --exact-rows the same sessions come from histograms: the same numbers within 0.05 %, flagged approximate.",
			recs: agentic(),
			opt:  func(o *Options) { o.ExactRows = 2 },
			want: want{sessions: 3, calls: CountDist{P50: 3, P90: 7.8, Max: 9},
				turns:     []string{"1", "2", "3", "4", "5", "6", "7", "≥ 8"},
				turnCalls: []int64{3, 3, 2, 1, 1, 1, 1, 2},
				ttftP50:   []float64{100, 200, 225, 200, 250, 300, 350, 425},
				makespan:  [3]float64{7000, 7000 + 0.8*1500, 7000 + 0.98*1500}, approx: true},
		},
		{
			doc: "A session silent for longer than the idle window (3 s) ends: its next call, 9 s after the last token, starts a second part.",
			recs: []traces.Record{
				call(0, 1, 1, 0, 100*ms, 1000*ms),
				call(1, 1, 2, 10*time.Second, 100*ms, 2000*ms),
			},
			opt: func(o *Options) { o.SessionIdle = 3 * time.Second },
			want: want{sessions: 2, calls: CountDist{P50: 1, P90: 1, Max: 1},
				turns: []string{"1", "2"}, turnCalls: []int64{1, 1}, ttftP50: []float64{100, 100},
				makespan: [3]float64{1500, 1900, 1990}},
		},
		{
			doc: "With at most two sessions open, the third session closes the least recently active one (session 1) early, and session 1's second call, a new part, closes session 2.",
			recs: []traces.Record{
				call(0, 1, 1, 0, 100*ms, 500*ms),
				call(1, 2, 1, 1000*ms, 100*ms, 500*ms),
				call(2, 3, 1, 2000*ms, 100*ms, 500*ms),
				call(3, 1, 2, 3000*ms, 100*ms, 500*ms),
			},
			max: 2,
			want: want{sessions: 4, early: 2, calls: CountDist{P50: 1, P90: 1, Max: 1},
				turns: []string{"1", "2"}, turnCalls: []int64{3, 1}, ttftP50: []float64{100, 100},
				makespan: [3]float64{500, 500, 500}},
		},
		{
			doc: "Calls without a turn number take their order in the session.",
			recs: []traces.Record{
				call(0, 7, 0, 0, 100*ms, 500*ms),
				call(1, 7, 0, 1000*ms, 300*ms, 500*ms),
			},
			want: want{sessions: 1, calls: CountDist{P50: 2, P90: 2, Max: 2},
				turns: []string{"1", "2"}, turnCalls: []int64{1, 1}, ttftP50: []float64{100, 300},
				makespan: [3]float64{1500, 1500, 1500}},
		},
	}
	for _, c := range cases {
		t.Run(c.doc, func(t *testing.T) {
			o := DefaultOptions()
			if c.opt != nil {
				c.opt(&o)
			}
			a := mustNew(t, o)
			if c.max > 0 {
				a.sess.maxOpen = c.max
			}
			for i := range c.recs {
				a.Add(&c.recs[i])
				if c.max > 0 && len(a.sess.open) > c.max {
					t.Fatalf("after row %d: %d sessions open, bound %d", i, len(a.sess.open), c.max)
				}
			}
			rep := mustClose(t, a)
			s := rep.Sessions
			if s == nil {
				t.Fatal("no Sessions section")
			}
			w := c.want
			tol := func(got, want float64) bool {
				if w.approx {
					return math.Abs(got-want) <= 1e-3*math.Abs(want)
				}
				return near(got, want)
			}
			if s.Sessions != w.sessions || s.ClosedEarly != w.early {
				t.Errorf("sessions %d (closed early %d), want %d (%d)", s.Sessions, s.ClosedEarly, w.sessions, w.early)
			}
			if !tol(s.CallsPerSession.P50, w.calls.P50) || !tol(s.CallsPerSession.P90, w.calls.P90) || !tol(s.CallsPerSession.Max, w.calls.Max) {
				t.Errorf("calls per session %+v, want %+v", s.CallsPerSession, w.calls)
			}
			if len(s.ByTurn) != len(w.turns) {
				t.Fatalf("%d turn rows, want %d: %+v", len(s.ByTurn), len(w.turns), s.ByTurn)
			}
			for i, tl := range s.ByTurn {
				if tl.Label() != w.turns[i] || tl.Calls != w.turnCalls[i] || !tol(tl.TTFT.P50, w.ttftP50[i]) || tl.TTFT.Approx != w.approx {
					t.Errorf("turn %s: %d calls, TTFT p50 %v (approx %v); want turn %s, %d calls, %v", tl.Label(), tl.Calls, tl.TTFT.P50, tl.TTFT.Approx, w.turns[i], w.turnCalls[i], w.ttftP50[i])
				}
			}
			m := s.Makespan
			if !tol(m.P50, w.makespan[0]) || !tol(m.P90, w.makespan[1]) || !tol(m.P99, w.makespan[2]) || m.Approx != w.approx {
				t.Errorf("makespan p50/p90/p99 %v/%v/%v (approx %v), want %v", m.P50, m.P90, m.P99, m.Approx, w.makespan)
			}
		})
	}
}

// TestSessionsE2EByTurn checks the E2E column of the first case by hand:
// turn 1 has 1000, 1000 and 500 ms.
func TestSessionsE2EByTurn(t *testing.T) {
	rep := mustAnalyze(t, agentic(), DefaultOptions())
	e := rep.Sessions.ByTurn[0].E2E
	if !near(e.P50, 1000) || !near(e.P90, 1000) || !near(e.Min, 500) {
		t.Errorf("turn 1 E2E p50 %v p90 %v min %v, want 1000, 1000, 500", e.P50, e.P90, e.Min)
	}
}

func TestNoSessionsNoSection(t *testing.T) {
	rep := mustAnalyze(t, small(), DefaultOptions())
	if rep.Sessions != nil || rep.PrefixCache != nil {
		t.Errorf("a run without sessions or prefix blocks has sections: %+v %+v", rep.Sessions, rep.PrefixCache)
	}
	if text := textOf(t, rep); strings.Contains(text, "Sessions") || strings.Contains(text, "Prefix cache") {
		t.Errorf("text has a session or prefix-cache block:\n%s", text)
	}
}

func TestSessionsInTextJSONHTML(t *testing.T) {
	recs := agentic()
	for i := range recs {
		recs[i].PrefixBlocks = []int64{1, int64(100 + i)}
		recs[i].ServerCachedTokens = 10 // what an unbounded cache implies: block 1 on every row but the first
	}
	recs[0].ServerCachedTokens = 0
	o := DefaultOptions()
	o.BlockSize = 10
	rep := mustAnalyze(t, recs, o)
	var txt, js, html bytes.Buffer
	if err := rep.WriteText(&txt); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteHTML(&html); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Sessions      3 (14 calls; calls per session p50 3, p90 8, max 9;", "  ≥ 8             2     425.00     445.00", "makespan  p50 7000 ms",
		"Prefix cache  implied 9.3% of prompt tokens", "server 9.3%", "gap +0.0 points", "the server cached what an unbounded cache (Options.KVBlocks 0) implies"} {
		if !strings.Contains(txt.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, txt.String())
		}
	}
	var got struct {
		Sessions    *Sessions    `json:"sessions"`
		PrefixCache *PrefixCache `json:"prefix_cache"`
	}
	if err := json.Unmarshal(js.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Sessions == nil || got.Sessions.Sessions != 3 || len(got.Sessions.ByTurn) != 8 || got.PrefixCache == nil || got.PrefixCache.ReportedRequests != 15 {
		t.Errorf("JSON sessions %+v prefix cache %+v", got.Sessions, got.PrefixCache)
	}
	for _, want := range []string{"<h2>Sessions</h2>", "<td>≥ 8</td><td>2</td><td>425.00</td>", "Session makespan", "<h2>Prefix cache</h2>", "implied 9.3% of prompt tokens"} {
		if !strings.Contains(html.String(), want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
}
