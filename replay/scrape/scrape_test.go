package scrape

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/sim"
	"github.com/tokentrace/tokentrace/traces"
)

func snapshotFile(t *testing.T, name string, at time.Duration) metricsSnapshot {
	t.Helper()
	f, err := os.Open("testdata/metrics/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := parseMetricsSnapshot(f, (&Scraper{}).labelNames())
	if err != nil {
		t.Fatalf("parseMetricsSnapshot(%s) = %v", name, err)
	}
	s.at = at
	return s
}

// Two scrapes of a two-engine vLLM become one sample: gauges summed (KV
// usage averaged), counters and histograms as deltas over the interval.
func TestMetricsDeltaFixtures(t *testing.T) {
	t0 := snapshotFile(t, "vllm_t0.txt", time.Second)
	t1 := snapshotFile(t, "vllm_t1.txt", 1250*time.Millisecond)

	first := metricsDelta(nil, &t0)
	wantFirst := traces.NewMetricsSample(1e9)
	wantFirst.Waiting, wantFirst.Running, wantFirst.KVCacheUsage = 1, 7, 0.5
	if first != wantFirst {
		t.Errorf("first sample = %+v\nwant %+v", first, wantFirst)
	}

	got := metricsDelta(&t0, &t1)
	want := traces.MetricsSample{
		TimeNs:            1_250_000_000,
		IntervalNs:        250_000_000,
		Waiting:           12,              // 5 + 7
		Running:           16,              // 8 + 8
		KVCacheUsage:      0.95,            // mean of 0.9 and 1.0
		PrefixHitRate:     1750.0 / 3000.0, // Δhits / Δqueries, in tokens
		Preemptions:       4,               // 5 − 1
		QueueTimeMeanNs:   1_000_000_000,   // Δsum 6 s / Δcount 6
		PrefillTimeMeanNs: 150_000_000,     // 0.9 s / 6
		DecodeTimeMeanNs:  2_333_333_333,   // 14 s / 6
		RequestsFinished:  6,               // request_success over all finish reasons
		PromptTokens:      6000,
		GenerationTokens:  600,
		// A fleet's columns: this scrape reads none.
		KVTransferTimeMeanNs: traces.NotReported,
		KVTransfers:          traces.NotReported,
		Routed:               traces.NotReported,
	}
	if math.Abs(got.KVCacheUsage-want.KVCacheUsage) < 1e-12 {
		got.KVCacheUsage = want.KVCacheUsage
	}
	if got != want {
		t.Errorf("sample = %+v\nwant     %+v", got, want)
	}
}

// Pre-0.10 names and histograms without TYPE lines are read; what the
// server does not expose stays NotReported.
func TestMetricsDeltaLegacy(t *testing.T) {
	t0 := snapshotFile(t, "legacy_t0.txt", 0)
	t1 := snapshotFile(t, "legacy_t1.txt", time.Second)
	got := metricsDelta(&t0, &t1)
	want := traces.NewMetricsSample(1e9)
	want.IntervalNs = 1e9
	want.KVCacheUsage = 0.625          // vllm:gpu_cache_usage_perc
	want.RequestsFinished = 4          // e2e histogram count, no request_success
	want.QueueTimeMeanNs = 500_000_000 // untyped _sum/_count: 2 s / 4
	// No prefix-cache queries in the interval: the hit rate is NotReported.
	if got != want {
		t.Errorf("sample = %+v\nwant     %+v", got, want)
	}
	// A counter that goes down is a server restart: the delta is its value.
	restarted := t0
	restarted.queueTime = metricsHisto{count: 2, sum: 0.5, ok: true}
	restarted.at = 2 * time.Second
	if got := metricsDelta(&t1, &restarted); got.QueueTimeMeanNs != 250_000_000 || got.RequestsFinished != 3 {
		t.Errorf("after a restart: queue mean %d, finished %d; want 250ms, 3", got.QueueTimeMeanNs, got.RequestsFinished)
	}
}

// snapshotWith parses a fixture with sc's labels.
func snapshotWith(t *testing.T, sc *Scraper, name string, at time.Duration) metricsSnapshot {
	t.Helper()
	b, err := os.ReadFile("testdata/metrics/" + name)
	if err != nil {
		t.Fatal(err)
	}
	s, err := parseMetricsSnapshot(strings.NewReader(string(b)), sc.labelNames())
	if err != nil {
		t.Fatalf("parseMetricsSnapshot(%s) = %v", name, err)
	}
	s.at = at
	return s
}

// Two scrapes of a prefill/decode fleet's one endpoint: a pooled sample
// that counts each finished request once (the decode pool's finishes; the
// prefill replica finished the same requests first) while its means add
// both pools' time, then one sample per pod with its role, its KV pulls
// and the router's count of requests it was sent.
func TestMetricsFleetFixtures(t *testing.T) {
	sc := &Scraper{}
	t0 := snapshotWith(t, sc, "fleet_pd_t0.txt", time.Second)
	t1 := snapshotWith(t, sc, "fleet_pd_t1.txt", 1250*time.Millisecond)
	got := metricsSamples(&t0, &t1)
	sample := func(instance, role string, f func(s *traces.MetricsSample)) traces.MetricsSample {
		s := traces.NewMetricsSample(1_250_000_000)
		s.IntervalNs, s.Instance, s.Role = 250_000_000, instance, role
		f(&s)
		return s
	}
	want := []traces.MetricsSample{
		sample("", "", func(s *traces.MetricsSample) {
			s.Waiting, s.Running, s.KVCacheUsage = 9, 7, 0.5 // mean of 0.3, 0.5, 0.7
			s.PrefixHitRate = 500.0 / 2000.0
			s.RequestsFinished = 6                                // 3 + 3 on the decode pool; not prefill-0's 6 as well
			s.QueueTimeMeanNs = 1_100_000_000                     // (6 + 0.3 + 0.3) s over the 6 requests
			s.PrefillTimeMeanNs = 210_000_000                     // (1.2 + 0.03 + 0.03) s / 6
			s.DecodeTimeMeanNs = 1_010_000_000                    // (0.06 + 3 + 3) s / 6
			s.PromptTokens, s.GenerationTokens = 6000, 66         // every replica's
			s.KVTransfers, s.KVTransferTimeMeanNs = 6, 25_000_000 // (0.06 + 0.09) s / 6
			s.Routed = 15                                         // 8 + 4 + 3 decisions
		}),
		sample("decode-0", "decode", func(s *traces.MetricsSample) {
			s.Waiting, s.Running, s.KVCacheUsage = 0, 2, 0.5
			s.RequestsFinished, s.QueueTimeMeanNs, s.PrefillTimeMeanNs, s.DecodeTimeMeanNs = 3, 100_000_000, 10_000_000, 1_000_000_000
			s.PromptTokens, s.GenerationTokens = 0, 30
			s.KVTransfers, s.KVTransferTimeMeanNs, s.Routed = 3, 20_000_000, 4
		}),
		sample("decode-1", "decode", func(s *traces.MetricsSample) {
			s.Waiting, s.Running, s.KVCacheUsage = 0, 1, 0.7
			s.RequestsFinished, s.QueueTimeMeanNs, s.PrefillTimeMeanNs, s.DecodeTimeMeanNs = 3, 100_000_000, 10_000_000, 1_000_000_000
			s.PromptTokens, s.GenerationTokens = 0, 30
			s.KVTransfers, s.KVTransferTimeMeanNs, s.Routed = 3, 30_000_000, 3
		}),
		sample("prefill-0", "prefill", func(s *traces.MetricsSample) {
			s.Waiting, s.Running, s.KVCacheUsage = 9, 4, 0.3
			s.PrefixHitRate = 0.25
			s.RequestsFinished, s.QueueTimeMeanNs, s.PrefillTimeMeanNs, s.DecodeTimeMeanNs = 6, 1_000_000_000, 200_000_000, 10_000_000
			s.PromptTokens, s.GenerationTokens, s.Routed = 6000, 6, 8
			// No NIXL series: it pulls nothing.
		}),
	}
	if len(got) != len(want) {
		t.Fatalf("%d samples, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		g := got[i]
		if math.Abs(g.KVCacheUsage-want[i].KVCacheUsage) < 1e-12 {
			g.KVCacheUsage = want[i].KVCacheUsage
		}
		if math.Abs(g.PrefixHitRate-want[i].PrefixHitRate) < 1e-12 {
			g.PrefixHitRate = want[i].PrefixHitRate
		}
		if g != want[i] {
			t.Errorf("sample %d:\n got %+v\nwant %+v", i, g, want[i])
		}
	}
	// The first scrape has gauges per pod already.
	first := metricsSamples(nil, &t0)
	if len(first) != 4 || first[3].Instance != "prefill-0" || first[3].Waiting != 5 || first[3].IntervalNs != 0 || first[3].RequestsFinished != traces.NotReported {
		t.Errorf("first scrape's samples: %+v", first)
	}
}

// Under disaggregation the prefill pool adds its queue time when it
// finishes a request, the decode pool counts the request a scrape or more
// later: the pooled mean of the scrape that counts it carries the time of
// the scrapes before (none is lost), while a replica's own means do not
// carry.
func TestMetricsPooledMeanCarries(t *testing.T) {
	a := metricsSnapshot{at: time.Second}
	a.queueTime = metricsHisto{count: 4, sum: 5.4, ok: true}
	b := a
	b.at = 2 * time.Second
	b.queueTime.sum += 6 // prefill-0 finished 6 requests that waited 1 s
	c := b
	c.at = 3 * time.Second
	c.queueTime.count += 6 // the decode pool finishes them after 0.1 s of queue each
	c.queueTime.sum += 0.6
	if got := metricsDelta(&a, &b).QueueTimeMeanNs; got != traces.NotReported {
		t.Errorf("a scrape with no request finished: queue mean %d, want not reported", got)
	}
	if got := metricsDelta(&b, &c).QueueTimeMeanNs; got != 1_100_000_000 {
		t.Errorf("the scrape that finishes them: queue mean %d ns, want 1.1 s (the 6 s carried and 0.6 s over 6)", got)
	}
	d := c
	d.at = 4 * time.Second
	d.queueTime.count++
	d.queueTime.sum += 0.2
	if got := metricsDelta(&c, &d).QueueTimeMeanNs; got != 200_000_000 {
		t.Errorf("the next scrape: queue mean %d ns, want 0.2 s (nothing left to carry)", got)
	}
}

// Labels that cannot read the fleet per replica leave pooled samples only
// and say why once, listing the labels the series have; other labels
// read other instances.
func TestMetricsFleetLabels(t *testing.T) {
	for _, c := range []struct {
		why          string
		sc           Scraper
		file         string
		wantRows     []string // instances with rows, in order
		wantFinished int64    // pooled
		wantProblem  []string
	}{
		{"a role label no series carries is named with the labels the series have",
			Scraper{RoleLabel: "llm_d_ai_role"}, "fleet_pd", nil, 12,
			[]string{`role label "llm_d_ai_role" (Scraper.RoleLabel) is on none of the 3 series`, "pod=decode-0, decode-1, prefill-0", "role=decode, prefill"}},
		{"an instance label under which one instance has two roles does not tell the replicas apart; the roles still count each request once",
			Scraper{InstanceLabel: "model_name"}, "fleet_pd", nil, 6,
			[]string{`instance label "model_name" (Scraper.InstanceLabel) does not tell the replicas apart`, `m has "prefill" and "decode"`}},
		{"an instance label named that no series carries",
			Scraper{InstanceLabel: "kubernetes_pod_name"}, "vllm", nil, 6,
			[]string{`instance label "kubernetes_pod_name" (Scraper.InstanceLabel) is on none of the 2 series`, "engine=0, 1"}},
		{"one server's series have neither default label: one instance, no warning",
			Scraper{}, "vllm", nil, 6, nil},
		{"a server's engines told apart by their engine label, without roles",
			Scraper{InstanceLabel: "engine"}, "vllm", []string{"0", "1"}, 6, nil},
	} {
		t0 := snapshotWith(t, &c.sc, c.file+"_t0.txt", time.Second)
		t1 := snapshotWith(t, &c.sc, c.file+"_t1.txt", 2*time.Second)
		got := metricsSamples(&t0, &t1)
		var rows []string
		var finished int64
		for _, s := range got[1:] {
			rows = append(rows, s.Instance)
			if s.Role != "" {
				t.Errorf("%s: row of %s has role %q", c.why, s.Instance, s.Role)
			}
			finished += s.RequestsFinished
		}
		if !slices.Equal(rows, c.wantRows) || got[0].RequestsFinished != c.wantFinished {
			t.Errorf("%s: rows %v, pooled finished %d; want %v, %d", c.why, rows, got[0].RequestsFinished, c.wantRows, c.wantFinished)
		}
		if len(rows) > 0 && finished != got[0].RequestsFinished {
			t.Errorf("%s: the instances finished %d, the pooled row %d", c.why, finished, got[0].RequestsFinished)
		}
		if len(c.wantProblem) == 0 && t1.problem != "" {
			t.Errorf("%s: problem %q, want none", c.why, t1.problem)
		}
		for _, w := range c.wantProblem {
			if !strings.Contains(t1.problem, w) {
				t.Errorf("%s: problem %q does not contain %q", c.why, t1.problem, w)
			}
		}
	}
}

// fakeOverload is a /metrics endpoint of an engine in an overload burst:
// each scrape is one step in which 6 requests arrive and 4 finish, so the
// waiting queue grows by 2 per scrape while running stays at its cap. Some
// scrapes fail on purpose.
type fakeOverload struct {
	mu       sync.Mutex
	step     int
	waiting  int
	finished int
	queueSum float64
	failAt   map[int]string // step → "500" or "garbage"
}

func (f *fakeOverload) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.step++
	if f.step > 1 { // the engine moves on whether or not the scrape works
		f.waiting += 2
		f.finished += 4
		// Requests finishing later waited longer: 0.1 s per step.
		f.queueSum += 4 * 0.1 * float64(f.step)
	}
	switch f.failAt[f.step] {
	case "500":
		http.Error(w, "engine busy", http.StatusInternalServerError)
		return
	case "garbage":
		fmt.Fprintln(w, `vllm:num_requests_waiting{model_name="m" 3`)
		return
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	fmt.Fprintf(w, "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} %d\n", f.waiting)
	fmt.Fprintf(w, "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{engine=\"0\",model_name=\"m\"} 8\n")
	fmt.Fprintf(w, "# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc{engine=\"0\",model_name=\"m\"} %g\n", math.Min(1, 0.5+0.05*float64(f.step)))
	fmt.Fprintf(w, "# TYPE vllm:request_success_total counter\nvllm:request_success_total{engine=\"0\",finished_reason=\"length\",model_name=\"m\"} %d\n", f.finished)
	fmt.Fprintf(w, "# TYPE vllm:request_queue_time_seconds histogram\n")
	fmt.Fprintf(w, "vllm:request_queue_time_seconds_bucket{engine=\"0\",le=\"+Inf\",model_name=\"m\"} %d\n", f.finished)
	fmt.Fprintf(w, "vllm:request_queue_time_seconds_count{engine=\"0\",model_name=\"m\"} %d\n", f.finished)
	fmt.Fprintf(w, "vllm:request_queue_time_seconds_sum{engine=\"0\",model_name=\"m\"} %g\n", f.queueSum)
}

// The series shows the waiting queue rising through an overload burst, the
// queueing time of finished requests rising with it, and failed scrapes as
// counted gaps that do not break the deltas.
func TestScraperSeriesRising(t *testing.T) {
	fake := &fakeOverload{failAt: map[int]string{4: "500", 7: "garbage"}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sc := &Scraper{URL: srv.URL + "/metrics", Interval: 5 * time.Millisecond, Timeout: time.Minute}
	var series []traces.MetricsSample
	st, err := sc.Run(ctx, func(s traces.MetricsSample) {
		series = append(series, s)
		if len(series) == 12 {
			cancel()
		}
	})
	if err != nil {
		t.Fatalf("Run = %v", err)
	}
	// 12 scrapes until cancel, plus the final one when ctx ends.
	if len(series) != 13 || st.Scrapes != 13 || st.Failures != 2 {
		t.Fatalf("Run gave %d samples, %+v; want 13 samples, 13 scrapes, 2 failures", len(series), st)
	}
	lastWaiting := int64(-1)
	var lastQueue int64
	for i, s := range series {
		step := i + 1
		if i > 0 && s.TimeNs < series[i-1].TimeNs {
			t.Errorf("sample %d: time_ns %d before the previous %d", i, s.TimeNs, series[i-1].TimeNs)
		}
		if fake.failAt[step] != "" {
			if s.ScrapeError == "" || s.Waiting != traces.NotReported {
				t.Errorf("step %d: failed scrape gave %+v", step, s)
			}
			continue
		}
		if s.ScrapeError != "" {
			t.Fatalf("step %d: unexpected scrape error %q", step, s.ScrapeError)
		}
		if want := int64(2 * (step - 1)); s.Waiting != want {
			t.Errorf("step %d: waiting %d, want %d", step, s.Waiting, want)
		}
		if s.Waiting <= lastWaiting {
			t.Errorf("step %d: waiting %d did not rise from %d", step, s.Waiting, lastWaiting)
		}
		lastWaiting = s.Waiting
		if step == 1 {
			continue // no interval yet
		}
		// A failed scrape in between: the deltas span two steps.
		steps := int64(1)
		if fake.failAt[step-1] != "" {
			steps = 2
		}
		if s.RequestsFinished != 4*steps {
			t.Errorf("step %d: requests finished %d, want %d", step, s.RequestsFinished, 4*steps)
		}
		if s.QueueTimeMeanNs <= lastQueue {
			t.Errorf("step %d: queue time mean %d did not rise from %d", step, s.QueueTimeMeanNs, lastQueue)
		}
		lastQueue = s.QueueTimeMeanNs
		if s.Running != 8 || s.IntervalNs <= 0 || s.PrefixHitRate != traces.NotReported || s.Preemptions != traces.NotReported {
			t.Errorf("step %d: sample %+v", step, s)
		}
	}
	if first, last := series[0].Waiting, series[len(series)-1].Waiting; last-first < 20 {
		t.Errorf("waiting went %d → %d, want a rise of at least 20", first, last)
	}
}

// A server that is down or answers garbage only produces counted failures.
func TestScraperFailures(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "not { prometheus")
	}))
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL + "/metrics"
	dead.Close()
	for _, c := range []struct{ name, url, wantErr string }{
		{"a body that is not the text format", srv.URL, "metrics parse error"},
		{"nobody listening", deadURL, "scrape failed"},
		{"a user:password in the URL never reaches the error", strings.Replace(deadURL, "http://", "http://user:s3cret@", 1), "scrape failed"},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		sc := &Scraper{URL: c.url, Interval: time.Millisecond}
		n := 0
		st, err := sc.Run(ctx, func(s traces.MetricsSample) {
			n++
			if !strings.Contains(s.ScrapeError, c.wantErr) || strings.Contains(s.ScrapeError, "s3cret") {
				t.Errorf("%s: scrape error %q, want %q", c.name, s.ScrapeError, c.wantErr)
			}
			if n == 3 {
				cancel()
			}
		})
		cancel()
		if err != nil || st.Failures != st.Scrapes || st.Scrapes != 4 {
			t.Errorf("%s: Run = %+v, %v; want 4 failed scrapes and no error", c.name, st, err)
		}
	}
	srv.Close()
	if _, _, err := (&Scraper{}).Collect(context.Background()); err == nil {
		t.Errorf("Collect without a URL = nil error")
	}
}

