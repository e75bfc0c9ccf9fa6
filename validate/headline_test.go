package validate

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// judged is a result holding the conclusions cs as Run leaves them once
// judged (targets a, the baseline, and the targets cs name).
func judged(cs ...Conclusion) *Result {
	r := &Result{Baseline: "a", Workloads: [2]string{"real", "synthetic"}, Speed: 1, Confidence: 0.95, MinEffect: DefaultMinEffect, opts: DefaultOptions()}
	seen := map[string]bool{"a": true}
	r.Targets = []TargetInfo{{Name: "a", Config: "sim"}}
	for i := range cs {
		c := &cs[i]
		if c.Verdict == "" {
			c.Verdict = verdict(c.Real, c.Synthetic, &r.opts)
		}
		if !seen[c.Target] {
			seen[c.Target] = true
			r.Targets = append(r.Targets, TargetInfo{Name: c.Target, Config: "sim:max-num-seqs=8"})
		}
		if !seen["m:"+c.Metric] {
			seen["m:"+c.Metric] = true
			ms, _ := ParseMetrics(c.Metric)
			r.Metrics = append(r.Metrics, ms...)
		}
	}
	r.Conclusions = cs
	r.Counts = countConclusions(cs)
	return r
}

// on is a conclusion of metric on target with a verdict made from
// effects that give it.
func on(metric, target, v string) Conclusion {
	c := Conclusion{Metric: metric, Target: target, Baseline: "a"}
	switch v {
	case VerdictHolds:
		c.Real, c.Synthetic = eff(0.30, 0.20, 0.40), eff(0.32, 0.22, 0.42)
	case VerdictMagnitudeOff:
		c.Real, c.Synthetic = eff(0.30, 0.28, 0.32), eff(1.20, 1.10, 1.30)
	case VerdictReversed:
		c.Real, c.Synthetic = eff(0.30, 0.20, 0.40), eff(-0.30, -0.40, -0.20)
	case VerdictNotSignificantSynthetic:
		c.Real, c.Synthetic = eff(-0.40, -0.50, -0.30), eff(-0.10, -0.22, 0.01)
	case VerdictNotSignificantReal:
		c.Real, c.Synthetic = eff(0.04, -0.03, 0.36), eff(2.96, 2.50, 3.80)
	}
	c.Verdict = v
	return c
}

// fleetLike are the conclusions of docs/fleet.md's three-router example:
// two not significant on synthetic, one on real, one magnitude off, two
// that hold.
func fleetLike() *Result {
	return judged(
		on("ttft_p50", "pa", VerdictHolds),
		on("ttft_p50", "lo", VerdictNotSignificantSynthetic),
		on("ttft_p99", "pa", VerdictMagnitudeOff),
		on("ttft_p99", "lo", VerdictNotSignificantSynthetic),
		on("e2e_p99", "pa", VerdictNotSignificantReal),
		on("e2e_p99", "lo", VerdictHolds),
	)
}

// restoring is a transplant's effects that restore the named conclusions
// of r and leave the others where the synthetic workload had them.
func restoring(r *Result, names ...string) []AblatedEffect {
	o := r.opts
	var out []AblatedEffect
	for _, c := range r.broken() {
		e := c.Synthetic
		for _, n := range names {
			if n == c.name() {
				e = c.Real
			}
		}
		out = append(out, AblatedEffect{Metric: c.Metric, Target: c.Target, Effect: e, GapClosed: gapClosed(c, e), Restores: restores(c, e, &o)})
	}
	return out
}

// single is a transplant of prop with effects, counted as ablate counts.
func single(r *Result, prop string, effects []AblatedEffect) Transplant {
	tr := Transplant{Property: prop, Broken: r.Counts.Broken(), Effects: effects, Evidence: "mean prompt 100 tokens → 200 tokens (real 200 tokens)"}
	var gaps []float64
	for _, e := range effects {
		c := conclusionOf(r.Conclusions, e)
		if e.Restores {
			tr.Restored++
			if !carriesOver(c) {
				tr.RestoredDecisions++
			}
		}
		tr.Closes = tr.Closes || movesTowardReal(c, e.Effect)
		gaps = append(gaps, e.GapClosed)
	}
	tr.GapClosed = median(gaps)
	return tr
}

