package validate

import (
	"bufio"
	"encoding/json"
	"fmt"
	"html/template"
	"image/color"
	"io"
	"math"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/tokentrace/tokentrace/internal/chart"
	"github.com/tokentrace/tokentrace/traces"
)

// WriteJSON writes the result as indented JSON.
func (r *Result) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes the result for a person: the conclusion, each verdict
// with both effects and their intervals, the measured values, the
// rankings, the likely reasons and any warnings.
func (r *Result) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	p := func(format string, a ...any) { fmt.Fprintf(bw, format+"\n", a...) }
	real, syn := r.Workloads[0], r.Workloads[1]
	p("tokentrace validate: do the %s workload's conclusions hold on %s traffic?", syn, real)
	p("Conclusion: %s", r.Conclusion)
	p("")
	var ts []string
	for _, t := range r.Targets {
		ts = append(ts, t.Name+" = "+t.Config)
	}
	p("Targets (%s is the baseline): %s", r.Baseline, strings.Join(ts, "; "))
	p("Speed %g×; %.0f%% bootstrap intervals of the relative change against %s.", r.Speed, 100*r.Confidence, r.Baseline)
	p("")
	p("%-12s %-10s %-30s %-30s %s", "metric", "target", syn+" change [CI]", real+" change [CI]", "verdict")
	for _, c := range r.Conclusions {
		p("%-12s %-10s %-30s %-30s %s", c.Metric, c.Target, r.fmtEffect(c.Synthetic), r.fmtEffect(c.Real), c.Verdict)
	}
	for _, line := range r.legend() {
		p("%s", line)
	}
	p("")
	head := fmt.Sprintf("%-10s %-10s %9s %7s", "workload", "target", "requests", "failed")
	for _, m := range r.Metrics {
		head += fmt.Sprintf(" %10s", m.Name)
	}
	p("%s %8s  %s", head, "cached", "p99 E2E tail mostly")
	for _, c := range r.Cells {
		line := fmt.Sprintf("%-10s %-10s %9d %7d", c.Workload, c.Target, c.Requests, c.Failed)
		for _, m := range r.Metrics {
			v, ok := c.Values[m.Name]
			switch {
			case !ok:
				line += fmt.Sprintf(" %10s", "-")
			case m.Kind == kindGoodput:
				line += fmt.Sprintf(" %9.1f%%", 100*v)
			default:
				line += fmt.Sprintf(" %10.1f", v)
			}
		}
		cached := "-"
		if c.CachedShare >= 0 {
			cached = fmt.Sprintf("%.0f%%", 100*c.CachedShare)
		}
		tail := "-"
		if c.TailCause != "" {
			tail = fmt.Sprintf("%s (%.0f%%)", c.TailCause, 100*c.TailShare)
		}
		p("%s %8s  %s", line, cached, tail)
	}
	p("(latencies in ms; goodput is the share of requests meeting the SLO; cached is the share of prompt tokens served from the prefix cache)")
	p("")
	p("Rankings, best first:")
	for _, rk := range r.Rankings {
		same := "same"
		if !rk.Same {
			same = "differs"
		}
		p("  %-12s %s: %s   %s: %s   %s", rk.Metric, syn, rankText(rk.Synthetic), real, rankText(rk.Real), same)
	}
	r.writeWhy(p)
	for _, wn := range r.Warnings {
		p("warning: %s", wn)
	}
	return bw.Flush()
}

// writeWhy writes the reasons, the ablation behind them and the next
// steps.
func (r *Result) writeWhy(p func(string, ...any)) {
	if a := r.Ablation; a != nil && a.Status == AblationRan {
		r.writeAblation(p)
	} else if a != nil && a.Note != "" {
		p("")
		p("%s", a.Note)
	}
	r.writeReasons(p)
	if len(r.NextSteps) > 0 {
		p("")
		p("Next steps (what to change in the %s workload):", r.Workloads[1])
		for _, st := range r.NextSteps {
			p("  - %s (%s): %s", st.Property, st.Evidence, st.Change)
			for _, c := range st.Commands {
				p("      %s", c)
			}
		}
	}
}

