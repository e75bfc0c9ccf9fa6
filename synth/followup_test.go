package synth

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// threeTurns is n sessions of category "c": turn 1 has 100 input and 20
// output tokens, turn 2 resends them with 30 new tokens (150 in, 40 out),
// turn 3 is a fresh 50-token prompt. Each turn finishes 1 s after it
// arrives and the next arrives 2 s after that; set says which columns the
// trace carries.
func threeTurns(n int, finish, think bool) []traces.Record {
	var recs []traces.Record
	for s := range n {
		t := int64(s) * int64(time.Minute)
		for turn, lens := range [][2]int32{{100, 20}, {150, 40}, {50, 10}} {
			r := traces.NewRecord()
			r.ArrivalNs, r.Session, r.Turn, r.Category = t, int64(s+1), int32(turn+1), "c"
			r.InputTokens, r.OutputTokens, r.Model, r.API = lens[0], lens[1], "m", traces.APIChat
			if finish {
				r.FinishNs = t + int64(time.Second)
			}
			if think && turn > 0 {
				r.ThinkNs = int64(500 * time.Millisecond)
			}
			recs = append(recs, r)
			t += 3 * int64(time.Second)
		}
	}
	for i := range recs {
		recs[i].Seq = int64(i)
	}
	return recs
}

func TestFitFollowUps(t *testing.T) {
	cases := []struct {
		why           string
		finish, think bool
		from          string
		thinkS        float64 // every think time
	}{
		{"without finish_ns the think time is the arrival gap, and the model says so", false, false, ThinkFromArrivalGap, 3},
		{"with finish_ns the think time is next arrival − previous finish", true, false, ThinkFromFinish, 2},
		{"an explicit think_ns wins over finish_ns", true, true, ThinkFromRecorded, 0.5},
	}
	for _, c := range cases {
		m, err := Fit(context.Background(), threeTurns(10, c.finish, c.think), fitMeta(traces.NewMeta("test")))
		if err != nil {
			t.Fatal(err)
		}
		if m.Version != 3 || m.Classes[0].Sessions.StartsPerBin == nil {
			t.Errorf("%s: version %d, want 3 (follow-up turns, and the sessions' starts per bin)", c.why, m.Version)
		}
		s := m.Classes[0].Sessions
		if s.FollowUps != 20 || s.ThinkFrom != c.from {
			t.Errorf("%s: %d follow-ups, think from %q; want 20 from %q", c.why, s.FollowUps, s.ThinkFrom, c.from)
		}
		if n := len(s.Turns.Bins); n == 0 || s.Turns.Bins[0].Lo != 3 || s.Turns.Bins[n-1].Hi != 3 {
			t.Errorf("%s: turns per session %+v, want all 3", c.why, s.Turns.Bins)
		}
		fu := m.Classes[0].Groups[0].FollowUp
		if fu == nil {
			t.Fatalf("%s: no follow-up model for category c", c.why)
		}
		one := func(what string, h Hist, v, n float64) {
			t.Helper()
			if len(h.Bins) != 1 || h.Bins[0].Lo != v || h.Bins[0].Hi != v || h.Bins[0].Count != n {
				t.Errorf("%s: %s %+v, want %g values of %g", c.why, what, h.Bins, n, v)
			}
		}
		if fu.Turns != 20 || fu.FreshPrompts != 10 {
			t.Errorf("%s: %d follow-ups with %d fresh prompts, want 20 with 10", c.why, fu.Turns, fu.FreshPrompts)
		}
		one("new input tokens", fu.NewInputTokens, 30, 10)
		one("first-turn input", fu.FirstInputTokens, 100, 10)
		one("think time", fu.ThinkS, c.thinkS, 20)
		if fu.OutputTokens.Total() != 20 || fu.OutputTokens.Bins[0].Lo != 10 {
			t.Errorf("%s: follow-up outputs %+v, want the 20 outputs of turns 2 and 3", c.why, fu.OutputTokens.Bins)
		}
	}
}