// Collect gathers the series, and Start sets the time origin.
func TestScraperCollect(t *testing.T) {
	fake := &fakeOverload{}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	start := time.Now().Add(-time.Hour)
	got, st, err := (&Scraper{URL: srv.URL, Interval: 5 * time.Millisecond, Timeout: time.Minute, Start: start}).Collect(ctx)
	if err != nil || len(got) < 2 || int64(len(got)) != st.Scrapes || st.Failures != 0 {
		t.Fatalf("Collect = %d samples, %+v, %v", len(got), st, err)
	}
	if got[0].TimeNs < time.Hour.Nanoseconds() {
		t.Errorf("first time_ns %d, want at least an hour after Start", got[0].TimeNs)
	}
}

func FuzzParseMetrics(f *testing.F) {
	for _, name := range []string{"vllm_t0.txt", "legacy_t1.txt", "garbage.txt", "fleet_pd_t1.txt"} {
		b, err := os.ReadFile("testdata/metrics/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := parseMetricsSnapshot(strings.NewReader(string(b)), (&Scraper{}).labelNames())
		if err != nil {
			return
		}
		prev := s
		metricsSamples(&prev, &s) // must not panic
	})
}

// scrapeWhile scrapes url every 20 ms while load runs, from a first sample
// (a baseline before the load) to when load returns, and returns the series
// and the scraper's stats.
func scrapeWhile(ctx context.Context, url string, load func()) ([]traces.MetricsSample, Stats) {
	sctx, stopScrape := context.WithCancel(ctx)
	defer stopScrape()
	var series []traces.MetricsSample
	scraped := make(chan struct{}, 1)
	done := make(chan Stats)
	go func() {
		// A generous timeout: on a loaded machine a slow scrape only delays
		// the next one.
		sc := &Scraper{URL: url, Interval: 20 * time.Millisecond, Timeout: time.Minute}
		st, _ := sc.Run(sctx, func(s traces.MetricsSample) {
			series = append(series, s)
			select {
			case scraped <- struct{}{}:
			default:
			}
		})
		done <- st
	}()
	<-scraped
	load()
	stopScrape()
	return series, <-done
}

