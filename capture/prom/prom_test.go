package prom

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/internal/promtest"
	"github.com/tokentrace/tokentrace/sim"
	"github.com/tokentrace/tokentrace/traces"
)

// load sends n completions to the simulator over about d.
func load(t *testing.T, url string, n int, d time.Duration) {
	t.Helper()
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := fmt.Sprintf(`{"model":%q,"prompt":%q,"max_tokens":48,"ignore_eos":true}`, sim.DefaultModel, strings.Repeat("tok ", 200))
			resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(body))
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
		}()
		time.Sleep(d / time.Duration(n))
	}
	wg.Wait()
}

// TestFetchFromRealPrometheus replays load on a simulator that a real
// Prometheus scrapes every second, then reads the window back: every column
// the simulator exports is present, requests finished add up to what was
// sent, the instance is named, and a credential file's content never shows
// up in an error.
func TestFetchFromRealPrometheus(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Prometheus and waits for scrapes (~12 s)")
	}
	ctx := context.Background()
	so := sim.DefaultOptions()
	srv, err := sim.Start(ctx, so)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	promURL := promtest.Start(t, strings.TrimPrefix(srv.URL, "http://"))
	// A second Prometheus drops the queue-time histogram at scrape time,
	// as if the server did not export it.
	partialURL := promtest.StartDropping(t, "vllm:request_queue_time_seconds.*", strings.TrimPrefix(srv.URL, "http://"))
	promtest.WaitScrapes(t, promURL, 3) // the load must start inside scraped history
	promtest.WaitScrapes(t, partialURL, 3)
	start := time.Now().Truncate(time.Second)
	const n = 60
	load(t, srv.URL, n, 4*time.Second)
	time.Sleep(5 * time.Second) // the last scrapes after the load, past the window
	res, err := Fetch(ctx, with(DefaultOptions(), func(o *Options) { o.URL = promURL; o.Start = start; o.Duration = 8 * time.Second; o.Step = time.Second }))
	if err != nil {
		t.Fatal(err)
	}
	for _, col := range res.Missing {
		switch col {
		case "preemptions", "prefix_hit_rate":
			// present in the export but may be empty (no preemptions; hit
			// rate NaN without queries are skipped, not missing)
		default:
			t.Errorf("column %s missing from Prometheus, though the simulator exports it", col)
		}
	}
	finished, maxRunning := 0.0, int64(0)
	for _, s := range res.Samples {
		if s.RequestsFinished > 0 {
			finished += float64(s.RequestsFinished)
		}
		maxRunning = max(maxRunning, s.Running)
	}
	// increase() extrapolates within each step, so the sum is close to n,
	// not exact.
	if finished < 0.8*n || finished > 1.2*n {
		t.Errorf("requests finished over the window: %.0f, want about %d", finished, n)
	}
	if maxRunning <= 0 {
		t.Errorf("no running requests seen in %d samples", len(res.Samples))
	}
	if len(res.Instances) != 1 {
		t.Errorf("instances %v, want the one simulator", res.Instances)
	}
	t.Logf("%d samples, %.0f finished, max running %d, gaps %d, missing %v", len(res.Samples), finished, maxRunning, res.Gaps, res.Missing)

	// With one metric absent, the rest still comes back and the absent
	// one is named, its column not reported (never zero).
	part, err := Fetch(ctx, with(DefaultOptions(), func(o *Options) {
		o.URL = partialURL
		o.Start = start
		o.Duration = 8 * time.Second
		o.Step = time.Second
	}))
	if err != nil {
		t.Fatalf("partial series: %v", err)
	}
	if !slices.Contains(part.Missing, "queue_time_mean_ns") || slices.Contains(part.Missing, "waiting") || slices.Contains(part.Missing, "prefill_time_mean_ns") {
		t.Errorf("partial series: missing %v, want queue_time_mean_ns and not waiting or prefill_time_mean_ns", part.Missing)
	}
	prefill := false
	for _, s := range part.Samples {
		if s.QueueTimeMeanNs != traces.NotReported {
			t.Fatalf("partial series: queue time %d at %d, want not reported", s.QueueTimeMeanNs, s.TimeNs)
		}
		prefill = prefill || s.PrefillTimeMeanNs > 0
	}
	if !prefill {
		t.Errorf("partial series: no prefill time means, though the histogram is there")
	}

	// Failures are errors that say what failed.
	for _, c := range []struct {
		why  string
		o    Options
		want []string
	}{
		{"a window outside the retention (before this Prometheus existed) names the window and the likely reasons",
			with(DefaultOptions(), func(o *Options) {
				o.URL = promURL
				o.Start = start.Add(-2 * time.Hour)
				o.Duration = time.Minute
				o.Step = time.Second
			}),
			[]string{"no vLLM or SGLang series", start.Add(-2 * time.Hour).UTC().Format(time.RFC3339), "retention"}},
		{"a selector that matches nothing is named",
			with(DefaultOptions(), func(o *Options) {
				o.URL = promURL
				o.Start = start
				o.Duration = 8 * time.Second
				o.Step = time.Second
				o.Selector = `job="nope"`
			}),
			[]string{"no vLLM or SGLang series", `job="nope"`}},
		{"a URL that is not a Prometheus (the simulator) names the server and the query",
			with(DefaultOptions(), func(o *Options) {
				o.URL = srv.URL
				o.Start = start
				o.Duration = 8 * time.Second
				o.Step = time.Second
				o.Retries = 1
				o.Timeout = time.Second
			}),
			[]string{strings.TrimPrefix(srv.URL, "http://"), "query", "not as Prometheus' HTTP API"}},
	} {
		_, err := Fetch(ctx, c.o)
		if err == nil {
			t.Errorf("%s: no error", c.why)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not contain %q", c.why, err, w)
			}
		}
		t.Logf("%s: %v", c.why, err)
	}

	// A Prometheus that went away: the error names it and what failed.
	promtest.Stop(partialURL)
	if _, err := Fetch(ctx, with(DefaultOptions(), func(o *Options) {
		o.URL = partialURL
		o.Start = start
		o.Duration = 8 * time.Second
		o.Step = time.Second
		o.Retries = 1
		o.Timeout = time.Second
	})); err == nil ||
		!strings.Contains(err.Error(), strings.TrimPrefix(partialURL, "http://")) || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("stopped Prometheus: error %v, want one naming %s and the refused connection", err, partialURL)
	} else {
		t.Logf("stopped Prometheus: %v", err)
	}

	// A wrong URL fails with a message naming the server; a token never
	// appears in it.
	tok := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tok, []byte("s3cret-token\n"), 0o600)
	_, err = Fetch(ctx, with(DefaultOptions(), func(o *Options) {
		o.URL = "http://127.0.0.1:1"
		o.Start = start
		o.Duration = time.Minute
		o.BearerTokenFile = tok
		o.Retries = 1
		o.Timeout = time.Second
	}))
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("stopped Prometheus: error %v", err)
	}
}