// agentic is a multi-turn trace whose context grows: sessions start at
// about 0.5/s with 2 to 10 turns; a turn resends the previous input and
// output plus 20–600 new tokens (one follow-up in ten is a fresh prompt);
// each call is served in 0.2 s + 20 ms per output token and the next turn
// comes a think time later (exponential, mean 2 s for "plan", 8 s for
// "code").
func agentic(sessions int, seed uint64) []traces.Record {
	rng := rand.New(rand.NewPCG(seed, 18))
	var recs []traces.Record
	start := int64(0)
	for s := range sessions {
		start += int64(rng.ExpFloat64() * 2e9)
		cat, thinkMean := "plan", 2.0
		if s%3 == 0 {
			cat, thinkMean = "code", 8.0
		}
		t := start
		in := int32(500 + rng.IntN(2500))
		turns := 2 + rng.IntN(9)
		for k := 1; k <= turns; k++ {
			out := int32(20 + rng.IntN(380))
			r := traces.NewRecord()
			r.ArrivalNs, r.Session, r.Turn, r.Category = t, int64(s+1), int32(k), cat
			r.InputTokens, r.OutputTokens, r.Model, r.API = in, out, "m", traces.APIChat
			r.FinishNs = t + int64((0.2+0.02*float64(out))*1e9)
			recs = append(recs, r)
			t = r.FinishNs + int64(rng.ExpFloat64()*thinkMean*1e9)
			if rng.IntN(10) == 0 {
				in = int32(100 + rng.IntN(900))
			} else {
				in += out + int32(20+rng.IntN(580))
			}
		}
	}
	inArrivalOrder(recs)
	return recs
}

// firstTurnDraw is m as a version-1 model: follow-up turns drawn like
// first turns, as before follow-ups were modelled.
func firstTurnDraw(t *testing.T, m *Model) *Model {
	t.Helper()
	old, err := LoadModel(strings.NewReader(refView(t, m)))
	if err != nil {
		t.Fatal(err)
	}
	return old
}

func TestGenerateFollowUpsGrowContext(t *testing.T) {
	real := agentic(1500, 1)
	m := fitModel(t, real)
	syn := gen(t, m, genSeed(5))
	rep := Check(real, syn, DefaultThresholds())
	old := Check(real, gen(t, firstTurnDraw(t, m), genSeed(5)), DefaultThresholds())
	for _, r := range []*Report{&rep, &old} {
		var b strings.Builder
		r.WriteText(&b)
		t.Logf("\n%s", b.String())
	}
	// The synthetic input-by-turn curve (median and p90, turns 1–8) stays
	// within 15% of the real one; drawing follow-ups like first turns is
	// more than 50% off.
	if len(rep.InputByTurn) < 6 {
		t.Fatalf("only %d turn indexes compared, want at least 6", len(rep.InputByTurn))
	}
	if rep.ContextGrowth > 0.15 {
		t.Errorf("context growth error %.3f, want ≤ 0.15", rep.ContextGrowth)
	}
	if old.ContextGrowth < 0.5 {
		t.Errorf("the first-turn draw's context growth error is %.3f; the test trace should show it far off (≥ 0.5)", old.ContextGrowth)
	}
	// Think times: the real ones are arrival − previous finish; the
	// synthetic rows carry theirs in think_ns.
	if rep.KS.Think > 0.05 || math.Abs(rep.Synth.MedianThinkS/rep.Real.MedianThinkS-1) > 0.1 {
		t.Errorf("think time: KS %.3f, median %.2f s vs %.2f s real; want KS ≤ 0.05 and the median within 10%%", rep.KS.Think, rep.Synth.MedianThinkS, rep.Real.MedianThinkS)
	}
	for _, c := range rep.Checks {
		if (c.Name == "context_growth" || c.Name == "ks.think") && !c.Pass {
			t.Errorf("check %s should pass: %+v", c.Name, c)
		}
	}
	for _, c := range old.Checks {
		if c.Name == "context_growth" && c.Pass {
			t.Errorf("check %s should fail on the first-turn draw: %+v", c.Name, c)
		}
	}

	// Structure: each follow-up names the previous turn as its parent,
	// carries its think time and keeps the session's category; most
	// resend the previous context; arrivals keep the recorded spacing
	// of turns (open-loop replay).
	if r, s := medianTurnGapS(real), medianTurnGapS(syn); math.Abs(s/r-1) > 0.1 {
		t.Errorf("median gap between turns' arrivals %.2f s, real %.2f s: want within 10%%", s, r)
	}
	last := map[int64]*traces.Record{}
	var follow, grown int
	for i := range syn {
		r := &syn[i]
		p := last[r.Session]
		last[r.Session] = r
		if p == nil {
			if r.ParentSeq != traces.NotReported || r.ThinkNs != traces.NotReported {
				t.Fatalf("first turn seq %d has parent %d, think %d", r.Seq, r.ParentSeq, r.ThinkNs)
			}
			continue
		}
		follow++
		if r.ParentSeq != p.Seq || r.ThinkNs < 0 || r.ArrivalNs < p.ArrivalNs || r.Category != p.Category {
			t.Fatalf("follow-up seq %d: parent %d (want %d), think %d, arrival %d (previous %d), category %q (want %q)",
				r.Seq, r.ParentSeq, p.Seq, r.ThinkNs, r.ArrivalNs, p.ArrivalNs, r.Category, p.Category)
		}
		if r.InputTokens >= p.InputTokens+p.OutputTokens {
			grown++
		}
	}
	if share := float64(grown) / float64(follow); math.Abs(share-0.9) > 0.03 {
		t.Errorf("%.3f of %d follow-ups resend the previous context, want 0.9 ± 0.03 (one in ten is a fresh prompt)", share, follow)
	}
}

