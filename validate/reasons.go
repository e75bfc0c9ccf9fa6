package validate

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
)

// Evidence of a Reason.
const (
	// EvidenceAblation: transplanting the property of the real workload
	// into the synthetic one moved the conclusion (Reason.Proven when it
	// restored it).
	EvidenceAblation = "ablation"
	// EvidencePrior: the configuration change is known to act through the
	// property, and the workloads differ in it; not proven.
	EvidencePrior = "prior"
	// EvidenceDifference: the workloads differ in the property; neither
	// proven nor expected from the change.
	EvidenceDifference = "difference"
)

// actsThrough maps a simulator configuration key to the properties of a
// workload its effect depends on, most direct first: what a change of the
// key is known to act through. Fleet keys (routing, replicas,
// disaggregation) act through where requests land: prefix reuse and
// sessions decide cache hits per replica, the length mix how prefill and
// decode load split.
var actsThrough = map[string][]string{
	"prefix-caching":         {PropPrefixReuse, PropSessions},
	"block-size":             {PropPrefixReuse, PropSessions},
	"num-gpu-blocks":         {PropPrefixReuse, PropPromptLengths, PropOutputLengths, PropArrivals},
	"max-num-seqs":           {PropArrivals},
	"max-num-batched-tokens": {PropArrivals, PropPromptLengths},
	"max-queued-requests":    {PropArrivals},
	"policy":                 {PropArrivals},
	"prefill-per-token":      {PropPromptLengths},
	"max-model-len":          {PropPromptLengths},
	"decode-per-seq":         {PropOutputLengths},
	"attn-per-context-token": {PropPromptLengths, PropOutputLengths},
	"step-fixed":             {PropOutputLengths, PropArrivals},
	"stream-interval":        {PropOutputLengths},
	"replicas":               {PropArrivals, PropPrefixReuse, PropSessions},
	"router":                 {PropPrefixReuse, PropSessions, PropPromptLengths, PropOutputLengths},
	"prefill-replicas":       {PropPromptLengths, PropOutputLengths, PropPrefixReuse, PropSessions},
	"decode-replicas":        {PropOutputLengths, PropPromptLengths, PropPrefixReuse, PropSessions},
	"kv-transfer-":           {PropPromptLengths, PropPrefixReuse, PropSessions},
}

// propertiesOf is what a change of key acts through (every property for
// a preset or an unknown key). A key scoped to one pool or replica of a
// fleet ("decode.max-num-seqs") acts as the key does.
func propertiesOf(key string) []string {
	if i := strings.LastIndexByte(key, '.'); i >= 0 {
		key = key[i+1:]
	}
	if p, ok := actsThrough[key]; ok {
		return p
	}
	if strings.HasPrefix(key, "kv-transfer-") {
		return actsThrough["kv-transfer-"]
	}
	return Properties
}

// simKeys parses a simulator target's configuration ("sim:k=v,...") into
// its keys; ok is false for a URL target (its configuration is unknown).
func simKeys(config string) (map[string]string, bool) {
	if config != "sim" && !strings.HasPrefix(config, "sim:") {
		return nil, false
	}
	kv := map[string]string{}
	for _, part := range strings.Split(strings.TrimPrefix(strings.TrimPrefix(config, "sim"), ":"), ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		if k = strings.TrimSpace(k); k != "" {
			kv[k] = strings.TrimSpace(v)
		}
	}
	return kv, true
}

