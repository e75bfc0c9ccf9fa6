package validate

import (
	"slices"
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/traces"
)

func sortedField(recs []traces.Record, f func(*traces.Record) int64) []int64 {
	var out []int64
	for i := range recs {
		out = append(out, f(&recs[i]))
	}
	slices.Sort(out)
	return out
}

func input(r *traces.Record) int64   { return int64(r.InputTokens) }
func output(r *traces.Record) int64  { return int64(r.OutputTokens) }
func arrival(r *traces.Record) int64 { return r.ArrivalNs }

// Each transplant carries exactly its property over and keeps the
// synthetic workload's others.
func TestTransplants(t *testing.T) {
	real := loaded(t, workload("real", 200, 5, true, 1))
	syn := fixedLengths("synthetic", 100, 2, 1000, 100, 2)
	syn.Records[0].Category, syn.Records[0].PrefixTokens = "own", 500
	syn = loaded(t, syn)

	t.Run("prompt lengths take the real distribution, nothing else moves", func(t *testing.T) {
		w, why := transplant(PropPromptLengths, real, syn, 512)
		if why != "" {
			t.Fatal(why)
		}
		got, want := sortedField(records(w), input), sortedField(records(real), input)
		for k, v := range got { // the middle of each synthetic rank's share of the real values
			if v != want[(2*k+1)*len(want)/(2*len(got))] {
				t.Fatalf("rank %d: input %d, want the real value at its quantile %d", k, v, want[(2*k+1)*len(want)/(2*len(got))])
			}
		}
		recs := records(w)
		if !slices.Equal(sortedField(recs, output), sortedField(records(syn), output)) || !slices.Equal(sortedField(recs, arrival), sortedField(records(syn), arrival)) {
			t.Error("outputs or arrivals changed")
		}
		if recs[0].Category != "own" || recs[0].PrefixTokens > recs[0].InputTokens {
			t.Errorf("the synthetic prefix %+v should stay, cut to the prompt", recs[0])
		}
	})
	t.Run("arrivals are the real ones, the requests the synthetic ones used again", func(t *testing.T) {
		w, why := transplant(PropArrivals, real, syn, 512)
		if why != "" {
			t.Fatal(why)
		}
		recs := records(w)
		if !slices.Equal(sortedField(recs, arrival), sortedField(records(real), arrival)) {
			t.Error("arrival times are not the real ones")
		}
		for i := range recs {
			if recs[i].InputTokens != 1000 || recs[i].Seq != int64(i) {
				t.Fatalf("request %d: %+v, want a synthetic request renumbered", i, recs[i])
			}
		}
	})
	t.Run("prefix reuse takes the real categories, cut to the synthetic prompts", func(t *testing.T) {
		w, why := transplant(PropPrefixReuse, real, syn, 512)
		if why != "" {
			t.Fatal(why)
		}
		cats := map[string]int{}
		recs := records(w)
		for i := range recs {
			r := &recs[i]
			cats[r.Category]++
			if r.InputTokens != 1000 || r.PrefixTokens != min(1536, r.InputTokens) {
				t.Fatalf("request %d: %+v, want its own length and the real prefix cut to it", i, r)
			}
		}
		if len(cats) != 4 || cats["own"] != 0 {
			t.Errorf("categories %v, want the real four", cats)
		}
	})
	t.Run("sessions: follow-ups resend their predecessor's context and share its blocks", func(t *testing.T) {
		real := workload("real", 200, 5, false, 1)
		for i := range real.Records {
			r := &real.Records[i]
			r.Session, r.Turn = int64(i/2+1), int32(i%2+1)
			if i%2 == 1 {
				prev := &real.Records[i-1]
				r.InputTokens = prev.InputTokens + prev.OutputTokens + 50
			}
		}
		w, why := transplant(PropSessions, loaded(t, real), syn, 512)
		if why != "" {
			t.Fatal(why)
		}
		recs := records(w)
		bySeq := map[int64]*traces.Record{}
		for i := range recs {
			bySeq[recs[i].Seq] = &recs[i]
		}
		follow := 0
		for i := range recs {
			r := &recs[i]
			if r.ParentSeq == traces.NotReported {
				continue
			}
			follow++
			p := bySeq[r.ParentSeq]
			if r.Session == 0 || r.Session != p.Session || r.Turn != p.Turn+1 || r.InputTokens != p.InputTokens+p.OutputTokens+50 {
				t.Fatalf("follow-up %+v of %+v: want the same session, the next turn, input = previous input + output + 50", r, p)
			}
			shared := int(p.InputTokens) / w.Meta.BlockSize
			if shared == 0 || !slices.Equal(r.PrefixBlocks[:shared], p.PrefixBlocks[:shared]) {
				t.Fatalf("follow-up blocks %v do not start with the predecessor's %d whole blocks %v", r.PrefixBlocks, shared, p.PrefixBlocks)
			}
		}
		if follow < 40 || follow > 50 {
			t.Errorf("%d follow-ups, want about half of 100", follow)
		}
	})
	t.Run("what cannot be built says why", func(t *testing.T) {
		plain := fixedLengths("real", 50, 2, 1000, 100, 3)
		for prop, want := range map[string]string{
			PropSessions:      "the real workload has no sessions",
			PropPrefixReuse:   "neither workload has shared prefixes",
			PropOutputLengths: "already has the real output lengths",
		} {
			if _, why := transplant(prop, loaded(t, plain), syn2(t, syn), 512); !strings.Contains(why, want) {
				t.Errorf("%s: %q, want %q", prop, why, want)
			}
		}
		one := loaded(t, Workload{Name: "real", Records: plain.Records[:1]})
		if _, why := transplant(PropArrivals, one, syn, 512); !strings.Contains(why, "fewer than two requests") {
			t.Errorf("arrivals from one request: %q", why)
		}
	})
}

