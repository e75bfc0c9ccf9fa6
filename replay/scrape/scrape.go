// Package scrape polls a vLLM server's Prometheus /metrics endpoint during a
// replay and turns consecutive scrapes into the metrics series
// (traces.MetricsSample: gauges at the scrape, deltas of counters and
// histogram means over the interval) that analyze joins with the results.
package scrape

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/tokentrace/tokentrace/traces"
)

// DefaultInterval is the default scrape interval.
const DefaultInterval = 250 * time.Millisecond

// DefaultMetricsMaxBody bounds one /metrics response.
const DefaultMetricsMaxBody = 64 << 20

// vLLM metric names (vllm/v1/metrics/loggers.py). Each list is tried in
// order; counters are also tried with the "_total" suffix the Python client
// exposes them with. Later entries are the names before vLLM 0.9/0.10.
var (
	metricsWaiting       = []string{"vllm:num_requests_waiting"}
	metricsRunning       = []string{"vllm:num_requests_running"}
	metricsKVUsage       = []string{"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"}
	metricsPrefixQueries = []string{"vllm:prefix_cache_queries", "vllm:gpu_prefix_cache_queries"}
	metricsPrefixHits    = []string{"vllm:prefix_cache_hits", "vllm:gpu_prefix_cache_hits"}
	metricsPreemptions   = []string{"vllm:num_preemptions"}
	metricsSuccess       = []string{"vllm:request_success"}
	metricsPromptTokens  = []string{"vllm:prompt_tokens"}
	metricsGenTokens     = []string{"vllm:generation_tokens"}
	metricsQueueTime     = []string{"vllm:request_queue_time_seconds"}
	metricsPrefillTime   = []string{"vllm:request_prefill_time_seconds"}
	metricsDecodeTime    = []string{"vllm:request_decode_time_seconds"}
	metricsE2ETime       = []string{"vllm:e2e_request_latency_seconds"}
)

// Scraper samples a Prometheus /metrics endpoint (vLLM metric names) at a
// fixed interval and turns each pair of consecutive scrapes into a
// traces.MetricsSample. Scrape failures become samples with ScrapeError set
// and are counted, never fatal.
type Scraper struct {
	// URL is the metrics endpoint, e.g. http://127.0.0.1:8000/metrics.
	// Required.
	URL string
	// Interval is the time between scrapes. Defaults to
	// DefaultInterval.
	Interval time.Duration
	// Start is the run start that TimeNs offsets count from. Defaults to the
	// time Run is called.
	Start time.Time
	// Client does the requests. Defaults to http.DefaultClient.
	Client *http.Client
	// Timeout bounds one scrape. Defaults to max(Interval, 1s).
	Timeout time.Duration
	// MaxBody bounds one response. Defaults to DefaultMetricsMaxBody.
	MaxBody int64
}

// Stats counts a Scraper's scrapes.
type Stats struct {
	// Scrapes is the number of scrapes attempted.
	Scrapes int64
	// Failures is the number of scrapes that failed (transport error, non-2xx
	// status, unparsable body).
	Failures int64
}

// Metadata keys Stats.Annotate sets in Meta.Extra.
const (
	MetaMetricsURL      = "replay.metrics_url"
	MetaMetricsInterval = "replay.metrics_interval"
	MetaMetricsScrapes  = "replay.metrics_scrapes"
	MetaMetricsFailures = "replay.metrics_failures"
)

// Annotate records the scraper's URL (without credentials), interval and
// counters in m.
func (st Stats) Annotate(m *traces.Meta, s *Scraper) {
	if u, err := url.Parse(s.URL); err == nil {
		u.User = nil
		u.RawQuery = ""
		m.Set(MetaMetricsURL, u.String())
	}
	interval := s.Interval
	if interval <= 0 {
		interval = DefaultInterval
	}
	m.Set(MetaMetricsInterval, interval.String())
	m.Set(MetaMetricsScrapes, strconv.FormatInt(st.Scrapes, 10))
	m.Set(MetaMetricsFailures, strconv.FormatInt(st.Failures, 10))
}