// TestValidate names the option at fault, in a *traces.OptionError.
func TestValidate(t *testing.T) {
	ok := with(DefaultOptions(), func(o *Options) {
		o.URL = "http://p:9090"
		o.Start = time.Unix(1, 0)
		o.Duration = time.Minute
		o.Step = time.Second
	})
	for _, c := range []struct {
		why    string
		edit   func(o *Options)
		option string
		want   string
	}{
		{"a URL is required", func(o *Options) { o.URL = "" }, "Options.URL", "prom: Options.URL: required"},
		{"credentials in the URL are refused without echoing them", func(o *Options) { o.URL = "http://user:pw@p:9090" }, "Options.URL", "carries credentials"},
		{"a start is required", func(o *Options) { o.Start = time.Time{} }, "Options.Start", "required"},
		{"the step is whole seconds", func(o *Options) { o.Step = 1500 * time.Millisecond }, "Options.Step", "whole seconds"},
		{"too many points are refused", func(o *Options) { o.Duration = 24 * time.Hour }, "Options.Step", "11,000 points"},
		{"a role label that is a Kubernetes pod label, not a series label, is refused", func(o *Options) { o.RoleLabel = "llm-d.ai/role" }, "Options.RoleLabel", `Options.RoleLabel: "llm-d.ai/role" is not a Prometheus label name`},
		{"one label cannot name both a replica and its pool", func(o *Options) { o.InstanceLabel, o.RoleLabel = "pod", "pod" }, "Options.RoleLabel", "also Options.InstanceLabel"},
		{"a zero timeout is a timeout, not the default", func(o *Options) { o.Timeout = 0 }, "Options.Timeout", "want > 0"},
		{"an empty instance label is no label", func(o *Options) { o.InstanceLabel = "" }, "Options.InstanceLabel", "not a Prometheus label name"},
	} {
		o := ok
		c.edit(&o)
		err := o.Validate()
		var oe *traces.OptionError
		if !errors.As(err, &oe) || oe.Option != c.option || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "pw") {
			t.Errorf("%s: %v, want an option error for %s containing %q", c.why, err, c.option, c.want)
		}
	}
	if err := ok.Validate(); err != nil {
		t.Errorf("valid options: %v", err)
	}
}

