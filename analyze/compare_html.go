package analyze

import (
	"fmt"
	"html/template"
	"io"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// compareCDF overlays the CDFs of one metric of both runs.
func (c *Comparison) compareCDF(title string, a, b []float64) (*plot.Plot, error) {
	if len(a) == 0 && len(b) == 0 {
		return nil, nil
	}
	p := newPlot(title, "latency (ms)", "fraction of requests")
	if err := addLine(p, c.LabelA, cdfLine(a), colTTFT, false); err != nil {
		return nil, err
	}
	if err := addLine(p, c.LabelB, cdfLine(b), colE2E, false); err != nil {
		return nil, err
	}
	p.Y.Min, p.Y.Max = 0, 1
	latencyX(p, a, b)
	return p, nil
}

// compareBars stacks both tails' attribution shares.
func (c *Comparison) compareBars() (*plot.Plot, error) {
	a, b := c.AttributionA, c.AttributionB
	if a.TailRequests == 0 && b.TailRequests == 0 {
		return nil, nil
	}
	metric := strings.ToUpper(a.TailMetric)
	p := newPlot(fmt.Sprintf("Where the p%s %s tail's time went", fmtPct(a.TailPercentile), metric), "", fmt.Sprintf("share of %s (%%)", metric))
	sa, sb := a.Share.Array(), b.Share.Array()
	var prev *plotter.BarChart
	for k := range nComponents {
		if k == cDecode && a.TailMetric == MetricTTFT {
			continue // never part of TTFT
		}
		var err error
		if prev, err = stackComponent(p, prev, k, plotter.Values{100 * sa[k], 100 * sb[k]}, vg.Points(60)); err != nil {
			return nil, err
		}
	}
	p.NominalX(fmt.Sprintf("%s (%s)", c.LabelA, orDash(a.Source)), fmt.Sprintf("%s (%s)", c.LabelB, orDash(b.Source)))
	p.Y.Min, p.Y.Max = 0, 100
	p.X.Min, p.X.Max = -0.7, 1.7
	return p, nil
}

var compareTmpl = template.Must(template.New("compare").Funcs(template.FuncMap{
	"f3": func(v float64) string { return fmt.Sprintf("%.3f", v) },
	"pctp": func(p *float64) string {
		if p == nil {
			return ""
		}
		return fmt.Sprintf("%+.1f%%", *p)
	},
	"ci": func(lo, hi *float64) string {
		if lo == nil {
			return ""
		}
		return fmt.Sprintf("[%+.2f, %+.2f]", *lo, *hi)
	},
}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>tokentrace analyze compare</title>
<style>
body{font-family:"Liberation Sans",Arial,Helvetica,sans-serif;margin:24px auto;max-width:1100px;color:#222;padding:0 12px}
h1{font-size:1.5em} h2{font-size:1.15em;margin-top:28px;border-bottom:1px solid #ddd;padding-bottom:4px}
table{border-collapse:collapse;font-size:.9em} td,th{padding:3px 9px;text-align:right;border-bottom:1px solid #eee}
th:first-child,td:first-child{text-align:left}
.better{color:#17803d;font-weight:bold}.worse{color:#b3261e;font-weight:bold}
.conclusion{font-size:1.1em;background:#eef4ff;border-left:4px solid #3060c0;padding:8px 16px}
.diag{background:#fff8e6;border-left:4px solid #f0a000;padding:8px 16px}
.charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(480px,1fr));gap:16px}
svg.chart{width:100%;height:auto;background:#fff;border:1px solid #eee}
</style></head><body>
<h1>tokentrace analyze compare: {{.C.LabelA}} vs {{.C.LabelB}}</h1>
<p class="conclusion">{{.C.Conclusion}}</p>
{{if .C.MetaDiffs}}<h2>Metadata that differs</h2>
<table><tr><th>key</th><th>{{.C.LabelA}}</th><th>{{.C.LabelB}}</th></tr>
{{range .C.MetaDiffs}}<tr><td>{{.Key}}</td><td>{{.A}}</td><td>{{.B}}</td></tr>{{end}}</table>{{end}}
<h2>Charts</h2>
<div class="charts">{{range .Charts}}{{.}}{{end}}</div>
<h2>Metrics</h2>
<table><tr><th>metric</th><th>{{.C.LabelA}}</th><th>{{.C.LabelB}}</th><th>change</th><th>change %</th><th>{{printf "%.0f" .ConfPct}}% CI of change</th><th>verdict</th></tr>
{{range .C.Metrics}}<tr><td>{{.Name}}</td><td>{{f3 .A}}</td><td>{{f3 .B}}</td><td>{{f3 .Change}}</td><td>{{pctp .ChangePct}}</td><td>{{ci .CILow .CIHigh}}</td><td class="{{if eq .Verdict "better"}}better{{else if or (eq .Verdict "worse") (eq .Verdict "differs")}}worse{{end}}">{{.Verdict}}</td></tr>
{{end}}</table>
{{if .C.ByClass}}<h2>By class</h2>
<p>Each class's rows of both runs compared alone; everything else on this page pools the classes.</p>
{{range .C.ByClass}}<h3>{{.Class}}</h3>{{if .Comparison}}<p class="conclusion">{{.Conclusion}}</p>
<table><tr><th>metric</th><th>{{$.C.LabelA}}</th><th>{{$.C.LabelB}}</th><th>change</th><th>change %</th><th>{{printf "%.0f" $.ConfPct}}% CI of change</th><th>verdict</th></tr>
{{range .KeyMetrics}}<tr><td>{{.Name}}</td><td>{{f3 .A}}</td><td>{{f3 .B}}</td><td>{{f3 .Change}}</td><td>{{pctp .ChangePct}}</td><td>{{ci .CILow .CIHigh}}</td><td class="{{if eq .Verdict "better"}}better{{else if or (eq .Verdict "worse") (eq .Verdict "differs")}}worse{{end}}">{{.Verdict}}</td></tr>
{{end}}<tr><td>tail dominant</td><td>{{.AttributionA.Dominant}}</td><td>{{.AttributionB.Dominant}}</td><td></td><td></td><td></td><td></td></tr></table>
{{else}}<p>Only in {{.OnlyIn}}: nothing to compare.</p>{{end}}{{end}}{{end}}
<h2>Diagnosis: {{.C.LabelA}}</h2><div class="diag">{{range .C.AttributionA.Diagnosis}}<p>{{.}}</p>{{end}}</div>
<h2>Diagnosis: {{.C.LabelB}}</h2><div class="diag">{{range .C.AttributionB.Diagnosis}}<p>{{.}}</p>{{end}}</div>
<p style="color:#888;font-size:.8em">Generated by tokentrace analyze compare. Self-contained: no network needed to view.</p>
</body></html>
`))

// WriteHTML writes the comparison as one self-contained HTML page: the
// differing metadata, TTFT/E2E/TPOT CDFs of both runs overlaid, both tails'
// attribution as stacked bars, the metric table with intervals and
// verdicts, and both diagnoses.
func (c *Comparison) WriteHTML(w io.Writer) error {
	var charts []template.HTML
	if c.a != nil && c.b != nil {
		for _, f := range []func() (*plot.Plot, error){
			func() (*plot.Plot, error) { return c.compareCDF("TTFT CDF", c.a.samples.ttft, c.b.samples.ttft) },
			func() (*plot.Plot, error) { return c.compareCDF("E2E CDF", c.a.samples.e2e, c.b.samples.e2e) },
			func() (*plot.Plot, error) { return c.compareCDF("TPOT CDF", c.a.samples.tpot, c.b.samples.tpot) },
			c.compareBars,
		} {
			p, err := f()
			if err != nil {
				return fmt.Errorf("render charts: %w", err)
			}
			if p == nil {
				continue
			}
			s, err := svgOf(p, 16*vg.Centimeter, 9*vg.Centimeter)
			if err != nil {
				s = template.HTML(`<p class="worse">` + template.HTMLEscapeString(err.Error()) + `</p>`)
			}
			charts = append(charts, s)
		}
	}
	return compareTmpl.Execute(w, struct {
		C       *Comparison
		Charts  []template.HTML
		ConfPct float64
	}{c, charts, 100 * c.Confidence})
}
