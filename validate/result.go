package validate

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/tokentrace/tokentrace/synth"
)

// TargetInfo names a target and its configuration in a Result.
type TargetInfo struct {
	Name   string `json:"name"`
	Config string `json:"config"`
}

// Cell is one workload run on one target (all its repeats pooled).
type Cell struct {
	Workload string `json:"workload"`
	Target   string `json:"target"`
	Runs     int    `json:"runs"`
	Requests int    `json:"requests"`
	Failed   int    `json:"failed"`
	// Values holds each metric (ms, or the good share for goodput).
	Values map[string]float64 `json:"values"`
	// CachedShare is the share of prompt tokens the server served from its
	// prefix cache (−1 when the server did not say).
	CachedShare float64 `json:"cached_share"`
	// TailCause is the dominant component of the p99 E2E tail (analyze's
	// attribution) and TailShare its share of the tail's latency.
	TailCause string   `json:"tail_cause"`
	TailShare float64  `json:"tail_share"`
	Files     []string `json:"files,omitempty"`
}

func (c *Cell) headline(ms []Metric) string {
	var parts []string
	for _, m := range ms {
		if v, ok := c.Values[m.Name]; ok {
			parts = append(parts, m.Name+" "+fmtValue(m, v))
		}
		if len(parts) == 2 {
			break
		}
	}
	return strings.Join(parts, ", ")
}

// Conclusion is one metric's verdict for one target against the baseline.
type Conclusion struct {
	Metric    string `json:"metric"`
	Target    string `json:"target"`
	Baseline  string `json:"baseline"`
	Real      Effect `json:"real"`
	Synthetic Effect `json:"synthetic"`
	Verdict   string `json:"verdict"`
}

// Ranking is the order of the targets (best first) on one metric under
// each workload.
type Ranking struct {
	Metric    string   `json:"metric"`
	Real      []string `json:"real"`
	Synthetic []string `json:"synthetic"`
	Same      bool     `json:"same"`
}

// Reason is a property of the synthetic workload that likely breaks a
// conclusion, most severe first.
type Reason struct {
	Property string `json:"property"`
	Detail   string `json:"detail"`
	// Severity is the difference over the threshold at which it matters
	// (≥ 1 is listed).
	Severity float64 `json:"severity"`
}

// Result is a whole validation.
type Result struct {
	Baseline   string       `json:"baseline"`
	Targets    []TargetInfo `json:"targets"`
	Workloads  [2]string    `json:"workloads"` // real, synthetic
	Speed      float64      `json:"speed"`
	Confidence float64      `json:"confidence"`
	Metrics    []Metric     `json:"metrics"`
	// Conclusion is the whole answer in one or two sentences.
	Conclusion  string       `json:"conclusion"`
	Conclusions []Conclusion `json:"conclusions"`
	Rankings    []Ranking    `json:"rankings"`
	// Reasons are listed whenever a conclusion does not hold.
	Reasons  []Reason      `json:"reasons"`
	Cells    []Cell        `json:"cells"`
	Fidelity *synth.Report `json:"fidelity"`
	Warnings []string      `json:"warnings,omitempty"`

	opts Options
}

// Holds reports whether every conclusion holds.
func (r *Result) Holds() bool {
	for _, c := range r.Conclusions {
		if c.Verdict != VerdictHolds {
			return false
		}
	}
	return len(r.Conclusions) > 0
}

func (r *Result) cell(workload, target string) *Cell {
	for i := range r.Cells {
		if r.Cells[i].Workload == workload && r.Cells[i].Target == target {
			return &r.Cells[i]
		}
	}
	return nil
}

// judge fills Conclusions and Rankings.
func (r *Result) judge(samples map[[2]string]sample, real, syn string) {
	o := &r.opts
	base := r.Baseline
	for mi, m := range o.Metrics {
		for ti, t := range o.Targets[1:] {
			seed := uint64(mi*1000 + ti)
			er, ok1 := effect(samples[[2]string{real, base}], samples[[2]string{real, t.Name}], m, o, 2*seed)
			es, ok2 := effect(samples[[2]string{syn, base}], samples[[2]string{syn, t.Name}], m, o, 2*seed+1)
			if !ok1 || !ok2 {
				r.Warnings = append(r.Warnings, fmt.Sprintf("%s of %s against %s: no value on one side (no successful request, or a zero baseline); not judged", m.Name, t.Name, base))
				continue
			}
			r.Conclusions = append(r.Conclusions, Conclusion{Metric: m.Name, Target: t.Name, Baseline: base, Real: er, Synthetic: es, Verdict: verdict(er, es, o)})
		}
		rk := Ranking{Metric: m.Name, Real: r.rank(real, m), Synthetic: r.rank(syn, m)}
		rk.Same = slices.Equal(rk.Real, rk.Synthetic)
		r.Rankings = append(r.Rankings, rk)
	}
}

// rank orders the targets best first on m under workload w (stable: ties
// keep the targets' order).
func (r *Result) rank(w string, m Metric) []string {
	var names []string
	vals := map[string]float64{}
	for _, t := range r.Targets {
		c := r.cell(w, t.Name)
		v, ok := c.Values[m.Name]
		if !ok {
			v = math.Inf(1)
			if !m.LowerIsBetter() {
				v = math.Inf(-1)
			}
		}
		names, vals[t.Name] = append(names, t.Name), v
	}
	sort.SliceStable(names, func(i, j int) bool {
		if m.LowerIsBetter() {
			return vals[names[i]] < vals[names[j]]
		}
		return vals[names[i]] > vals[names[j]]
	})
	return names
}

