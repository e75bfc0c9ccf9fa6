package analyze

import (
	"bytes"
	"context"
	"fmt"
	"html/template"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// The HTML report is one self-contained page: inline SVG charts, no
// scripts, no external references. Set TOKENTRACE_HTML_OUT=file.html to keep
// it (to look at it in a browser).
func TestHTMLReportIsSelfContained(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	var arr []arrival
	arr = poisson(rng, 0, 300*time.Second, 4, func(at time.Duration) arrival {
		a := arrival{at: at, in: 100 + rng.Int32N(2000), out: 20 + rng.Int32N(200), cached: rng.Int32N(100)}
		if rng.Float64() < 0.02 {
			a.in = 8000 + rng.Int32N(4000)
		}
		return a
	})
	for i := range 120 {
		arr = append(arr, arrival{at: 150*time.Second + time.Duration(i)*8*ms, in: 100 + rng.Int32N(500), out: 20 + rng.Int32N(40)})
	}
	recs := simulate(arr, 0.01)
	o := DefaultOptions()
	o.IgnoreServerTimings = true
	o.SLO = traces.SLO{TTFT: 500 * ms, E2E: 5 * time.Second}
	rep := mustAnalyze(t, recs, o)
	page := htmlOf(t, rep)
	if n := strings.Count(page, "<svg"); n != 8 {
		t.Errorf("page has %d charts, want 8 (the tail waterfall and 7 in the grid)", n)
	}
	if strings.Contains(page, "<script") {
		t.Errorf("page has a script")
	}
	// Only the SVG namespace URIs may mention http(s); nothing is fetched.
	ext := regexp.MustCompile(`(src|href)="(https?:)?//`)
	if ext.MatchString(page) {
		t.Errorf("page references external resources: %q", ext.FindString(page))
	}
	for _, want := range []string{"Diagnosis", "Queueing", "Where the time went: E2E split", "TTFT against prompt length"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if p := os.Getenv("TOKENTRACE_HTML_OUT"); p != "" { // htmlOf wrote the page there
		var tb bytes.Buffer
		o.Window = 10 * time.Second
		rep2, _ := Analyze(context.Background(), recs, o)
		rep2.WriteText(&tb)
		os.WriteFile(p+".txt", tb.Bytes(), 0o644)
	}
}

// Odd data still renders a page: one request, identical values, a first
// token before the send (clock skew), zero-length requests.
func TestHTMLDegenerateData(t *testing.T) {
	skew := rec(1, 100*ms, 0, 0, 0, 10, 1, 1)
	skew.FirstTokenNs, skew.LastTokenNs = int64(50*ms), int64(50*ms)
	late := rec(2, 0, 0, 10*ms, 10*ms, 10, 1, 1)
	late.ScheduledNs = int64(5 * ms) // sent before it was due
	cases := map[string][]traces.Record{
		"one request":      {rec(0, 0, 0, 10*ms, 20*ms, 10, 2, 1)},
		"identical values": {rec(0, 0, 0, 10*ms, 20*ms, 10, 2, 1), rec(1, 0, 0, 10*ms, 20*ms, 10, 2, 1)},
		"clock skew":       {rec(0, 0, 0, 10*ms, 20*ms, 10, 2, 1), skew, late},
	}
	for name, recs := range cases {
		rep, err := Analyze(context.Background(), recs, DefaultOptions())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var b bytes.Buffer
		if err := rep.WriteHTML(&b); err != nil || !strings.Contains(b.String(), "</html>") {
			t.Errorf("%s: WriteHTML: %v", name, err)
		}
	}
}

// chartLabels returns the texts of the page's SVG charts.
func chartLabels(page string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`<text[^>]*>([^<]*)</text>`).FindAllStringSubmatch(page, -1) {
		out = append(out, m[1])
	}
	return out
}

// TestHTMLTickLabels: chart ticks carry no useless decimals (gonum labelled
// a 0–9000 ms axis 1250.00, 2500.00, …) and no exponents.
func TestHTMLTickLabels(t *testing.T) {
	var recs []traces.Record
	for i := range 600 {
		e2e := 1000*ms + time.Duration(i)*13*ms // up to 8.8 s
		recs = append(recs, rec(int64(i), time.Duration(i)*100*ms, 0, 50*ms+time.Duration(i%7)*50*ms, e2e, 100, 50, 1))
	}
	o := DefaultOptions()
	o.Window = 5 * time.Second
	rep := mustAnalyze(t, recs, o)
	var b bytes.Buffer
	if err := rep.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	bad := regexp.MustCompile(`^-?[0-9]+\.[0-9]*0$|^[0-9.]+e[-+]?[0-9]+$`)
	num := 0
	for _, l := range chartLabels(b.String()) {
		if bad.MatchString(l) {
			t.Errorf("tick label %q", l)
		}
		if regexp.MustCompile(`^[0-9.]+$`).MatchString(l) {
			num++
		}
	}
	if num < 20 {
		t.Errorf("only %d numeric tick labels found", num)
	}
}

// TestHTMLTimelineTTFTOwnAxis: a TTFT spike (100 ms → 600 ms) beside E2E
// of ~9 s fills most of its own panel's height, instead of being a bump at
// the bottom of one axis shared with E2E.
func TestHTMLTimelineTTFTOwnAxis(t *testing.T) {
	var recs []traces.Record
	for i := range 600 {
		ttft := 100 * ms
		if i >= 300 && i < 320 {
			ttft = 600 * ms // the spike, at 30–32 s
		}
		recs = append(recs, rec(int64(i), time.Duration(i)*100*ms, 0, ttft, 9*time.Second, 100, 200, 1))
	}
	o := DefaultOptions()
	o.TailMetric = MetricTTFT
	o.Window = 2 * time.Second
	rep := mustAnalyze(t, recs, o)
	page := htmlOf(t, rep)
	for _, want := range []string{"Timeline: TTFT of requests sent in each window", "Timeline: E2E of requests sent in each window"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks the panel %q", want)
		}
	}
	p, err := rep.timelineTTFT()
	if err != nil || p == nil {
		t.Fatalf("TTFT timeline: %v", err)
	}
	if p.Y.Max > 1000 {
		t.Errorf("TTFT panel's axis reaches %.0f ms: the 600 ms spike is a bump (E2E is 9000 ms)", p.Y.Max)
	}
}

