package validate

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tokentrace/tokentrace/traces"
)

// The headline: the decision first (which conclusions keep their direction
// and significance on real traffic), then the best supported reason. Its
// counts are Result.Counts, as the table's tally and the ablation's are.

// carriesOver reports whether a conclusion's decision carries over: the
// same direction and significance on both workloads (holds, or the same
// direction with the magnitude off).
func carriesOver(c Conclusion) bool {
	return c.Verdict == VerdictHolds || c.Verdict == VerdictMagnitudeOff
}

// conclude says the answer in one or two sentences: first the decision
// (do the direction and significance carry over), then the detail and the
// reason.
func (r *Result) conclude() string {
	real, syn := r.Workloads[0], r.Workloads[1]
	if len(r.Conclusions) == 0 {
		return "No conclusion could be judged (see the warnings)."
	}
	var notCarried, off []Conclusion
	for _, c := range r.Conclusions {
		switch {
		case !carriesOver(c):
			notCarried = append(notCarried, c)
		case c.Verdict == VerdictMagnitudeOff:
			off = append(off, c)
		}
	}
	n := r.Counts.Judged
	item := func(c Conclusion) string {
		return fmt.Sprintf("%s (%s %s, %s %s)", c.Metric, syn, r.pctShort(c.Synthetic), real, r.pctShort(c.Real))
	}
	if r.Counts.NotCarried == 0 {
		if r.Counts.SizeOff == 0 {
			return fmt.Sprintf("The %s workload's conclusions hold on %s traffic: all %d judged (%s) agree in direction and magnitude.",
				syn, real, n, r.metricList())
		}
		var items []string
		for _, c := range off {
			items = append(items, item(c))
		}
		s := fmt.Sprintf("The decision carries over: all %d conclusions have the same direction and significance on %s traffic (%s). Only the size differs for %d: %s.",
			n, real, directions(r.carried(), r.Metrics), r.Counts.SizeOff, strings.Join(items, ", "))
		return s + r.reasonSentence()
	}
	// Group the conclusions that do not carry over by verdict and target.
	type key struct{ verdict, target, baseline string }
	var keys []key
	groups := map[key][]string{}
	for _, c := range notCarried {
		k := key{c.Verdict, c.Target, c.Baseline}
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], item(c))
	}
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s for %s vs %s on %s", k.verdict, k.target, k.baseline, strings.Join(groups[k], ", ")))
	}
	s := fmt.Sprintf("The decision does not carry over to %s traffic for %d of %d conclusions: %s.", real, r.Counts.NotCarried, n, strings.Join(parts, "; "))
	if carried := n - r.Counts.NotCarried; carried > 0 {
		s += fmt.Sprintf(" The other %d carry over (%s)", carried, directions(r.carried(), r.Metrics))
		if r.Counts.SizeOff > 0 {
			s += fmt.Sprintf(", %d of them with the size off", r.Counts.SizeOff)
		}
		s += "."
	}
	return s + r.reasonSentence()
}

// directions says what the carried conclusions decide, per target: worse,
// better or no different from the baseline, and on which metrics.
func directions(cs []Conclusion, ms []Metric) string {
	lower := map[string]bool{}
	for _, m := range ms {
		lower[m.Name] = m.LowerIsBetter()
	}
	var order []string
	by := map[string]*[3][]string{} // worse, better, none
	for _, c := range cs {
		g := by[c.Target]
		if g == nil {
			g = &[3][]string{}
			by[c.Target] = g
			order = append(order, c.Target)
		}
		switch d := decision(c.Real); {
		case d == 0:
			g[2] = append(g[2], c.Metric)
		case (d > 0) == lower[c.Metric]:
			g[0] = append(g[0], c.Metric)
		default:
			g[1] = append(g[1], c.Metric)
		}
	}
	var parts []string
	for _, t := range order {
		g := by[t]
		base := cs[0].Baseline
		var p []string
		if len(g[0]) > 0 {
			p = append(p, fmt.Sprintf("%s is worse than %s on %s", t, base, strings.Join(g[0], ", ")))
		}
		if len(g[1]) > 0 {
			p = append(p, fmt.Sprintf("%s is better than %s on %s", t, base, strings.Join(g[1], ", ")))
		}
		if len(g[2]) > 0 {
			p = append(p, fmt.Sprintf("no significant difference between %s and %s on %s", t, base, strings.Join(g[2], ", ")))
		}
		parts = append(parts, strings.Join(p, "; "))
	}
	return strings.Join(parts, "; ")
}