// medianTurnGapS is the median gap between consecutive turns' arrivals.
func medianTurnGapS(recs []traces.Record) float64 {
	last := map[int64]int64{}
	var gaps []float64
	for _, r := range recs {
		if r.Session == 0 {
			continue
		}
		if a, ok := last[r.Session]; ok {
			gaps = append(gaps, float64(r.ArrivalNs-a)/1e9)
		}
		last[r.Session] = r.ArrivalNs
	}
	slices.Sort(gaps)
	return nearestRank(gaps, 0.5)
}

func TestMaxContextTokens(t *testing.T) {
	m := fitModel(t, agentic(300, 2))
	for _, c := range []struct {
		why  string
		max  int
		want int32
	}{
		{"by default the cap is the longest input the model saw", 0, int32(longestInput(m))},
		{"an explicit cap cuts longer contexts to it", 4000, 4000},
	} {
		var top int32
		for _, r := range gen(t, m, with(genSeed(1), func(o *GenOptions) { o.MaxContextTokens = c.max })) {
			top = max(top, r.InputTokens)
		}
		if top != c.want {
			t.Errorf("%s: longest input %d, want %d", c.why, top, c.want)
		}
	}
}

func longestInput(m *Model) float64 {
	v := 0.0
	for _, g := range m.Classes[0].Groups {
		v = max(v, g.InputTokens.Bins[len(g.InputTokens.Bins)-1].Hi)
	}
	return v
}

