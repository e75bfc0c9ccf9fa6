package analyze

import (
	"cmp"
	"fmt"
	"html/template"
	"math"
	"slices"
	"strings"

	"github.com/tokentrace/tokentrace/internal/chart"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// MaxWaterfallBars caps the tail waterfall: with more tail requests, the
// slowest MaxWaterfallBars are drawn and the page says how many are not.
const MaxWaterfallBars = 50

// wfBar is one tail request in the waterfall: its scheduled send (s from
// the timeline's origin) and its components (s), in ComponentNames order.
type wfBar struct {
	seq    int64
	startS float64
	comp   [nComponents]float64
	totalS float64
	server bool
}

// waterfallBars are the tail requests to draw: the slowest
// MaxWaterfallBars, by scheduled send; and how many tail requests there
// were.
func (rep *Report) waterfallBars() ([]wfBar, int) {
	var bars []wfBar
	for _, i := range rep.tail {
		r := rep.rows.at(int(i))
		c, server, ok := rep.components(int(i), r)
		if !ok || r.sent < 0 {
			continue
		}
		c = clampPos(c)
		b := wfBar{seq: r.seq, server: server, startS: rep.secondsOf(r.sent - int64(c[cLateness]))}
		for k := range c {
			b.comp[k] = c[k] / 1e9
			b.totalS += b.comp[k]
		}
		bars = append(bars, b)
	}
	n := len(bars)
	if n > MaxWaterfallBars {
		slices.SortStableFunc(bars, func(a, b wfBar) int { return cmp.Compare(b.totalS, a.totalS) })
		bars = bars[:MaxWaterfallBars]
	}
	slices.SortStableFunc(bars, func(a, b wfBar) int {
		return cmp.Or(cmp.Compare(a.startS, b.startS), cmp.Compare(a.seq, b.seq))
	})
	return bars, n
}

// waterfall draws the bars, the first at the top, each split into its
// components left to right.
type waterfall struct{ bars []wfBar }

// barHalf is half a bar's height, in rows.
const barHalf = 0.35

func (w waterfall) y(i int) float64 { return float64(len(w.bars) - 1 - i) }

// Plot implements plot.Plotter.
func (w waterfall) Plot(c draw.Canvas, p *plot.Plot) {
	tx, ty := p.Transforms(&c)
	for i, b := range w.bars {
		y0, y1 := ty(w.y(i)-barHalf), ty(w.y(i)+barHalf)
		x := b.startS
		for _, k := range componentOrder { // in the order the request met them
			d := b.comp[k]
			if d <= 0 {
				continue
			}
			x0, x1 := tx(x), tx(x+d)
			x += d
			if x1-x0 < vg.Points(0.5) {
				x1 = x0 + vg.Points(0.5) // a sliver stays visible
			}
			c.FillPolygon(compColors[k], []vg.Point{{X: x0, Y: y0}, {X: x1, Y: y0}, {X: x1, Y: y1}, {X: x0, Y: y1}})
		}
	}
}

// DataRange implements plot.DataRanger.
func (w waterfall) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmin, xmax = math.Inf(1), math.Inf(-1)
	for _, b := range w.bars {
		xmin, xmax = min(xmin, b.startS), max(xmax, b.startS+b.totalS)
	}
	return xmin, xmax, -0.5, float64(len(w.bars)) - 0.5
}

// tailWaterfall draws each tail request as a bar on one time axis from its
// scheduled send, split into lateness, queue, prefill and decode (and
// other), sorted by scheduled send, the burst of tail sends shaded as in
// the incident timeline. It returns no chart without a tail, and a note
// saying what is drawn.
func (rep *Report) tailWaterfall() (template.HTML, string, error) {
	bars, n := rep.waterfallBars()
	if len(bars) == 0 {
		return "", "", nil
	}
	at := &rep.Attribution
	metric := strings.ToUpper(at.TailMetric)
	p := newPlot(fmt.Sprintf("Tail waterfall: each p%s %s tail request from its scheduled send", fmtPct(at.TailPercentile), metric),
		"time since the first send (s)", "tail request (seq)")
	if x0, x1, _, ok := rep.burst(); ok {
		b := chart.Band{X0: x0, X1: x1, Color: colBurst}
		p.Add(b)
		p.Legend.Add("burst of tail sends", b)
	}
	w := waterfall{bars}
	p.Add(w)
	est := 0
	var used [nComponents]bool
	for _, b := range bars {
		if !b.server {
			est++
		}
		for k, d := range b.comp {
			used[k] = used[k] || d > 0
		}
	}
	for _, k := range componentOrder {
		if !used[k] {
			continue
		}
		name := ComponentNames[k]
		if (k == cQueue || k == cPrefill || k == cKVTransfer) && est > 0 {
			if est == len(bars) {
				name += " (estimated)"
			} else {
				name += fmt.Sprintf(" (estimated for %d)", est)
			}
		}
		p.Legend.Add(name, chart.Band{Color: compColors[k]})
	}
	var ticks []plot.Tick
	every := max(1, len(bars)/25) // at most about 25 labels
	for i, b := range bars {
		t := plot.Tick{Value: w.y(i)}
		if i%every == 0 {
			t.Label = fmt.Sprintf("#%d", b.seq)
		}
		ticks = append(ticks, t)
	}
	p.Y.Tick.Marker = plot.ConstantTicks(ticks)
	// the canvas: axes and title, and a row per bar
	h := 3*vg.Centimeter + max(3*vg.Centimeter, vg.Length(len(bars))*0.45*vg.Centimeter)
	s, err := svgOf(p, incidentW, h)
	if err != nil {
		return "", "", err
	}
	note := fmt.Sprintf("%d tail requests drawn", len(bars))
	if n > len(bars) {
		note = fmt.Sprintf("The %d slowest of the %d tail requests drawn (%d not drawn; at most %d bars)", len(bars), n, n-len(bars), MaxWaterfallBars)
	}
	if rep.Sampling != nil {
		note += fmt.Sprintf(", from the 1-in-%d sample of the rows", rep.oneIn())
	}
	note += ", sorted by scheduled send: each bar runs from the scheduled send to the " + map[bool]string{true: "first token", false: "last token"}[at.TailMetric == MetricTTFT] + "."
	if est > 0 {
		note += fmt.Sprintf(" The queue/prefill split of %d of them is estimated from the prefill model (no server timings).", est)
	}
	note += " " + rep.waterfallFinding(bars)
	return s, note, nil
}

// waterfallFinding says in one sentence how many of the drawn requests
// were sent in the burst and how many of them spent most of their time
// in the dominant component.
func (rep *Report) waterfallFinding(bars []wfBar) string {
	x0, x1, _, ok := rep.burst()
	if !ok {
		return ""
	}
	in, dom := 0, 0
	var k int
	for i, n := range ComponentNames {
		if n == rep.Attribution.Dominant {
			k = i
		}
	}
	for _, b := range bars {
		send := b.startS + b.comp[cLateness]
		if send >= x0 && send < x1 {
			in++
			if argmax(b.comp) == k {
				dom++
			}
		}
	}
	return fmt.Sprintf("%d of the %d drawn were sent in the burst (%.1f–%.1f s); %s was the largest part of %d of those.",
		in, len(bars), x0, x1, ComponentNames[k], dom)
}