// carried are the conclusions whose decision carries over.
func (r *Result) carried() []Conclusion {
	var out []Conclusion
	for _, c := range r.Conclusions {
		if carriesOver(c) {
			out = append(out, c)
		}
	}
	return out
}

// reasonSentence says the best supported reason with its evidence: with an
// ablation, what it restores (ablationSentence); else the prior or the
// largest difference.
func (r *Result) reasonSentence() string {
	if a := r.Ablation; a != nil && a.Status == AblationRan {
		return r.ablationSentence()
	}
	if len(r.Reasons) == 0 {
		return ""
	}
	rs := r.Reasons[0]
	if rs.Evidence == EvidencePrior {
		return fmt.Sprintf(" Likely reason (a prior, not proven: the change of %s acts through it): %s (%s).", strings.Join(rs.Keys, ", "), rs.Property, rs.Detail)
	}
	return fmt.Sprintf(" The workloads differ most in %s (%s); not proven to be the reason.", rs.Property, rs.Detail)
}

// ablationSentence says what the ablation proves, in the headline's
// terms: the single property that restores decisions that do not carry
// over (or, where none does, sizes), then what the combination search
// found for the conclusions no single property restores.
func (r *Result) ablationSentence() string {
	real, syn := r.Workloads[0], r.Workloads[1]
	var s string
	if first := r.firstSingle(); first != nil && first.Restored > 0 {
		dec, size := r.splitConclusions(first.Conclusions)
		if len(dec) > 0 || r.Counts.NotCarried == 0 {
			s = fmt.Sprintf(" Proven reason (ablation): %s: the %s workload with the %s %s reaches %s.", first.Property, syn, real, first.Property, r.reachText(dec, size))
		} else {
			s = fmt.Sprintf(" By ablation, with the %s %s the %s workload reaches %s.", real, first.Property, syn, r.reachText(nil, size))
		}
	}
	s += r.combinationSentence(s == "")
	for _, t := range r.Ablation.Properties {
		if t.MovedAway {
			s += fmt.Sprintf(" The %s transplant did not carry the %s %s (its figures moved away from them), so that property is untested.", t.Property, real, t.Property)
		}
	}
	return s
}

// isAre is the verb a property takes: "prefix reuse is", "arrivals are".
func isAre(prop string) string {
	if prop == PropPrefixReuse {
		return "is"
	}
	return "are"
}

// firstSingle is the first reason that is one property's transplant.
func (r *Result) firstSingle() *Reason {
	for i := range r.Reasons {
		if rs := &r.Reasons[i]; rs.Evidence == EvidenceAblation && len(rs.Properties) == 0 {
			return rs
		}
	}
	return nil
}

// splitConclusions splits named conclusions into decisions that do not
// carry over and conclusions with the size off.
func (r *Result) splitConclusions(names []string) (decisions, sizes []string) {
	for _, c := range r.Conclusions {
		if !slices.Contains(names, c.name()) {
			continue
		}
		if carriesOver(c) {
			sizes = append(sizes, c.name())
		} else {
			decisions = append(decisions, c.name())
		}
	}
	return decisions, sizes
}

// reachText says what a counterfactual reaches, in the headline's counts:
// "the real decision for 1 of the 3 that do not carry over (e2e_p99 of
// pa) and the real size for 1 of the 1 with the size off (ttft_p99 of
// pa)".
func (r *Result) reachText(decisions, sizes []string) string {
	real := r.Workloads[0]
	// The names, unless all were reached.
	list := func(names []string, of int) string {
		if len(names) == of {
			return ""
		}
		return " (" + strings.Join(names, ", ") + ")"
	}
	var parts []string
	if n := r.Counts.NotCarried; len(decisions) > 0 {
		parts = append(parts, fmt.Sprintf("the %s decision for %d of the %d that do not carry over%s", real, len(decisions), n, list(decisions, n)))
	}
	if n := r.Counts.SizeOff; len(sizes) > 0 {
		parts = append(parts, fmt.Sprintf("the %s size for %d of the %d with the size off%s", real, len(sizes), n, list(sizes, n)))
	}
	return strings.Join(parts, " and ")
}