// TestFollowUpsPublicTraces: on each shared public trace with multi-turn
// sessions, the synthetic input-by-turn curve is within 25% of the real
// one (the context_growth default), and closer than drawing follow-ups
// like first turns; both are logged. Traces without sessions are skipped
// with a message, absent ones by testtraces.
func TestFollowUpsPublicTraces(t *testing.T) {
	for _, p := range publicTraces {
		t.Run(p.name, func(t *testing.T) {
			recs, meta := loadPublic(t, p)
			m, syn := fitGen(t, recs, meta, genSeed(7))
			if m.Version < 2 {
				t.Skipf("%s has no follow-up turns (its importer gives no sessions): nothing to compare", p.name)
			}
			rep := Check(recs, syn, DefaultThresholds())
			var oldSyn memWriter
			if _, err := firstTurnDraw(t, m).Generate(context.Background(), genSeed(7), &oldSyn); err != nil {
				t.Fatal(err)
			}
			old := Check(recs, oldSyn.recs, DefaultThresholds())
			if len(rep.InputByTurn) < 2 {
				t.Skipf("%s: fewer than two turn indexes with %d rows", p.name, minTurnRows)
			}
			for i, tu := range rep.InputByTurn {
				o := TurnInput{}
				if i < len(old.InputByTurn) {
					o = old.InputByTurn[i]
				}
				t.Logf("%s turn %d (%d rows): median real %.0f synth %.0f first-turn draw %.0f; p90 real %.0f synth %.0f first-turn draw %.0f",
					p.name, tu.Turn, tu.RealRows, tu.RealMedian, tu.SynthMedian, o.SynthMedian, tu.RealP90, tu.SynthP90, o.SynthP90)
			}
			t.Logf("%s: context_growth %.3f (first-turn draw %.3f), think median real %.2f s synth %.2f s, ks.think %.3f",
				p.name, rep.ContextGrowth, old.ContextGrowth, rep.Real.MedianThinkS, rep.Synth.MedianThinkS, rep.KS.Think)
			if rep.ContextGrowth > DefaultContextGrowthError || rep.ContextGrowth >= old.ContextGrowth {
				t.Errorf("%s: context_growth %.3f, want ≤ %.2f and below the first-turn draw's %.3f", p.name, rep.ContextGrowth, DefaultContextGrowthError, old.ContextGrowth)
			}
		})
	}
}

// TestSessionCategoryDraw: sessions start in the categories whose sessions
// went on, single-shot rows in the categories of the other rows. Here
// every session is in "c" and every single-shot row in "x" (half the rows
// each); drawing both by the categories' share of all rows would put half
// the sessions in "x".
func TestSessionCategoryDraw(t *testing.T) {
	recs := threeTurns(200, true, false)
	for i := range 600 {
		r := traces.NewRecord()
		r.ArrivalNs, r.Category = int64(i)*int64(20*time.Second), "x"
		r.InputTokens, r.OutputTokens, r.Model, r.API = 300, 30, "m", traces.APIChat
		recs = append(recs, r)
	}
	inArrivalOrder(recs)
	syn := gen(t, fitModel(t, recs), genSeed(2))
	rows := map[int64]int{}
	for _, r := range syn {
		rows[r.Session]++
	}
	bad := 0
	for _, r := range syn {
		multi := r.Session != 0 && rows[r.Session] > 1
		if multi != (r.Category == "c") {
			bad++
		}
	}
	if bad > 0 || len(syn) == 0 {
		t.Errorf("%d of %d rows: a multi-turn session's row outside category c or a single-shot row inside it", bad, len(syn))
	}
}

// TestTurnsPerCategory: a category whose sessions run longer keeps its
// longer sessions. "short" has 1200 sessions of 2 turns, "long" 400 of 8
// (0.43 and 0.57 of the rows); drawing every session's turns from the
// class's distribution would give "long" about a quarter of the rows.
// The limit, 0.03, is about two standard errors of the long sessions'
// binomial count.
func TestTurnsPerCategory(t *testing.T) {
	var recs []traces.Record
	for s := range 1600 {
		cat, turns := "short", 2
		if s%4 == 0 {
			cat, turns = "long", 8
		}
		at := int64(s) * int64(3*time.Second)
		for k := 1; k <= turns; k++ {
			r := traces.NewRecord()
			r.ArrivalNs, r.Session, r.Turn, r.Category = at, int64(s+1), int32(k), cat
			r.InputTokens, r.OutputTokens, r.Model, r.API = int32(100*k), 20, "m", traces.APIChat
			recs = append(recs, r)
			at += int64(time.Second)
		}
	}
	inArrivalOrder(recs)
	syn := gen(t, fitModel(t, recs), genSeed(3))
	rep := Check(recs, syn, DefaultThresholds())
	if rep.CategoryShareMaxDiff > 0.03 {
		t.Errorf("category shares real %v synthetic %v: largest difference %.3f, want ≤ 0.03", rep.Real.CategoryShares, rep.Synth.CategoryShares, rep.CategoryShareMaxDiff)
	}
}