// writeAblation writes what each transplant restores, in the counts of
// the table's tally (decisions that do not carry over, sizes off), then
// the combination search.
func (r *Result) writeAblation(p func(string, ...any)) {
	a := r.Ablation
	real, syn := r.Workloads[0], r.Workloads[1]
	p("")
	p("Why, by ablation: the %s, rerun with one property of the %s workload in the %s one at a time, on %s (%d extra runs, %s):",
		r.brokenText(), real, syn, strings.Join(a.Targets, ", "), a.Runs, fmtSeconds(a.Seconds))
	var none, notBuilt, notCarried []string
	for _, t := range a.Properties {
		switch {
		case t.NotBuilt != "":
			notBuilt = append(notBuilt, t.Property+": "+t.NotBuilt)
		case t.MovedAway:
			notCarried = append(notCarried, t.Property+": "+t.Evidence)
		case !t.named():
			none = append(none, t.Property)
		default:
			mark := ""
			if t.Restored > 0 {
				mark = "  proven"
			}
			dec, size := r.splitConclusions(restoredNames(t.Effects))
			p("  %-15s %s; %s%s", t.Property, r.restoredCounts(dec, size), gapText(t.GapClosed), mark)
		}
	}
	if len(none) > 0 {
		p("  closes none of the gap (not a reason): %s", strings.Join(none, ", "))
	}
	for _, nc := range notCarried {
		p("  not carried over (not a reason): %s", nc)
	}
	for _, nb := range notBuilt {
		p("  not built: %s", nb)
	}
	if c := a.Combination; c != nil {
		r.writeCombination(p, c)
	}
}

// brokenText is the conclusions that do not hold, as the tally counts
// them: "4 conclusions that do not hold (3 decisions that do not carry
// over, 1 with the size off)".
func (r *Result) brokenText() string {
	n := r.Counts
	var parts []string
	if n.NotCarried > 0 {
		parts = append(parts, plural(n.NotCarried, "decision that does not carry over", "decisions that do not carry over"))
	}
	if n.SizeOff > 0 {
		parts = append(parts, fmt.Sprintf("%d with the size off", n.SizeOff))
	}
	return fmt.Sprintf("%s (%s)", plural(n.Broken(), "conclusion that does not hold", "conclusions that do not hold"), strings.Join(parts, ", "))
}

// restoredCounts is what a transplant restores in the tally's counts:
// "decisions 1 of 3 (e2e_p99 of pa), sizes 0 of 1".
func (r *Result) restoredCounts(decisions, sizes []string) string {
	var parts []string
	// The names, unless none or all were restored.
	list := func(names []string, of int) string {
		if len(names) == 0 || len(names) == of {
			return ""
		}
		return " (" + strings.Join(names, ", ") + ")"
	}
	if n := r.Counts.NotCarried; n > 0 {
		parts = append(parts, fmt.Sprintf("decisions %d of %d%s", len(decisions), n, list(decisions, n)))
	}
	if n := r.Counts.SizeOff; n > 0 {
		parts = append(parts, fmt.Sprintf("sizes %d of %d%s", len(sizes), n, list(sizes, n)))
	}
	return strings.Join(parts, ", ")
}

