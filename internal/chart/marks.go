package chart

import (
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Band shades the x range [X0, X1] over the plot area's full height (a
// burst, an incident window). Add it before the lines it sits under.
type Band struct {
	X0, X1 float64
	Color  color.Color
}

// Plot implements plot.Plotter.
func (b Band) Plot(c draw.Canvas, p *plot.Plot) {
	tx, _ := p.Transforms(&c)
	x0 := max(tx(b.X0), c.Min.X)
	x1 := min(tx(b.X1), c.Max.X)
	if x1 <= x0 {
		return
	}
	c.FillPolygon(b.Color, []vg.Point{{X: x0, Y: c.Min.Y}, {X: x1, Y: c.Min.Y}, {X: x1, Y: c.Max.Y}, {X: x0, Y: c.Max.Y}})
}

// Thumbnail implements plot.Thumbnailer: a filled box.
func (b Band) Thumbnail(c *draw.Canvas) {
	c.FillPolygon(b.Color, []vg.Point{{X: c.Min.X, Y: c.Min.Y}, {X: c.Max.X, Y: c.Min.Y}, {X: c.Max.X, Y: c.Max.Y}, {X: c.Min.X, Y: c.Max.Y}})
}

// DataRange implements plot.DataRanger: the band's x range (no y).
func (b Band) DataRange() (xmin, xmax, ymin, ymax float64) {
	return b.X0, b.X1, math.Inf(1), math.Inf(-1)
}

// Rug marks each x in Xs with a short vertical tick standing on the
// bottom of the plot area (when the tail requests arrived).
type Rug struct {
	Xs    []float64
	Color color.Color
}

// rugHeight is a rug tick's length.
var rugHeight = vg.Points(6)

// Plot implements plot.Plotter.
func (r Rug) Plot(c draw.Canvas, p *plot.Plot) {
	tx, _ := p.Transforms(&c)
	sty := draw.LineStyle{Color: r.Color, Width: vg.Points(1)}
	for _, x := range r.Xs {
		px := tx(x)
		if px < c.Min.X || px > c.Max.X {
			continue
		}
		c.StrokeLine2(sty, px, c.Min.Y, px, c.Min.Y+rugHeight)
	}
}

// Thumbnail implements plot.Thumbnailer: three ticks.
func (r Rug) Thumbnail(c *draw.Canvas) {
	sty := draw.LineStyle{Color: r.Color, Width: vg.Points(1)}
	for k := 1; k <= 3; k++ {
		x := c.Min.X + (c.Max.X-c.Min.X)*vg.Length(k)/4
		c.StrokeLine2(sty, x, c.Min.Y, x, c.Max.Y)
	}
}