// The simulator in an overload burst: 24 requests at once on an engine that
// runs 4 at a time. The scraped series shows the waiting queue jump and
// drain, running at its cap, and every finished request counted once.
func TestScraperSimOverload(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o := sim.DefaultOptions()
	o.MaxNumSeqs = 4
	o.StepFixed = 2 * time.Millisecond
	srv, err := sim.Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()

	const n = 24
	errs := make(chan error, n)
	series, st := scrapeWhile(ctx, srv.URL+"/metrics", func() {
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				prompt := make([]string, 64)
				for j := range prompt {
					prompt[j] = fmt.Sprint(1000 + 64*i + j)
				}
				body := fmt.Sprintf(`{"model":%q,"prompt":[%s],"max_tokens":24,"ignore_eos":true}`, o.Model, strings.Join(prompt, ","))
				resp, err := http.Post(srv.URL+"/v1/completions", "application/json", strings.NewReader(body))
				if err != nil {
					errs <- err
					return
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					errs <- fmt.Errorf("status %d", resp.StatusCode)
				}
			})
		}
		wg.Wait()
		close(errs)
	})
	for err := range errs {
		t.Fatalf("request: %v", err)
	}
	if st.Failures != 0 {
		t.Errorf("scrapes: %+v, want no failures", st)
	}
	if len(series) < 3 {
		t.Fatalf("only %d samples", len(series))
	}
	peak, finished := int64(0), int64(0)
	for i, s := range series {
		peak = max(peak, s.Waiting)
		if s.Running > 4 {
			t.Errorf("sample %d: running %d over max-num-seqs 4", i, s.Running)
		}
		if i > 0 && s.ScrapeError == "" {
			finished += s.RequestsFinished // deltas span failed scrapes
		}
	}
	first, last := series[0], series[len(series)-1]
	if first.ScrapeError != "" || last.ScrapeError != "" {
		t.Fatalf("first or last scrape failed: %q, %q", first.ScrapeError, last.ScrapeError)
	}
	var ws []int64
	for _, s := range series {
		ws = append(ws, s.Waiting)
	}
	t.Logf("waiting per %v scrape: %v", 20*time.Millisecond, ws)
	if first.Waiting != 0 || peak < 12 || last.Waiting != 0 || last.Running != 0 {
		t.Errorf("waiting: first %d, peak %d, last %d (running %d); want 0, ≥ 12, 0 (0)", first.Waiting, peak, last.Waiting, last.Running)
	}
	if finished != n {
		t.Errorf("requests finished over the series = %d, want %d", finished, n)
	}
	// FCFS: the requests that finish later waited longer.
	var means []int64
	for _, s := range series {
		if s.QueueTimeMeanNs > 0 {
			means = append(means, s.QueueTimeMeanNs)
		}
	}
	if len(means) < 2 || means[len(means)-1] <= means[0] {
		t.Errorf("queue time means over the run = %v, want rising", means)
	}
	// The simulator's own lateness over the run, as the simulator counts
	// it: every step fell between the first scrape and the last.
	want := srv.Lateness()
	got := st.SimLateness
	if got == nil || got.Steps != want.Steps || math.Abs(got.ModelS-want.ModelS) > 1e-9 || math.Abs(got.LateS-want.LateS) > 1e-6 ||
		got.StepP99Ms > got.StepMaxMs || got.StepMaxMs < want.StepMaxMs {
		t.Errorf("scraped simulator lateness %+v; the simulator's %+v", got, want)
	}
}

