package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/analyze"
	"github.com/tokentrace/tokentrace/bench/pmdemo/pdincident"
	"github.com/tokentrace/tokentrace/traces"
)

// TestReplayScrapesFleetPools replays the incident of package pdincident
// (a burst of long prompts that queues on the one prefill replica while
// three decode replicas idle) against a simulated prefill/decode fleet in
// process (--target sim:...), whose one /metrics replay scrapes, and
// analyzes the results with the series: every pod has rows with its
// role, the pooled rows count each request once (not on both pools), and
// analyze names the saturated prefill pool from the scraped series, in
// one sentence with the results' own evidence (the replica columns); the
// same requests kept as a gateway logs them (no server timings, no
// replicas) get the postmortem's report: the pool named from the series
// alone, and a cross-check against the fleet's histograms that agrees.
func TestReplayScrapesFleetPools(t *testing.T) {
	if testing.Short() {
		t.Skip("replays in real time (~6 s)")
	}
	dir := t.TempDir()
	recs := pdincident.Records(33)
	trace := writeTrace(t, filepath.Join(dir, "trace.parquet"), traces.NewMeta("test"), recs)
	out := filepath.Join(dir, "results.parquet")
	_, stderr := runMain(t, "replay", "--target", "sim:"+pdincident.Fleet, "--quiet", "--no-preflight", "--max-lateness", "10s",
		"--metrics-interval", "100ms", "--out", out, trace)
	if strings.Contains(stderr, "metrics series:") {
		t.Errorf("replay warned about the series: %s", stderr)
	}
	samples, _, err := traces.ReadSamples(traces.SamplesPathFor(out))
	if err != nil {
		t.Fatal(err)
	}
	wantRole := map[string]string{"": "", "prefill-0": "prefill", "decode-0": "decode", "decode-1": "decode", "decode-2": "decode"}
	finished := map[string]int64{}
	for _, s := range samples {
		if r, ok := wantRole[s.Instance]; !ok || s.Role != r {
			t.Errorf("row of %q has role %q, want %q", s.Instance, s.Role, r)
		}
		if s.ScrapeError == "" {
			finished[s.Instance] += max(s.RequestsFinished, 0)
		}
	}
	n := int64(len(recs))
	if finished[""] != n || finished["prefill-0"] != n {
		t.Errorf("finished per row %v: want %d pooled (each request once) and %d on prefill-0", finished, n, n)
	}

	analyzeJSON := func(results string) reportJSON {
		t.Helper()
		stdout, _ := runMain(t, "analyze", "--tail", "p90", "--tail-metric", "ttft", "--json", results)
		var rep reportJSON
		if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
			t.Fatal(err)
		}
		t.Logf("analyze %s (%s attribution):\n%s", filepath.Base(results), rep.Attribution.Source, strings.Join(rep.Attribution.Diagnosis, "\n"))
		sat := ""
		for _, p := range rep.Pools {
			if p.Saturated {
				sat += p.Role
			}
		}
		if len(rep.Pools) != 2 || sat != "prefill" {
			t.Errorf("%s: pools %+v, want prefill and decode, the prefill pool saturated", results, rep.Pools)
		}
		return rep
	}

	rep := analyzeJSON(out)
	n1, n2 := 0, 0
	for _, s := range rep.Attribution.Diagnosis {
		if strings.Contains(s, "Prefill pool saturated") {
			n1++
			if !strings.Contains(s, "servers' own series") || !strings.Contains(s, "the prefill pool (1 replica(s): prefill-0) held") {
				t.Errorf("the finding does not cite the scraped series: %s", s)
			}
		}
		if strings.Contains(s, "Pool saturated") {
			n2++
		}
	}
	if n1 != 1 || n2 != 0 {
		t.Errorf("%d sentences say the prefill pool saturated from the results, %d from the series; want one from both:\n%s", n1, n2, strings.Join(rep.Attribution.Diagnosis, "\n"))
	}

	// As the gateway logged it: no server timings, no replicas.
	res, meta, err := traces.ReadAll(out)
	if err != nil {
		t.Fatal(err)
	}
	for i := range res {
		r := &res[i]
		r.ServerQueueNs, r.ServerPrefillNs, r.ServerDecodeNs = traces.NotReported, traces.NotReported, traces.NotReported
		r.ServerKVTransferNs, r.ServerDecodeQueueNs = traces.NotReported, traces.NotReported
		r.Replica, r.PrefillReplica, r.RouteReason = "", "", ""
	}
	logged := writeTrace(t, filepath.Join(dir, "logged.parquet"), meta, res)
	b, err := os.ReadFile(traces.SamplesPathFor(out))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(traces.SamplesPathFor(logged), b, 0o644); err != nil {
		t.Fatal(err)
	}
	rep = analyzeJSON(logged)
	diag := strings.Join(rep.Attribution.Diagnosis, "\n")
	// The log names no replica, but the series' roles and histograms say
	// the servers were a prefill and a decode pool: the requests are
	// explained as going through both, and the prefill pool's saturation
	// is one sentence citing the estimate and the series.
	if rep.Attribution.Source != analyze.SourceEstimated || !strings.Contains(diag, "Prefill pool saturated: ") || !strings.Contains(diag, "the prefill pool (1 replica(s): prefill-0) held") {
		t.Errorf("the logged requests (%s attribution) do not name the saturated prefill pool:\n%s", rep.Attribution.Source, diag)
	}
	// A scrape reads a replica's counters and histograms one family after
	// another, as vLLM's exposition does: a request finishing in between
	// shows in one a scrape before the other, and the cross-check leaves
	// such a step out of both sides; the rest counts each request once.
	// A simulator that fell behind its model (a loaded machine, the race
	// detector) batched as the machine let it, not as the model the
	// estimate follows: the cross-check may then rightly disagree.
	late, _ := traces.SimLatenessOf(meta)
	if late.FellBehind() {
		t.Logf("the simulator fell behind its model (%s): a disagreement is not judged", late)
	}
	if cc := rep.CrossCheck; cc == nil || len(cc.Missing) > 0 || cc.ServerRequests > n || cc.ServerRequests < n*9/10 || cc.Disagree && !late.FellBehind() {
		t.Errorf("cross-check %+v: want most of the %d requests compared, each counted once by the fleet's histograms, and agreement within %.0f points", cc, n, analyze.CrossCheckTolerancePoints)
	} else {
		t.Logf("cross-check: %+v, max %.1f points on %s", cc.Components, cc.MaxDiffPoints, cc.Worst)
	}
}