// Run scrapes immediately, then every Interval, and once more when ctx
// ends (so the series covers the end of the run), calling out with one
// sample per scrape. It returns when ctx is done; the error is non-nil only
// for an unusable configuration.
func (s *Scraper) Run(ctx context.Context, out func(traces.MetricsSample)) (Stats, error) {
	var st Stats
	if s.URL == "" {
		return st, errors.New("scrape metrics: no URL")
	}
	interval := s.Interval
	if interval <= 0 {
		interval = DefaultInterval
	}
	start := s.Start
	if start.IsZero() {
		start = time.Now()
	}
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = max(interval, time.Second)
	}
	var prev *metricsSnapshot
	scrape := func() {
		st.Scrapes++
		at := time.Since(start)
		// A scrape in flight when ctx ends is finished, not failed: each is
		// bounded by its own timeout instead.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		cur, err := s.scrapeOnce(sctx)
		cancel()
		if err != nil {
			st.Failures++
			smp := traces.NewMetricsSample(at.Nanoseconds())
			smp.ScrapeError = err.Error()
			out(smp)
			return
		}
		cur.at = at
		out(metricsDelta(prev, cur))
		prev = &cur
	}
	scrape()
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		if ctx.Err() == nil {
			select {
			case <-ctx.Done():
			case <-ticker.C:
				if ctx.Err() == nil {
					scrape()
				}
				continue
			}
		}
		scrape()
		return st, nil
	}
}

// Collect is Run gathering the samples into a slice.
func (s *Scraper) Collect(ctx context.Context) ([]traces.MetricsSample, Stats, error) {
	var out []traces.MetricsSample
	st, err := s.Run(ctx, func(m traces.MetricsSample) { out = append(out, m) })
	return out, st, err
}

func (s *Scraper) scrapeOnce(ctx context.Context) (metricsSnapshot, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL, nil)
	if err != nil {
		return metricsSnapshot{}, errors.New("bad metrics URL")
	}
	// Ask for the classic text format, the one TextParser reads.
	req.Header.Set("Accept", "text/plain;version=0.0.4;q=1,*/*;q=0.1")
	client := s.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return metricsSnapshot{}, errors.New("scrape timed out")
		}
		var ue interface{ Unwrap() error }
		if errors.As(err, &ue) && ue.Unwrap() != nil {
			err = ue.Unwrap() // drop the URL, which may carry credentials
		}
		return metricsSnapshot{}, fmt.Errorf("scrape failed: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return metricsSnapshot{}, fmt.Errorf("scrape status %d", resp.StatusCode)
	}
	maxBody := s.MaxBody
	if maxBody <= 0 {
		maxBody = DefaultMetricsMaxBody
	}
	snap, err := parseMetricsSnapshot(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return snap, err
	}
	return snap, nil
}

// metricsValue is a sum over label sets; ok says the metric was exposed.
type metricsValue struct {
	v  float64
	n  int // label sets summed
	ok bool
}

type metricsHisto struct {
	count, sum float64
	ok         bool
}

// metricsSnapshot is what one scrape said, summed over label sets.
type metricsSnapshot struct {
	at                                      time.Duration
	waiting, running, kvUsage               metricsValue
	prefixQueries, prefixHits               metricsValue
	preemptions, success, prompt, gen       metricsValue
	queueTime, prefillTime, decodeTime, e2e metricsHisto
}

// parseMetricsSnapshot parses the Prometheus text format with the
// Prometheus project's own parser and extracts vLLM's metrics.
func parseMetricsSnapshot(r io.Reader) (metricsSnapshot, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		msg := err.Error()
		if len(msg) > 160 {
			msg = msg[:160] + "…"
		}
		return metricsSnapshot{}, fmt.Errorf("metrics parse error: %s", msg)
	}
	return metricsSnapshot{
		waiting:       metricsSum(fams, metricsWaiting, false),
		running:       metricsSum(fams, metricsRunning, false),
		kvUsage:       metricsSum(fams, metricsKVUsage, false),
		prefixQueries: metricsSum(fams, metricsPrefixQueries, true),
		prefixHits:    metricsSum(fams, metricsPrefixHits, true),
		preemptions:   metricsSum(fams, metricsPreemptions, true),
		success:       metricsSum(fams, metricsSuccess, true),
		prompt:        metricsSum(fams, metricsPromptTokens, true),
		gen:           metricsSum(fams, metricsGenTokens, true),
		queueTime:     metricsHistoSum(fams, metricsQueueTime),
		prefillTime:   metricsHistoSum(fams, metricsPrefillTime),
		decodeTime:    metricsHistoSum(fams, metricsDecodeTime),
		e2e:           metricsHistoSum(fams, metricsE2ETime),
	}, nil
}

// metricsSum sums the first of names that is exposed (counters also as
// name_total), over all its label sets.
func metricsSum(fams map[string]*dto.MetricFamily, names []string, counter bool) metricsValue {
	for _, name := range names {
		cands := []string{name}
		if counter {
			cands = []string{name + "_total", name}
		}
		for _, c := range cands {
			mf, ok := fams[c]
			if !ok {
				continue
			}
			var v metricsValue
			for _, m := range mf.GetMetric() {
				x, ok := metricsScalar(m)
				if !ok || math.IsNaN(x) || math.IsInf(x, 0) {
					continue
				}
				v.v += x
				v.n++
				v.ok = true
			}
			if v.ok {
				return v
			}
		}
	}
	return metricsValue{}
}

