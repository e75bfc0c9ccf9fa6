package validate

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
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
// each workload, as groups: targets whose difference from the baseline is
// not significant share the baseline's group (a tie).
type Ranking struct {
	Metric    string     `json:"metric"`
	Real      [][]string `json:"real"`
	Synthetic [][]string `json:"synthetic"`
	Same      bool       `json:"same"`
}

// Reason is a property of the synthetic workload (or a pair of them) that
// breaks a conclusion, or likely does; the first is the best supported.
type Reason struct {
	Property string `json:"property"`
	// Properties are a pair's two properties (Property joins them with
	// "and"); empty for one property.
	Properties []string `json:"properties,omitempty"`
	// Detail is the evidence: for an ablation, the figures its
	// counterfactual workload moved; else how the workloads differ.
	Detail string `json:"detail"`
	// Evidence is EvidenceAblation, EvidenceNecessary, EvidencePrior or
	// EvidenceDifference.
	Evidence string `json:"evidence"`
	// Proven: transplanting the property (a pair: both together) restored
	// Restored of the Broken conclusions that did not hold (Result.Counts),
	// RestoredDecisions of them decisions that did not carry over, closing
	// GapClosed (the median share) of the gap between the synthetic and
	// the real effects.
	Proven            bool    `json:"proven"`
	Restored          int     `json:"restored,omitempty"`
	RestoredDecisions int     `json:"restored_decisions,omitempty"`
	Broken            int     `json:"broken,omitempty"`
	GapClosed         float64 `json:"gap_closed,omitempty"`
	// Conclusions names the conclusions restored ("ttft_p99 of pa"); for
	// EvidenceNecessary, those the real workload decides as the synthetic
	// one does without its own property.
	Conclusions []string `json:"conclusions,omitempty"`
	// Keys are the configuration keys whose change acts through the
	// property (a prior).
	Keys []string `json:"keys,omitempty"`
	// Severity is how far apart the workloads are on the property, over
	// the difference at which it matters (≥ 1 matters).
	Severity float64 `json:"severity"`
}

// Result is a whole validation.
type Result struct {
	Baseline   string       `json:"baseline"`
	Targets    []TargetInfo `json:"targets"`
	Workloads  [2]string    `json:"workloads"` // real, synthetic
	Speed      float64      `json:"speed"`
	Confidence float64      `json:"confidence"`
	// MinEffect is the relative change under which an effect is none
	// (Options.MinEffect).
	MinEffect float64  `json:"min_effect"`
	Metrics   []Metric `json:"metrics"`
	// Conclusion is the whole answer in one or two sentences.
	Conclusion  string       `json:"conclusion"`
	Conclusions []Conclusion `json:"conclusions"`
	// Counts tallies Conclusions by what becomes of their decision.
	Counts   Counts    `json:"counts"`
	Rankings []Ranking `json:"rankings"`
	// Reasons are listed whenever a conclusion does not hold, the best
	// supported first.
	Reasons []Reason `json:"reasons"`
	// Ablation is the explanation by ablation (or why it did not run).
	Ablation *Ablation `json:"ablation,omitempty"`
	// NextSteps say what to change in the synthetic workload so that it
	// carries the real conclusion.
	NextSteps []NextStep    `json:"next_steps,omitempty"`
	Cells     []Cell        `json:"cells"`
	Fidelity  *synth.Report `json:"fidelity"`
	Warnings  []string      `json:"warnings,omitempty"`

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
		tied := [2]map[string]bool{{}, {}} // real, synthetic: targets no different from the baseline
		for ti, t := range o.Targets[1:] {
			seed := uint64(mi*1000 + ti)
			er, ok1 := effect(samples[[2]string{real, base}], samples[[2]string{real, t.Name}], m, o, 2*seed)
			es, ok2 := effect(samples[[2]string{syn, base}], samples[[2]string{syn, t.Name}], m, o, 2*seed+1)
			tied[0][t.Name] = ok1 && !er.Significant
			tied[1][t.Name] = ok2 && !es.Significant
			if !ok1 || !ok2 {
				r.Warnings = append(r.Warnings, fmt.Sprintf("%s of %s against %s: no value on one side (no successful request, or a zero baseline); not judged", m.Name, t.Name, base))
				continue
			}
			r.Conclusions = append(r.Conclusions, Conclusion{Metric: m.Name, Target: t.Name, Baseline: base, Real: er, Synthetic: es, Verdict: verdict(er, es, o)})
		}
		rk := Ranking{Metric: m.Name, Real: r.rank(real, m, tied[0]), Synthetic: r.rank(syn, m, tied[1])}
		rk.Same = slices.EqualFunc(rk.Real, rk.Synthetic, slices.Equal)
		r.Rankings = append(r.Rankings, rk)
	}
	r.Counts = countConclusions(r.Conclusions)
}

// rank orders the targets best first on m under workload w, as groups:
// the targets in tied (no significant difference from the baseline) share
// the baseline's group; the others stand alone, ordered by value (stable:
// equal values keep the targets' order).
func (r *Result) rank(w string, m Metric, tied map[string]bool) [][]string {
	vals := map[string]float64{}
	var groups [][]string
	var baseGroup int
	for _, t := range r.Targets {
		c := r.cell(w, t.Name)
		v, ok := c.Values[m.Name]
		if !ok {
			v = math.Inf(1)
			if !m.LowerIsBetter() {
				v = math.Inf(-1)
			}
		}
		vals[t.Name] = v
		if t.Name == r.Baseline {
			baseGroup = len(groups)
		}
		if !tied[t.Name] || t.Name == r.Baseline {
			groups = append(groups, []string{t.Name})
		}
	}
	for _, t := range r.Targets {
		if tied[t.Name] && t.Name != r.Baseline {
			groups[baseGroup] = append(groups[baseGroup], t.Name)
		}
	}
	sort.SliceStable(groups, func(i, j int) bool {
		a, b := vals[groups[i][0]], vals[groups[j][0]]
		if m.LowerIsBetter() {
			return a < b
		}
		return a > b
	})
	return groups
}

// rankText is a ranking for a person: "b > a = c".
func rankText(groups [][]string) string {
	var parts []string
	for _, g := range groups {
		parts = append(parts, strings.Join(g, " = "))
	}
	return strings.Join(parts, " > ")
}

func (r *Result) metricList() string {
	var n []string
	for _, m := range r.Metrics {
		n = append(n, m.Name)
	}
	return strings.Join(n, ", ")
}

// pctShort is an effect in a sentence: "+108%", or "+3% ns" when not
// significant ("+1% ns (<2%)" when its interval excludes 0 but it is
// under the minimum effect).
func (r *Result) pctShort(e Effect) string {
	return fmt.Sprintf("%+.0f%%", 100*e.Change) + r.nsMark(e)
}

// nsMark marks an effect that is not significant: " ns", or " ns (<2%)"
// when only the minimum effect makes it so.
func (r *Result) nsMark(e Effect) string {
	switch {
	case e.Significant:
		return ""
	case e.BelowMinEffect:
		return fmt.Sprintf(" ns (<%s%%)", strconv.FormatFloat(100*r.MinEffect, 'g', 3, 64))
	}
	return " ns"
}

func fmtValue(m Metric, v float64) string {
	if m.Kind == kindGoodput {
		return fmt.Sprintf("%.1f%%", 100*v)
	}
	return fmt.Sprintf("%.1f ms", v)
}