// sglangExporter serves SGLang's metric names (as its collector exports
// them) on /metrics: gauges fixed, and repeated for two tensor-parallel
// ranks as with --enable-metrics-for-all-schedulers; counters growing with
// time since start, in fixed proportions so the ratios are exact whatever
// the scrape times.
func sglangExporter(t *testing.T) *httptest.Server {
	t.Helper()
	t0 := time.Now()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		s := time.Since(t0).Seconds()
		var b strings.Builder
		gauge := func(name string, v float64) {
			fmt.Fprintf(&b, "# TYPE %s gauge\n", name)
			for _, rank := range []string{"0", "1"} {
				fmt.Fprintf(&b, "%s{model_name=\"m\",engine_type=\"unified\",tp_rank=%q,pp_rank=\"0\"} %g\n", name, rank, v)
			}
		}
		counter := func(name string, v float64) {
			fmt.Fprintf(&b, "# TYPE %s counter\n%s{model_name=\"m\"} %g\n", name, name, v)
		}
		gauge("sglang:num_queue_reqs", 3)
		gauge("sglang:num_running_reqs", 5)
		gauge("sglang:token_usage", 0.25)
		gauge("sglang:cache_hit_rate", 0.9)   // a batch's rate: must not become prefix_hit_rate
		gauge("sglang:num_retracted_reqs", 2) // a batch's count: must not become preemptions
		gauge("sglang:gen_throughput", 1234)  // no column
		counter("sglang:prompt_tokens_total", 100*s)
		counter("sglang:cached_tokens_total", 40*s)
		counter("sglang:generation_tokens_total", 20*s)
		counter("sglang:num_requests_total", 2*s)
		fmt.Fprintf(&b, "# TYPE sglang:queue_time_seconds histogram\n")
		fmt.Fprintf(&b, "sglang:queue_time_seconds_bucket{model_name=\"m\",tp_rank=\"0\",pp_rank=\"0\",le=\"+Inf\"} %g\n", 4*s)
		fmt.Fprintf(&b, "sglang:queue_time_seconds_sum{model_name=\"m\",tp_rank=\"0\",pp_rank=\"0\"} %g\n", 0.5*s)
		fmt.Fprintf(&b, "sglang:queue_time_seconds_count{model_name=\"m\",tp_rank=\"0\",pp_rank=\"0\"} %g\n", 4*s)
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		io.WriteString(w, b.String())
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestFetchSGLangNames has a real Prometheus scrape an exporter that speaks
// SGLang's names and checks each column: the equivalents fill it, the
// gauges of several schedulers of one server are not added up, and the
// columns SGLang has no equivalent for are reported missing and hold
// NotReported, never zero.
func TestFetchSGLangNames(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Prometheus and waits for scrapes (~10 s)")
	}
	ctx := context.Background()
	exp := sglangExporter(t)
	promURL := promtest.Start(t, strings.TrimPrefix(exp.URL, "http://"))
	promtest.WaitScrapes(t, promURL, 3)
	start := time.Now().Truncate(time.Second)
	time.Sleep(6 * time.Second)
	res, err := Fetch(ctx, with(DefaultOptions(), func(o *Options) { o.URL = promURL; o.Start = start; o.Duration = 4 * time.Second; o.Step = time.Second }))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Instances) != 1 {
		t.Errorf("instances %v, want the one exporter", res.Instances)
	}
	pooled := res.Samples[:res.Steps]
	nr := float64(traces.NotReported)
	for _, c := range []struct {
		why     string
		col     string
		get     func(s traces.MetricsSample) float64
		counter bool    // no value at the first step
		want    float64 // exact, or with tol the per-step value within tol
		tol     float64
		missing bool
	}{
		{"the waiting queue is sglang:num_queue_reqs, one scheduler's value though two ranks export it",
			"waiting", func(s traces.MetricsSample) float64 { return float64(s.Waiting) }, false, 3, 0, false},
		{"running requests are sglang:num_running_reqs, not doubled by the second rank",
			"running", func(s traces.MetricsSample) float64 { return float64(s.Running) }, false, 5, 0, false},
		{"KV-cache usage is sglang:token_usage, a fraction",
			"kv_cache_usage", func(s traces.MetricsSample) float64 { return s.KVCacheUsage }, false, 0.25, 1e-9, false},
		{"the prefix hit rate is Δcached_tokens/Δprompt_tokens, not the last batch's cache_hit_rate gauge",
			"prefix_hit_rate", func(s traces.MetricsSample) float64 { return s.PrefixHitRate }, true, 0.4, 1e-6, false},
		{"the queue-time mean is Δsum/Δcount of sglang:queue_time_seconds, in ns",
			"queue_time_mean_ns", func(s traces.MetricsSample) float64 { return float64(s.QueueTimeMeanNs) }, true, 125e6, 1, false},
		{"finished requests are the increase of sglang:num_requests_total (about 2 a second)",
			"requests_finished", func(s traces.MetricsSample) float64 { return float64(s.RequestsFinished) }, true, 2, 1, false},
		{"prompt tokens are the increase of sglang:prompt_tokens_total (about 100 a second)",
			"prompt_tokens", func(s traces.MetricsSample) float64 { return float64(s.PromptTokens) }, true, 100, 30, false},
		{"generation tokens are the increase of sglang:generation_tokens_total (about 20 a second)",
			"generation_tokens", func(s traces.MetricsSample) float64 { return float64(s.GenerationTokens) }, true, 20, 6, false},
		{"preemptions have no SGLang counter (num_retracted_reqs is a gauge), so they are missing, not zero",
			"preemptions", func(s traces.MetricsSample) float64 { return float64(s.Preemptions) }, false, nr, 0, true},
		{"prefill time has no SGLang histogram, so it is missing, not zero",
			"prefill_time_mean_ns", func(s traces.MetricsSample) float64 { return float64(s.PrefillTimeMeanNs) }, false, nr, 0, true},
		{"decode time has no SGLang histogram, so it is missing, not zero",
			"decode_time_mean_ns", func(s traces.MetricsSample) float64 { return float64(s.DecodeTimeMeanNs) }, false, nr, 0, true},
	} {
		if got := slices.Contains(res.Missing, c.col); got != c.missing {
			t.Errorf("%s: %s in Missing %v: %v, want %v", c.why, c.col, res.Missing, got, c.missing)
		}
		for i, s := range pooled {
			v := c.get(s)
			if c.counter && i == 0 {
				if v != nr {
					t.Errorf("%s: step 0 has %v, want not reported (a counter has no increase yet)", c.why, v)
				}
				continue
			}
			if v == nr && !c.missing {
				continue // a gap, counted in res.Gaps
			}
			if math.Abs(v-c.want) > c.tol {
				t.Errorf("%s: step %d has %v, want %v ± %v", c.why, i, v, c.want, c.tol)
			}
		}
	}
	if res.Gaps > 2 {
		t.Errorf("%d gaps in %d steps of a series scraped every second", res.Gaps, res.Steps)
	}
	t.Logf("missing %v, gaps %d, first rows %+v", res.Missing, res.Gaps, pooled[1])
}