// TestHTMLSaysWhatIsSplit: the attribution bars and table say which metric
// they split; with the TTFT tail, decode (never part of TTFT) is not drawn
// as a 0 % bar and the note says why.
func TestHTMLSaysWhatIsSplit(t *testing.T) {
	var recs []traces.Record
	for i := range 200 {
		ttft := 50*ms + time.Duration(i%10)*ms
		if i%50 == 0 {
			ttft = 900 * ms
		}
		recs = append(recs, withServer(rec(int64(i), time.Duration(i)*50*ms, 0, ttft, ttft+500*ms, 100, 20, 1), ttft-40*ms, 40*ms, 500*ms, 0))
	}
	for _, metric := range []string{MetricTTFT, MetricE2E} {
		o := DefaultOptions()
		o.TailMetric = metric
		rep := mustAnalyze(t, recs, o)
		page := htmlOf(t, rep)
		m := strings.ToUpper(metric)
		for _, want := range []string{"Where the time went: " + m + " split (server attribution)", "share of " + m + " (%)", "How the " + m + " of the p99 " + m + " tail"} {
			if !strings.Contains(page, want) {
				t.Errorf("%s: page lacks %q", metric, want)
			}
		}
		drawsDecode := slices.Contains(chartLabels(page), "decode")
		if metric == MetricTTFT && (drawsDecode || !strings.Contains(page, "never part of TTFT")) {
			t.Errorf("TTFT split: decode drawn %v, or the note does not say decode is not part of TTFT", drawsDecode)
		}
		if metric == MetricE2E && !drawsDecode {
			t.Errorf("E2E split: no decode bar")
		}
	}
}

// TestHTMLByClassAttributionAndGoodput: with --by class the HTML report has
// what the text and JSON reports have: each class's goodput and its own
// tail attribution with its diagnosis.
func TestHTMLByClassAttributionAndGoodput(t *testing.T) {
	var recs []traces.Record
	for i := range 200 {
		r := withServer(rec(int64(i), time.Duration(i)*50*ms, 0, 60*ms+time.Duration(i%10)*ms, 400*ms, 100, 20, 1), 10*ms, 50*ms, 340*ms, 0)
		r.Class = "interactive"
		if i%2 == 1 {
			r.Class = "batch"
			r = withServer(rec(int64(i), time.Duration(i)*50*ms, 0, 900*ms+time.Duration(i%10)*ms, 4000*ms, 2000, 200, 1), 100*ms, 800*ms, 3100*ms, 0)
			r.Class = "batch"
		}
		recs = append(recs, r)
	}
	o := DefaultOptions()
	o.By = ByClass
	o.TailMetric = MetricTTFT
	o.SLO = traces.SLO{TTFT: 500 * ms}
	rep := mustAnalyze(t, recs, o)
	if err := AttributeGroups(context.Background(), rep, recs); err != nil {
		t.Fatal(err)
	}
	var b, js bytes.Buffer
	if err := rep.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	for _, g := range rep.Groups {
		if g.Attribution == nil || g.Goodput == nil {
			t.Fatalf("group %s: attribution %v goodput %v", g.Value, g.Attribution, g.Goodput)
		}
		for _, want := range []string{
			"<td>" + g.Value + "</td>",
			fmt.Sprintf("%.2f req/s (%.1f%%)", *g.Goodput, 100**g.GoodRatio),
			"<h3>" + g.Value + "</h3>",
			template.HTMLEscapeString(g.Attribution.Diagnosis[0]),
		} {
			if !strings.Contains(page, want) {
				t.Errorf("class %s: page lacks %q", g.Value, want)
			}
		}
	}
	for _, want := range []string{"Tail attribution by class", "Where each class&#39;s tail time went: TTFT split"} {
		if !strings.Contains(page, want) && !strings.Contains(page, strings.ReplaceAll(want, "&#39;", "'")) {
			t.Errorf("page lacks %q", want)
		}
	}
	if !strings.Contains(js.String(), `"goodput":`) || strings.Count(js.String(), `"attribution": {`) < 3 {
		t.Errorf("JSON lacks per-class goodput or attribution")
	}
}
