// Package chart renders tokentrace's gonum plots (analyze's HTML reports,
// the sweep's capacity chart) with one layout rule: the legend sits in a
// strip to the right of the plot area, so it never covers the data it
// labels, whatever the data's shape.
package chart

import (
	"bytes"
	"fmt"
	"image/color"
	"io"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/tokentrace/tokentrace/internal/atomicfile"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// legendGap is the space between the plot area and the legend strip;
// legendMargin the space right of the legend, for browsers whose fallback
// font sets the text wider than gonum measured it.
const (
	legendGap    = 8 * vg.Millimeter
	legendMargin = 5 * vg.Millimeter
)

// fewPoints is the series length below which points are marked: a lone
// point draws no line.
const fewPoints = 20

// AddLine adds xy to p as a line (with its points marked when there are few)
// and a legend entry. An empty series adds nothing.
func AddLine(p *plot.Plot, name string, xy plotter.XYs, c color.Color, dashed bool) error {
	if len(xy) == 0 {
		return nil
	}
	var dashes []vg.Length
	if dashed {
		dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	}
	if len(xy) < fewPoints {
		lp, pts, err := plotter.NewLinePoints(xy)
		if err != nil {
			return err
		}
		lp.Color, lp.Width, lp.Dashes, pts.Color = c, vg.Points(1.5), dashes, c
		pts.Radius = vg.Points(2)
		p.Add(lp, pts)
		p.Legend.Add(name, lp, pts)
		return nil
	}
	l, err := plotter.NewLine(xy)
	if err != nil {
		return err
	}
	l.Color, l.Width, l.Dashes = c, vg.Points(1.5), dashes
	p.Add(l)
	p.Legend.Add(name, l)
	return nil
}

// legendWidth is the width of p's legend (0 without entries).
func legendWidth(p *plot.Plot) vg.Length {
	return p.Legend.Rectangle(draw.Canvas{}).Size().X
}

// size is the canvas size for a plot area of w × h plus p's legend strip.
func size(p *plot.Plot, w, h vg.Length) (vg.Length, vg.Length) {
	if lw := legendWidth(p); lw > 0 {
		return w + legendGap + lw + legendMargin, h
	}
	return w, h
}

// Draw draws p on dc: the plot in the left part, the legend in a strip on
// the right, aligned with the top of the plot area. A panic in the plotting
// library (degenerate data) becomes an error.
func Draw(dc draw.Canvas, p *plot.Plot) (err error) {
	defer func() {
		if e := recover(); e != nil {
			err = fmt.Errorf("chart %q: %v", p.Title.Text, e)
		}
	}()
	leg := p.Legend
	lw := legendWidth(p)
	if lw == 0 {
		p.Draw(dc)
		return nil
	}
	p.Legend = plot.NewLegend()
	defer func() { p.Legend = leg }()
	p.Draw(draw.Crop(dc, 0, -(lw + legendGap + legendMargin), 0, 0))
	leg.Top, leg.Left, leg.XOffs, leg.YOffs = true, true, 0, 0
	leg.Padding = vg.Points(2)
	area := draw.Crop(dc, dc.Max.X-dc.Min.X-lw-legendMargin, -legendMargin, 0, 0)
	// Start below the title, level with the top of the plot area.
	if p.Title.Text != "" {
		area = draw.Crop(area, 0, 0, 0, -(p.Title.TextStyle.Height(p.Title.Text) + p.Title.Padding))
	}
	leg.Draw(area)
	frameLegend(dc, &leg, area)
	return nil
}

// LegendFrame is the colour of the thin box drawn around every legend, so
// a reader (and a test parsing the SVG) sees where the legend sits.
var LegendFrame = color.RGBA{R: 0xbb, G: 0xbb, B: 0xbb, A: 0xff}

// frameLegend strokes a box around leg as Legend.Draw lays it out in area
// (Top and Left set): entries from the top-left corner down.
func frameLegend(dc draw.Canvas, leg *plot.Legend, area draw.Canvas) {
	r := leg.Rectangle(area)
	w, h := r.Size().X, r.Size().Y
	pad := vg.Points(2)
	x0, y1 := area.Min.X-pad, area.Max.Y+pad
	x1, y0 := area.Min.X+w+pad, area.Max.Y-h-leg.TextStyle.FontExtents().Descent-pad
	dc.StrokeLines(draw.LineStyle{Color: LegendFrame, Width: vg.Points(0.5)}, []vg.Point{
		{X: x0, Y: y0}, {X: x1, Y: y0}, {X: x1, Y: y1}, {X: x0, Y: y1}, {X: x0, Y: y0},
	})
}

// SVG renders p as an SVG document whose plot area is w × h.
func SVG(p *plot.Plot, w, h vg.Length) ([]byte, error) {
	var b bytes.Buffer
	if err := write(&b, p, w, h, "svg"); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func write(out io.Writer, p *plot.Plot, w, h vg.Length, format string) error {
	cw, ch := size(p, w, h)
	c, err := draw.NewFormattedCanvas(cw, ch, format)
	if err != nil {
		return err
	}
	if err := Draw(draw.New(c), p); err != nil {
		return err
	}
	_, err = c.WriteTo(out)
	return err
}

// Save writes p to name in the format its extension names (.svg, .png or
// .pdf), with a plot area of w × h. The file appears only once complete.
func Save(p *plot.Plot, w, h vg.Length, name string) error {
	format := strings.TrimPrefix(strings.ToLower(filepath.Ext(name)), ".")
	if format != "svg" && format != "png" && format != "pdf" {
		return fmt.Errorf("chart %s: want .svg, .png or .pdf", name)
	}
	f, err := atomicfile.Create(name)
	if err != nil {
		return err
	}
	if err := write(f, p, w, h, format); err != nil {
		f.Abort()
		return fmt.Errorf("chart %s: %w", name, err)
	}
	return f.Close()
}

// Ticks marks an axis like gonum's DefaultTicks (or LogTicks with Log), but
// labels each tick with no useless decimals ("1250", not "1250.00"; "0.5",
// not "0.50"; "1000000", not "1e+06"), dividing the values by Div first
// (1000 to show an axis of milliseconds in seconds; 0 or 1 keeps them).
type Ticks struct {
	Div float64
	Log bool
}

// Ticks implements plot.Ticker.
func (t Ticks) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	if t.Log {
		ts = plot.LogTicks{Prec: -1}.Ticks(lo, hi)
	} else {
		ts = plot.DefaultTicks{}.Ticks(lo, hi)
	}
	div := t.Div
	if div == 0 {
		div = 1
	}
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = TickLabel(ts[i].Value / div)
		}
	}
	return ts
}

// TickLabel formats v with the digits it needs and no more: six
// significant digits at most (so 0.30000000000000004 is "0.3"), no
// exponent, no trailing zeros.
func TickLabel(v float64) string {
	r, err := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 6, 64), 64)
	if err != nil {
		r = v
	}
	if r == 0 {
		r = 0 // no "-0"
	}
	return strconv.FormatFloat(r, 'f', -1, 64)
}

// MsAxis labels an axis of milliseconds whose values reach hiMs: in ms, or
// in seconds once they reach 10 s ("latency (s)" with ticks 2.5, 5, 7.5
// rather than "latency (ms)" with 2500.00 …), on a log scale when log is
// set. The values stay in ms; only the labels change.
func MsAxis(a *plot.Axis, name string, hiMs float64, log bool) {
	t := Ticks{Log: log}
	unit := "ms"
	if hiMs >= 10000 {
		t.Div, unit = 1000, "s"
	}
	a.Label.Text = name + " (" + unit + ")"
	if log {
		a.Scale = plot.LogScale{}
		a.Label.Text += ", log scale"
	}
	a.Tick.Marker = t
}
