package synth

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// agents is an agentic coding trace laid out as WEKA's kv-cache-tester
// conversations are: every session starts at 0 (the format has no start
// times) and its calls come at whole seconds; each session has a system
// prompt of its own (block ids are the session's: no two share one). The
// main thread resends its history plus the last output and 20–800 new
// tokens; one turn in twenty drops the last output's reasoning (a prompt a
// little shorter than the history); past a window of 24,000 tokens it
// compacts the history to a tenth of it; one turn in eight spawns a
// subagent (a fresh prompt of the system prompt and a task, parent_seq the
// spawning call) whose 1–4 calls interleave with the main thread's next
// ones, which name their own parents. Prefix blocks of 16 tokens are
// chained hashes of the prompt, the trailing partial block too.
func agents(sessions int, seed uint64) ([]traces.Record, traces.Meta) {
	const bs, window = 16, 24000
	rng := rand.New(rand.NewPCG(seed, 21))
	var recs []traces.Record
	tok := int32(0)
	fresh := func(n int) []int32 {
		out := make([]int32, n)
		for i := range out {
			tok++
			out[i] = tok
		}
		return out
	}
	type call struct {
		at     int64
		prompt []int32
		out    int32
		parent int // index in the session's calls, -1 = none
		sess   int64
	}
	for s := 1; s <= sessions; s++ {
		system := fresh(1000 + rng.IntN(3000))
		var calls []call
		// The main thread, then each subagent, as its own chain of calls.
		type thread struct {
			t      int64
			prompt []int32
			last   int // index in calls, -1 = none
		}
		main := thread{prompt: slices.Clone(system), last: -1}
		main.prompt = append(main.prompt, fresh(200+rng.IntN(1500))...)
		var subs []thread
		for range 20 + rng.IntN(60) {
			c := call{at: main.t, prompt: slices.Clone(main.prompt), out: int32(30 + rng.IntN(500)), parent: main.last, sess: int64(s)}
			calls = append(calls, c)
			main.last = len(calls) - 1
			if rng.IntN(8) == 0 {
				sub := thread{t: main.t + 1 + rng.Int64N(5), last: main.last, prompt: append(slices.Clone(system), fresh(300+rng.IntN(1200))...)}
				for range 1 + rng.IntN(4) {
					calls = append(calls, call{at: sub.t, prompt: slices.Clone(sub.prompt), out: int32(30 + rng.IntN(300)), parent: sub.last, sess: int64(s)})
					sub.last = len(calls) - 1
					sub.prompt = append(sub.prompt, fresh(int(calls[sub.last].out)+20+rng.IntN(400))...)
					sub.t += 2 + rng.Int64N(12)
				}
				subs = append(subs, sub)
			}
			main.t += 2 + int64(rng.ExpFloat64()*15)
			switch {
			case len(main.prompt) > window:
				keep := len(main.prompt) / 10
				main.prompt = append(slices.Clone(system), main.prompt[len(main.prompt)-keep:]...)
			case rng.IntN(20) == 0:
				main.prompt = append(main.prompt, fresh(20+rng.IntN(780))...)
			default:
				main.prompt = append(main.prompt, fresh(int(c.out)+20+rng.IntN(780))...)
			}
		}
		base := int64(len(recs))
		for _, c := range calls {
			r := traces.NewRecord()
			r.ArrivalNs, r.Session = c.at*1e9, c.sess
			r.InputTokens, r.OutputTokens, r.Model, r.API = int32(len(c.prompt)), c.out, "m", traces.APIChat
			h := uint64(14695981039346656037) ^ uint64(s)<<40
			for j, v := range c.prompt {
				h = (h ^ uint64(v)) * 1099511628211
				if (j+1)%bs == 0 || j == len(c.prompt)-1 {
					r.PrefixBlocks = append(r.PrefixBlocks, int64(h>>1))
				}
			}
			// Seq is the call's index in the trace for now, ParentSeq its
			// parent's; both are renumbered below.
			r.Seq = int64(len(recs))
			if c.parent >= 0 {
				r.ParentSeq = base + int64(c.parent)
			}
			recs = append(recs, r)
		}
	}
	// Arrival order (a session's calls in the order sent), then seq and
	// turn in that order, and each parent_seq renumbered with them.
	slices.SortStableFunc(recs, func(a, b traces.Record) int { return cmp.Compare(a.ArrivalNs, b.ArrivalNs) })
	seqOf := make(map[int64]int64, len(recs))
	for i := range recs {
		seqOf[recs[i].Seq] = int64(i)
	}
	turns := map[int64]int32{}
	for i := range recs {
		r := &recs[i]
		r.Seq = int64(i)
		if r.ParentSeq >= 0 {
			r.ParentSeq = seqOf[r.ParentSeq]
		}
		turns[r.Session]++
		r.Turn = turns[r.Session]
	}
	meta := traces.NewMeta("test")
	meta.BlockSize = bs
	return recs, meta
}