// changedKeys lists the simulator keys whose values differ between two
// configurations, sorted; ok is false when either is not a simulator.
func changedKeys(base, t string) ([]string, bool) {
	a, ok1 := simKeys(base)
	b, ok2 := simKeys(t)
	if !ok1 || !ok2 {
		return nil, false
	}
	var keys []string
	for k, v := range a {
		if b[k] != v {
			keys = append(keys, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys, true
}

// prior is what the changes behind the broken conclusions act through:
// each property with the keys that point at it, in order of the first
// key's list.
func (r *Result) prior() (props []string, keysOf map[string][]string) {
	keysOf = map[string][]string{}
	for _, t := range r.Targets {
		if t.Name == r.Baseline || !slices.ContainsFunc(r.broken(), func(c Conclusion) bool { return c.Target == t.Name }) {
			continue
		}
		keys, ok := changedKeys(r.targetInfo(r.Baseline).Config, t.Config)
		if !ok {
			continue
		}
		for _, k := range keys {
			for _, p := range propertiesOf(k) {
				if !slices.Contains(props, p) {
					props = append(props, p)
				}
				if !slices.Contains(keysOf[p], k) {
					keysOf[p] = append(keysOf[p], k)
				}
			}
		}
	}
	return props, keysOf
}

func (r *Result) targetInfo(name string) TargetInfo {
	for _, t := range r.Targets {
		if t.Name == name {
			return t
		}
	}
	return TargetInfo{}
}

// difference is how far apart the workloads are on prop, from the
// fidelity check: a severity (the difference over the size at which it
// matters; ≥ 1 matters) and a sentence.
func (r *Result) difference(prop string) (float64, string) {
	f := r.Fidelity
	if f == nil {
		return 0, ""
	}
	real, syn := r.Workloads[0], r.Workloads[1]
	switch prop {
	case PropPrefixReuse:
		d := math.Abs(f.Real.PrefixReuse - f.Synth.PrefixReuse)
		detail := fmt.Sprintf("%s prompts reuse %.0f%% of their prefix from earlier requests, %s %.0f%%", real, 100*f.Real.PrefixReuse, syn, 100*f.Synth.PrefixReuse)
		for _, t := range r.Targets {
			cr, cs := r.cell(real, t.Name), r.cell(syn, t.Name)
			if cr != nil && cs != nil && cr.CachedShare >= 0 && cs.CachedShare >= 0 && math.Abs(cr.CachedShare-cs.CachedShare) >= 0.05 {
				detail += fmt.Sprintf("; on %s the prefix cache served %.0f%% of %s prompt tokens and %.0f%% of %s", t.Name, 100*cr.CachedShare, real, 100*cs.CachedShare, syn)
			}
		}
		if w, spread := r.cacheSpread(); spread >= 0.10 {
			detail += fmt.Sprintf("; the targets differ in cache hits on %s (%s)", w, r.cacheList(w))
		}
		return d / 0.10, detail
	case PropPromptLengths:
		return f.KS.InputTokens / 0.10, fmt.Sprintf("mean %.0f tokens (%s) vs %.0f (%s), KS %.2f", f.Real.MeanInput, real, f.Synth.MeanInput, syn, f.KS.InputTokens)
	case PropOutputLengths:
		return f.KS.OutputTokens / 0.10, fmt.Sprintf("mean %.0f tokens (%s) vs %.0f (%s), KS %.2f", f.Real.MeanOutput, real, f.Synth.MeanOutput, syn, f.KS.OutputTokens)
	case PropArrivals:
		var sev float64
		if f.Real.RatePerS > 0 {
			sev = math.Abs(f.Synth.RatePerS/f.Real.RatePerS-1) / 0.10
		}
		if f.Real.CV > 0 {
			sev = max(sev, math.Abs(f.Synth.CV/f.Real.CV-1)/0.25)
		}
		return sev, fmt.Sprintf("%.2f req/s with inter-arrival CV %.2f (%s) vs %.2f req/s, CV %.2f (%s)", f.Real.RatePerS, f.Real.CV, real, f.Synth.RatePerS, f.Synth.CV, syn)
	case PropSessions:
		share := func(n, recs int64) float64 {
			if recs == 0 {
				return 0
			}
			return float64(n) / float64(recs)
		}
		fr, fs := share(f.Real.FollowUps, f.Real.Records), share(f.Synth.FollowUps, f.Synth.Records)
		sev := math.Abs(fr-fs) / 0.10
		if f.Real.Sessions > 0 || f.Synth.Sessions > 0 {
			sev = max(sev, relDiff(f.Synth.TurnsPerSess, f.Real.TurnsPerSess)/0.25)
		}
		return sev, fmt.Sprintf("%.0f%% of %s requests continue a conversation (%.1f turns per session), %.0f%% of %s (%.1f)",
			100*fr, real, f.Real.TurnsPerSess, 100*fs, syn, f.Synth.TurnsPerSess)
	}
	return 0, ""
}

func relDiff(a, b float64) float64 {
	if b == 0 {
		if a == 0 {
			return 0
		}
		return 1
	}
	return math.Abs(a-b) / math.Abs(b)
}

// explain names the reasons of the broken conclusions (none when every
// conclusion holds): the transplants the ablation shows move them, most
// restored first; without an ablation, the properties the configuration
// change acts through (a prior), then the other differences.
func (r *Result) explain() {
	r.Reasons = nil
	if len(r.broken()) == 0 {
		return
	}
	if a := r.Ablation; a != nil && a.Status == AblationRan {
		var named []Transplant
		for _, t := range a.Properties {
			if t.named() {
				named = append(named, t)
			}
		}
		// Most restored first, then the nearest to the real effects.
		sort.SliceStable(named, func(i, j int) bool {
			if named[i].Restored != named[j].Restored {
				return named[i].Restored > named[j].Restored
			}
			return math.Abs(1-named[i].GapClosed) < math.Abs(1-named[j].GapClosed)
		})
		for _, t := range named {
			sev, detail := r.difference(t.Property)
			r.Reasons = append(r.Reasons, Reason{Property: t.Property, Detail: detail, Severity: sev, Evidence: EvidenceAblation,
				Proven: t.Restored > 0, Restored: t.Restored, Broken: t.Broken, GapClosed: t.GapClosed})
		}
		return
	}
	props, keysOf := r.prior()
	var prior, other []Reason
	for _, p := range Properties {
		sev, detail := r.difference(p)
		if sev < 1 {
			continue
		}
		if slices.Contains(props, p) {
			prior = append(prior, Reason{Property: p, Detail: detail, Severity: sev, Evidence: EvidencePrior, Keys: keysOf[p]})
		} else {
			other = append(other, Reason{Property: p, Detail: detail, Severity: sev, Evidence: EvidenceDifference})
		}
	}
	// The prior's order: how far apart the workloads are, except that
	// when the targets themselves differ in prefix-cache hits the change
	// is seen to act through the cache, and prefix reuse comes first.
	_, spread := r.cacheSpread()
	weight := func(rs Reason) float64 {
		if rs.Property == PropPrefixReuse && spread >= 0.10 {
			return rs.Severity * 10
		}
		return rs.Severity
	}
	sort.SliceStable(prior, func(i, j int) bool { return weight(prior[i]) > weight(prior[j]) })
	sort.SliceStable(other, func(i, j int) bool { return other[i].Severity > other[j].Severity })
	real, syn := r.Workloads[0], r.Workloads[1]
	for _, t := range r.Targets {
		cr, cs := r.cell(real, t.Name), r.cell(syn, t.Name)
		if cr != nil && cs != nil && cr.TailCause != "" && cs.TailCause != "" && cr.TailCause != cs.TailCause {
			other = append(other, Reason{Property: "tail cause on " + t.Name, Evidence: EvidenceDifference, Severity: 1.5,
				Detail: fmt.Sprintf("on %s the %s tail is mostly %s (%.0f%%), the %s tail %s (%.0f%%)", t.Name, real, cr.TailCause, 100*cr.TailShare, syn, cs.TailCause, 100*cs.TailShare)})
		}
	}
	r.Reasons = append(prior, other...)
}

// cacheSpread is the largest difference in prefix-cache hit share between
// two targets under one workload, and that workload.
func (r *Result) cacheSpread() (workload string, spread float64) {
	for _, w := range r.Workloads {
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, t := range r.Targets {
			if c := r.cell(w, t.Name); c != nil && c.CachedShare >= 0 {
				lo, hi = min(lo, c.CachedShare), max(hi, c.CachedShare)
			}
		}
		if hi-lo > spread {
			workload, spread = w, hi-lo
		}
	}
	return workload, spread
}

func (r *Result) cacheList(w string) string {
	var parts []string
	for _, t := range r.Targets {
		if c := r.cell(w, t.Name); c != nil && c.CachedShare >= 0 {
			parts = append(parts, fmt.Sprintf("%s %.0f%%", t.Name, 100*c.CachedShare))
		}
	}
	return strings.Join(parts, ", ")
}

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
	var carried, notCarried, off []Conclusion
	for _, c := range r.Conclusions {
		switch {
		case !carriesOver(c):
			notCarried = append(notCarried, c)
		default:
			carried = append(carried, c)
			if c.Verdict == VerdictMagnitudeOff {
				off = append(off, c)
			}
		}
	}
	n := len(r.Conclusions)
	item := func(c Conclusion) string {
		return fmt.Sprintf("%s (%s %s, %s %s)", c.Metric, syn, pctShort(c.Synthetic), real, pctShort(c.Real))
	}
	if len(notCarried) == 0 {
		if len(off) == 0 {
			return fmt.Sprintf("The %s workload's conclusions hold on %s traffic: all %d judged (%s) agree in direction and magnitude.",
				syn, real, n, r.metricList())
		}
		var items []string
		for _, c := range off {
			items = append(items, item(c))
		}
		s := fmt.Sprintf("The decision carries over: all %d conclusions have the same direction and significance on %s traffic (%s). Only the size differs for %d: %s.",
			n, real, directions(carried, r.Metrics), len(off), strings.Join(items, ", "))
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
	s := fmt.Sprintf("The decision does not carry over to %s traffic for %d of %d conclusions: %s.", real, len(notCarried), n, strings.Join(parts, "; "))
	if len(carried) > 0 {
		s += fmt.Sprintf(" The other %d carry over (%s)", len(carried), directions(carried, r.Metrics))
		if len(off) > 0 {
			s += fmt.Sprintf(", %d of them with the size off", len(off))
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

// reasonSentence names the first reason with its evidence.
func (r *Result) reasonSentence() string {
	a := r.Ablation
	if len(r.Reasons) == 0 {
		if a != nil && a.Status == AblationRan {
			return fmt.Sprintf(" By ablation, no single property of the %s workload (%d transplanted) restores it or closes part of the gap: it lies in a combination of them or in one not transplanted.", r.Workloads[0], a.built())
		}
		return ""
	}
	rs := r.Reasons[0]
	switch rs.Evidence {
	case EvidenceAblation:
		if rs.Proven {
			return fmt.Sprintf(" Proven reason (ablation): %s; the %s workload with the %s %s reaches the %s conclusion for %d of %d%s and %s.",
				rs.Property, r.Workloads[1], r.Workloads[0], rs.Property, r.Workloads[0], rs.Restored, rs.Broken, r.restoredList(rs), gapText(rs.GapClosed))
		}
		return fmt.Sprintf(" By ablation, no single property restores it; %s comes nearest (it %s).", rs.Property, gapText(rs.GapClosed))
	case EvidencePrior:
		return fmt.Sprintf(" Likely reason (a prior, not proven: the change of %s acts through it): %s (%s).", strings.Join(rs.Keys, ", "), rs.Property, rs.Detail)
	}
	return fmt.Sprintf(" The workloads differ most in %s (%s); not proven to be the reason.", rs.Property, rs.Detail)
}

// built counts the transplants that could be built.
func (a *Ablation) built() int {
	n := 0
	for _, t := range a.Properties {
		if t.NotBuilt == "" {
			n++
		}
	}
	return n
}