// TestReplayMetricsLabels checks that --metrics-instance-label reads a
// scraped endpoint's series per replica by the label the user names (here
// a vLLM server's engine label, as a federation endpoint's instance label
// would be), and that a label on none of the series is said once, naming
// the flag, with the labels the series do have.
func TestReplayMetricsLabels(t *testing.T) {
	if testing.Short() {
		t.Skip("replays in real time (~1 s each)")
	}
	page, err := os.ReadFile(filepath.Join("..", "..", "replay", "scrape", "testdata", "metrics", "vllm_t1.txt"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		w.Write(page)
	}))
	defer srv.Close()
	dir := t.TempDir()
	recs := make([]traces.Record, 5)
	for i := range recs {
		recs[i] = traces.NewRecord()
		recs[i].Seq, recs[i].ArrivalNs, recs[i].InputTokens, recs[i].OutputTokens = int64(i), int64(i)*100e6, 16, 4
	}
	trace := writeTrace(t, filepath.Join(dir, "trace.parquet"), traces.NewMeta("test"), recs)
	for _, c := range []struct {
		why, label string
		wantRows   []string // instances with rows besides the pooled one
		wantWarn   string
	}{
		{"the engine label tells the server's two engines apart", "engine", []string{"0", "1"}, ""},
		{"a label on none of the series is named with its flag and the labels there are", "kubernetes_pod_name", nil,
			`metrics series: instance label "kubernetes_pod_name" (--metrics-instance-label) is on none of the 2 series`},
	} {
		out := filepath.Join(dir, c.label+".parquet")
		_, stderr := runMain(t, "replay", "--quiet", "--no-preflight", "--max-lateness", "10s", "--metrics-url", srv.URL+"/metrics",
			"--metrics-interval", "100ms", "--metrics-instance-label", c.label, "--out", out, trace)
		if c.wantWarn == "" && strings.Contains(stderr, "metrics series:") || !strings.Contains(stderr, c.wantWarn) || strings.Count(stderr, "metrics series:") > 1 {
			t.Errorf("%s: stderr %q, want one warning %q", c.why, stderr, c.wantWarn)
		}
		samples, _, err := traces.ReadSamples(traces.SamplesPathFor(out))
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		var rows []string
		for _, s := range samples {
			if s.Instance != "" && !seen[s.Instance] {
				seen[s.Instance] = true
				rows = append(rows, s.Instance)
			}
		}
		slices.Sort(rows)
		if !slices.Equal(rows, c.wantRows) {
			t.Errorf("%s: rows for instances %q, want %q", c.why, rows, c.wantRows)
		}
	}
}
