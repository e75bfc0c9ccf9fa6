package chart

import (
	"image/color"
	"regexp"
	"strconv"
	"testing"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// TestStackSVGSharesX: two panels whose y axes differ in width (ticks up
// to 1 against up to 1000000) get plot areas of the same left and right
// edges, read from their grid lines, and a legend frame each, right of
// both plot areas.
func TestStackSVGSharesX(t *testing.T) {
	var panels []*plot.Plot
	for i, hi := range []float64{1, 1e6} {
		p := plot.New()
		p.Add(plotter.NewGrid())
		var xy plotter.XYs
		for x := range 30 {
			xy = append(xy, plotter.XY{X: float64(x), Y: hi * float64(x) / 29})
		}
		if err := AddLine(p, []string{"small", "large values"}[i], xy, color.Black, false); err != nil {
			t.Fatal(err)
		}
		p.Add(Band{X0: 10, X1: 12, Color: color.NRGBA{R: 255, A: 64}}, Rug{Xs: []float64{11}, Color: color.Black})
		p.X.Min, p.X.Max = 0, 29
		panels = append(panels, p)
	}
	b, err := StackSVG(panels, 12*vg.Centimeter, 4*vg.Centimeter)
	if err != nil {
		t.Fatal(err)
	}
	// horizontal grid lines span each plot area's width
	grid := regexp.MustCompile(`<path d="M([0-9.]+),([0-9.]+)L([0-9.]+),([0-9.]+)" style="fill:none;stroke:#808080;stroke-width:0.25" />`)
	lefts, rights := map[string]bool{}, map[string]bool{}
	maxRight := 0.0
	for _, m := range grid.FindAllStringSubmatch(string(b), -1) {
		if m[2] == m[4] {
			lefts[m[1]], rights[m[3]] = true, true
			maxRight = max(maxRight, num(t, m[3]))
		}
	}
	if len(lefts) != 1 || len(rights) != 1 {
		t.Errorf("plot areas start at %v and end at %v: want one left and one right edge", lefts, rights)
	}
	frames := regexp.MustCompile(`<path d="M([0-9.]+),[^"]*" style="fill:none;stroke:#BBBBBB;stroke-width:0.5" />`).FindAllStringSubmatch(string(b), -1)
	if len(frames) != 2 {
		t.Fatalf("%d legend frames, want 2", len(frames))
	}
	for _, f := range frames {
		if x := num(t, f[1]); x <= maxRight {
			t.Errorf("legend frame at x=%.1f, not right of the plot areas (end at %.1f)", x, maxRight)
		}
	}
	if _, err := StackSVG(nil, vg.Centimeter, vg.Centimeter); err == nil {
		t.Errorf("no panels: want an error")
	}
}

func num(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
