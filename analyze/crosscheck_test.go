package analyze

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// crossCheckRun is 100 requests, one every 100 ms, each with server timings
// queue 100 ms, prefill 50 ms, decode 250 ms (finishing 400 ms after it is
// sent), and a metrics series of one row per second whose histogram means
// come from hist(step) and whose finished count is the trace's requests
// that finished in the step.
func crossCheckRun(t *testing.T, ignoreServer bool, hist func(x *traces.MetricsSample)) *Report {
	t.Helper()
	o := DefaultOptions()
	o.IgnoreServerTimings = ignoreServer
	var recs []traces.Record
	finished := make([]int64, 12)
	for i := range 100 {
		sent := time.Duration(i) * 100 * ms
		r := withServer(rec(int64(i), sent, 0, 150*ms, 400*ms, 200, 26, 1), 100*ms, 50*ms, 250*ms, 0)
		recs = append(recs, r)
		// a step at k s counts what finished in ((k−1) s, k s]
		finished[int(math.Ceil(float64(r.LastTokenNs)/1e9))]++
	}
	var s []traces.MetricsSample
	for k := range finished {
		x := traces.NewMetricsSample(int64(k) * int64(time.Second))
		if k > 0 {
			x.IntervalNs = int64(time.Second)
			x.RequestsFinished = finished[k]
			if finished[k] > 0 {
				x.QueueTimeMeanNs, x.PrefillTimeMeanNs, x.DecodeTimeMeanNs = int64(100*ms), int64(50*ms), int64(250*ms)
			}
		}
		hist(&x)
		s = append(s, x)
	}
	return analyzeWithSamples(t, recs, s, o)
}

// TestCrossCheck compares the attribution of every request with the
// server's histogram means, weighted by the requests finished per step.
func TestCrossCheck(t *testing.T) {
	for _, c := range []struct {
		why      string
		ignore   bool
		hist     func(x *traces.MetricsSample)
		disagree bool
		missing  string
		maxDiff  float64 // the largest share difference must be below this
	}{
		{"the server's histograms saying what the server timings say agree to the point", false,
			func(*traces.MetricsSample) {}, false, "", 0.5},
		{"histograms with ten times the queueing disagree, on queue", false,
			func(x *traces.MetricsSample) {
				if x.QueueTimeMeanNs > 0 {
					x.QueueTimeMeanNs *= 10
				}
			}, true, "", 100},
		{"a gap in one step is left out of both sides and the rest still agrees", false,
			func(x *traces.MetricsSample) {
				if x.TimeNs == int64(5*time.Second) {
					x.DecodeTimeMeanNs = traces.NotReported
				}
			}, false, "", 0.5},
		{"a series without the queue histogram names it and does not judge", false,
			func(x *traces.MetricsSample) { x.QueueTimeMeanNs = traces.NotReported }, false, "queue_time_mean_ns", 0},
		{"an estimated attribution is checked the same way", true,
			func(x *traces.MetricsSample) {
				if x.QueueTimeMeanNs > 0 {
					x.QueueTimeMeanNs *= 10
				}
			}, true, "", 100},
	} {
		rep := crossCheckRun(t, c.ignore, c.hist)
		cc := rep.CrossCheck
		if cc == nil {
			t.Errorf("%s: no cross-check", c.why)
			continue
		}
		diag := strings.Join(rep.Attribution.Diagnosis, "\n")
		var text strings.Builder
		rep.WriteText(&text)
		if c.missing != "" {
			if !strings.Contains(strings.Join(cc.Missing, ","), c.missing) || !strings.Contains(diag, "No cross-check") || !strings.Contains(diag, c.missing) {
				t.Errorf("%s: missing %v, diagnosis:\n%s", c.why, cc.Missing, diag)
			}
			// The report names the empty column, and only the empty ones.
			if !slices.Contains(rep.MissingMetrics, c.missing) || slices.Contains(rep.MissingMetrics, "prefill_time_mean_ns") ||
				!strings.Contains(strings.Join(rep.Warnings, "\n"), "no values for") {
				t.Errorf("%s: missing metrics %v, warnings %v", c.why, rep.MissingMetrics, rep.Warnings)
			}
			continue
		}
		if int64(cc.Requests) != cc.ServerRequests || cc.ServerRequests < 90 {
			t.Errorf("%s: compared %d requests against %d finished, want the same number (100, or 90 without the gap's step)", c.why, cc.Requests, cc.ServerRequests)
		}
		if cc.Disagree != c.disagree || strings.Contains(diag, "disagree") != c.disagree || strings.Contains(text.String(), "DISAGREE") != c.disagree {
			t.Errorf("%s: disagree %v (max %.1f points on %s), want %v; diagnosis:\n%s", c.why, cc.Disagree, cc.MaxDiffPoints, cc.Worst, c.disagree, diag)
		}
		if c.disagree && cc.Worst != "queue" {
			t.Errorf("%s: worst component %s, want queue", c.why, cc.Worst)
		}
		if !c.disagree && cc.MaxDiffPoints >= c.maxDiff {
			t.Errorf("%s: shares differ by %.2f points, want < %.1f: attribution %+v, server %+v", c.why, cc.MaxDiffPoints, c.maxDiff, cc.Attribution, cc.Server)
		}
		if !strings.Contains(text.String(), "Cross-check: all requests finished") {
			t.Errorf("%s: no side-by-side table in the text report", c.why)
		}
		wantSrc := SourceServer
		if c.ignore {
			wantSrc = SourceEstimated
		}
		if cc.Source != wantSrc {
			t.Errorf("%s: source %s, want %s", c.why, cc.Source, wantSrc)
		}
	}
}
