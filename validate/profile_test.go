package validate

import (
	"math"
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/traces"
)

// req is a request at second at with in prompt tokens and blocks.
func req(seq int64, at float64, in int32, blocks ...int64) request {
	return request{seq: seq, arrival: int64(at * 1e9), in: in, out: 10, blocks: blocks, parent: traces.NotReported}
}

// prefixReuse counts what an unbounded prefix cache serves: a block hits
// only when the whole chain before it was sent, as a cache that hashes
// each block with those before it sees.
func TestPrefixReuseFollowsChains(t *testing.T) {
	for _, tc := range []struct {
		name string
		reqs []request
		want float64 // share of prompt tokens
	}{
		{"nothing shared", []request{req(0, 0, 100, 1, 2), req(1, 1, 100, 3, 4)}, 0},
		{"a shared first block", []request{req(0, 0, 100, 1, 2), req(1, 1, 100, 1, 3)}, 50.0 / 200},
		{"a shared block behind another is no hit", []request{req(0, 0, 100, 1, 2), req(1, 1, 100, 3, 2)}, 0},
		{"a whole prompt again", []request{req(0, 0, 100, 1, 2), req(1, 1, 100, 1, 2)}, 100.0 / 200},
		{"a hit is capped at the prompt", []request{req(0, 0, 100, 1, 2), req(1, 1, 70, 1, 2)}, 70.0 / 170},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := prefixReuse(tc.reqs, 50); math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("reuse %g, want %g", got, tc.want)
			}
		})
	}
	// Without blocks, a category prefix hits as far as an earlier prompt
	// of the category reached.
	cat := func(seq int64, c string, prefix, in int32) request {
		r := req(seq, float64(seq), in)
		r.category, r.prefix = c, prefix
		return r
	}
	reqs := []request{cat(0, "a", 60, 100), cat(1, "a", 80, 100), cat(2, "b", 80, 100), cat(3, "a", 80, 100)}
	if got, want := prefixReuse(reqs, 50), (0+60+0+80)/400.0; math.Abs(got-want) > 1e-9 {
		t.Errorf("category prefixes: reuse %g, want %g", got, want)
	}
}

// sessionFigures measures each follow-up against the request before it in
// its session.
func TestSessionFigures(t *testing.T) {
	s := func(r request, session int64) request { r.session = session; return r }
	reqs := []request{
		s(req(0, 0, 100, 1, 2), 1),
		s(req(1, 1, 500), 0),
		s(req(2, 2, 150, 1, 2, 3), 1), // +50 tokens, 2 s after, 100 shared
		s(req(3, 3, 100, 7, 8), 2),
		s(req(4, 7, 160, 1, 2, 3, 4), 1), // +10 tokens, 5 s after, 150 shared (capped at 150)
	}
	var p profile
	p.turnGapS, p.growthTokens, p.turnReuse = math.NaN(), math.NaN(), math.NaN()
	sessionFigures(&p, reqs, 50)
	if p.followUps != 2.0/5 || p.turns != 2 {
		t.Errorf("follow-ups %g, turns %g; want 0.4 and 2 (4 requests in 2 sessions)", p.followUps, p.turns)
	}
	if p.turnGapS != 3.5 || p.growthTokens != 30 {
		t.Errorf("time between turns %g s, growth %g tokens; want the medians 3.5 and 30", p.turnGapS, p.growthTokens)
	}
	if want := (100.0 + 150) / (150 + 160); math.Abs(p.turnReuse-want) > 1e-9 {
		t.Errorf("the previous turn held %g of the follow-ups' prompts, want %g", p.turnReuse, want)
	}
	// No sessions: no session figures.
	var q profile
	q.turnGapS = math.NaN()
	sessionFigures(&q, []request{req(0, 0, 10), req(1, 1, 10)}, 50)
	if q.turns != 0 || q.followUps != 0 || !math.IsNaN(q.turnGapS) {
		t.Errorf("without sessions: %+v", q)
	}
}

// profileOf measures lengths, rate and burstiness of a loaded workload.
func TestProfileOf(t *testing.T) {
	w := Workload{Name: "w", Meta: traces.Meta{BlockSize: 64}}
	for i := range 10 {
		w.reqs = append(w.reqs, req(int64(i), float64(i)/2, int32(100*(i+1))))
	}
	p := profileOf(w, 512)
	if p.requests != 10 || p.meanIn != 550 || p.p90In != 900 || p.meanOut != 10 {
		t.Errorf("lengths: %+v", p)
	}
	if math.Abs(p.rate-2) > 1e-9 || p.cv > 1e-9 {
		t.Errorf("rate %g, CV %g; want 2 req/s, evenly spaced (CV 0)", p.rate, p.cv)
	}
	if p.peak != 2 {
		t.Errorf("busiest 5 s at %g req/s, want 2 (10 requests in 4.5 s)", p.peak)
	}
	// A burst: 6 requests within a second, then one a minute later.
	var burst []request
	for i := range 6 {
		burst = append(burst, req(int64(i), float64(i)/6, 10))
	}
	burst = append(burst, req(6, 60, 10))
	if got := peakRate(burst); got != 6.0/5 {
		t.Errorf("busiest 5 s of a burst: %g req/s, want 1.2", got)
	}
	if e := profileOf(Workload{}, 512); e.requests != 0 || !math.IsNaN(e.turnGapS) {
		t.Errorf("an empty workload: %+v", e)
	}
}