// writeCombination writes the combination search: each counterfactual
// workload, what it reaches and what it moved, and what the budget left.
func (r *Result) writeCombination(p func(string, ...any), c *Combination) {
	real, syn := r.Workloads[0], r.Workloads[1]
	p("")
	budget := traces.Textf("%d extra runs of a budget of %d, %s", c.Runs, c.Budget, optCombinationBudget).Say(r.opts.Terms)
	if c.Budget == 0 {
		budget = traces.Textf("none searched: %s is 0", optCombinationBudget).Say(r.opts.Terms)
	}
	p("No single property restores %s; combinations (%s):", strings.Join(c.Conclusions, ", "), budget)
	of := len(c.Conclusions)
	for _, cf := range c.Tried {
		what := strings.Join(cf.Properties, " and ")
		if cf.NotBuilt != "" {
			p("  not built: %s: %s", cf.Label(), cf.NotBuilt)
			continue
		}
		var effects []string
		for _, e := range cf.Effects {
			effects = append(effects, e.Metric+" of "+e.Target+" "+r.pctShort(e.Effect))
		}
		var line string
		if cf.Kind == CounterfactualComplement {
			line = fmt.Sprintf("  %s with the %s %s: decides as %s on %d of %d (%s), %s of the way to the %s effects",
				real, syn, what, syn, cf.Reaches, of, strings.Join(effects, ", "), pctOf(cf.GapClosed), syn)
			if cf.Reaches > 0 {
				line += fmt.Sprintf(": the %s %s %s necessary to %s", real, what, isAre(what), strings.Join(cf.reached(), ", "))
			}
		} else {
			line = fmt.Sprintf("  %s with the %s %s: restores %d of %d (%s), %s", syn, real, what, cf.Reaches, of, strings.Join(effects, ", "), gapText(cf.GapClosed))
		}
		if cf.MovedAway {
			line += fmt.Sprintf(": it did not carry the %s %s, so it proves nothing", lenderOf(cf, real, syn), what)
		}
		p("%s", line)
		p("      moved: %s", cf.Evidence)
	}
	if len(c.Left) > 0 {
		p("  not run, over the budget: %s", strings.Join(c.Left, "; "))
	}
}

// writeReasons writes the reasons with their evidence.
func (r *Result) writeReasons(p func(string, ...any)) {
	if len(r.Reasons) == 0 {
		return
	}
	real, syn := r.Workloads[0], r.Workloads[1]
	p("")
	switch r.Reasons[0].Evidence {
	case EvidenceAblation, EvidenceNecessary:
		p("Reasons (shown by the ablation; each with what its counterfactual workload changed, from → to, beside the workload it took the property from):")
	case EvidencePrior:
		p("Likely reasons (a prior from what the configuration change acts through, then other differences; not proven):")
	default:
		p("Where the %s workload differs from %s traffic (not proven to matter):", syn, real)
	}
	for _, rs := range r.Reasons {
		tag := ""
		switch {
		case rs.Proven && len(rs.Properties) > 0:
			tag = " [proven together]"
		case rs.Proven:
			tag = " [proven]"
		case rs.Evidence == EvidenceNecessary:
			tag = " [necessary]"
		case rs.Evidence == EvidencePrior:
			tag = " [prior: " + strings.Join(rs.Keys, ", ") + "]"
		}
		p("  - %s%s: %s", rs.Property, tag, rs.Detail)
	}
}