// explain lists the properties of the synthetic workload that differ from
// the real one enough to change a conclusion: prefix reuse (and the cache
// hits it gives), the tail's cause, lengths, rate and burstiness.
func (r *Result) explain() {
	f := r.Fidelity
	real, syn := r.Workloads[0], r.Workloads[1]
	var out []Reason
	add := func(prop string, sev float64, format string, args ...any) {
		if sev >= 1 {
			out = append(out, Reason{Property: prop, Severity: sev, Detail: fmt.Sprintf(format, args...)})
		}
	}
	if f != nil {
		d := math.Abs(f.Real.PrefixReuse - f.Synth.PrefixReuse)
		detail := fmt.Sprintf("%s prompts reuse %.0f%% of their prefix from earlier requests, %s %.0f%%", real, 100*f.Real.PrefixReuse, syn, 100*f.Synth.PrefixReuse)
		for _, t := range r.Targets {
			cr, cs := r.cell(real, t.Name), r.cell(syn, t.Name)
			if cr != nil && cs != nil && cr.CachedShare >= 0 && cs.CachedShare >= 0 && math.Abs(cr.CachedShare-cs.CachedShare) >= 0.05 {
				detail += fmt.Sprintf("; on %s the prefix cache served %.0f%% of %s prompt tokens and %.0f%% of %s", t.Name, 100*cr.CachedShare, real, 100*cs.CachedShare, syn)
			}
		}
		sev := d / 0.10
		// When the targets themselves differ in cache hits, the change acts
		// through the prefix cache: a reuse gap between the workloads is
		// then the reason before any other difference.
		if w, spread := r.cacheSpread(); sev >= 1 && spread >= 0.10 {
			sev *= 10
			detail += fmt.Sprintf("; the targets differ in cache hits on %s (%s), so the change acts through the prefix cache", w, r.cacheList(w))
		}
		add("prefix reuse", sev, "%s", detail)
		add("prompt lengths", f.KS.InputTokens/0.10, "mean %.0f tokens (%s) vs %.0f (%s), KS %.2f",
			f.Real.MeanInput, real, f.Synth.MeanInput, syn, f.KS.InputTokens)
		add("output lengths", f.KS.OutputTokens/0.10, "mean %.0f tokens (%s) vs %.0f (%s), KS %.2f",
			f.Real.MeanOutput, real, f.Synth.MeanOutput, syn, f.KS.OutputTokens)
		if f.Real.RatePerS > 0 {
			add("arrival rate", math.Abs(f.Synth.RatePerS/f.Real.RatePerS-1)/0.10, "%.2f req/s (%s) vs %.2f (%s)",
				f.Real.RatePerS, real, f.Synth.RatePerS, syn)
		}
		if f.Real.CV > 0 {
			add("burstiness", math.Abs(f.Synth.CV/f.Real.CV-1)/0.25, "inter-arrival CV %.2f (%s) vs %.2f (%s)",
				f.Real.CV, real, f.Synth.CV, syn)
		}
	}
	for _, t := range r.Targets {
		cr, cs := r.cell(real, t.Name), r.cell(syn, t.Name)
		if cr != nil && cs != nil && cr.TailCause != "" && cs.TailCause != "" && cr.TailCause != cs.TailCause {
			add("tail cause on "+t.Name, 1.5, "on %s the %s tail is mostly %s (%.0f%%), the %s tail %s (%.0f%%)",
				t.Name, real, cr.TailCause, 100*cr.TailShare, syn, cs.TailCause, 100*cs.TailShare)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Severity > out[j].Severity })
	r.Reasons = out
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

// conclude says the answer in one or two sentences.
func (r *Result) conclude() string {
	real, syn := r.Workloads[0], r.Workloads[1]
	if len(r.Conclusions) == 0 {
		return "No conclusion could be judged (see the warnings)."
	}
	// Group the broken conclusions by verdict and target, in order.
	type key struct{ verdict, target, baseline string }
	var keys []key
	groups := map[key][]string{}
	n := 0
	for _, c := range r.Conclusions {
		if c.Verdict == VerdictHolds {
			continue
		}
		n++
		k := key{c.Verdict, c.Target, c.Baseline}
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], fmt.Sprintf("%s (%s %s, %s %s)", c.Metric, syn, pctShort(c.Synthetic), real, pctShort(c.Real)))
	}
	var broken []string
	for _, k := range keys {
		broken = append(broken, fmt.Sprintf("%s for %s vs %s on %s", k.verdict, k.target, k.baseline, strings.Join(groups[k], ", ")))
	}
	if len(broken) == 0 {
		return fmt.Sprintf("The %s workload's conclusions hold on %s traffic: all %d judged (%s) agree in direction and magnitude.",
			syn, real, len(r.Conclusions), r.metricList())
	}
	s := fmt.Sprintf("The %s workload's conclusions do not hold on %s traffic for %d of %d: %s.", syn, real, n, len(r.Conclusions), strings.Join(broken, "; "))
	if len(r.Reasons) > 0 {
		s += " Likely reason: " + r.Reasons[0].Property + " (" + r.Reasons[0].Detail + ")."
	}
	return s
}

func (r *Result) metricList() string {
	var n []string
	for _, m := range r.Metrics {
		n = append(n, m.Name)
	}
	return strings.Join(n, ", ")
}

// pctShort is an effect in a sentence: "+108%", or "+3% ns" when not
// significant.
func pctShort(e Effect) string {
	s := fmt.Sprintf("%+.0f%%", 100*e.Change)
	if !e.Significant {
		s += " ns"
	}
	return s
}

func fmtValue(m Metric, v float64) string {
	if m.Kind == kindGoodput {
		return fmt.Sprintf("%.1f%%", 100*v)
	}
	return fmt.Sprintf("%.1f ms", v)
}
