package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/analyze"
	"github.com/tokentrace/tokentrace/bench/pmdemo/incident"
	"github.com/tokentrace/tokentrace/bench/pmdemo/pdincident"
	"github.com/tokentrace/tokentrace/internal/promtest"
	"github.com/tokentrace/tokentrace/replay"
	"github.com/tokentrace/tokentrace/sim"
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
	// Mostly waits on real time (replays, scrapes); the CLI runs in child
	// processes.
	t.Parallel()
	srv := startSimServer(t, "max-num-seqs=4", nil) // a burst of 40 queues
	promURL := promtest.Start(t, strings.TrimPrefix(srv.URL, "http://"))
	// A second Prometheus without the KV-cache gauge and the queue-time
	// histogram, as if the server did not export them.
	partialURL := promtest.StartDropping(t, "vllm:(kv_cache_usage_perc|request_queue_time_seconds.*)", strings.TrimPrefix(srv.URL, "http://"))
	promtest.WaitScrapes(t, promURL, 3)
	promtest.WaitScrapes(t, partialURL, 3)

	res, start := replayScraped(t, promURL, srv.URL, evenRecords(40, 50*time.Millisecond, 256, 32))

	dir := t.TempDir()
	trace := filepath.Join(dir, "incident.jsonl")
	m := keptStart(res.Meta, start)
	writeTrace(t, trace, m, res.Records)
	var so2, se bytes.Buffer
	code := mainChild(t, []string{"tokentrace", "postmortem", "--prometheus", promURL, "--step", "1s", "--html", filepath.Join(dir, "pm.html"), trace}, &so2, &se)
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
	if got := mainChild(t, []string{"tokentrace", "postmortem", "--prometheus", partialURL, "--step", "1s", partial}, &po, &pe); got != 0 {
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
		{"a URL with credentials is refused", []string{"postmortem", "--prometheus", "http://u:secretpw@127.0.0.1:1", trace}, exitUsage, "--prometheus: carries credentials"},
	} {
		var o, e bytes.Buffer
		got := mainChild(t, append([]string{"tokentrace"}, c.args...), &o, &e)
		if got != c.code || !strings.Contains(e.String(), c.want) || strings.Contains(e.String(), "secretpw") {
			t.Errorf("%s: exit %d, stderr %q", c.why, got, e.String())
		}
	}
	noStart := writeTrace(t, filepath.Join(dir, "nostart.jsonl"), traces.NewMeta("test"), res.Records)
	var o, e bytes.Buffer
	if got := mainChild(t, []string{"tokentrace", "postmortem", "--prometheus", promURL, noStart}, &o, &e); got != exitUsage || !strings.Contains(e.String(), "--keep-start") {
		t.Errorf("trace without an exact start: exit %d, %q", got, e.String())
	}
}

// The two-server incident, as the postmortem demo
// plays it (package incident): two simulators behind an imaginary gateway,
// both scraped every second by one real Prometheus (two targets, two
// instance labels), a burst at incident.BurstAt overflowing instance A's
// 16-sequence batch, and the results pooled into one trace the way the
// gateway would have logged it: one time origin, no server timing columns
// (so the attribution is estimated) and no record of which instance served
// a request. The postmortem then reads Prometheus and explains the tail.
//
// The truth is each simulator's own queue/prefill/decode per request (the
// results before the columns were stripped).

// incidentRun is the replayed scenario.
type incidentRun struct {
	hostA, hostB string
	promURL      string
	// truth holds the unstripped results by request id; pooled the trace
	// as the gateway logged it, with origin its wall-clock time origin.
	truth  map[string]traces.Record
	pooled []traces.Record
	origin time.Time
	meta   traces.Meta
}

