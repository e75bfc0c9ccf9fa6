package analyze

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// svgRect is an axis-aligned box in an SVG chart's coordinates (points, y
// up, as gonum draws them).
type svgRect struct{ x0, y0, x1, y1 float64 }

func (r svgRect) overlaps(o svgRect) bool {
	return r.x0 < o.x1 && o.x0 < r.x1 && r.y0 < o.y1 && o.y0 < r.y1
}

func (r svgRect) contains(x, y float64) bool {
	return r.x0 <= x && x <= r.x1 && r.y0 <= y && y <= r.y1
}

func (r svgRect) String() string {
	return fmt.Sprintf("[%.1f,%.1f]×[%.1f,%.1f]", r.x0, r.x1, r.y0, r.y1)
}

// svgText is a text of a chart: its baseline start and font size.
type svgText struct {
	x, y, size float64
	s          string
}

// box estimates the text's extent: half an em per character wide, from a
// fifth of an em below the baseline to eight tenths above.
func (t svgText) box() svgRect {
	return svgRect{t.x, t.y - 0.2*t.size, t.x + 0.5*t.size*float64(len([]rune(t.s))), t.y + 0.8*t.size}
}

// svgChart is what TestHTMLLegendsBesidePlots reads from one SVG chart:
// its plot areas (from the grid lines, which span them), its legend
// frames, its texts (outside rotated groups: the y-axis label) and its
// width.
type svgChart struct {
	width   float64
	areas   []svgRect
	legends []svgRect
	texts   []svgText
}

var (
	svgElem  = regexp.MustCompile(`<g transform="rotate\([^"]*\)">|</g>|<path d="([^"]*)" style="([^"]*)" />|<text x="([^"]*)" y="([^"]*)"[^>]*font-size:([0-9.]+)px[^>]*>([^<]*)</text>`)
	svgNum   = regexp.MustCompile(`-?[0-9.]+(?:e-?[0-9]+)?`)
	svgWidth = regexp.MustCompile(`viewBox="0 0 ([0-9.]+) `)
)

// parseChart reads an SVG chart as gonum writes it.
func parseChart(t *testing.T, svg string) svgChart {
	t.Helper()
	var c svgChart
	if m := svgWidth.FindStringSubmatch(svg); m != nil {
		c.width, _ = strconv.ParseFloat(m[1], 64)
	}
	num := func(s string) float64 {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("number %q: %v", s, err)
		}
		return v
	}
	type span struct{ a, b float64 }
	vert := map[span]bool{} // vertical grid lines' y extents: one per panel
	var horiz []svgRect     // horizontal grid lines
	rotated, depth := -1, 0
	for _, m := range svgElem.FindAllStringSubmatch(svg, -1) {
		switch {
		case strings.HasPrefix(m[0], "<g"):
			depth++
			if rotated < 0 {
				rotated = depth
			}
			continue
		case m[0] == "</g>":
			if depth == rotated {
				rotated = -1
			}
			depth--
			continue
		}
		if rotated >= 0 {
			continue
		}
		if m[1] != "" { // a path
			var pts []float64
			for _, s := range svgNum.FindAllString(m[1], -1) {
				pts = append(pts, num(s))
			}
			switch {
			case strings.Contains(m[2], "stroke:#808080;stroke-width:0.25") && len(pts) == 4:
				if pts[0] == pts[2] {
					vert[span{min(pts[1], pts[3]), max(pts[1], pts[3])}] = true
				} else if pts[1] == pts[3] {
					horiz = append(horiz, svgRect{min(pts[0], pts[2]), pts[1], max(pts[0], pts[2]), pts[1]})
				}
			case strings.Contains(m[2], "stroke:#BBBBBB") && len(pts) == 10:
				r := svgRect{pts[0], pts[1], pts[0], pts[1]}
				for i := 0; i < len(pts); i += 2 {
					r.x0, r.x1 = min(r.x0, pts[i]), max(r.x1, pts[i])
					r.y0, r.y1 = min(r.y0, pts[i+1]), max(r.y1, pts[i+1])
				}
				c.legends = append(c.legends, r)
			}
			continue
		}
		c.texts = append(c.texts, svgText{num(m[3]), -num(m[4]), num(m[5]), m[6]})
	}
	for v := range vert {
		a := svgRect{x0: 1e18, y0: v.a, x1: -1e18, y1: v.b}
		for _, h := range horiz {
			if v.a <= h.y0 && h.y0 <= v.b {
				a.x0, a.x1 = min(a.x0, h.x0), max(a.x1, h.x1)
			}
		}
		if a.x0 < a.x1 {
			c.areas = append(c.areas, a)
		}
	}
	return c
}

// TestHTMLLegendsBesidePlots parses every SVG chart of a report that has
// all of them (the incident timeline's four panels, the tail waterfall,
// the grid's charts, the per-class bars) and checks that each has a
// framed legend holding its entries, that no legend frame and no text
// overlaps a plot area (gonum's own legend sits inside it, over the data),
// that every legend fits in the chart, and that stacked panels' plot
// areas line up on their shared time axis.
func TestHTMLLegendsBesidePlots(t *testing.T) {
	recs, samples := incidentRecords()
	for i := range recs {
		recs[i].Class = []string{"interactive", "batch"}[i%2]
	}
	o := DefaultOptions()
	o.By = ByClass
	rep := analyzeWithSamples(t, recs, samples, o)
	if err := AttributeGroups(context.Background(), rep, recs); err != nil {
		t.Fatal(err)
	}
	page := htmlOf(t, rep)
	svgs := regexp.MustCompile(`(?s)<svg.*?</svg>`).FindAllString(page, -1)
	if len(svgs) != 10 {
		t.Errorf("%d charts, want 10 (incident timeline, waterfall, 8 in the grid)", len(svgs))
	}
	panels := 0
	for _, svg := range svgs {
		c := parseChart(t, svg)
		title := "?"
		if len(c.texts) > 0 {
			title = c.texts[0].s
		}
		if len(c.areas) == 0 || len(c.legends) == 0 {
			t.Errorf("chart %q: %d plot areas, %d legend frames; want both", title, len(c.areas), len(c.legends))
			continue
		}
		panels += len(c.areas)
		for _, a := range c.areas[1:] {
			// stacked panels share the time axis: their plot areas align
			if abs(a.x0-c.areas[0].x0) > 0.01 || abs(a.x1-c.areas[0].x1) > 0.01 {
				t.Errorf("chart %q: panels' plot areas %v and %v do not share x", title, c.areas[0], a)
			}
		}
		for _, l := range c.legends {
			in := 0
			for _, x := range c.texts {
				if l.contains(x.x, x.y) {
					in++
				}
			}
			if in == 0 {
				t.Errorf("chart %q: legend frame %v holds no text", title, l)
			}
			if l.x1 > c.width {
				t.Errorf("chart %q: legend frame %v runs past the chart's width %.1f", title, l, c.width)
			}
			for _, a := range c.areas {
				if l.overlaps(a) {
					t.Errorf("chart %q: legend frame %v covers the plot area %v", title, l, a)
				}
			}
		}
		for _, x := range c.texts {
			for _, a := range c.areas {
				if x.box().overlaps(a) {
					t.Errorf("chart %q: text %q at %v is inside the plot area %v", title, x.s, x.box(), a)
				}
			}
		}
	}
	if panels != 13 {
		t.Errorf("%d plot areas found, want 13 (4 incident panels + 9 single charts)", panels)
	}
}