func metricsScalar(m *dto.Metric) (float64, bool) {
	switch {
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue(), true
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue(), true
	case m.GetUntyped() != nil:
		return m.GetUntyped().GetValue(), true
	}
	return 0, false
}

// metricsHistoSum sums a histogram's count and sum over its label sets; a
// histogram exposed without a TYPE line arrives as untyped name_count and
// name_sum families, which are read too.
func metricsHistoSum(fams map[string]*dto.MetricFamily, names []string) metricsHisto {
	for _, name := range names {
		var h metricsHisto
		if mf, ok := fams[name]; ok {
			for _, m := range mf.GetMetric() {
				if hg := m.GetHistogram(); hg != nil {
					h.count += float64(hg.GetSampleCount())
					if hg.GetSampleCountFloat() > 0 {
						h.count += hg.GetSampleCountFloat()
					}
					h.sum += hg.GetSampleSum()
					h.ok = true
				}
			}
		}
		if !h.ok {
			c := metricsSum(fams, []string{name + "_count"}, false)
			s := metricsSum(fams, []string{name + "_sum"}, false)
			if c.ok && s.ok {
				h = metricsHisto{count: c.v, sum: s.v, ok: true}
			}
		}
		if h.ok && !math.IsNaN(h.sum) && !math.IsInf(h.sum, 0) {
			return h
		}
	}
	return metricsHisto{}
}

// metricsCounterDelta is cur − prev for a counter, reading a decrease as a
// reset (the server restarted): the delta is then cur.
func metricsCounterDelta(prev, cur float64) float64 {
	if cur < prev {
		return cur
	}
	return cur - prev
}

// metricsDelta turns a scrape (and the previous successful one, nil for the
// first) into a sample: gauges from cur, deltas over the interval.
func metricsDelta(prev *metricsSnapshot, cur metricsSnapshot) traces.MetricsSample {
	s := traces.NewMetricsSample(cur.at.Nanoseconds())
	round := func(f float64) int64 {
		if math.IsNaN(f) || math.Abs(f) > 9e18 {
			return traces.NotReported
		}
		return int64(math.Round(f))
	}
	if cur.waiting.ok {
		s.Waiting = round(cur.waiting.v)
	}
	if cur.running.ok {
		s.Running = round(cur.running.v)
	}
	if cur.kvUsage.ok {
		s.KVCacheUsage = cur.kvUsage.v / float64(cur.kvUsage.n)
	}
	if prev == nil {
		return s
	}
	s.IntervalNs = (cur.at - prev.at).Nanoseconds()
	delta := func(p, c metricsValue) (float64, bool) {
		if !p.ok || !c.ok {
			return 0, false
		}
		return metricsCounterDelta(p.v, c.v), true
	}
	if dq, ok := delta(prev.prefixQueries, cur.prefixQueries); ok && dq > 0 {
		if dh, ok := delta(prev.prefixHits, cur.prefixHits); ok {
			s.PrefixHitRate = math.Min(1, dh/dq)
		}
	}
	if d, ok := delta(prev.preemptions, cur.preemptions); ok {
		s.Preemptions = round(d)
	}
	if d, ok := delta(prev.prompt, cur.prompt); ok {
		s.PromptTokens = round(d)
	}
	if d, ok := delta(prev.gen, cur.gen); ok {
		s.GenerationTokens = round(d)
	}
	if d, ok := delta(prev.success, cur.success); ok {
		s.RequestsFinished = round(d)
	} else if prev.e2e.ok && cur.e2e.ok {
		s.RequestsFinished = round(metricsCounterDelta(prev.e2e.count, cur.e2e.count))
	}
	mean := func(p, c metricsHisto) int64 {
		if !p.ok || !c.ok {
			return traces.NotReported
		}
		dc, ds := c.count-p.count, c.sum-p.sum
		if dc < 0 { // reset
			dc, ds = c.count, c.sum
		}
		if dc <= 0 || ds < 0 {
			return traces.NotReported
		}
		return round(ds / dc * 1e9)
	}
	s.QueueTimeMeanNs = mean(prev.queueTime, cur.queueTime)
	s.PrefillTimeMeanNs = mean(prev.prefillTime, cur.prefillTime)
	s.DecodeTimeMeanNs = mean(prev.decodeTime, cur.decodeTime)
	return s
}
