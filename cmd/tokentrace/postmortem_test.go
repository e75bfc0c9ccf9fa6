package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/internal/promtest"
	"github.com/tokentrace/tokentrace/replay"
	"github.com/tokentrace/tokentrace/replay/sim"
	"github.com/tokentrace/tokentrace/traces"
)

// TestPostmortemFromPrometheus runs a burst that overflows a small
// simulated server's batch while a real Prometheus scrapes it, stores the
// requests as a production trace with its exact start, and runs
// postmortem: the series land beside the trace, the report ties the tail
// to the server's waiting queue; with series partly missing (a second
// Prometheus drops two metrics at scrape time) the report names them and
// still gives the rest; a wrong Prometheus URL or a trace without an exact
// start is a clear error.
func TestPostmortemFromPrometheus(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Prometheus and replays in real time (~20 s)")
	}
	ctx := context.Background()
	so := sim.DefaultOptions()
	so.MaxNumSeqs = 4 // a burst of 40 queues
	srv, err := sim.Start(ctx, so)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	promURL := promtest.Start(t, strings.TrimPrefix(srv.URL, "http://"))
	// A second Prometheus without the KV-cache gauge and the queue-time
	// histogram, as if the server did not export them.
	partialURL := promtest.StartDropping(t, "vllm:(kv_cache_usage_perc|request_queue_time_seconds.*)", strings.TrimPrefix(srv.URL, "http://"))
	promtest.WaitScrapes(t, promURL, 3)
	promtest.WaitScrapes(t, partialURL, 3)

	recs := make([]traces.Record, 40)
	for i := range recs {
		r := traces.NewRecord()
		r.Seq, r.ArrivalNs = int64(i), int64(i)*int64(50*time.Millisecond)
		r.InputTokens, r.OutputTokens = 256, 32
		recs[i] = r
	}
	ro := replay.DefaultOptions()
	ro.URL, ro.Model = srv.URL, so.Model
	start := time.Now()
	res, err := replay.Run(ctx, recs, traces.NewMeta("test"), ro)
	if err != nil {
		t.Fatal(err)
	}
	promtest.WaitScrapes(t, promURL, int(time.Since(start)/time.Second)+6)

	dir := t.TempDir()
	trace := filepath.Join(dir, "incident.jsonl")
	m := res.Meta
	m.Set("capture.start", start.UTC().Format(time.RFC3339Nano))
	m.Set("capture.start_precision", "exact")
	writeTrace(t, trace, m, res.Records)
	var so2, se bytes.Buffer
	code := Main(ctx, []string{"tokentrace", "postmortem", "--prometheus", promURL, "--step", "1s", "--html", filepath.Join(dir, "pm.html"), trace}, nil, &so2, &se)
	if code != 0 {
		t.Fatalf("postmortem: exit %d\n%s", code, se.String())
	}
	samples, _, err := traces.ReadSamples(traces.SamplesPathFor(trace))
	if err != nil {
		t.Fatal(err)
	}
	maxWaiting := int64(0)
	for _, s := range samples {
		maxWaiting = max(maxWaiting, s.Waiting)
	}
	if maxWaiting == 0 {
		t.Errorf("no waiting requests in %d samples from Prometheus", len(samples))
	}
	if !strings.Contains(so2.String(), "waiting queue held") {
		t.Errorf("report does not use the server's queue:\n%s", so2.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "pm.html")); err != nil {
		t.Error(err)
	}
	t.Logf("stderr: %s", se.String())

	// Partly missing series: the report says which metrics are absent and
	// still ties the tail to the waiting queue.
	partial := filepath.Join(dir, "partial.jsonl")
	if err := traces.WriteAll(partial, m, res.Records); err != nil {
		t.Fatal(err)
	}
	var po, pe bytes.Buffer
	if got := Main(ctx, []string{"tokentrace", "postmortem", "--prometheus", partialURL, "--step", "1s", partial}, nil, &po, &pe); got != 0 {
		t.Fatalf("postmortem on partial series: exit %d\n%s", got, pe.String())
	}
	for _, want := range []string{"no values for kv_cache_usage, queue_time_mean_ns", "No cross-check against the server's own histograms: the metrics series has no queue_time_mean_ns", "waiting queue held"} {
		if !strings.Contains(po.String(), want) {
			t.Errorf("partial series: report does not say %q:\n%s", want, po.String())
		}
	}
	if !strings.Contains(pe.String(), "no series for [kv_cache_usage queue_time_mean_ns]") {
		t.Errorf("partial series: stderr %q does not name the missing metrics", pe.String())
	}

	for _, c := range []struct {
		why  string
		args []string
		code int
		want string
	}{
		{"a Prometheus that is not there is a failure naming it", []string{"postmortem", "--prometheus", "http://127.0.0.1:1", "--timeout", "1s", trace}, exitFailure, "127.0.0.1:1"},
		{"a window outside the retention is a failure saying so", []string{"postmortem", "--prometheus", promURL, "--step", "1s", "--start", start.Add(-3 * time.Hour).UTC().Format(time.RFC3339), trace}, exitFailure, "outside Prometheus' retention"},
		{"a URL that is not Prometheus' API is a failure saying so", []string{"postmortem", "--prometheus", srv.URL, "--timeout", "1s", trace}, exitFailure, "not as Prometheus' HTTP API"},
		{"a URL with credentials is refused", []string{"postmortem", "--prometheus", "http://u:secretpw@127.0.0.1:1", trace}, exitUsage, "--prometheus carries credentials"},
	} {
		var o, e bytes.Buffer
		got := Main(ctx, append([]string{"tokentrace"}, c.args...), nil, &o, &e)
		if got != c.code || !strings.Contains(e.String(), c.want) || strings.Contains(e.String(), "secretpw") {
			t.Errorf("%s: exit %d, stderr %q", c.why, got, e.String())
		}
	}
	noStart := writeTrace(t, filepath.Join(dir, "nostart.jsonl"), traces.NewMeta("test"), res.Records)
	var o, e bytes.Buffer
	if got := Main(ctx, []string{"tokentrace", "postmortem", "--prometheus", promURL, noStart}, nil, &o, &e); got != exitUsage || !strings.Contains(e.String(), "--keep-start") {
		t.Errorf("trace without an exact start: exit %d, %q", got, e.String())
	}
}
