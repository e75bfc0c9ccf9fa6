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
	return nil
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
