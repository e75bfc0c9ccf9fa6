package analyze

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestHTMLTailWaterfall: every tail request of the incident run is a bar
// from its scheduled send to its last token, split into the attribution's
// components (queue and prefill marked estimated: the run is analyzed
// without server timings), the bars in order of scheduled send, and the
// page names the finding: the tail was sent in the burst and queued.
func TestHTMLTailWaterfall(t *testing.T) {
	rep := incidentReport(t, true)
	bars, n := rep.waterfallBars()
	if n != len(rep.tail) || len(bars) != n || n == 0 {
		t.Fatalf("%d bars of %d tail requests, want all %d", len(bars), n, len(rep.tail))
	}
	for i, b := range bars {
		var r *row
		for _, j := range rep.tail {
			if x := rep.rows.at(int(j)); x.seq == b.seq {
				r = x
			}
		}
		if got, want := b.startS, rep.secondsOf(r.sched); abs(got-want) > 1e-6 {
			t.Errorf("bar #%d starts at %.6f s, want its scheduled send %.6f s", b.seq, got, want)
		}
		if got, want := b.startS+b.totalS, rep.secondsOf(r.last); abs(got-want) > 1e-6 {
			t.Errorf("bar #%d ends at %.6f s, want its last token %.6f s", b.seq, got, want)
		}
		if i > 0 && b.startS < bars[i-1].startS {
			t.Errorf("bar %d (#%d) sent before bar %d: not sorted by scheduled send", i, b.seq, i-1)
		}
	}
	page := htmlOf(t, rep)
	svg := chartSVG(page, "Tail waterfall: each")
	if svg == "" {
		t.Fatal("no tail waterfall on the page")
	}
	labels := chartLabels(svg)
	for _, want := range []string{"lateness", "queue (estimated)", "prefill (estimated)", "decode", "burst of tail sends", fmt.Sprintf("#%d", bars[0].seq)} {
		if !slices.Contains(labels, want) {
			t.Errorf("waterfall lacks %q (labels %q)", want, labels)
		}
	}
	// The y labels list the drawn requests top to bottom by scheduled send.
	var seqs []string
	for _, l := range labels {
		if strings.HasPrefix(l, "#") {
			seqs = append(seqs, l)
		}
	}
	if len(seqs) != len(bars) {
		t.Errorf("%d request labels, want %d", len(seqs), len(bars))
	}
	// A filled queue segment per bar that queued, and a legend thumbnail.
	queued := 0
	for _, b := range bars {
		if b.comp[cQueue] > 0 {
			queued++
		}
	}
	if got := strings.Count(svg, `style="fill:#FF7F0E"`); got != queued+1 {
		t.Errorf("%d queue-coloured fills, want %d bars that queued + 1 legend thumbnail", got, queued+1)
	}
	if !regexp.MustCompile(`13 of the 13 drawn were sent in the burst \(150\.0–165\.0 s\); queue was the largest part of [0-9]+ of those`).MatchString(page) {
		t.Errorf("the page does not name the waterfall's finding")
	}
}

// TestHTMLTailWaterfallCap: with more tail requests than MaxWaterfallBars
// (the p80 tail of the incident run), the slowest are drawn and the page
// says how many are not.
func TestHTMLTailWaterfallCap(t *testing.T) {
	recs, _ := incidentRecords()
	o := DefaultOptions()
	o.TailPercentile = 80
	rep := mustAnalyze(t, recs, o)
	bars, n := rep.waterfallBars()
	if n <= MaxWaterfallBars || len(bars) != MaxWaterfallBars {
		t.Fatalf("%d bars of %d tail requests, want %d of more than %d", len(bars), n, MaxWaterfallBars, MaxWaterfallBars)
	}
	// the drawn ones are the slowest: none left out is slower
	drawn := map[int64]bool{}
	slowestLeftOut, fastestDrawn := 0.0, 1e18
	for _, b := range bars {
		drawn[b.seq] = true
		fastestDrawn = min(fastestDrawn, b.totalS)
	}
	for _, i := range rep.tail {
		r := rep.rows.at(int(i))
		if !drawn[r.seq] {
			c, _, _ := rep.components(int(i), r)
			var tot float64
			for _, v := range clampPos(c) {
				tot += v / 1e9
			}
			slowestLeftOut = max(slowestLeftOut, tot)
		}
	}
	if slowestLeftOut > fastestDrawn {
		t.Errorf("a request left out took %.3f s, more than the fastest drawn (%.3f s)", slowestLeftOut, fastestDrawn)
	}
	if !slices.IsSortedFunc(bars, func(a, b wfBar) int {
		switch {
		case a.startS < b.startS:
			return -1
		case a.startS > b.startS:
			return 1
		}
		return 0
	}) {
		t.Errorf("drawn bars not sorted by scheduled send")
	}
	page := htmlOf(t, rep)
	want := fmt.Sprintf("The %d slowest of the %d tail requests drawn (%d not drawn; at most %d bars)", MaxWaterfallBars, n, n-MaxWaterfallBars, MaxWaterfallBars)
	if !strings.Contains(page, want) {
		t.Errorf("page lacks %q", want)
	}
	// with server timings, nothing is marked estimated
	if l := chartLabels(chartSVG(page, "Tail waterfall: each")); !slices.Contains(l, "queue") || slices.Contains(l, "queue (estimated)") {
		t.Errorf("server-timed waterfall legend %q: want plain queue", l)
	}
}

func abs(x float64) float64 { return max(x, -x) }