// combinationSentence says what the combination search found for the
// conclusions no single property restores: the pairs that restore them,
// the properties found necessary, the nearest miss, or that the budget
// ran out. lead: nothing of the ablation was said before it.
func (r *Result) combinationSentence(lead bool) string {
	c := r.Ablation.Combination
	if c == nil {
		return ""
	}
	real, syn := r.Workloads[0], r.Workloads[1]
	which := strings.Join(c.Conclusions, ", ")
	if len(c.Conclusions) == r.Counts.Broken() {
		which = "any of them"
	}
	s := " No single property restores " + which
	if lead {
		s = fmt.Sprintf(" By ablation, no single property of the %s workload restores %s", real, which)
	}
	var found []string
	var necessary []string         // conclusions, in order
	needs := map[string][]string{} // conclusions → the properties necessary to them
	for _, rs := range r.Reasons {
		switch {
		case len(rs.Properties) > 0:
			found = append(found, fmt.Sprintf("the %s %s together restore %s", real, rs.Property, strings.Join(rs.Conclusions, ", ")))
		case rs.Evidence == EvidenceNecessary:
			k := strings.Join(rs.Conclusions, ", ")
			if _, ok := needs[k]; !ok {
				necessary = append(necessary, k)
			}
			needs[k] = append(needs[k], rs.Property)
		}
	}
	for _, k := range necessary {
		props := needs[k]
		if len(props) == 1 {
			found = append(found, fmt.Sprintf("the %s %s %s necessary to %s (with the %s one instead, the %s workload decides as the %s one does)",
				real, props[0], isAre(props[0]), k, syn, real, syn))
			continue
		}
		found = append(found, fmt.Sprintf("the %s %s are each necessary to %s (with either %s one instead, the %s workload decides as the %s one does)",
			real, strings.Join(props, " and "), k, syn, real, syn))
	}
	switch {
	case len(found) > 0:
		s += ": " + strings.Join(found, "; ")
	case c.Budget == 0:
		s += traces.Textf("; the search for a combination is off (%s 0)", optCombinationBudget).Say(r.opts.Terms)
	case len(c.Left) == 0:
		s += fmt.Sprintf(": no complement shows a %s property necessary and no pair restores them (%d extra runs): it lies in more properties together, or in one not transplanted", real, c.Runs)
		if cf := c.nearest(); cf != nil {
			s += "; " + r.nearestText(cf)
		}
	}
	if len(c.Left) > 0 && c.Budget > 0 {
		s += traces.Textf("; the search ran out of its budget of %d extra runs (%s) with %d counterfactual workloads left", c.Budget, optCombinationBudget, len(c.Left)).Say(r.opts.Terms)
	}
	return s + "."
}

// nearest is the counterfactual workload that moved the effects furthest
// towards the other workload's (nil when none moved towards them).
func (c *Combination) nearest() *Counterfactual {
	var best *Counterfactual
	for i := range c.Tried {
		cf := &c.Tried[i]
		if cf.NotBuilt == "" && !cf.MovedAway && cf.GapClosed > 0 && (best == nil || cf.GapClosed > best.GapClosed) {
			best = cf
		}
	}
	return best
}

// nearestText says how far the nearest counterfactual went.
func (r *Result) nearestText(cf *Counterfactual) string {
	real, syn := r.Workloads[0], r.Workloads[1]
	what := strings.Join(cf.Properties, " and ")
	if cf.Kind == CounterfactualComplement {
		return fmt.Sprintf("nearest, the %s workload with the %s %s moves its effects %.0f%% of the way to the %s ones (the median) without reaching the %s conclusions", real, syn, what, 100*cf.GapClosed, syn, syn)
	}
	return fmt.Sprintf("nearest, the %s workload with the %s %s closes %.0f%% of the gap (the median) without restoring them", syn, real, what, 100*cf.GapClosed)
}
