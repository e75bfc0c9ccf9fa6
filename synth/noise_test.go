package synth

import (
	"cmp"
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// chats is a conversational trace as capture writes one: sessions of a
// few categories, each with a system prompt of its own length, whose
// turns resend the conversation so far with a new message; single-shot
// rows in between; prefix blocks of 16 tokens hashed over the prompt (the
// trailing partial block too) and, with k ≥ 2, every block fewer than k
// rows share replaced by an id of its own (capture's k-anonymity).
func chats(sessions int, seed uint64, k int) ([]traces.Record, traces.Meta) {
	const bs = 16
	rng := rand.New(rand.NewPCG(seed, 7))
	type cat struct {
		name          string
		system, turns int
	}
	cats := []cat{{"support", 150, 6}, {"coder", 260, 4}, {"summarize", 40, 1}, {"", 0, 3}}
	var recs []traces.Record
	var t int64
	next := int64(1 << 40)
	hash := map[string]int64{}
	blockOf := func(prefix []int32) int64 {
		key := string(rune(len(prefix))) + "/" + fmtInts(prefix)
		if id, ok := hash[key]; ok {
			return id
		}
		next++
		hash[key] = next
		return next
	}
	for s := 1; s <= sessions; s++ {
		t += int64(rng.ExpFloat64() * float64(2*time.Second))
		c := cats[rng.IntN(len(cats))]
		var prompt []int32
		for i := range c.system {
			prompt = append(prompt, int32(1000*len(c.name)+i))
		}
		turns := 1 + rng.IntN(c.turns)
		single := rng.IntN(4) == 0
		at := t
		for turn := 1; turn <= turns; turn++ {
			for range 10 + rng.IntN(120) {
				prompt = append(prompt, int32(100000+rng.IntN(50000)))
			}
			r := traces.NewRecord()
			r.ArrivalNs, r.Category, r.PrefixTokens = at, c.name, int32(c.system)
			if !single {
				r.Session, r.Turn = int64(s), int32(turn)
			}
			r.InputTokens, r.OutputTokens = int32(len(prompt)), int32(10+rng.IntN(200))
			r.Model, r.API = "m", traces.APIChat
			for i := bs; i < len(prompt)+bs; i += bs {
				r.PrefixBlocks = append(r.PrefixBlocks, blockOf(prompt[:min(i, len(prompt))]))
			}
			recs = append(recs, r)
			for range r.OutputTokens {
				prompt = append(prompt, int32(200000+rng.IntN(50000)))
			}
			at += int64((2 + 8*rng.Float64()) * float64(time.Second))
			if single {
				break
			}
		}
	}
	if k >= 2 {
		uses := map[int64]int{}
		for _, r := range recs {
			for _, b := range r.PrefixBlocks {
				uses[b]++
			}
		}
		for i := range recs {
			for j, b := range recs[i].PrefixBlocks {
				if uses[b] < k {
					next++
					recs[i].PrefixBlocks[j] = next
				}
			}
		}
	}
	inArrivalOrder(recs)
	meta := traces.NewMeta("test")
	meta.BlockSize, meta.KThreshold = bs, k
	return recs, meta
}

func fmtInts(x []int32) string {
	b := make([]byte, 0, 4*len(x))
	for _, v := range x {
		b = append(b, byte(v), byte(v>>8), byte(v>>16), byte(v>>24))
	}
	return string(b)
}

// resample draws the real trace's units (its sessions and single-shot
// rows) with replacement, each at the start of the real unit in its
// place, its rows at their offsets: a trace drawn like the real one. A
// block only one unit uses gets an id of its own in each copy (a copied
// conversation does not reuse its original's), a shared one keeps its id.
func resample(real []traces.Record, seed uint64) []traces.Record {
	rng := rand.New(rand.NewPCG(seed, 11))
	type unit struct{ rows []traces.Record }
	var units []*unit
	bySess := map[int64]*unit{}
	owner := map[int64]*unit{}
	shared := map[int64]bool{}
	for _, r := range real {
		u := bySess[r.Session]
		if u == nil || r.Session == 0 {
			u = &unit{}
			units = append(units, u)
			if r.Session != 0 {
				bySess[r.Session] = u
			}
		}
		u.rows = append(u.rows, r)
		for _, b := range r.PrefixBlocks {
			if o, ok := owner[b]; ok && o != u {
				shared[b] = true
			}
			owner[b] = u
		}
	}
	var out []traces.Record
	next := int64(1 << 50)
	for i, slot := range units {
		u := units[rng.IntN(len(units))]
		fresh := map[int64]int64{}
		for _, r := range u.rows {
			c := r
			c.ArrivalNs = slot.rows[0].ArrivalNs + r.ArrivalNs - u.rows[0].ArrivalNs
			if c.Session != 0 {
				c.Session = int64(i + 1)
			}
			c.PrefixBlocks = slices.Clone(r.PrefixBlocks)
			for j, b := range c.PrefixBlocks {
				if shared[b] {
					continue
				}
				if _, ok := fresh[b]; !ok {
					next++
					fresh[b] = next
				}
				c.PrefixBlocks[j] = fresh[b]
			}
			out = append(out, c)
		}
	}
	slices.SortStableFunc(out, func(a, b traces.Record) int { return cmp.Compare(a.ArrivalNs, b.ArrivalNs) })
	for i := range out {
		out[i].Seq = int64(i)
	}
	return out
}

// A trace drawn like the real one passes every check about as often as
// the stated confidence promises: resamples of a conversational trace
// pass at 95 % in at least 45 of 50 draws.
func TestResamplePassesAtConfidence(t *testing.T) {
	real, _ := chats(200, 1, 5)
	pass := 0
	var failed []string
	for seed := range uint64(50) {
		rep := Check(real, resample(real, seed+1), DefaultThresholds())
		if rep.Pass {
			pass++
			continue
		}
		for _, c := range rep.Checks {
			if !c.Pass {
				failed = append(failed, c.Name)
			}
		}
	}
	t.Logf("%d of 50 resamples passed; failed checks: %v", pass, failed)
	if pass < 45 {
		t.Errorf("%d of 50 resamples passed at 95 %% confidence, want at least 45; failed: %v", pass, failed)
	}
}

// Fitted on a conversational trace (growing prompts, a trailing partial
// block, k-anonymity), the generated workload reuses prefixes as the real
// one does, overall within 3 points in at least 4 of 5 seeds, and passes
// every check in at least 4 of 5.
func TestConversationReuseMatches(t *testing.T) {
	real, meta := chats(300, 2, 5)
	m := fitModelMeta(t, real, meta)
	if m.BlockK != 5 || m.Version != ModelVersion {
		t.Errorf("model block_k %d version %d, want 5 and %d", m.BlockK, m.Version, ModelVersion)
	}
	within, passed := 0, 0
	for seed := range uint64(5) {
		syn := gen(t, m, genSeed(seed+1))
		rep := Check(real, syn, DefaultThresholds())
		d := math.Abs(rep.Real.PrefixReuse - rep.Synth.PrefixReuse)
		t.Logf("seed %d: reuse real %.3f synthetic %.3f, pass %v", seed+1, rep.Real.PrefixReuse, rep.Synth.PrefixReuse, rep.Pass)
		if d <= 0.03 {
			within++
		}
		if rep.Pass {
			passed++
		} else {
			for _, c := range rep.Checks {
				if !c.Pass {
					t.Logf("  %s %.4f > %.4f (%s)", c.Name, c.Value, c.Limit, c.At)
				}
			}
		}
	}
	if within < 4 || passed < 4 {
		t.Errorf("reuse within 3 points in %d of 5 seeds, every check passed in %d; want at least 4 of each", within, passed)
	}
}

// The fixes FindFixes prints for a deliberately mis-scaled workload
// (prompts 1.6×, outputs 0.5×), applied together, pass the check: each
// changes its own dimension, and none makes another check fail.
func TestFixesComposeOnMisScaledWorkload(t *testing.T) {
	real, meta := chats(300, 3, 5)
	m := fitModelMeta(t, real, meta)
	bad := with(genSeed(4), func(o *GenOptions) { o.InputLengthScale = 1.6; o.OutputLengthScale = 0.5 })
	if rep := Check(real, gen(t, m, bad), DefaultThresholds()); rep.Pass {
		t.Fatal("the mis-scaled workload passes the check: the test shows nothing")
	}
	opts, fixes, rep, err := m.FindFixes(context.Background(), real, bad, DefaultThresholds())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range fixes {
		got[f.Option] = f.Value
		t.Logf("fix %s: %s = %s", f.Check, f.Option, f.Value)
	}
	if got["GenOptions.InputLengthScale"] == "" || got["GenOptions.OutputLengthScale"] == "" {
		t.Errorf("fixes %v, want a prompt scale and an output scale", fixes)
	}
	if opts.LengthScale != 1 {
		t.Errorf("a fix changed LengthScale (both dimensions): %g", opts.LengthScale)
	}
	// Applied together, from the options as printed, they pass.
	final := Check(real, gen(t, m, opts), DefaultThresholds())
	if !final.Pass || !rep.Pass {
		for _, c := range final.Checks {
			if !c.Pass {
				t.Errorf("after the fixes %s %.4f > %.4f", c.Name, c.Value, c.Limit)
			}
		}
	}
}