// TestFetchFleetRoles has a real Prometheus scrape a simulated
// disaggregated fleet (one prefill and two decode replicas behind one
// endpoint, every series labelled with its pod and role) and reads it per
// replica: each replica's rows carry its role, the decode replicas' KV
// pulls come from vLLM's NIXL histograms, the router's per-replica counts
// add up to the requests each pool served, and the pooled finished
// requests count each request once though the prefill and the decode
// replica both finish it. A role label no series has, an instance label
// no series has, and an instance label that does not tell the replicas
// apart are errors listing the labels the series do have.
func TestFetchFleetRoles(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Prometheus and waits for scrapes (~12 s)")
	}
	ctx := context.Background()
	so := sim.DefaultOptions()
	if err := sim.ApplyConfig(&so, "prefill-replicas=1,decode-replicas=2"); err != nil {
		t.Fatal(err)
	}
	srv, err := sim.Start(ctx, so)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	promURL := promtest.Start(t, strings.TrimPrefix(srv.URL, "http://"))
	promtest.WaitScrapes(t, promURL, 3)
	start := time.Now().Truncate(time.Second)
	const n = 40
	load(t, srv.URL, n, 3*time.Second)
	time.Sleep(5 * time.Second)
	o := with(DefaultOptions(), func(o *Options) {
		o.URL = promURL
		o.Start = start
		o.Duration = 8 * time.Second
		o.Step = time.Second
		o.InstanceLabel = "pod"
		o.RoleLabel = "role"
	})
	res, err := Fetch(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(res.Instances, ","); got != "decode-0,decode-1,prefill-0" {
		t.Fatalf("instances %s, want the three pods", got)
	}
	wantRole := map[string]string{"decode-0": "decode", "decode-1": "decode", "prefill-0": "prefill"}
	if !maps.Equal(res.Roles, wantRole) {
		t.Errorf("roles %v, want %v", res.Roles, wantRole)
	}
	if len(res.NotExported) > 0 || len(res.Missing) > 2 {
		t.Errorf("not exported %v, missing %v: want every fleet column", res.NotExported, res.Missing)
	}
	finished, routed, pulls := 0.0, map[string]int64{}, map[string]int64{}
	pullTime := map[string]bool{}
	for _, s := range res.Samples {
		if s.Instance == "" {
			if s.Role != "" {
				t.Errorf("pooled row at %d has role %q", s.TimeNs, s.Role)
			}
			finished += float64(max(s.RequestsFinished, 0))
			continue
		}
		if s.Role != wantRole[s.Instance] {
			t.Errorf("row of %s has role %q, want %q", s.Instance, s.Role, wantRole[s.Instance])
		}
		routed[s.Instance] += max(s.Routed, 0)
		pulls[s.Instance] += max(s.KVTransfers, 0)
		pullTime[s.Instance] = pullTime[s.Instance] || s.KVTransferTimeMeanNs > 0
	}
	// Each request finishes on the prefill and on the decode replica; the
	// pooled rows count it once.
	if finished < 0.8*n || finished > 1.2*n {
		t.Errorf("requests finished over the window: %.0f, want about %d (each request once)", finished, n)
	}
	if r := routed["prefill-0"]; r < n*8/10 || r > n {
		t.Errorf("routed to prefill-0: %d, want about %d", r, n)
	}
	if r := routed["decode-0"] + routed["decode-1"]; r < n*8/10 || r > n {
		t.Errorf("routed to the decode pool: %d, want about %d", r, n)
	}
	// A decode replica pulls what its own prefix cache lacks (every
	// prompt here is the same): at most one pull per request it served.
	for _, d := range []string{"decode-0", "decode-1"} {
		if pulls[d] <= 0 || pulls[d] > routed[d] || !pullTime[d] {
			t.Errorf("KV pulls of %s: %d (mean time seen: %v), want some and at most the %d requests routed there", d, pulls[d], pullTime[d], routed[d])
		}
	}
	if pulls["prefill-0"] != 0 {
		t.Errorf("the prefill replica pulled KV %d times, want never", pulls["prefill-0"])
	}
	t.Logf("finished %.0f, routed %v, pulls %v, gaps %d, missing %v", finished, routed, pulls, res.Gaps, res.Missing)

	for _, c := range []struct {
		why  string
		edit func(o *Options)
		want []string
	}{
		{"a role label on no series lists the labels and values the series have",
			func(o *Options) { o.RoleLabel = "llm_d_ai_role" },
			[]string{`role label "llm_d_ai_role"`, "is on none", "pod=decode-0, decode-1, prefill-0", "role=decode, prefill", "job=vllm"}},
		{"an instance label on no series is named with the labels the series have",
			func(o *Options) { o.InstanceLabel, o.RoleLabel = "kubernetes_pod_name", "" },
			[]string{`instance label "kubernetes_pod_name"`, "is on none", "pod=decode-0"}},
		{"an instance label under which one instance has two roles does not tell the replicas apart",
			func(o *Options) { o.InstanceLabel = DefaultInstanceLabel },
			[]string{`instance label "instance"`, "does not tell the replicas apart", `has "decode" and "prefill"`, "pod=decode-0"}},
	} {
		bad := o
		c.edit(&bad)
		_, err := Fetch(ctx, bad)
		if !errors.Is(err, ErrLabel) {
			t.Errorf("%s: error %v, want ErrLabel", c.why, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not contain %q", c.why, err, w)
			}
		}
		t.Logf("%s: %v", c.why, err)
	}
}

