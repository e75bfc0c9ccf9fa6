package chart

import (
	"bytes"
	"fmt"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// panelGap is the space between stacked panels.
const panelGap = 3 * vg.Millimeter

// StackSVG renders panels one above the other as one SVG document, each
// panel's plot area w × h and the plot areas aligned left and right, so
// the panels share the x axis (the caller gives them the same X.Min and
// X.Max). The legends sit in one strip to the right, each level with its
// panel's plot area, so none covers data.
func StackSVG(panels []*plot.Plot, w, h vg.Length) (_ []byte, err error) {
	if len(panels) == 0 {
		return nil, fmt.Errorf("chart: no panels to stack")
	}
	defer func() {
		if e := recover(); e != nil {
			err = fmt.Errorf("chart %q: %v", panels[0].Title.Text, e)
		}
	}()
	// Measure each panel's axes and title around a plot area.
	type margins struct{ left, right, vert vg.Length }
	ms := make([]margins, len(panels))
	var left, right, lw, total vg.Length
	for i, p := range panels {
		tile := draw.Canvas{Rectangle: vg.Rectangle{Max: vg.Point{X: w + 10*vg.Centimeter, Y: h + 10*vg.Centimeter}}}
		da := p.DataCanvas(tile)
		ms[i] = margins{da.Min.X - tile.Min.X, tile.Max.X - da.Max.X, tile.Size().Y - da.Size().Y}
		left, right = max(left, ms[i].left), max(right, ms[i].right)
		lw = max(lw, legendWidth(p))
		total += h + ms[i].vert
	}
	total += panelGap * vg.Length(len(panels)-1)
	strip := vg.Length(0)
	if lw > 0 {
		strip = legendGap + lw + legendMargin
	}
	c, err := draw.NewFormattedCanvas(left+w+right+strip, total, "svg")
	if err != nil {
		return nil, err
	}
	full := draw.New(c)
	top := full.Max.Y
	for i, p := range panels {
		m := ms[i]
		tile := draw.Canvas{Canvas: full.Canvas, Rectangle: vg.Rectangle{
			Min: vg.Point{X: left - m.left, Y: top - h - m.vert},
			Max: vg.Point{X: left + w + m.right, Y: top},
		}}
		top -= h + m.vert + panelGap
		leg := p.Legend
		p.Legend = plot.NewLegend()
		p.Draw(tile)
		p.Legend = leg
		if legendWidth(p) == 0 {
			continue
		}
		leg.Top, leg.Left, leg.XOffs, leg.YOffs = true, true, 0, 0
		leg.Padding = vg.Points(2)
		area := draw.Canvas{Canvas: full.Canvas, Rectangle: vg.Rectangle{
			Min: vg.Point{X: full.Max.X - lw - legendMargin, Y: tile.Min.Y},
			Max: vg.Point{X: full.Max.X - legendMargin, Y: p.DataCanvas(tile).Max.Y},
		}}
		leg.Draw(area)
		frameLegend(full, &leg, area)
	}
	var b bytes.Buffer
	if _, err := c.WriteTo(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
