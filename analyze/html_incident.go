package analyze

import (
	"fmt"
	"html/template"
	"image/color"
	"strings"

	"github.com/tokentrace/tokentrace/internal/chart"
	"github.com/tokentrace/tokentrace/traces"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// maxSeriesPoints caps each server series in the incident timeline; a
// longer series is cut into that many runs of samples, each drawn as its
// largest value (peaks are what an incident is about).
const maxSeriesPoints = 2000

var (
	colRunning = color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}
	colKV      = color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}
	// colBurst shades the burst of tail sends; translucent, so the lines
	// under it stay visible.
	colBurst = color.NRGBA{R: 0xf0, G: 0xa0, B: 0x00, A: 0x40}
	colRug   = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
)

// Incident charts are wider than the grid's: one shared time axis the
// width of the page.
const (
	incidentW      = 24 * vg.Centimeter
	incidentPanelH = 4 * vg.Centimeter
)

// burst is the run of consecutive windows holding tail sends around the
// window that holds the most, in seconds from the first send; ok is false
// without a tail.
func (rep *Report) burst() (x0, x1 float64, n int, ok bool) {
	best := -1
	for k, w := range rep.Windows {
		if w.TailRequests > 0 && (best < 0 || w.TailRequests > rep.Windows[best].TailRequests) {
			best = k
		}
	}
	if best < 0 {
		return 0, 0, 0, false
	}
	lo, hi := best, best
	for lo > 0 && rep.Windows[lo-1].TailRequests > 0 {
		lo--
	}
	for hi < len(rep.Windows)-1 && rep.Windows[hi+1].TailRequests > 0 {
		hi++
	}
	for k := lo; k <= hi; k++ {
		n += rep.Windows[k].TailRequests
	}
	return rep.Windows[lo].StartS, rep.Windows[hi].EndS, n, true
}

// secondsOf is a run-clock time in seconds from the timeline's origin.
func (rep *Report) secondsOf(ns int64) float64 { return float64(ns-rep.windowT0) / 1e9 }

// tailSends are the tail requests' send times, in seconds.
func (rep *Report) tailSends() []float64 {
	xs := make([]float64, 0, len(rep.tail))
	for _, i := range rep.tail {
		xs = append(xs, rep.secondsOf(rep.rows.at(int(i)).start()))
	}
	return xs
}

// serverSeries are the running, waiting and KV-cache-usage (%) series
// within [x0, x1] seconds, each without the samples that did not report
// it, at most maxSeriesPoints each.
func serverSeries(s []traces.MetricsSample, at func(int64) float64, x0, x1 float64) (running, waiting, kv plotter.XYs) {
	for _, x := range s {
		t := at(x.TimeNs)
		if t < x0 || t > x1 {
			continue
		}
		if x.Running >= 0 {
			running = append(running, plotter.XY{X: t, Y: float64(x.Running)})
		}
		if x.Waiting >= 0 {
			waiting = append(waiting, plotter.XY{X: t, Y: float64(x.Waiting)})
		}
		if x.KVCacheUsage >= 0 {
			kv = append(kv, plotter.XY{X: t, Y: 100 * x.KVCacheUsage})
		}
	}
	return peaks(running), peaks(waiting), peaks(kv)
}

// peaks thins xy to at most maxSeriesPoints: each run of consecutive
// points becomes its largest value, at the run's middle time.
func peaks(xy plotter.XYs) plotter.XYs {
	if len(xy) <= maxSeriesPoints {
		return xy
	}
	step := (len(xy) + maxSeriesPoints - 1) / maxSeriesPoints
	var out plotter.XYs
	for i := 0; i < len(xy); i += step {
		run := xy[i:min(i+step, len(xy))]
		m := run[0].Y
		for _, v := range run {
			m = max(m, v.Y)
		}
		out = append(out, plotter.XY{X: (run[0].X + run[len(run)-1].X) / 2, Y: m})
	}
	return out
}

