package validate

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/traces"
)

// kvBound is a workload whose requests need prompt tokens and a rate
// together to fill a small KV cache: n requests at rate req/s (Poisson),
// prompts of in tokens (±10 %), and the same outputs (64–127 tokens, from
// one seed) whatever in and rate are, so that their output lengths never
// differ between two such workloads.
func kvBound(name string, n int, rate float64, in int32, seed uint64) Workload {
	rng := rand.New(rand.NewPCG(seed, 17))
	outs := rand.New(rand.NewPCG(99, 17))
	return poisson(name, n, rate, rng, func(_ int, r *traces.Record) {
		r.InputTokens = in - in/10 + int32(rng.IntN(int(in/5)))
		r.OutputTokens = int32(64 + outs.IntN(64))
	})
}

// twoProperties is a conclusion that needs two properties together: a
// KV cache of 800 blocks (b) against one of 26000 (a) fills only under long
// prompts (2000 tokens) at a high rate (10 req/s), which the real workload
// has and the synthetic one (200 tokens at 0.5 req/s) has neither of. Long
// prompts alone or a high rate alone fit in b's cache.
func twoProperties() (real, syn Workload, o Options) {
	real = kvBound("real", 300, 10, 2000, 1)
	syn = kvBound("synthetic", 300, 0.5, 200, 2)
	o = with(DefaultOptions(), func(o *Options) { o.Metrics = mustMetrics("ttft_p50,ttft_p99") })
	return real, syn, o
}

func mustMetrics(s string) []Metric {
	ms, err := ParseMetrics(s)
	if err != nil {
		panic(err)
	}
	return ms
}

func TestCombinationNamesThePairAndWhatIsNecessary(t *testing.T) {
	real, syn, o := twoProperties()
	o.Targets = targets(t, "a=sim", "b=sim:num-gpu-blocks=800")
	res := validateLogged(t, real, syn, o)
	if res.Counts.NotCarried != 2 || res.Counts.ByVerdict[VerdictNotSignificantSynthetic] != 2 {
		t.Fatalf("counts %+v: the test wants both conclusions significant on real only", res.Counts)
	}
	for _, tr := range res.Ablation.Properties {
		if tr.Restored > 0 {
			t.Fatalf("%s restores %d alone: the test wants no single property to", tr.Property, tr.Restored)
		}
	}
	c := res.Ablation.Combination
	if c == nil || len(c.Conclusions) != 2 || len(c.Left) > 0 {
		t.Fatalf("combination %+v: want both conclusions searched within the budget", c)
	}
	var pair *Counterfactual
	necessary := map[string]int{}
	for i, cf := range c.Tried {
		switch {
		case cf.Kind == CounterfactualPair && cf.NotBuilt == "":
			pair = &c.Tried[i]
		case cf.Kind == CounterfactualComplement && cf.NotBuilt == "":
			necessary[cf.Properties[0]] = cf.Reaches
		}
	}
	if pair == nil || !slices.Equal(pair.Properties, []string{PropPromptLengths, PropArrivals}) || pair.Reaches != 2 {
		t.Errorf("pair %+v: want prompt lengths and arrivals to restore both", pair)
	}
	if necessary[PropPromptLengths] != 2 || necessary[PropArrivals] != 2 {
		t.Errorf("complements %v: want each of prompt lengths and arrivals necessary to both", necessary)
	}
	// Two complements and one pair on a and b: 6 runs.
	if c.Runs != 6 {
		t.Errorf("the search took %d runs, want 6", c.Runs)
	}
	says(t, fmt.Sprintf("headline %q", res.Conclusion), res.Conclusion,
		"By ablation, no single property of the real workload restores any of them: the real prompt lengths and arrivals together restore ttft_p50 of b, ttft_p99 of b",
		"the real prompt lengths and arrivals are each necessary to ttft_p50 of b, ttft_p99 of b",
	)
	if len(res.Reasons) == 0 || res.Reasons[0].Property != "prompt lengths and arrivals" || !res.Reasons[0].Proven {
		t.Errorf("first reason %+v, want the pair, proven", res.Reasons)
	}
}