// says checks that text holds each of wants; what names the text in a
// failure.
func says(t *testing.T, what, text string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(text, want) {
			t.Errorf("%s lacks %q", what, want)
		}
	}
}

func text(t *testing.T, r *Result) string {
	t.Helper()
	var b bytes.Buffer
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// The headline, the tally under the table and the ablation count the same
// conclusions: the decisions that do not carry over and the sizes off.
func TestOneCountEverywhere(t *testing.T) {
	r := fleetLike()
	r.Ablation = &Ablation{Status: AblationRan, Targets: []string{"a", "pa", "lo"}, Runs: 15}
	r.Ablation.Properties = []Transplant{
		single(r, PropPrefixReuse, restoring(r, "e2e_p99 of pa")),
		single(r, PropSessions, restoring(r, "ttft_p99 of pa")),
		single(r, PropArrivals, restoring(r)),
	}
	r.explain()
	r.Conclusion = r.conclude()
	out := text(t, r)
	t.Log("\n" + out)
	says(t, "the report", out,
		"The decision does not carry over to real traffic for 3 of 6 conclusions",
		"The other 3 carry over (",
		"1 of them with the size off",
		"Proven reason (ablation): prefix reuse: the synthetic workload with the real prefix reuse reaches the real decision for 1 of the 3 that do not carry over (e2e_p99 of pa).",
		"Of 6 conclusions: 3 do not carry over (2 not significant on synthetic, 1 not significant on real); 1 carries over with the size off (magnitude off); 2 hold.",
		"the 4 conclusions that do not hold (3 decisions that do not carry over, 1 with the size off)",
		"prefix reuse    decisions 1 of 3 (e2e_p99 of pa), sizes 0 of 1;",
		"sessions        decisions 0 of 3, sizes 1 of 1;",
		"closes none of the gap (not a reason): arrivals",
	)
	// The decisive reason comes first, then the one that restores only a
	// size, each with its evidence.
	if len(r.Reasons) != 2 || r.Reasons[0].Property != PropPrefixReuse || r.Reasons[1].Property != PropSessions ||
		r.Reasons[0].RestoredDecisions != 1 || r.Reasons[1].RestoredDecisions != 0 || r.Reasons[1].Restored != 1 {
		t.Errorf("reasons %+v", r.Reasons)
	}
	if !strings.Contains(r.Reasons[0].Detail, "with the real prefix reuse, mean prompt 100 tokens → 200 tokens") {
		t.Errorf("the reason's detail %q is not its transplant's evidence", r.Reasons[0].Detail)
	}
	// Every count in the output is one of the tally's.
	nums := regexp.MustCompile(`(\d+) of (?:the )?(\d+)`).FindAllStringSubmatch(out, -1)
	allowed := map[int]bool{6: true, 3: true, 1: true, 4: true, 2: true}
	for _, m := range nums {
		if n, _ := strconv.Atoi(m[2]); !allowed[n] {
			t.Errorf("%q counts out of %s, none of the tally's counts", m[0], m[2])
		}
	}
}

// When no single property restores a decision, the headline says so and
// says what restored a size; with all decisions carried over, the size is
// the headline's proof.
func TestHeadlineSizesOnly(t *testing.T) {
	r := fleetLike()
	r.Ablation = &Ablation{Status: AblationRan, Targets: []string{"a", "pa", "lo"}}
	r.Ablation.Properties = []Transplant{single(r, PropSessions, restoring(r, "ttft_p99 of pa"))}
	r.explain()
	if got := r.ablationSentence(); !strings.Contains(got, "By ablation, with the real sessions the synthetic workload reaches the real size for 1 of the 1 with the size off.") {
		t.Errorf("sizes only: %q", got)
	}
	sizes := judged(on("ttft_p50", "b", VerdictMagnitudeOff), on("ttft_p99", "b", VerdictMagnitudeOff), on("e2e_p99", "b", VerdictHolds))
	sizes.Ablation = &Ablation{Status: AblationRan, Targets: []string{"a", "b"}}
	sizes.Ablation.Properties = []Transplant{single(sizes, PropArrivals, restoring(sizes, "ttft_p99 of b"))}
	sizes.explain()
	got := sizes.conclude()
	says(t, fmt.Sprintf("headline %q", got), got, "The decision carries over: all 3 conclusions", "Only the size differs for 2",
		"Proven reason (ablation): arrivals: the synthetic workload with the real arrivals reaches the real size for 1 of the 2 with the size off (ttft_p99 of b).")
}

// The combination search in the headline: what it found, that the budget
// ran out, that it is off, or the nearest miss.
func TestHeadlineCombination(t *testing.T) {
	base := func() *Result {
		r := judged(on("ttft_p50", "b", VerdictNotSignificantSynthetic), on("ttft_p99", "b", VerdictNotSignificantSynthetic))
		r.Ablation = &Ablation{Status: AblationRan, Targets: []string{"a", "b"}}
		r.Ablation.Properties = []Transplant{single(r, PropPromptLengths, restoring(r)), single(r, PropArrivals, restoring(r))}
		return r
	}
	necessaryTo := func(r *Result, prop string) Counterfactual {
		cf := Counterfactual{Kind: CounterfactualComplement, Properties: []string{prop}, GapClosed: 1, Evidence: "rate 10 req/s → 0.5 req/s (synthetic 0.5 req/s)"}
		for _, c := range r.Conclusions {
			cf.Effects = append(cf.Effects, AblatedEffect{Metric: c.Metric, Target: c.Target, Effect: c.Synthetic, Necessary: true})
			cf.Reaches++
		}
		return cf
	}
	for _, tc := range []struct {
		name  string
		setup func(r *Result) *Combination
		want  []string
		not   []string
	}{
		{"a pair and two necessary properties", func(r *Result) *Combination {
			pair := Counterfactual{Kind: CounterfactualPair, Properties: []string{PropPromptLengths, PropArrivals}, Reaches: 2, GapClosed: 0.98,
				Effects: restoring(r, "ttft_p50 of b", "ttft_p99 of b")}
			return &Combination{Conclusions: []string{"ttft_p50 of b", "ttft_p99 of b"}, Budget: 24, Runs: 6,
				Tried: []Counterfactual{necessaryTo(r, PropPromptLengths), necessaryTo(r, PropArrivals), pair}}
		}, []string{
			"By ablation, no single property of the real workload restores any of them: the real prompt lengths and arrivals together restore ttft_p50 of b, ttft_p99 of b",
			"the real prompt lengths and arrivals are each necessary to ttft_p50 of b, ttft_p99 of b",
		}, []string{"budget"}},
		{"one necessary property", func(r *Result) *Combination {
			return &Combination{Conclusions: []string{"ttft_p50 of b", "ttft_p99 of b"}, Budget: 24, Runs: 4,
				Tried: []Counterfactual{necessaryTo(r, PropPrefixReuse)}}
		}, []string{"the real prefix reuse is necessary to ttft_p50 of b, ttft_p99 of b (with the synthetic one instead, the real workload decides as the synthetic one does)"}, nil},
		{"the budget ran out", func(r *Result) *Combination {
			return &Combination{Conclusions: []string{"ttft_p50 of b", "ttft_p99 of b"}, Budget: 2, Runs: 2,
				Tried: []Counterfactual{{Kind: CounterfactualComplement, Properties: []string{PropPromptLengths}, GapClosed: 0.2}},
				Left:  []string{"complement: arrivals", "pair: prompt lengths and arrivals"}}
		}, []string{"the search ran out of its budget of 2 extra runs (Options.CombinationBudget) with 2 counterfactual workloads left"}, []string{"it lies in"}},
		{"the search is off", func(r *Result) *Combination {
			return &Combination{Conclusions: []string{"ttft_p50 of b", "ttft_p99 of b"}, Left: []string{"complement: arrivals"}}
		}, []string{"the search for a combination is off (Options.CombinationBudget 0)"}, []string{"ran out"}},
		{"nothing found: the nearest miss", func(r *Result) *Combination {
			return &Combination{Conclusions: []string{"ttft_p50 of b", "ttft_p99 of b"}, Budget: 24, Runs: 6, Tried: []Counterfactual{
				{Kind: CounterfactualComplement, Properties: []string{PropArrivals}, GapClosed: 1.18},
				{Kind: CounterfactualPair, Properties: []string{PropPromptLengths, PropArrivals}, GapClosed: 0.4},
			}}
		}, []string{"no complement shows a real property necessary and no pair restores them (6 extra runs): it lies in more properties together, or in one not transplanted; nearest, the real workload with the synthetic arrivals moves its effects 118% of the way to the synthetic ones (the median) without reaching the synthetic conclusions."}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := base()
			r.Ablation.Combination = tc.setup(r)
			r.explain()
			got := r.conclude()
			says(t, fmt.Sprintf("headline %q", got), got, tc.want...)
			for _, w := range tc.not {
				if strings.Contains(got, w) {
					t.Errorf("headline %q says %q", got, w)
				}
			}
			out := text(t, r)
			if !strings.Contains(out, "No single property restores ttft_p50 of b, ttft_p99 of b; combinations (") {
				t.Errorf("the report has no combination section:\n%s", out)
			}
			for _, l := range r.Ablation.Combination.Left {
				if !strings.Contains(out, l) {
					t.Errorf("the report does not list %q as left unrun:\n%s", l, out)
				}
			}
		})
	}
}

