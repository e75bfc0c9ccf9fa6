package sweep

import (
	"fmt"
	"image/color"
	"math"
	"time"

	"github.com/tokentrace/tokentrace/internal/chart"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// WriteChart draws throughput (output tok/s) against p50 and p99 latency of
// the first SLO metric, with the SLO bound and the knee marked; the format
// follows the extension (.svg, .png, .pdf).
func (res *Result) WriteChart(name string) error {
	cfg := res.opts
	names, bounds := sloMetrics(cfg.SLO)
	metric, bound := "ttft", time.Duration(0)
	if len(names) > 0 {
		metric, bound = names[0], bounds[0]
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Throughput vs %s latency (knee at %s×)", metricLabel(metric), fmtSpeed(res.Knee))
	p.X.Label.Text = "achieved output tokens/s"
	p.Y.Label.Text = metricLabel(metric) + " (ms)"
	p.X.Tick.Marker, p.Y.Tick.Marker = chart.Ticks{}, chart.Ticks{} // no useless decimals
	var p50, p99 plotter.XYs
	var labels []string
	var lx, ly []float64
	maxY := 0.0
	for _, s := range res.Steps {
		a, b := s.TTFTP50Ms, s.TTFTP99Ms
		switch metric {
		case "tpot":
			a, b = s.TPOTP50Ms, s.TPOTP99Ms
		case "e2e":
			a, b = math.NaN(), s.E2EP99Ms
		}
		if !math.IsNaN(a) {
			p50 = append(p50, plotter.XY{X: s.OutTokPerS, Y: a})
		}
		p99 = append(p99, plotter.XY{X: s.OutTokPerS, Y: b})
		labels = append(labels, fmtSpeed(s.Speed)+"×")
		lx, ly = append(lx, s.OutTokPerS), append(ly, b)
		maxY = max(maxY, b)
	}
	add := func(xy plotter.XYs, c color.Color, legend string, dashed bool) error {
		return chart.AddLine(p, legend, xy, c, dashed)
	}
	if err := add(p50, color.RGBA{R: 31, G: 119, B: 180, A: 255}, metricLabel(metric)+" p50", false); err != nil {
		return err
	}
	if err := add(p99, color.RGBA{R: 214, G: 39, B: 40, A: 255}, metricLabel(metric)+" p99", false); err != nil {
		return err
	}
	if bound > 0 && len(res.Steps) > 0 {
		x0, x1 := math.Inf(1), math.Inf(-1)
		for _, s := range res.Steps {
			x0, x1 = min(x0, s.OutTokPerS), max(x1, s.OutTokPerS)
		}
		bm := float64(bound) / 1e6
		if err := add(plotter.XYs{{X: x0, Y: bm}, {X: x1, Y: bm}}, color.Gray{Y: 90}, "SLO "+metricLabel(metric)+" "+fmtBound(bound), true); err != nil {
			return err
		}
	}
	for _, s := range res.Steps {
		if s.Speed == res.Knee && res.Knee > 0 {
			y := s.TTFTP99Ms
			switch metric {
			case "tpot":
				y = s.TPOTP99Ms
			case "e2e":
				y = s.E2EP99Ms
			}
			sc, err := plotter.NewScatter(plotter.XYs{{X: s.OutTokPerS, Y: y}})
			if err != nil {
				return err
			}
			sc.GlyphStyle.Shape = draw.RingGlyph{}
			sc.GlyphStyle.Radius = vg.Points(7)
			sc.GlyphStyle.Color = color.RGBA{G: 140, A: 255}
			p.Add(sc)
			p.Legend.Add(fmt.Sprintf("knee %s× (%.0f tok/s)", fmtSpeed(s.Speed), s.OutTokPerS), sc)
		}
	}
	if len(lx) > 0 {
		var xy plotter.XYs
		for i := range lx {
			xy = append(xy, plotter.XY{X: lx[i], Y: ly[i]})
		}
		if lb, err := plotter.NewLabels(plotter.XYLabels{XYs: xy, Labels: labels}); err == nil {
			lb.Offset = vg.Point{X: vg.Points(4), Y: vg.Points(4)}
			p.Add(lb)
		}
	}
	// Latency spans orders of magnitude past the knee: a log axis keeps
	// the region below the SLO readable (all values are positive).
	minY := math.Inf(1)
	for _, xy := range append(append(plotter.XYs{}, p50...), p99...) {
		if xy.Y > 0 {
			minY = min(minY, xy.Y)
		}
	}
	if bound > 0 {
		minY = min(minY, float64(bound)/1e6)
		maxY = max(maxY, float64(bound)/1e6)
	}
	if maxY > 0 && !math.IsInf(minY, 1) && !math.IsInf(maxY, 1) && allPositive(p50) && allPositive(p99) {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = chart.Ticks{Log: true}
		p.Y.Min, p.Y.Max = minY/1.5, maxY*1.5
		p.Y.Label.Text += ", log scale"
	} else {
		p.Y.Min = 0
	}
	return chart.Save(p, 8*vg.Inch, 5*vg.Inch, name)
}

func allPositive(xy plotter.XYs) bool {
	for _, v := range xy {
		if !(v.Y > 0) || math.IsInf(v.Y, 1) {
			return false
		}
	}
	return true
}