// A budget too small for the search says what it left: here room for one
// counterfactual workload on a and b (the most promising complement), the
// rest listed as not run, and the headline says the budget ran out.
func TestCombinationBudgetRunsOut(t *testing.T) {
	real, syn, o := twoProperties()
	o.Targets = targets(t, "a=sim", "b=sim:num-gpu-blocks=800")
	o.CombinationBudget = 3
	res := validateLogged(t, real, syn, o)
	c := res.Ablation.Combination
	if c == nil || c.Budget != 3 || c.Runs != 2 {
		t.Fatalf("combination %+v: want 2 of a budget of 3 runs", c)
	}
	if want := []string{"complement: arrivals", "pair: prompt lengths and arrivals"}; !slices.Equal(c.Left, want) {
		t.Errorf("left %q, want %q", c.Left, want)
	}
	if !strings.Contains(res.Conclusion, "the search ran out of its budget of 3 extra runs (Options.CombinationBudget) with 2 counterfactual workloads left") {
		t.Errorf("headline %q does not say the budget ran out", res.Conclusion)
	}
	// What the budget allowed still counts: the complement it ran.
	if !strings.Contains(res.Conclusion, "the real prompt lengths are necessary to ttft_p50 of b, ttft_p99 of b") {
		t.Errorf("headline %q does not say what the complement it ran found", res.Conclusion)
	}
	// Off: nothing runs, and it says so.
	o.CombinationBudget = 0
	res = validateLogged(t, real, syn, o)
	if c := res.Ablation.Combination; c == nil || c.Runs != 0 || c.Budget != 0 || len(c.Left) != 3 || res.Ablation.Runs != 4 {
		t.Errorf("search off: combination %+v, ablation runs %d; want none run, 3 left, the 4 single runs", c, res.Ablation.Runs)
	}
	if !strings.Contains(res.Conclusion, "the search for a combination is off") {
		t.Errorf("headline %q", res.Conclusion)
	}
}

// When a single transplant restores every conclusion, there is no search.
func TestNoCombinationWhenASinglePropertyRestores(t *testing.T) {
	real := workload("real", 300, 6, true, 1)
	syn := fixedLengths("synthetic", 300, 6, 1786, 128, 2)
	res := validateLogged(t, real, syn, with(targeted(t, "a=sim", "b=sim:prefix-caching=false"), func(o *Options) { o.Metrics = mustMetrics("ttft_p50") }))
	if res.Ablation.Combination != nil {
		t.Errorf("combination %+v, want none: prefix reuse restores the one conclusion", res.Ablation.Combination)
	}
}

// Whatever the budget, the search never runs more than it allows, every
// counterfactual workload it plans is either tried or listed as left, and
// a larger budget runs at least what a smaller one did.
func TestCombinationKeepsItsBudget(t *testing.T) {
	real, syn, o := twoProperties()
	o.Targets = targets(t, "a=sim", "b=sim:num-gpu-blocks=800")
	planned, last := -1, -1
	for _, budget := range []int{1, 2, 4, 5, 6, 100} {
		o.CombinationBudget = budget
		res := mustRun(t, real, syn, o)
		c := res.Ablation.Combination
		if c.Runs > budget || res.Ablation.Runs != 4+c.Runs {
			t.Errorf("budget %d: the search ran %d, the ablation %d (4 single runs)", budget, c.Runs, res.Ablation.Runs)
		}
		built := 0
		for _, cf := range c.Tried {
			if cf.NotBuilt == "" {
				built++
			}
		}
		if n := built + len(c.Left); planned >= 0 && n != planned {
			t.Errorf("budget %d: %d tried and left, %d at the budget before", budget, n, planned)
		} else {
			planned = n
		}
		if c.Runs < last {
			t.Errorf("budget %d ran %d, fewer than a smaller budget's %d", budget, c.Runs, last)
		}
		last = c.Runs
	}
}