// runIncident starts the simulators and Prometheus, replays both parts at
// once and pools the results.
func runIncident(t *testing.T) *incidentRun {
	t.Helper()
	ctx := context.Background()
	so := sim.DefaultOptions()
	so.MaxNumBatchedTokens = 512
	so.MaxNumSeqs = 16
	so.PerRequestMetrics = true
	var srv [2]*sim.Server
	for i := range srv {
		s, err := sim.Start(ctx, so)
		if err != nil {
			t.Fatalf("start sim: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		srv[i] = s
	}
	run := &incidentRun{hostA: strings.TrimPrefix(srv[0].URL, "http://"), hostB: strings.TrimPrefix(srv[1].URL, "http://"), truth: map[string]traces.Record{}}
	run.promURL = promtest.Start(t, run.hostA, run.hostB)
	promtest.WaitScrapes(t, run.promURL, 3) // the load starts inside scraped history

	parts := incident.Parts(16)
	ro := replay.DefaultOptions()
	ro.NoPreflight = true
	ro.Model = so.Model
	pl, err := incident.Play(ctx, [2]string{srv[0].URL, srv[1].URL}, parts, traces.NewMeta("incident"), ro)
	if err != nil {
		t.Fatal(err)
	}
	for _, res := range pl.Results {
		for _, r := range res.Records {
			if r.Status != traces.StatusOK {
				t.Fatalf("request %s: status %s (%s)", r.RequestID, r.Status, r.Error)
			}
			run.truth[r.RequestID] = r
		}
	}
	if n := len(parts[0]) + len(parts[1]); len(pl.Pooled) != n {
		t.Fatalf("pooled %d results, want %d", len(pl.Pooled), n)
	}
	run.pooled, run.origin = pl.Pooled, pl.Origin
	run.meta = pl.Results[0].Meta
	pl.StartMeta(&run.meta)
	// Scrapes past the last token, so the window's end is in Prometheus.
	time.Sleep(time.Until(run.origin.Add(pl.Last + 3*time.Second)))
	return run
}

// postmortemJSON writes recs (with meta) as a trace in a temporary
// directory, runs postmortem on it against promURL with 1 s steps, args and
// --json, and decodes the JSON report into rep; it returns the trace's path
// and the command's standard error, and fails the test unless the command
// exits 0.
func postmortemJSON(t *testing.T, promURL string, meta traces.Meta, recs []traces.Record, args []string, rep any) (trace, stderr string) {
	t.Helper()
	dir := t.TempDir()
	trace = filepath.Join(dir, "incident.parquet")
	if err := traces.WriteAll(trace, meta, recs); err != nil {
		t.Fatal(err)
	}
	jsonPath := filepath.Join(dir, "incident.json")
	var so, se bytes.Buffer
	argv := append([]string{"tokentrace", "postmortem", "--prometheus", promURL, "--step", "1s"}, args...)
	code := mainChild(t, append(argv, "--json", jsonPath, trace), &so, &se)
	if code != 0 {
		t.Fatalf("postmortem: exit %d\n%s", code, se.String())
	}
	t.Logf("stderr: %s\nreport:\n%s", se.String(), so.String())
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, rep); err != nil {
		t.Fatal(err)
	}
	return trace, se.String()
}

// replaySim replays recs in real time against the simulator at url.
func replaySim(t *testing.T, url string, recs []traces.Record) *replay.Result {
	t.Helper()
	ro := replay.DefaultOptions()
	ro.URL, ro.Model = url, sim.DefaultModel
	res, err := replay.Run(context.Background(), recs, traces.NewMeta("test"), ro)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// replayScraped is replaySim, then a wait until Prometheus at promURL has
// scraped well past the run; start is the run's wall-clock start.
func replayScraped(t *testing.T, promURL, url string, recs []traces.Record) (res *replay.Result, start time.Time) {
	t.Helper()
	start = time.Now()
	res = replaySim(t, url, recs)
	promtest.WaitScrapes(t, promURL, int(time.Since(start)/time.Second)+6)
	return res, start
}

// keptStart is m with the trace's wall-clock start, start, recorded
// exactly (as capture --keep-start does).
func keptStart(m traces.Meta, start time.Time) traces.Meta {
	m.Set("capture.start", start.UTC().Format(time.RFC3339Nano))
	m.Set("capture.start_precision", "exact")
	return m
}

// reportJSON is what the tests read of a postmortem or analyze --json
// report.
type reportJSON struct {
	Attribution struct {
		Source    string             `json:"source"`
		Dominant  string             `json:"dominant"`
		Share     map[string]float64 `json:"share"`
		When      analyze.TailTiming `json:"when"`
		Diagnosis []string           `json:"diagnosis"`
	} `json:"attribution"`
	Instances  []analyze.InstanceLoad `json:"instances"`
	Pools      []analyze.PoolLoad     `json:"pools"`
	CrossCheck *analyze.CrossCheck    `json:"cross_check"`
}

// postmortemPlayed runs postmortemJSON on the gateway's log of pl, with
// its exact start, once Prometheus has scraped past its last token.
func postmortemPlayed(t *testing.T, promURL string, pl *pdincident.Played, args []string, rep any) (trace, stderr string) {
	t.Helper()
	meta := pl.Result.Meta
	pl.StartMeta(&meta)
	time.Sleep(time.Until(pl.Origin.Add(pl.Last + 3*time.Second)))
	return postmortemJSON(t, promURL, meta, pl.Logged, args, rep)
}

// TestPostmortemIncidentTwoInstances runs the incident scenario and the
// postmortem against the real Prometheus, and checks the postmortem
// against the simulators' truth: the p90 E2E tail's shares within 10
// points, the dominant cause right for at least 90 % of the tail
// requests, the burst window and the overloaded instance named in the
// diagnosis (the other instance not), and the cross-check of every
// request's estimated split against the simulators' histograms agreeing.
func TestPostmortemIncidentTwoInstances(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Prometheus and two simulators, replays in real time (~20 s)")
	}
	t.Parallel() // mostly waits on real time (replays, scrapes); the CLI runs in child processes
	ctx := context.Background()
	run := runIncident(t)
	var rep reportJSON
	trace, _ := postmortemJSON(t, run.promURL, run.meta, run.pooled, []string{"--tail", "p90", "--tail-metric", "e2e"}, &rep)
	diag := strings.Join(rep.Attribution.Diagnosis, "\n")
	if rep.Attribution.Source != analyze.SourceEstimated {
		t.Errorf("attribution source %q, want %q (the pooled trace has no server timings)", rep.Attribution.Source, analyze.SourceEstimated)
	}

	// The burst window: the diagnosis names when the tail requests were
	// sent (checked below against their own send times, which lateness on
	// a loaded machine moves), and they are the burst's requests.
	wh := rep.Attribution.When
	lo, hi := incident.BurstAt.Seconds()-0.1, (incident.BurstAt+incident.BurstLen).Seconds()+0.1
	if wh.BusiestStartS > wh.LastS || wh.BusiestEndS < wh.FirstS {
		t.Errorf("busiest window %.2f–%.2f s lies outside the tail's sends %.2f–%.2f s", wh.BusiestStartS, wh.BusiestEndS, wh.FirstS, wh.LastS)
	}
	w := fmt.Sprintf("%.1f–%.1f s", wh.BusiestStartS, wh.BusiestEndS)
	if wh.LastS-wh.FirstS < 0.05 { // all sent within 50 ms: one time
		w = fmt.Sprintf("sent at %.1f s", wh.FirstS)
	}
	if !strings.Contains(diag, w) {
		t.Errorf("diagnosis does not name the burst window %s:\n%s", w, diag)
	}

	// The overloaded instance: its own rows in the stored series show the
	// queue, and the diagnosis names it and not the other.
	samples, _, err := traces.ReadSamples(traces.SamplesPathFor(trace))
	if err != nil {
		t.Fatal(err)
	}
	peak := map[string]int64{}
	for _, x := range samples {
		peak[x.Instance] = max(peak[x.Instance], x.Waiting)
	}
	if peak[run.hostA] < 10 || peak[run.hostB] >= peak[run.hostA]/2 {
		t.Errorf("peak waiting per instance in the stored series %v: want A (%s) ≥ 10 and B (%s) well below", peak, run.hostA, run.hostB)
	}
	if !strings.Contains(diag, "Uneven load: instance "+run.hostA) || strings.Contains(diag, run.hostB) {
		t.Errorf("diagnosis does not name the overloaded instance %s alone (the other is %s):\n%s", run.hostA, run.hostB, diag)
	}
	if len(rep.Instances) != 2 {
		t.Errorf("report instances %+v, want both", rep.Instances)
	}

	// The cross-check against the simulators' own histograms: the
	// estimated attribution of every request against them.
	if cc := rep.CrossCheck; cc == nil || cc.Requests < len(run.pooled)*9/10 || len(cc.Missing) > 0 {
		t.Errorf("cross-check %+v: want most of the %d requests compared, no histogram missing", cc, len(run.pooled))
	} else {
		t.Logf("cross-check: %d requests against %d finished; %+v, max %.1f points on %s",
			cc.Requests, cc.ServerRequests, cc.Components, cc.MaxDiffPoints, cc.Worst)
	}

	// Accuracy against the truth, per tail request, on the same analysis
	// the postmortem made (it reads the stored series beside the trace).
	ao := analyze.DefaultOptions()
	ao.TailPercentile, ao.TailMetric, ao.KeepRequests = 90, analyze.MetricE2E, true
	est, err := analyze.AnalyzeFiles(ctx, []string{trace}, ao)
	if err != nil {
		t.Fatal(err)
	}
	ar := &attribRun{truth: run.truth, sent: map[string]traces.Record{}}
	for _, r := range run.pooled {
		ar.sent[r.RequestID] = r
	}
	var tally tailTally[[5]float64]
	onA := 0
	// The report counts time from the run's first send, which lateness
	// (tens of ms where the host took the replayer's CPU) can move off the
	// schedule's zero: the tail's own sends are counted from there too.
	origin := int64(math.MaxInt64)
	for _, r := range run.pooled {
		if r.SentNs >= 0 {
			origin = min(origin, r.SentNs)
		}
	}
	schedLo, schedHi, sentLo, sentHi := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	err = eachRequest(est, func(ra analyze.RequestAttribution) error {
		if !ra.Tail {
			return nil
		}
		if r, ok := ar.sent[ra.RequestID]; ok {
			sc, se := float64(r.ScheduledNs)/1e9, float64(r.SentNs-origin)/1e9
			schedLo, schedHi = min(schedLo, sc), max(schedHi, sc)
			sentLo, sentHi = min(sentLo, se), max(sentHi, se)
		}
		if strings.HasPrefix(ra.RequestID, "a-") {
			onA++
		}
		tally.add(ar.truthOf(t, ra.RequestID, false), attribEstimate(ra))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	tail, agree := tally.n, tally.agree
	truthShare, estShare := toShares(tally.truth), toShares(tally.est)
	errPP := 0.0
	for k := range truthShare {
		errPP = max(errPP, math.Abs(truthShare[k]-estShare[k])*100)
		if got := rep.Attribution.Share[analyze.ComponentNames[k]]; math.Abs(got-estShare[k]) > 1e-6 {
			t.Errorf("postmortem's %s share %.4f, this analysis %.4f", analyze.ComponentNames[k], got, estShare[k])
		}
	}
	rate := float64(agree) / float64(max(tail, 1))
	t.Logf("tail %d requests (%d on A); truth [%s], postmortem [%s], max error %.1f pp; dominant right %d/%d",
		tail, onA, fmtShares(truthShare), fmtShares(estShare), errPP, agree, tail)
	if tail < 5 || onA != tail {
		t.Errorf("tail of %d requests, %d of them on the overloaded instance A: want ≥ 5, all on A (scenario design)", tail, onA)
	}
	if schedLo < lo || schedHi > hi {
		t.Errorf("tail requests scheduled %.2f–%.2f s; want inside the burst %.2f–%.2f s", schedLo, schedHi, lo, hi)
	}
	if math.Abs(wh.FirstS-sentLo) > 0.05 || math.Abs(wh.LastS-sentHi) > 0.05 {
		t.Errorf("the report's tail was sent %.2f–%.2f s, the tail requests' own sends %.2f–%.2f s", wh.FirstS, wh.LastS, sentLo, sentHi)
	}
	if other := truthShare[componentIdx("other")]; other > attribOtherMax {
		t.Skipf("not judging the estimate: client ↔ engine time was %.1f%% of the tail's latency (> %.0f%%): the machine is too loaded for the real-time scenario", other*100, attribOtherMax*100)
	}
	if errPP > attribShareTolPP {
		t.Errorf("tail shares off by %.1f pp (> %.0f)", errPP, attribShareTolPP)
	}
	if cc := rep.CrossCheck; cc != nil && cc.Disagree {
		t.Errorf("the estimated attribution of all requests disagrees with the simulators' histograms by %.1f points on %s", cc.MaxDiffPoints, cc.Worst)
	}
	if rate < attribDominantRate {
		t.Errorf("dominant cause right for %d/%d tail requests (%.0f%% < %.0f%%)", agree, tail, rate*100, attribDominantRate*100)
	}
}

// TestPostmortemDisaggregatedFleet has a real Prometheus scrape a
// simulated disaggregated fleet through its one /metrics (every replica's
// series labelled with its pod and role), plays the incident of package
// pdincident against it (a burst of long prompts that queues on the one
// prefill replica while the three decode replicas idle), keeps the
// results as the gateway would have logged them (no server timings, no
// replicas) and runs postmortem per pod with the role label: the report
// has both pools and names the prefill pool as the saturated one, the
// decode pool's KV transfers come from vLLM's NIXL histograms, and the
// estimated split of every request agrees with the replicas' own
// queue/prefill/decode histograms, summed over both pools, within 10
// points. A role label no series has is a usage error listing the labels
// the series do have.
func TestPostmortemDisaggregatedFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Prometheus and a fleet, replays in real time (~20 s)")
	}
	t.Parallel() // mostly waits on real time (replays, scrapes); the CLI runs in child processes
	ctx := context.Background()
	srv := startSimServer(t, pdincident.Fleet, func(so *sim.Options) { so.PerRequestMetrics = true })
	promURL := startScraping(t, srv)

	ro := replay.DefaultOptions()
	ro.NoPreflight = true
	ro.Model = sim.DefaultModel
	pl, err := pdincident.Play(ctx, srv.URL, pdincident.Records(33), traces.NewMeta("incident"), ro)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range pl.Result.Records {
		if r.Status != traces.StatusOK {
			t.Fatalf("request %s: status %s (%s)", r.RequestID, r.Status, r.Error)
		}
	}
	var rep reportJSON
	trace, stderr := postmortemPlayed(t, promURL, pl,
		[]string{"--instance-label", "pod", "--role-label", "role", "--tail", "p90", "--tail-metric", "ttft"}, &rep)
	diag := strings.Join(rep.Attribution.Diagnosis, "\n")
	if rep.Attribution.Source != analyze.SourceEstimated {
		t.Errorf("attribution source %q, want %q (the gateway's log has no server timings)", rep.Attribution.Source, analyze.SourceEstimated)
	}
	if !strings.Contains(stderr, "pools decode [decode-0 decode-1 decode-2], prefill [prefill-0]") {
		t.Errorf("stderr does not name the pools and their replicas: %s", stderr)
	}
	sat, kv := "", false
	for _, p := range rep.Pools {
		if p.Saturated {
			sat += p.Role
		}
		if p.Role == "decode" {
			kv = p.KVTransfers > 0 && p.AllKVTransferMs != nil
		}
	}
	if len(rep.Pools) != 2 || sat != "prefill" {
		t.Errorf("pools %+v: want prefill and decode, the prefill pool saturated", rep.Pools)
	}
	// The gateway's log names no replica; the series' roles and
	// histograms make the requests a prefill/decode fleet's, and the
	// prefill pool's saturation one sentence citing the series too.
	if !strings.Contains(diag, "Prefill pool saturated: ") || !strings.Contains(diag, "the prefill pool (1 replica(s): prefill-0) held") {
		t.Errorf("diagnosis does not name the saturated prefill pool:\n%s", diag)
	}
	if !kv {
		t.Errorf("pools %+v: the decode pool's KV transfers are missing", rep.Pools)
	}
	if cc := rep.CrossCheck; cc == nil || len(cc.Missing) > 0 || cc.Requests < len(pl.Logged)*9/10 {
		t.Errorf("cross-check %+v: want most of the %d requests compared, no histogram missing", cc, len(pl.Logged))
	} else {
		t.Logf("cross-check: %d requests against %d finished; %+v, max %.1f points on %s",
			cc.Requests, cc.ServerRequests, cc.Components, cc.MaxDiffPoints, cc.Worst)
		if cc.ServerRequests > int64(len(pl.Logged))*11/10 {
			t.Errorf("the server finished %d requests per the pooled series, the trace has %d: a request finishing on both pools counts once", cc.ServerRequests, len(pl.Logged))
		}
		if cc.Disagree || cc.MaxDiffPoints > analyze.CrossCheckTolerancePoints {
			t.Errorf("the estimated split disagrees with the fleet's histograms by %.1f points on %s", cc.MaxDiffPoints, cc.Worst)
		}
	}

	// A role label that no series has: a usage error listing the labels.
	var o, e bytes.Buffer
	if got := mainChild(t, []string{"tokentrace", "postmortem", "--prometheus", promURL, "--step", "1s",
		"--instance-label", "pod", "--role-label", "llm_d_ai_role", trace}, &o, &e); got != exitUsage ||
		!strings.Contains(e.String(), `role label "llm_d_ai_role" (--role-label) is on none`) || !strings.Contains(e.String(), "role=decode, prefill") {
		t.Errorf("a role label on no series: exit %d, stderr %q", got, e.String())
	}
}
