package analyze

import (
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// refused is n requests of class, 100 ms apart, that the server refused
// (HTTP 503): no token, no latency.
func refused(n int, class string) []traces.Record {
	var recs []traces.Record
	for i := range n {
		r := rec(int64(i), time.Duration(i)*100*ms, 0, 0, 0, 10, 2, 1)
		r.Status, r.HTTPStatus, r.Error = traces.StatusHTTPError, 503, "HTTP 503"
		r.FirstTokenNs, r.LastTokenNs, r.ChunkNs = -1, -1, nil
		r.Class = class
		recs = append(recs, r)
	}
	return recs
}

// TestTextShowsNoValueAsDash checks that the text report never prints a
// number where there is none: the peak concurrency of a run where every
// request failed, and the latencies of a timeline window in which no
// request succeeded, read "-", not 0.
func TestTextShowsNoValueAsDash(t *testing.T) {
	failed := refused(5, "")
	rep := mustAnalyze(t, failed, DefaultOptions())
	if text := textOf(t, rep); !strings.Contains(text, "Concurrency   peak -") {
		t.Errorf("every request failed, yet:\n%s", text)
	}

	// Successes in the first and last second, only failures in between.
	var recs []traces.Record
	for i := range 10 {
		recs = append(recs, rec(int64(i), time.Duration(i)*50*ms, 0, 20*ms, 80*ms, 10, 4, 1))
	}
	for i := 10; i < 15; i++ {
		r := failed[0]
		r.Seq, r.SentNs, r.ScheduledNs, r.ArrivalNs = int64(i), int64(1500*ms), int64(1500*ms), int64(1500*ms)
		recs = append(recs, r)
	}
	recs = append(recs, rec(15, 2500*ms, 0, 20*ms, 80*ms, 10, 4, 1))
	o := DefaultOptions()
	o.Window = time.Second
	rep = mustAnalyze(t, recs, o)
	text := textOf(t, rep)
	var row string
	for _, l := range strings.Split(text, "\n") {
		if f := strings.Fields(l); len(f) > 4 && f[0] == "1.0" {
			row = l
		}
	}
	if f := strings.Fields(row); len(f) < 8 || f[4] != "-" || f[7] != "-" {
		t.Errorf("window 1.0 s (5 sent, none ok) prints %q; want '-' for its latencies\n%s", row, text)
	}
}

// TestHTMLShowsNoValueAsDash: the HTML report prints "-" where the text
// report does (a latency without a value, the peak concurrency of a run
// where every request failed, the latencies of a group without a
// success), never 0.00; so does the text report's per-group table.
func TestHTMLShowsNoValueAsDash(t *testing.T) {
	recs := refused(5, "down")
	o := DefaultOptions()
	o.By = ByClass
	rep := mustAnalyze(t, recs, o)
	page := htmlOf(t, rep)
	for _, want := range []string{
		"peak concurrency<b>-</b>",
		"TTFT p99<b>-</b>p50 -",
		"<tr><td>TTFT</td><td>0</td><td>-</td><td>-</td>",
		"<tr><td>down</td><td>5</td><td>0</td><td>5</td><td>-</td><td>-</td><td>-</td><td>-</td><td>-</td>",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	for _, l := range strings.Split(page, "\n") {
		if strings.HasPrefix(l, "<tr><td>TTFT") || strings.HasPrefix(l, "<tr><td>E2E") || strings.HasPrefix(l, "<tr><td>down") {
			if strings.Contains(l, "0.00") {
				t.Errorf("HTML prints 0.00 where there is no value: %s", l)
			}
		}
	}
	for _, l := range strings.Split(textOf(t, rep), "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == "down" && strings.Contains(l, "0.00") {
			t.Errorf("text group row prints 0.00 for a group without a success: %q", l)
		}
	}
}
