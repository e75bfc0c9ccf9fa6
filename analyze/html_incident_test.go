package analyze

import (
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// incidentRecords is a 300 s run at 4 req/s with a burst of 120 requests
// at 150 s that queue behind each other (one prefill lane; the requests
// of 150–160 s are sent 30 ms late), and the server
// series a 1 s scraper would have seen: requests waiting (sent, not yet
// prefilling), running (prefilling or decoding), KV-cache usage growing
// with the running ones.
func incidentRecords() ([]traces.Record, []traces.MetricsSample) {
	rng := rand.New(rand.NewPCG(7, 11))
	arr := poisson(rng, 0, 300*time.Second, 4, func(at time.Duration) arrival {
		a := arrival{at: at, in: 100 + rng.Int32N(2000), out: 20 + rng.Int32N(200), cached: rng.Int32N(100)}
		if at >= 150*time.Second && at < 160*time.Second {
			a.lateness = 30 * ms
		}
		return a
	})
	for i := range 120 {
		arr = append(arr, arrival{at: 150*time.Second + time.Duration(i)*8*ms, in: 100 + rng.Int32N(500), out: 20 + rng.Int32N(40)})
	}
	recs := simulate(arr, 0.01)
	var samples []traces.MetricsSample
	for t := int64(0); t <= int64(320*time.Second); t += int64(time.Second) {
		s := traces.NewMetricsSample(t)
		s.Waiting, s.Running = 0, 0
		for _, r := range recs {
			switch {
			case r.SentNs <= t && t < r.SentNs+r.ServerQueueNs:
				s.Waiting++
			case r.SentNs+r.ServerQueueNs <= t && t < r.LastTokenNs:
				s.Running++
			}
		}
		s.KVCacheUsage = min(float64(s.Running)/40, 1)
		samples = append(samples, s)
	}
	return recs, samples
}

// incidentReport analyzes the incident run, with its server series when
// withSeries is set.
func incidentReport(t *testing.T, withSeries bool) *Report {
	t.Helper()
	recs, samples := incidentRecords()
	o := DefaultOptions()
	o.IgnoreServerTimings = true
	if !withSeries {
		samples = nil
	}
	return analyzeWithSamples(t, recs, samples, o)
}

// TestHTMLIncidentTimeline: with the server's series the report draws one
// stacked chart on one time axis: TTFT and E2E per window, running and
// waiting requests, KV-cache usage, the tail's sends as ticks and the
// burst shaded where the burst was (150 s); without them it says the
// series are absent and draws no timeline.
func TestHTMLIncidentTimeline(t *testing.T) {
	page := htmlOf(t, incidentReport(t, true))
	svg := chartSVG(page, "Incident timeline: latency")
	if svg == "" {
		t.Fatal("no incident timeline on the page")
	}
	labels := chartLabels(svg)
	for _, want := range []string{"TTFT p99", "E2E p50", "running", "waiting", "KV-cache usage", "tail request sent", "KV cache used (%)", "time since the first send (s)"} {
		if !slices.Contains(labels, want) {
			t.Errorf("incident timeline lacks %q (labels %q)", want, labels)
		}
	}
	// One translucent shaded band per panel (4 panels), one in the legend.
	if n := strings.Count(svg, "fill-opacity:0.25098"); n != 5 {
		t.Errorf("%d shaded bands, want 4 panels + 1 legend thumbnail", n)
	}
	// The shaded span and the ticks sit at the burst, 150 s after the start.
	m := regexp.MustCompile(`Shaded: ([0-9.]+)–([0-9.]+) s`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("the note does not say where the burst is")
	}
	lo, _ := strconv.ParseFloat(m[1], 64)
	hi, _ := strconv.ParseFloat(m[2], 64)
	if lo > 150 || hi < 151 || hi-lo > 30 {
		t.Errorf("burst shaded at %.1f–%.1f s, want around 150 s", lo, hi)
	}
	// Every tail request is a red tick in each of the 4 panels (rug ticks
	// are 6 points tall), besides 3 in the legend thumbnail.
	rep := incidentReport(t, true)
	ticks := regexp.MustCompile(`<path d="M[0-9.]+,([0-9.]+)L[0-9.]+,([0-9.]+)" style="fill:none;stroke:#D62728" />`).FindAllStringSubmatch(svg, -1)
	if want := 4*len(rep.tail) + 3; len(ticks) != want {
		t.Errorf("%d tail ticks, want %d (4 panels × %d tail requests + 3 in the legend)", len(ticks), want, len(rep.tail))
	}

	page = htmlOf(t, incidentReport(t, false))
	if chartSVG(page, "Incident timeline: latency") != "" {
		t.Errorf("incident timeline drawn without server series")
	}
	if !strings.Contains(page, "The server&#39;s metrics series are absent") {
		t.Errorf("the page does not say the server series are absent")
	}
}