// lenderOf is the workload a counterfactual took its properties from.
func lenderOf(cf Counterfactual, real, syn string) string {
	if cf.Kind == CounterfactualComplement {
		return syn
	}
	return real
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

func pctOf(g float64) string { return fmt.Sprintf("%.0f%%", 100*g) }

// gapText says how far a transplant moves the effects from the synthetic
// towards the real ones (the median over the conclusions that did not
// hold).
func gapText(g float64) string {
	switch {
	case g < 0:
		return fmt.Sprintf("moves away from the real effect (median %.0f%% of the gap)", 100*g)
	case g >= 1.005:
		return fmt.Sprintf("overshoots the real effect (median %.0f%% of the gap)", 100*g)
	}
	return fmt.Sprintf("closes %.0f%% of the gap", 100*g)
}

// fmtEffect is an effect in the verdict table: its change, its interval
// and, when it is not significant, "ns" (or "ns (<2%)" when only the
// minimum effect makes it so).
func (r *Result) fmtEffect(e Effect) string {
	return fmt.Sprintf("%+.1f%% [%+.1f, %+.1f]", 100*e.Change, 100*e.CILow, 100*e.CIHigh) + r.nsMark(e)
}

// legend says, under the verdict table, how many conclusions fall under
// each verdict (the tally the headline and the ablation count in) and what
// each verdict word and mark in the table means.
func (r *Result) legend() []string {
	n := r.Counts
	if n.Judged == 0 {
		return nil
	}
	by := func(v string) string { return fmt.Sprintf("%d %s", n.ByVerdict[v], v) }
	var notCarried []string
	for _, v := range []string{VerdictReversed, VerdictNotSignificantSynthetic, VerdictNotSignificantReal} {
		if n.ByVerdict[v] > 0 {
			notCarried = append(notCarried, by(v))
		}
	}
	var tally []string
	if n.NotCarried > 0 {
		tally = append(tally, plural(n.NotCarried, "does not carry over", "do not carry over")+" ("+strings.Join(notCarried, ", ")+")")
	}
	if n.SizeOff > 0 {
		tally = append(tally, plural(n.SizeOff, "carries", "carry")+fmt.Sprintf(" over with the size off (%s)", VerdictMagnitudeOff))
	}
	if n.Holds > 0 {
		tally = append(tally, plural(n.Holds, "holds", "hold"))
	}
	out := []string{"", fmt.Sprintf("Of %d conclusions: %s.", n.Judged, strings.Join(tally, "; "))}
	meaning := map[string]string{
		VerdictHolds: fmt.Sprintf("both workloads show no effect, or the same direction with sizes that agree (intervals overlap, or within %.0f%% of the %s change)",
			100*r.opts.MagnitudeTolerance, r.Workloads[0]),
		VerdictMagnitudeOff:            "the same direction, sizes further apart: the decision carries over, its size does not",
		VerdictReversed:                "both significant, in opposite directions",
		VerdictNotSignificantSynthetic: "only the " + r.Workloads[0] + " workload shows an effect",
		VerdictNotSignificantReal:      "only the " + r.Workloads[1] + " workload shows an effect",
	}
	for _, v := range []string{VerdictHolds, VerdictMagnitudeOff, VerdictReversed, VerdictNotSignificantSynthetic, VerdictNotSignificantReal} {
		if n.ByVerdict[v] > 0 {
			out = append(out, fmt.Sprintf("  %s: %s", v, meaning[v]))
		}
	}
	var ns, small bool
	for _, c := range r.Conclusions {
		for _, e := range []Effect{c.Real, c.Synthetic} {
			ns = ns || !e.Significant && !e.BelowMinEffect
			small = small || e.BelowMinEffect
		}
	}
	if ns {
		out = append(out, fmt.Sprintf("  ns: not significant: the %.0f%% interval includes 0; counted as no effect", 100*r.Confidence))
	}
	if small {
		out = append(out, traces.Textf("  ns (<%s%%): the interval excludes 0 but the change is under the minimum effect (%s, %s%%); counted as no effect",
			strconv.FormatFloat(100*r.MinEffect, 'g', 3, 64), optMinEffect, strconv.FormatFloat(100*r.MinEffect, 'g', 3, 64)).Say(r.opts.Terms))
	}
	return out
}

var targetColors = []color.Color{
	color.RGBA{0x30, 0x60, 0xc0, 0xff}, color.RGBA{0xe0, 0x70, 0x10, 0xff}, color.RGBA{0x20, 0x90, 0x40, 0xff},
	color.RGBA{0xa0, 0x30, 0xa0, 0xff}, color.RGBA{0x80, 0x80, 0x80, 0xff},
}

// metricChart draws one metric side by side: a group per workload, a bar
// per target.
func (r *Result) metricChart(m Metric) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = m.Name
	p.Y.Label.Text = "ms"
	if m.Kind == kindGoodput {
		p.Y.Label.Text = "share of requests meeting the SLO (%)"
	}
	p.Legend.Top = true
	width := vg.Points(22)
	n := len(r.Targets)
	for ti, t := range r.Targets {
		var vals plotter.Values
		for _, w := range r.Workloads {
			v := 0.0
			if c := r.cell(w, t.Name); c != nil {
				v = c.Values[m.Name]
			}
			if m.Kind == kindGoodput {
				v *= 100
			}
			if math.IsNaN(v) || math.IsInf(v, 0) {
				v = 0
			}
			vals = append(vals, v)
		}
		bc, err := plotter.NewBarChart(vals, width)
		if err != nil {
			return nil, err
		}
		bc.Color = targetColors[ti%len(targetColors)]
		bc.LineStyle.Width = 0
		bc.Offset = width * vg.Length(2*ti-n+1) / 2
		p.Add(bc)
		p.Legend.Add(t.Name, bc)
	}
	p.NominalX(r.Workloads[0], r.Workloads[1])
	p.Y.Min = 0
	return p, nil
}

