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
	// EvidenceNecessary: the real workload with the property of the
	// synthetic one reaches the synthetic conclusion (a complement), so
	// the real property is necessary to the real conclusion.
	EvidenceNecessary = "necessary"
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
// conclusion holds): with an ablation, what it shows (reasonsByAblation);
// without one, the properties the configuration change acts through (a
// prior), then the other differences.
func (r *Result) explain() {
	r.Reasons = nil
	if len(r.broken()) == 0 {
		return
	}
	if a := r.Ablation; a != nil && a.Status == AblationRan {
		r.Reasons = r.reasonsByAblation()
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

// reasonsByAblation are the reasons the ablation shows, best supported
// first: the single properties that restore a decision that did not carry
// over (most decisions, then most conclusions, then nearest the real
// effects), the pairs that restore what no single property does, the
// properties a complement shows necessary, then the single properties
// that restore only sizes or close part of a gap. Each reason's detail is
// its counterfactual's evidence: what the transplant changed.
func (r *Result) reasonsByAblation() []Reason {
	a := r.Ablation
	real, syn := r.Workloads[0], r.Workloads[1]
	var decisive, rest, pairs, needed []Reason
	var singles []Transplant
	for _, t := range a.Properties {
		if t.named() {
			singles = append(singles, t)
		}
	}
	sort.SliceStable(singles, func(i, j int) bool {
		a, b := singles[i], singles[j]
		if a.RestoredDecisions != b.RestoredDecisions {
			return a.RestoredDecisions > b.RestoredDecisions
		}
		if a.Restored != b.Restored {
			return a.Restored > b.Restored
		}
		return math.Abs(1-a.GapClosed) < math.Abs(1-b.GapClosed)
	})
	for _, t := range singles {
		sev, _ := r.difference(t.Property)
		rs := Reason{Property: t.Property, Detail: fmt.Sprintf("with the %s %s, %s", real, t.Property, t.Evidence), Severity: sev,
			Evidence: EvidenceAblation, Proven: t.Restored > 0, Restored: t.Restored, RestoredDecisions: t.RestoredDecisions,
			Broken: t.Broken, GapClosed: t.GapClosed, Conclusions: restoredNames(t.Effects)}
		if t.RestoredDecisions > 0 {
			decisive = append(decisive, rs)
		} else {
			rest = append(rest, rs)
		}
	}
	if c := a.Combination; c != nil {
		for _, cf := range c.Tried {
			if cf.NotBuilt != "" || cf.Reaches == 0 {
				continue
			}
			names := cf.reached()
			what := strings.Join(cf.Properties, " and ")
			if cf.Kind == CounterfactualPair {
				pairs = append(pairs, Reason{Property: what, Properties: cf.Properties, Evidence: EvidenceAblation, Proven: true,
					Detail: fmt.Sprintf("with the %s %s together, %s", real, what, cf.Evidence), Restored: cf.Reaches,
					RestoredDecisions: r.decisionsAmong(names), Broken: r.Counts.Broken(), GapClosed: cf.GapClosed, Conclusions: names})
				continue
			}
			needed = append(needed, Reason{Property: what, Evidence: EvidenceNecessary, GapClosed: cf.GapClosed, Conclusions: names,
				Detail: fmt.Sprintf("the %s workload with the %s %s decides as the %s one does on %s; %s", real, syn, what, syn, strings.Join(names, ", "), cf.Evidence)})
		}
		sort.SliceStable(pairs, func(i, j int) bool { return pairs[i].Restored > pairs[j].Restored })
		sort.SliceStable(needed, func(i, j int) bool { return len(needed[i].Conclusions) > len(needed[j].Conclusions) })
	}
	out := append(decisive, pairs...)
	out = append(out, needed...)
	return append(out, rest...)
}

// restoredNames lists the conclusions effects restore ("ttft_p99 of pa").
func restoredNames(effects []AblatedEffect) []string {
	var out []string
	for _, e := range effects {
		if e.Restores {
			out = append(out, e.Metric+" of "+e.Target)
		}
	}
	return out
}

// decisionsAmong counts the named conclusions whose decision does not
// carry over.
func (r *Result) decisionsAmong(names []string) int {
	n := 0
	for _, c := range r.Conclusions {
		if !carriesOver(c) && slices.Contains(names, c.name()) {
			n++
		}
	}
	return n
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