// syn2 is syn without its one shared prefix.
func syn2(t *testing.T, syn Workload) Workload {
	recs := records(syn)
	recs[0].Category, recs[0].PrefixTokens = "", 0
	return loaded(t, Workload{Name: syn.Name, Records: recs, Meta: syn.Meta})
}

// A complement is a transplant the other way: the real workload with one
// property of the synthetic one, named for it; a pair applies both, in
// Properties order, and is named for both.
func TestComplementAndPair(t *testing.T) {
	real := loaded(t, kvBound("real", 100, 10, 2000, 1))
	syn := loaded(t, kvBound("synthetic", 80, 0.5, 200, 2))
	w, why := transplant(PropPromptLengths, syn, real, 512)
	if why != "" || w.Name != "real with synthetic prompt lengths" || len(w.reqs) != len(real.reqs) {
		t.Fatalf("complement %q (%d requests): %s", w.Name, len(w.reqs), why)
	}
	for i := range w.reqs {
		if w.reqs[i].arrival != real.reqs[i].arrival || w.reqs[i].in > 220 {
			t.Fatalf("request %d: arrival %d, %d prompt tokens; want the real arrival and a synthetic length", i, w.reqs[i].arrival, w.reqs[i].in)
		}
	}
	p, why := transplantAll([]string{PropArrivals, PropPromptLengths}, real, syn, 512)
	if why != "" || p.Name != "synthetic with real prompt lengths and arrivals" {
		t.Fatalf("pair %q: %s", p.Name, why)
	}
	if len(p.reqs) != len(real.reqs) || p.reqs[len(p.reqs)-1].arrival != real.reqs[len(real.reqs)-1].arrival {
		t.Errorf("the pair has %d requests ending at %d, want the real %d ending at %d", len(p.reqs), p.reqs[len(p.reqs)-1].arrival, len(real.reqs), real.reqs[len(real.reqs)-1].arrival)
	}
	for i := range p.reqs {
		if p.reqs[i].in < 1700 {
			t.Fatalf("pair request %d has %d prompt tokens, want a real length", i, p.reqs[i].in)
		}
	}
	// A property either workload lacks stops the pair, and says which.
	if _, why := transplantAll([]string{PropArrivals, PropSessions}, real, syn, 512); !strings.HasPrefix(why, "sessions: the real workload has no sessions") {
		t.Errorf("pair with sessions: %q", why)
	}
	if _, why := transplant(PropSessions, syn, real, 512); !strings.Contains(why, "the synthetic workload has no sessions") {
		t.Errorf("complement of sessions: %q", why)
	}
}