var htmlTmpl = template.Must(template.New("validate").Funcs(template.FuncMap{
	"pct":  func(v float64) string { return fmt.Sprintf("%.0f%%", 100*v) },
	"rank": rankText,
	"join": strings.Join,
	"secs": fmtSeconds,
	"val": func(c Cell, m Metric) string {
		v, ok := c.Values[m.Name]
		if !ok {
			return "-"
		}
		return fmtValue(m, v)
	},
}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>tokentrace validate</title>
<style>
body{font-family:"Liberation Sans",Arial,Helvetica,sans-serif;margin:24px auto;max-width:1100px;color:#222;padding:0 12px}
h1{font-size:1.5em} h2{font-size:1.15em;margin-top:28px;border-bottom:1px solid #ddd;padding-bottom:4px}
table{border-collapse:collapse;font-size:.9em} td,th{padding:3px 9px;text-align:right;border-bottom:1px solid #eee}
th:first-child,td:first-child,td.l,th.l{text-align:left}
.holds{color:#17803d;font-weight:bold}.broken{color:#b3261e;font-weight:bold}
.conclusion{font-size:1.1em;background:#eef4ff;border-left:4px solid #3060c0;padding:8px 16px}
.diag{background:#fff8e6;border-left:4px solid #f0a000;padding:8px 16px}
.charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(340px,1fr));gap:16px}
svg{width:100%;height:auto;background:#fff;border:1px solid #eee}
</style></head><body>
<h1>tokentrace validate: {{index .R.Workloads 1}} vs {{index .R.Workloads 0}}</h1>
<p class="conclusion">{{.R.Conclusion}}</p>
<p>Targets ({{.R.Baseline}} is the baseline): {{range .R.Targets}}<b>{{.Name}}</b> = <code>{{.Config}}</code> &nbsp; {{end}}<br>
Speed {{.R.Speed}}×; {{printf "%.0f" .ConfPct}}% bootstrap intervals of the relative change against {{.R.Baseline}}.</p>
<h2>Verdicts</h2>
<table><tr><th>metric</th><th class="l">target</th><th>{{index .R.Workloads 1}} change [CI]</th><th>{{index .R.Workloads 0}} change [CI]</th><th class="l">verdict</th></tr>
{{range .R.Conclusions}}<tr><td>{{.Metric}}</td><td class="l">{{.Target}}</td><td>{{call $.Eff .Synthetic}}</td><td>{{call $.Eff .Real}}</td><td class="l {{if eq .Verdict "holds"}}holds{{else}}broken{{end}}">{{.Verdict}}</td></tr>
{{end}}</table>
{{if .Legend}}<p>{{range .Legend}}{{.}}<br>
{{end}}</p>{{end}}
{{if .Why}}<h2>Why, by ablation</h2>
<pre>{{range .Why}}{{.}}
{{end}}</pre>{{else}}{{with .R.Ablation}}{{if .Note}}<p>{{.Note}}</p>{{end}}{{end}}{{end}}
{{if .R.Reasons}}<h2>Reasons</h2><div class="diag">{{range .R.Reasons}}<p><b>{{.Property}}</b>{{if and .Proven .Properties}} <span class="holds">[proven together]</span>{{else if .Proven}} <span class="holds">[proven]</span>{{else if eq .Evidence "necessary"}} [necessary]{{else if eq .Evidence "prior"}} [a prior: the change of {{join .Keys ", "}} acts through it; not proven]{{else if eq .Evidence "difference"}} [a difference; not proven]{{end}}: {{.Detail}}</p>{{end}}</div>{{end}}
{{if .R.NextSteps}}<h2>Next steps</h2>{{range .R.NextSteps}}<p><b>{{.Property}}</b> ({{.Evidence}}): {{.Change}}</p>{{if .Commands}}<pre>{{range .Commands}}{{.}}
{{end}}</pre>{{end}}{{end}}{{end}}
<h2>Side by side</h2>
<div class="charts">{{range .Charts}}{{.}}{{end}}</div>
<h2>Values</h2>
<table><tr><th>workload</th><th class="l">target</th><th>requests</th><th>failed</th>{{range .R.Metrics}}<th>{{.Name}}</th>{{end}}<th>cached</th><th class="l">p99 E2E tail mostly</th></tr>
{{range $c := .R.Cells}}<tr><td>{{$c.Workload}}</td><td class="l">{{$c.Target}}</td><td>{{$c.Requests}}</td><td>{{$c.Failed}}</td>{{range $.R.Metrics}}<td>{{val $c .}}</td>{{end}}<td>{{if ge $c.CachedShare 0.0}}{{pct $c.CachedShare}}{{else}}-{{end}}</td><td class="l">{{if $c.TailCause}}{{$c.TailCause}} ({{pct $c.TailShare}}){{else}}-{{end}}</td></tr>
{{end}}</table>
<h2>Rankings, best first</h2>
<table><tr><th>metric</th><th class="l">{{index .R.Workloads 1}}</th><th class="l">{{index .R.Workloads 0}}</th><th class="l"></th></tr>
{{range .R.Rankings}}<tr><td>{{.Metric}}</td><td class="l">{{rank .Synthetic}}</td><td class="l">{{rank .Real}}</td><td class="l {{if .Same}}holds{{else}}broken{{end}}">{{if .Same}}same{{else}}differs{{end}}</td></tr>
{{end}}</table>
{{range .R.Warnings}}<p class="broken">warning: {{.}}</p>{{end}}
<p style="color:#888;font-size:.8em">Generated by tokentrace validate. Self-contained: no network needed to view.</p>
</body></html>
`))

// WriteHTML writes the result as one self-contained page: the conclusion,
// the verdicts, the likely reasons, a side-by-side chart per metric, the
// values and the rankings.
func (r *Result) WriteHTML(w io.Writer) error {
	var charts []template.HTML
	for _, m := range r.Metrics {
		p, err := r.metricChart(m)
		if err != nil {
			return fmt.Errorf("render chart %s: %w", m.Name, err)
		}
		svg, err := chart.SVG(p, 11*vg.Centimeter, 8*vg.Centimeter)
		if err != nil {
			return fmt.Errorf("render chart %s: %w", m.Name, err)
		}
		charts = append(charts, template.HTML(svg))
	}
	var why []string
	if a := r.Ablation; a != nil && a.Status == AblationRan {
		r.writeAblation(func(format string, a ...any) { why = append(why, fmt.Sprintf(format, a...)) })
	}
	legend := r.legend()
	// The text's blank lines before each block are the page's headings.
	for len(legend) > 0 && legend[0] == "" {
		legend = legend[1:]
	}
	for len(why) > 0 && why[0] == "" {
		why = why[1:]
	}
	return htmlTmpl.Execute(w, struct {
		R           *Result
		Charts      []template.HTML
		ConfPct     float64
		Eff         func(Effect) string
		Legend, Why []string
	}{r, charts, 100 * r.Confidence, r.fmtEffect, legend, why})
}