// A prefill/decode fleet in process, scraped through its one /metrics
// while 24 requests go through it: each scrape has a row per pod with its
// role; over the series the pooled rows count every request once, the
// prefill pod finished each, the decode pods between them each, the
// router's counts say the same, and only the decode pods pulled KV.
func TestScraperSimFleet(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o := sim.DefaultOptions()
	if err := sim.ApplyConfig(&o, "prefill-replicas=1,decode-replicas=2"); err != nil {
		t.Fatal(err)
	}
	srv, err := sim.Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	const n = 24
	series, st := scrapeWhile(ctx, srv.URL+"/metrics", func() {
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				body := fmt.Sprintf(`{"model":%q,"prompt":"request %d of the fleet test","max_tokens":8,"ignore_eos":true}`, o.Model, i)
				resp, err := http.Post(srv.URL+"/v1/completions", "application/json", strings.NewReader(body))
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Errorf("status %d", resp.StatusCode)
				}
			})
		}
		wg.Wait()
	})
	if st.Failures != 0 || st.Instances != 3 || len(st.Warnings) > 0 {
		t.Errorf("scrapes: %+v, want no failures, 3 instances, no warnings", st)
	}
	wantRole := map[string]string{"prefill-0": "prefill", "decode-0": "decode", "decode-1": "decode"}
	finished, routed, pulls := map[string]int64{}, map[string]int64{}, map[string]int64{}
	for _, s := range series {
		if s.ScrapeError != "" {
			continue
		}
		if r, ok := wantRole[s.Instance]; (ok || s.Instance != "") && s.Role != r {
			t.Errorf("row of %q has role %q, want %q", s.Instance, s.Role, r)
		}
		finished[s.Instance] += max(s.RequestsFinished, 0)
		routed[s.Instance] += max(s.Routed, 0)
		pulls[s.Instance] += max(s.KVTransfers, 0)
	}
	t.Logf("%d samples; finished %v, routed %v, KV pulls %v", len(series), finished, routed, pulls)
	if finished[""] != n || finished["prefill-0"] != n || finished["decode-0"]+finished["decode-1"] != n {
		t.Errorf("finished %v: want %d pooled (each request once), %d on prefill-0 and on the decode pool", finished, n, n)
	}
	if routed["prefill-0"] != n || routed["decode-0"]+routed["decode-1"] != n {
		t.Errorf("routed %v: want %d to prefill-0 and to the decode pool", routed, n)
	}
	if pulls["prefill-0"] != 0 || pulls["decode-0"] == 0 || pulls["decode-1"] == 0 || pulls[""] != pulls["decode-0"]+pulls["decode-1"] {
		t.Errorf("KV pulls %v: want some on each decode pod, none on prefill-0, the pooled row their sum", pulls)
	}
}