// moved lists the figures a counterfactual changed, beside the lender's:
// the transplanted property's first, those it moved along after, a
// figure that moved further from the lender's marked so, at most
// maxEvidence; and when nothing moved it says so, never two equal
// summaries.
func TestMovedEvidence(t *testing.T) {
	nan := math.NaN()
	from := profile{meanIn: 1000, p90In: 2000, meanOut: 100, p90Out: 200, rate: 5, cv: 1, reuse: 0.80, followUps: 0.5, turns: 2.9, turnGapS: 6, growthTokens: 240, turnReuse: 0.85}
	real := profile{meanIn: 1000, p90In: 2000, meanOut: 100, p90Out: 200, rate: 5, cv: 1, reuse: 0.60, followUps: 0.5, turns: 3.0, turnGapS: 6, growthTokens: 210, turnReuse: 0.57}

	to := from
	to.turns, to.turnReuse, to.meanIn = 3.0, 0.73, 1200
	got := moved([]string{PropSessions}, from, to, real, "synthetic", "real")
	want := "turns per session 2.90 → 3.00 (real 3.00); share of a follow-up's prompt its previous turn held 85% → 73% (real 57%); mean prompt 1000 tokens → 1200 tokens (real 1000 tokens)"
	if got != want {
		t.Errorf("sessions:\n got %s\nwant %s", got, want)
	}

	to = from
	to.reuse = 0.95 // further from the real 60 %
	if got := moved([]string{PropPrefixReuse}, from, to, real, "synthetic", "real"); got != "prompt tokens a prefix cache serves 80% → 95% (real 60%, further from it)" {
		t.Errorf("a figure moved away: %s", got)
	}

	to = from
	to.meanOut = 103 // under the 5 % that counts as moving
	got = moved([]string{PropOutputLengths}, from, to, real, "synthetic", "real")
	if !strings.HasPrefix(got, "no figure validate measures moved much from the synthetic workload's; the most: mean output 100 tokens → 103 tokens") {
		t.Errorf("nothing moved: %s", got)
	}
	if got := moved([]string{PropArrivals}, from, from, real, "synthetic", "real"); !strings.Contains(got, "measures as the synthetic workload does") {
		t.Errorf("identical: %s", got)
	}

	// A figure that appears (sessions where there were none) moved.
	none := from
	none.turnGapS, none.growthTokens, none.turnReuse, none.turns, none.followUps = nan, nan, nan, 0, 0
	got = moved([]string{PropSessions}, none, from, real, "synthetic", "real")
	if !strings.Contains(got, "median time between turns none → 6.00 s (real 6.00 s)") {
		t.Errorf("figures that appear: %s", got)
	}
	if n := strings.Count(got, "→"); n != maxEvidence {
		t.Errorf("%d figures listed, want at most %d: %s", n, maxEvidence, got)
	}
}

// Every figure belongs to a property and moves by its own rule.
func TestFigures(t *testing.T) {
	for _, f := range figures {
		found := false
		for _, p := range Properties {
			found = found || p == f.prop
		}
		if !found {
			t.Errorf("figure %q belongs to no property (%q)", f.name, f.prop)
		}
		if f.moved(1, 1) {
			t.Errorf("figure %q: equal values moved", f.name)
		}
	}
	if !relMoved(0.05)(100, 106) || relMoved(0.05)(100, 104) || !relMoved(0.05)(math.NaN(), 1) || relMoved(0.05)(math.NaN(), math.NaN()) {
		t.Error("relMoved")
	}
	if !absMoved(0.02)(0.50, 0.52) || absMoved(0.02)(0.50, 0.51) {
		t.Error("absMoved")
	}
}

// The evidence of a real transplant: the real sessions laid over a
// synthetic workload whose follow-ups resend more of the turn before
// change what validate measures of them, and say so.
func TestTransplantEvidenceShowsTheDifference(t *testing.T) {
	real := loaded(t, conversationsWithReuse("real", 200, 0.5, 1))
	syn := loaded(t, conversationsWithReuse("synthetic", 200, 0.9, 2))
	w, why := transplant(PropSessions, real, syn, 512)
	if why != "" {
		t.Fatal(why)
	}
	pr, ps, pw := profileOf(real, 512), profileOf(syn, 512), profileOf(w, 512)
	ev := moved([]string{PropSessions}, ps, pw, pr, "synthetic", "real")
	if !strings.Contains(ev, "share of a follow-up's prompt its previous turn held") {
		t.Errorf("evidence %q does not show what the follow-ups resend (real %.2f, synthetic %.2f, transplanted %.2f)", ev, pr.turnReuse, ps.turnReuse, pw.turnReuse)
	}
}

// conversationsWithReuse is n requests in two-turn sessions whose second
// turn shares the given share of its prompt with the first (64-token
// blocks), one second apart.
func conversationsWithReuse(name string, n int, share float64, seed uint64) Workload {
	w := Workload{Name: name, Meta: traces.Meta{BlockSize: 64}}
	fresh := freshBlocks(int64(seed) << 40)
	for i := range n {
		r := traces.NewRecord()
		r.Seq, r.ArrivalNs, r.OutputTokens = int64(i), int64(i)*1e9, 32
		r.Session, r.Turn = int64(i/2+1), int32(i%2+1)
		r.InputTokens = 1024
		if i%2 == 0 {
			r.PrefixBlocks = fresh(16)
		} else {
			prev := w.Records[i-1].PrefixBlocks
			k := int(share * 16)
			r.PrefixBlocks = append(append([]int64{}, prev[:k]...), fresh(16-k)...)
		}
		w.Records = append(w.Records, r)
	}
	return w
}
