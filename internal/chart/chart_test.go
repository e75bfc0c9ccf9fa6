package chart

import (
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/recorder"
)

// risingPlot has a line that runs into the top right corner, where
// gonum's default legend sits, and a flat one along the top.
func risingPlot(t *testing.T) *plot.Plot {
	p := plot.New()
	p.Title.Text = "latency"
	var rise, top plotter.XYs
	for i := range 50 {
		rise = append(rise, plotter.XY{X: float64(i), Y: float64(i)})
		top = append(top, plotter.XY{X: float64(i), Y: 49})
	}
	if err := AddLine(p, "rising series", rise, color.RGBA{R: 200, A: 255}, false); err != nil {
		t.Fatal(err)
	}
	if err := AddLine(p, "flat series", top, color.RGBA{B: 200, A: 255}, true); err != nil {
		t.Fatal(err)
	}
	p.Legend.Top = true
	return p
}

// extents returns the rightmost x of the data lines (strokes of more than
// a thumbnail's few points) and the leftmost x of the legend texts.
func extents(rec *recorder.Canvas) (dataMaxX, legendMinX vg.Length) {
	legendMinX = vg.Length(math.Inf(1))
	for _, a := range rec.Actions {
		switch a := a.(type) {
		case *recorder.Stroke:
			if len(a.Path) > 10 {
				for _, c := range a.Path {
					dataMaxX = max(dataMaxX, c.Pos.X)
				}
			}
		case *recorder.FillString:
			if strings.HasSuffix(a.String, " series") {
				legendMinX = min(legendMinX, a.Point.X)
			}
		}
	}
	return dataMaxX, legendMinX
}

// TestLegendBesidePlot: the legend's texts start right of every data line.
// The same plot drawn by gonum alone puts them over the lines, which shows
// the check can fail.
func TestLegendBesidePlot(t *testing.T) {
	w, h := size(risingPlot(t), 10*vg.Centimeter, 6*vg.Centimeter)
	canvas := func(rec *recorder.Canvas) draw.Canvas {
		return draw.Canvas{Canvas: rec, Rectangle: vg.Rectangle{Max: vg.Point{X: w, Y: h}}}
	}

	var plain recorder.Canvas
	risingPlot(t).Draw(canvas(&plain))
	if data, legend := extents(&plain); !(legend < data) {
		t.Fatalf("control: gonum's own legend at x=%v is not over the data (right edge %v); the check below proves nothing", legend, data)
	}

	var rec recorder.Canvas
	if err := Draw(canvas(&rec), risingPlot(t)); err != nil {
		t.Fatal(err)
	}
	data, legend := extents(&rec)
	if math.IsInf(float64(legend), 1) {
		t.Fatal("no legend text drawn")
	}
	if legend <= data {
		t.Errorf("legend text starts at x=%v, left of the data's right edge %v: it covers the lines", legend, data)
	}
	if legend > w {
		t.Errorf("legend text at x=%v is outside the %v-wide canvas", legend, w)
	}
}

// TestSave: the format follows the extension, and an unknown one is refused
// without leaving a file.
func TestSave(t *testing.T) {
	dir := t.TempDir()
	for _, ext := range []string{".svg", ".png", ".pdf"} {
		name := filepath.Join(dir, "c"+ext)
		if err := Save(risingPlot(t), 8*vg.Centimeter, 5*vg.Centimeter, name); err != nil {
			t.Fatalf("%s: %v", ext, err)
		}
		if st, err := os.Stat(name); err != nil || st.Size() == 0 {
			t.Errorf("%s: not written (%v)", ext, err)
		}
	}
	bad := filepath.Join(dir, "c.jpeg")
	if err := Save(risingPlot(t), 8*vg.Centimeter, 5*vg.Centimeter, bad); err == nil || !strings.Contains(err.Error(), "want .svg, .png or .pdf") {
		t.Errorf("jpeg: %v", err)
	}
	if _, err := os.Stat(bad); err == nil {
		t.Error("a refused chart left a file")
	}
}