// TestDividePerRequest: a per-request mean carries the time of a step in
// which no request was counted (a prefill pool's, before its decode pool
// finishes the requests) to the next step that counts some; a ratio such
// as the prefix hit rate does not.
func TestDividePerRequest(t *testing.T) {
	nan := math.NaN()
	for _, c := range []struct {
		why        string
		perRequest bool
		num, den   []float64
		want       []float64
	}{
		{"a per-request mean carries", true, []float64{2, 6, 0.6, nan, 0.5}, []float64{2, 0, 6, nan, 1}, []float64{1, math.Inf(1), 1.1, nan, 0.5}},
		{"a ratio does not", false, []float64{2, 6, 0.6}, []float64{2, 0, 6}, []float64{1, math.Inf(1), 0.1}},
	} {
		num := slices.Clone(c.num)
		divide(num, c.den, c.perRequest)
		for i := range num {
			if !(num[i] == c.want[i] || math.IsNaN(num[i]) && math.IsNaN(c.want[i]) || math.Abs(num[i]-c.want[i]) < 1e-12) {
				t.Errorf("%s: %v, want %v", c.why, num, c.want)
				break
			}
		}
	}
}

// with is o changed by set: tests build options from DefaultOptions.
func with[T any](o T, set func(*T)) T {
	set(&o)
	return o
}
