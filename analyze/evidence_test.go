package analyze

import (
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// evidenceRun is a report of 20 requests, the last two slow, from a source
// whose metadata records replay options (none when opts is ""), with a
// metrics series when withMetrics.
func evidenceRun(t *testing.T, opts string, withMetrics bool) *Report {
	t.Helper()
	a := mustNew(t, DefaultOptions())
	for i := range 20 {
		e2e := 300 * ms
		if i >= 18 {
			e2e = 3000 * ms
		}
		r := rec(int64(i), time.Duration(i)*100*ms, 0, 50*ms, e2e, 100, 10, 1)
		a.Add(&r)
	}
	m := traces.NewMeta("replay")
	if opts != "" {
		m.Extra = map[string]string{"replay.options": opts}
	}
	a.AddSource(Source{File: "results.parquet", Rows: 20, Meta: m})
	if withMetrics {
		var s []traces.MetricsSample
		for k := range 4 {
			x := traces.NewMetricsSample(int64(k) * int64(time.Second))
			x.Waiting, x.Running, x.KVCacheUsage = 1, 4, 0.2
			s = append(s, x)
		}
		a.AddSamples(s)
	}
	rep := mustClose(t, a)
	return rep
}

// A report without a server metrics series says what that leaves out and
// how to record one (it dropped the server-queue lines and the cross-check
// without a word); with a series it says nothing of the kind.
func TestMissingMetricsNote(t *testing.T) {
	without := textOf(t, evidenceRun(t, "", false))
	for _, want := range []string{"Not in this report", "Server metrics: none (no results.metrics.parquet beside the results)",
		"waiting-queue or KV-cache lines", "cross-checked", "replay.TargetOptions.MetricsURL"} {
		if !strings.Contains(without, want) {
			t.Errorf("report without metrics does not say %q:\n%s", want, without)
		}
	}
	if with := textOf(t, evidenceRun(t, "", true)); strings.Contains(with, "Not in this report") {
		t.Errorf("report with a metrics series still says it has none:\n%s", with)
	}
}

// Tail times of a replay that started at a --window start (or ran at
// another speed) say they are run time and give the trace's time too:
// "sent at 1.8 s" of a run that began at the trace's 30 s was read as the
// trace's 1.8 s.
func TestTailTimesFromWindowStart(t *testing.T) {
	for _, c := range []struct {
		why, opts string
		want      []string
		not       string
	}{
		{"a window start", `{"speed":1,"window_from":"30s","window_to":"1m0s"}`,
			[]string{"between 1.8 s and 1.9 s of the run, which started at the trace's 30.0 s (replay.Options.WindowFrom): 31.8–31.9 s into the trace; 100% of them in 1.8–2.0 s of the run."}, ""},
		{"a window start at speed 2", `{"speed":2,"window_from":"30s"}`,
			[]string{"of the run, which started at the trace's 30.0 s (replay.Options.WindowFrom) and ran at speed 2: 33.6–33.8 s into the trace"}, ""},
		{"the whole trace at speed 1: run time is trace time", `{"speed":1}`,
			[]string{"The tail requests were sent between 1.8 s and 1.9 s;"}, "into the trace"},
		{"no replay options recorded", "",
			[]string{"The tail requests were sent between 1.8 s and 1.9 s;"}, "into the trace"},
	} {
		rep := evidenceRun(t, c.opts, true)
		d := strings.Join(rep.Attribution.Diagnosis, "\n")
		for _, w := range c.want {
			if !strings.Contains(d, w) {
				t.Errorf("%s: diagnosis does not say %q:\n%s", c.why, w, d)
			}
		}
		if c.not != "" && strings.Contains(d, c.not) {
			t.Errorf("%s: diagnosis says %q:\n%s", c.why, c.not, d)
		}
	}
}