// Fitted on agentic conversations as WEKA's are laid out (every session
// starts at 0, subagents interleave with the main thread, histories
// compacted near a window), the generated workload's first turns reuse
// nothing, as the real ones (no two sessions share a block), ks.interarrival
// and cv compare the gaps within sessions (the sessions' starts carry no
// time), and its reuse is within 3 points of the real trace's and it
// passes every check in at least 4 of 5 seeds. (The WEKA conversations
// themselves, every check within its noise floor: bench/synth-fidelity.sh.)
func TestAgenticSessionsMatch(t *testing.T) {
	real, meta := agents(60, 1)
	m := fitModelMeta(t, real, meta)
	within, passed := 0, 0
	for seed := range uint64(5) {
		rep := Check(real, gen(t, m, genSeed(seed+1)), DefaultThresholds())
		if rep.SessionGaps == "" {
			t.Errorf("seed %d: the real sessions all start at 0, but the check compared the merged arrivals' gaps", seed+1)
		}
		first := false
		for _, g := range rep.ReuseByTurn {
			if g.Name == "turn 1" {
				first = true
				if g.Real != 0 || g.Synth > 0.01 {
					t.Errorf("seed %d: first turns reuse %.3f real, %.3f synthetic; want 0 and at most 0.01", seed+1, g.Real, g.Synth)
				}
			}
		}
		if !first {
			t.Errorf("seed %d: no reuse by turn compared for turn 1", seed+1)
		}
		if math.Abs(rep.Real.PrefixReuse-rep.Synth.PrefixReuse) <= 0.03 {
			within++
		}
		if rep.Pass {
			passed++
		}
		for _, c := range rep.Checks {
			if c.Skipped == "" && c.Value > c.NoiseFloor {
				t.Logf("seed %d: %s %.4f beyond its floor %.4f (%s)", seed+1, c.Name, c.Value, c.NoiseFloor, c.At)
			}
		}
		t.Logf("seed %d: %d rows, reuse real %.3f synthetic %.3f, pass %v", seed+1, rep.Synth.Records, rep.Real.PrefixReuse, rep.Synth.PrefixReuse, rep.Pass)
	}
	if within < 4 || passed < 4 {
		t.Errorf("reuse within 3 points in %d of 5 seeds, every check passed in %d; want at least 4 of each", within, passed)
	}
}

// A trace's conversations need not start as its single-shot rows do: when
// every session starts in the first half and every single-shot row comes
// in the second, the model keeps the sessions' starts per bin and the
// generated sessions start in the first half too.
func TestSessionStartsPerBin(t *testing.T) {
	var recs []traces.Record
	for i := range 400 {
		r := traces.NewRecord()
		r.ArrivalNs = int64(i) * int64(150*time.Millisecond)
		r.InputTokens, r.OutputTokens, r.Model, r.API = 100, 20, "m", traces.APIChat
		if i < 200 {
			r.Session, r.Turn = int64(i+1), 1
		}
		recs = append(recs, r)
	}
	for i := range 200 { // each session's second turn, 1 s later
		r := recs[i]
		r.ArrivalNs += int64(time.Second)
		r.Turn = 2
		recs = append(recs, r)
	}
	inArrivalOrder(recs)
	m := fitModel(t, recs)
	s := m.Classes[0].Sessions
	if m.Version != ModelVersion || len(s.StartsPerBin) != len(m.Classes[0].Arrival.CountsPerBin) {
		t.Fatalf("version %d, %d starts per bin for %d bins", m.Version, len(s.StartsPerBin), len(m.Classes[0].Arrival.CountsPerBin))
	}
	half := int64(200) * int64(150*time.Millisecond)
	late := 0
	syn := gen(t, m, genSeed(2))
	for _, r := range syn {
		if r.Turn == 1 && r.ArrivalNs >= half+int64(m.BinNs) {
			late++
		}
	}
	if late > 0 {
		t.Errorf("%d generated sessions start after the real ones stopped starting", late)
	}
}

// Every session has four turns 10 s apart, but those that start in the
// trace's last 30 s are cut by its end: counted, turns per session average
// well under 4; fitted as a survival distribution, they are 4.
func TestTurnsCensoredByTheEnd(t *testing.T) {
	var recs []traces.Record
	for s := range 300 {
		start := int64(s) * int64(time.Second) / 2
		for k := range 4 {
			at := start + int64(k)*10*int64(time.Second)
			if at > 150*int64(time.Second) {
				break
			}
			r := traces.NewRecord()
			r.ArrivalNs, r.Session, r.Turn = at, int64(s+1), int32(k+1)
			r.InputTokens, r.OutputTokens, r.Model, r.API = 100, 20, "m", traces.APIChat
			recs = append(recs, r)
		}
	}
	inArrivalOrder(recs)
	m := fitModel(t, recs)
	var counted, four, all float64
	for _, b := range m.Classes[0].Sessions.Turns.Bins {
		all += b.Count
		if b.Lo <= 4 && b.Hi >= 4 {
			four += b.Count
		}
	}
	counted = float64(len(recs)) / 300
	if counted > 3.8 || four/all < 0.99 {
		t.Errorf("counted %.2f turns per session, fitted share of 4 turns %.3f; want the count under 3.8 and the fit at least 0.99", counted, four/all)
	}
}