// The legend explains each verdict word the table uses, and no other, and
// both ways an effect is marked not significant.
func TestLegend(t *testing.T) {
	r := judged(on("ttft_p50", "b", VerdictReversed), on("ttft_p99", "b", VerdictHolds))
	r.Conclusions[1].Real, r.Conclusions[1].Synthetic = eff(0.01, 0.005, 0.015), eff(0.0, -0.01, 0.01)
	r.Conclusions[1].Verdict = verdict(r.Conclusions[1].Real, r.Conclusions[1].Synthetic, &r.opts)
	r.Counts = countConclusions(r.Conclusions)
	out := text(t, r)
	t.Log("\n" + out)
	says(t, "the report", out,
		"Of 2 conclusions: 1 does not carry over (1 reversed); 1 holds.",
		"  holds: both workloads show no effect, or the same direction with sizes that agree (intervals overlap, or within 50% of the real change)",
		"  reversed: both significant, in opposite directions",
		"  ns: not significant: the 95% interval includes 0; counted as no effect",
		"  ns (<2%): the interval excludes 0 but the change is under the minimum effect (Options.MinEffect, 2%); counted as no effect",
		"+1.0% [+0.5, +1.5] ns (<2%)",
		"+0.0% [-1.0, +1.0] ns ",
	)
	for _, absent := range []string{"magnitude off:", "not significant on real:", "not significant on synthetic:"} {
		if strings.Contains(out, absent) {
			t.Errorf("the legend explains %q, which the table does not use", absent)
		}
	}
	// The headline marks a small effect the same way.
	if got := r.pctShort(r.Conclusions[1].Real); got != "+1% ns (<2%)" {
		t.Errorf("pctShort = %q", got)
	}
	// A minimum effect of 5 % says 5 %.
	r.MinEffect = 0.05
	if got := r.nsMark(Effect{Change: 0.03, CILow: 0.01, CIHigh: 0.05, BelowMinEffect: true}); got != " ns (<5%)" {
		t.Errorf("nsMark at a 5%% minimum: %q", got)
	}
}

// The HTML page carries the same legend, counts and ablation as the text.
func TestHTMLCarriesTheCounts(t *testing.T) {
	r := fleetLike()
	r.Ablation = &Ablation{Status: AblationRan, Targets: []string{"a", "pa", "lo"}}
	r.Ablation.Properties = []Transplant{single(r, PropPrefixReuse, restoring(r, "e2e_p99 of pa"))}
	r.explain()
	r.Conclusion = r.conclude()
	var b bytes.Buffer
	if err := r.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	says(t, "the page", page,
		"Of 6 conclusions: 3 do not carry over",
		"the 4 conclusions that do not hold (3 decisions that do not carry over, 1 with the size off)",
		"decisions 1 of 3 (e2e_p99 of pa), sizes 0 of 1",
		"ns: not significant",
		"for 3 of 6 conclusions",
	)
}