// incidentTimeline draws the request latency percentiles per window over
// the server's running, waiting and KV-cache series, stacked panels on
// one time axis, the tail's sends marked and its burst shaded. Without
// server series (or too short a run) it returns no chart and a note
// saying why.
func (rep *Report) incidentTimeline() (template.HTML, string, error) {
	if len(rep.series) == 0 {
		return "", "The server's metrics series are absent (no metrics file beside the results): the incident timeline draws the latency per window over the server's running and waiting requests and KV-cache usage, so it needs them. Scrape the server's /metrics while replaying, or read its history from Prometheus (postmortem).", nil
	}
	if len(rep.Windows) < 2 {
		return "", "The run is one timeline window long: too short for an incident timeline.", nil
	}
	x0, x1 := rep.Windows[0].StartS, rep.Windows[len(rep.Windows)-1].EndS
	running, waiting, kv := serverSeries(rep.series, rep.secondsOf, x0, x1)
	if len(running)+len(waiting)+len(kv) == 0 {
		return "", fmt.Sprintf("The server's metrics series (%d samples) report no running, waiting or KV-cache value during the run: no incident timeline.", len(rep.series)), nil
	}
	bx0, bx1, nb, hasBurst := rep.burst()
	sends := rep.tailSends()
	marks := func(p *plot.Plot, legend bool) {
		if hasBurst {
			b := chart.Band{X0: bx0, X1: bx1, Color: colBurst}
			p.Add(b)
			if legend {
				p.Legend.Add(fmt.Sprintf("burst of tail sends (%d)", nb*int(rep.oneIn())), b)
			}
		}
		if len(sends) > 0 {
			r := chart.Rug{Xs: sends, Color: colRug}
			p.Add(r)
			if legend {
				p.Legend.Add("tail request sent", r)
			}
		}
	}
	panel := func(y string, legend bool) *plot.Plot {
		p := newPlot("", "", y)
		marks(p, legend)
		p.X.Min, p.X.Max = x0, x1
		p.Y.Min = 0
		return p
	}
	var panels []*plot.Plot
	for i, m := range []struct {
		name     string
		p50, p99 func(Window) float64
		c        color.Color
	}{
		{"TTFT", func(w Window) float64 { return w.TTFTP50Ms }, func(w Window) float64 { return w.TTFTP99Ms }, colTTFT},
		{"E2E", func(w Window) float64 { return w.E2EP50Ms }, func(w Window) float64 { return w.E2EP99Ms }, colE2E},
	} {
		p := panel("", i == 0)
		lo, hi := rep.windowXYs(m.p50), rep.windowXYs(m.p99)
		if err := addLine(p, m.name+" p50", lo, m.c, true); err != nil {
			return "", "", err
		}
		if err := addLine(p, m.name+" p99", hi, m.c, false); err != nil {
			return "", "", err
		}
		chart.MsAxis(&p.Y, m.name, max(maxY(lo, hi), 1), false)
		panels = append(panels, p)
	}
	if len(running)+len(waiting) > 0 {
		p := panel("server requests", false)
		if err := addLine(p, "running", running, colRunning, false); err != nil {
			return "", "", err
		}
		if err := addLine(p, "waiting", waiting, compColors[cQueue], false); err != nil {
			return "", "", err
		}
		panels = append(panels, p)
	}
	if len(kv) > 0 {
		p := panel("KV cache used (%)", false)
		if err := addLine(p, "KV-cache usage", kv, colKV, false); err != nil {
			return "", "", err
		}
		p.Y.Max = 100
		panels = append(panels, p)
	}
	panels[0].Title.Text = "Incident timeline: latency of the requests sent in each window over the server's state"
	panels[len(panels)-1].X.Label.Text = "time since the first send (s)"
	b, err := chart.StackSVG(panels, incidentW, incidentPanelH)
	if err != nil {
		return "", "", err
	}
	note := fmt.Sprintf("Windows of %s; server series from %d samples.", fmtMs(float64(rep.windowW)*msPerNs), len(rep.series))
	if hasBurst {
		note += fmt.Sprintf(" Shaded: %.1f–%.1f s, the consecutive windows with tail sends around the busiest one; red ticks: when each tail request was sent.", bx0, bx1)
	}
	var missing []string
	for _, s := range []struct {
		name string
		xy   plotter.XYs
	}{{"running", running}, {"waiting", waiting}, {"KV-cache usage", kv}} {
		if len(s.xy) == 0 {
			missing = append(missing, s.name)
		}
	}
	if len(missing) > 0 {
		note += " Not in the server's series: " + strings.Join(missing, ", ") + "."
	}
	return inlineSVG(b), note, nil
}