// A scraper told a role label the endpoint's series do not carry says so
// once, however many scrapes, with the labels they have, and records it
// in the metadata; its samples are the pooled ones.
func TestScraperWarnsOnce(t *testing.T) {
	body, err := os.ReadFile("testdata/metrics/fleet_pd_t1.txt")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(body) }))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	sc := &Scraper{URL: srv.URL, Interval: time.Millisecond, RoleLabel: "llm_d_ai_role"}
	n := 0
	st, err := sc.Run(ctx, func(s traces.MetricsSample) {
		if s.Instance != "" {
			t.Errorf("a row of instance %q", s.Instance)
		}
		if n++; n == 4 {
			cancel()
		}
	})
	cancel()
	if err != nil || st.Scrapes < 4 || st.Instances != 0 || len(st.Warnings) != 1 || !strings.Contains(st.Warnings[0], `role label "llm_d_ai_role" (Scraper.RoleLabel) is on none`) {
		t.Fatalf("Run = %+v, %v; want one warning naming the role label, no instances", st, err)
	}
	m := traces.NewMeta("replay")
	st.Annotate(&m, sc)
	if got := m.Get(MetaMetricsWarnings); got != st.Warnings[0] || m.Get(MetaMetricsInstances) != "" {
		t.Errorf("metadata: warnings %q, instances %q", got, m.Get(MetaMetricsInstances))
	}
}

// Annotate never writes credentials or query tokens into the metadata.
func TestScrapeAnnotate(t *testing.T) {
	m := traces.NewMeta("replay")
	sc := &Scraper{URL: "http://user:s3cret@127.0.0.1:8000/metrics?token=abc"}
	Stats{Scrapes: 5, Failures: 1}.Annotate(&m, sc)
	if m.Get(MetaMetricsURL) != "http://127.0.0.1:8000/metrics" || m.Get(MetaMetricsInterval) != "250ms" ||
		m.Get(MetaMetricsScrapes) != "5" || m.Get(MetaMetricsFailures) != "1" {
		t.Errorf("Annotate = %v", m.Extra)
	}
}

// BenchmarkParseMetrics measures parsing one two-engine vLLM /metrics page.
func BenchmarkParseMetrics(b *testing.B) {
	body, err := os.ReadFile("testdata/metrics/vllm_t1.txt")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := parseMetricsSnapshot(strings.NewReader(string(body)), (&Scraper{}).labelNames()); err != nil {
			b.Fatal(err)
		}
	}
}
