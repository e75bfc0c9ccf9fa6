// Package scrape polls a vLLM server's Prometheus /metrics endpoint during a
// replay and turns consecutive scrapes into the metrics series
// (traces.MetricsSample: gauges at the scrape, deltas of counters and
// histogram means over the interval) that analyze joins with the results.
//
// An endpoint that serves a fleet's replicas (tokentrace sim's fleet, whose
// series carry pod and role labels, or a Prometheus federation endpoint)
// is read per replica the way postmortem reads a fleet from Prometheus
// (internal/fleetseries): each scrape gives the pooled sample, then one
// per replica with its role, its KV transfers and the router's count of
// requests sent to it; under prefill/decode disaggregation the pooled
// sample counts each finished request once.
package scrape

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/tokentrace/tokentrace/internal/fleetseries"
	"github.com/tokentrace/tokentrace/traces"
)

// DefaultInterval is the default scrape interval.
const DefaultInterval = 250 * time.Millisecond

// DefaultMetricsMaxBody bounds one /metrics response.
const DefaultMetricsMaxBody = 64 << 20

// Defaults of Scraper.InstanceLabel and Scraper.RoleLabel: tokentrace
// sim's labels, which a fleet's series carry on its one endpoint. One
// vLLM server's own /metrics has neither, and is read as one instance.
const (
	DefaultInstanceLabel = "pod"
	DefaultRoleLabel     = "role"
)

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
	metricsKVTransfer    = []string{fleetseries.NIXLTransferTime}
	metricsRouted        = []string{fleetseries.RouterDecisions}
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
	// InstanceLabel is the label that tells a fleet's replicas apart on
	// the endpoint's series. Defaults to DefaultInstanceLabel ("pod");
	// series without it are read as one server's, and a label named here
	// that no series carries is a warning (Stats.Warnings) listing the
	// labels they have.
	InstanceLabel string
	// RoleLabel is the label holding each replica's role (its pool:
	// prefill, decode). Defaults to DefaultRoleLabel ("role"), with the
	// same rules as InstanceLabel.
	RoleLabel string
	// InstanceLabelOption and RoleLabelOption are what warnings call the
	// two options above (default "Scraper.InstanceLabel" and
	// "Scraper.RoleLabel"), so a program that sets them some other way (the
	// CLI, by flags) has them said in its own terms.
	InstanceLabelOption, RoleLabelOption string

	// baseline is Prime's scrape, the first delta's start (nil: none);
	// baselineWall is when it was taken.
	baseline     *metricsSnapshot
	baselineWall time.Time
}

// Prime scrapes once before Run, as a baseline the first scrape's deltas
// are taken from: without it they start at Run's first scrape, which runs
// beside the run's first requests and misses what finished before it (a
// prefill replica's first requests, on a fast server). A failed scrape
// leaves no baseline and is returned.
func (s *Scraper) Prime(ctx context.Context) error {
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = max(s.Interval, time.Second)
	}
	sctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cur, err := s.scrapeOnce(sctx, s.labelNames())
	if err != nil {
		return err
	}
	s.baseline, s.baselineWall = &cur, time.Now()
	return nil
}

// Stats counts a Scraper's scrapes.
type Stats struct {
	// Scrapes is the number of scrapes attempted.
	Scrapes int64
	// Failures is the number of scrapes that failed (transport error, non-2xx
	// status, unparsable body).
	Failures int64
	// Instances is the most replicas a scrape read rows for (0: the
	// endpoint was read as one server).
	Instances int
	// Warnings say, once each, why a scrape's series could not be read
	// per replica (a label named that no series carries, or one that
	// does not tell the replicas apart); those scrapes have pooled rows
	// only.
	Warnings []string
	// SimLateness is how far a tokentrace sim's engine steps ran behind
	// wall-clock time between the first and the last scrape (nil when
	// the endpoint is not a real-time simulator).
	SimLateness *traces.SimLateness
}

// Metadata keys Stats.Annotate sets in Meta.Extra.
const (
	MetaMetricsURL      = "replay.metrics_url"
	MetaMetricsInterval = "replay.metrics_interval"
	MetaMetricsScrapes  = "replay.metrics_scrapes"
	MetaMetricsFailures = "replay.metrics_failures"
	// MetaMetricsInstances is set when the series has rows per replica.
	MetaMetricsInstances = "replay.metrics_instances"
	// MetaMetricsWarnings holds Stats.Warnings, joined by "; ".
	MetaMetricsWarnings = "replay.metrics_warnings"
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
	if st.Instances > 0 {
		m.Set(MetaMetricsInstances, strconv.Itoa(st.Instances))
	}
	if len(st.Warnings) > 0 {
		m.Set(MetaMetricsWarnings, strings.Join(st.Warnings, "; "))
	}
	if st.SimLateness != nil {
		st.SimLateness.Set(m)
	}
}

// Run scrapes immediately, then every Interval, and once more when ctx
// ends (so the series covers the end of the run), calling out with each
// scrape's samples: the pooled one, then (for a fleet) one per replica.
// It returns when ctx is done; the error is non-nil only for an unusable
// configuration.
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
	names := s.labelNames()
	var prev *metricsSnapshot
	if s.baseline != nil {
		prev = s.baseline
		prev.at = s.baselineWall.Sub(start) // before the run's zero
	}
	var firstLate simLate
	scrape := func() {
		st.Scrapes++
		at := time.Since(start)
		// A scrape in flight when ctx ends is finished, not failed: each is
		// bounded by its own timeout instead.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		cur, err := s.scrapeOnce(sctx, names)
		cancel()
		if err != nil {
			st.Failures++
			smp := traces.NewMetricsSample(at.Nanoseconds())
			smp.ScrapeError = err.Error()
			out(smp)
			return
		}
		cur.at = at
		if cur.problem != "" && !slices.Contains(st.Warnings, cur.problem) {
			st.Warnings = append(st.Warnings, cur.problem)
		}
		st.Instances = max(st.Instances, len(cur.instances))
		for _, smp := range metricsSamples(prev, &cur) {
			out(smp)
		}
		if prev == nil {
			firstLate = cur.late
		}
		st.SimLateness = simLateness(firstLate, cur.late) // simlateness.go
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

// labelNames are the labels a fleet's series are read by, with their
// defaults.
func (s *Scraper) labelNames() fleetseries.Names {
	n := fleetseries.Names{
		Instance: s.InstanceLabel, InstanceOption: cmp.Or(s.InstanceLabelOption, "Scraper.InstanceLabel"),
		Role: s.RoleLabel, RoleOption: cmp.Or(s.RoleLabelOption, "Scraper.RoleLabel"),
	}
	if n.Instance == "" {
		n.Instance, n.InstanceOptional = DefaultInstanceLabel, true
	}
	if n.Role == "" {
		n.Role, n.RoleOptional = DefaultRoleLabel, true
	}
	return n
}

func (s *Scraper) scrapeOnce(ctx context.Context, names fleetseries.Names) (metricsSnapshot, error) {
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
	snap, err := parseMetricsSnapshot(io.LimitReader(resp.Body, maxBody), names)
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

func (v *metricsValue) add(x float64) {
	v.v += x
	v.n++
	v.ok = true
}

type metricsHisto struct {
	count, sum float64
	ok         bool
}

// seriesValues is what one scrape said of one instance, or of the whole
// endpoint (its pooled values), summed over label sets.
type seriesValues struct {
	waiting, running, kvUsage                       metricsValue
	prefixQueries, prefixHits                       metricsValue
	preemptions, success, prompt, gen, routed       metricsValue
	queueTime, prefillTime, decodeTime, e2e, kvXfer metricsHisto
}

// metricsSnapshot is what one scrape said: the pooled values (embedded)
// and, for a fleet, each instance's with its role.
type metricsSnapshot struct {
	at time.Duration
	seriesValues
	// instances are the instances with rows of their own, sorted (none
	// for one server), roles their roles, by their values.
	instances []string
	roles     map[string]string
	by        map[string]*seriesValues
	// problem says why the labels could not be read per instance ("" when
	// they could, or when the default labels are simply absent).
	problem string
	// carry is what the pooled queue, prefill and decode means carry
	// past this scrape (fleetseries.MeanCarry), set by metricsDelta.
	carry [3]fleetseries.MeanCarry
	// late is a simulator's step lateness (simlateness.go).
	late simLate
}

// parseMetricsSnapshot parses the Prometheus text format with the
// Prometheus project's own parser and extracts vLLM's metrics, pooled and
// (with instances told apart by names.Instance) per instance.
func parseMetricsSnapshot(r io.Reader, names fleetseries.Names) (metricsSnapshot, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		msg := err.Error()
		if len(msg) > 160 {
			msg = msg[:160] + "…"
		}
		return metricsSnapshot{}, fmt.Errorf("metrics parse error: %s", msg)
	}
	rd := reader{fams: fams, names: names}
	rd.catalog()
	s := &rd.snap
	rd.scalar(metricsWaiting, false, false, func(v *seriesValues) *metricsValue { return &v.waiting })
	rd.scalar(metricsRunning, false, false, func(v *seriesValues) *metricsValue { return &v.running })
	rd.scalar(metricsKVUsage, false, false, func(v *seriesValues) *metricsValue { return &v.kvUsage })
	rd.scalar(metricsPrefixQueries, true, false, func(v *seriesValues) *metricsValue { return &v.prefixQueries })
	rd.scalar(metricsPrefixHits, true, false, func(v *seriesValues) *metricsValue { return &v.prefixHits })
	rd.scalar(metricsPreemptions, true, false, func(v *seriesValues) *metricsValue { return &v.preemptions })
	rd.scalar(metricsSuccess, true, true, func(v *seriesValues) *metricsValue { return &v.success })
	rd.scalar(metricsPromptTokens, true, false, func(v *seriesValues) *metricsValue { return &v.prompt })
	rd.scalar(metricsGenTokens, true, false, func(v *seriesValues) *metricsValue { return &v.gen })
	rd.scalar(metricsRouted, true, false, func(v *seriesValues) *metricsValue { return &v.routed })
	rd.histo(metricsQueueTime, true, func(v *seriesValues) *metricsHisto { return &v.queueTime })
	rd.histo(metricsPrefillTime, true, func(v *seriesValues) *metricsHisto { return &v.prefillTime })
	rd.histo(metricsDecodeTime, true, func(v *seriesValues) *metricsHisto { return &v.decodeTime })
	rd.histo(metricsE2ETime, true, func(v *seriesValues) *metricsHisto { return &v.e2e })
	rd.histo(metricsKVTransfer, false, func(v *seriesValues) *metricsHisto { return &v.kvXfer })
	s.late = readSimLate(fams)
	return *s, nil
}

// reader reads one scrape's families into a snapshot.
type reader struct {
	fams  map[string]*dto.MetricFamily
	names fleetseries.Names
	snap  metricsSnapshot
	// disaggregated says the pooled per-request counts leave the prefill
	// pool out (fleetseries.CountsInPool).
	disaggregated bool
}

// catalog reads the instances and their roles from the running-requests
// gauge's series, as postmortem reads them from Prometheus, and keeps
// rows per instance when there are two or more and the labels tell them
// apart.
func (rd *reader) catalog() {
	if rd.names.Instance == "" {
		return
	}
	var cat fleetseries.Catalog
	labels := fleetseries.Labels{}
	n := 0
	for _, name := range metricsRunning {
		mf := rd.fams[name]
		if mf == nil {
			continue
		}
		for _, m := range mf.GetMetric() {
			n++
			in, role := rd.labels(m)
			cat.Add(in, role)
			for _, lp := range m.GetLabel() {
				labels.Add(lp.GetName(), lp.GetValue())
			}
		}
		break
	}
	if p := cat.Problem(rd.names); p != nil {
		rd.snap.problem = fmt.Sprintf("%s of the %d series of the running-requests gauge; their labels: %s", p, n, labels)
		// The roles of the series still say which pool each is in.
		rd.disaggregated = rd.names.Role != "" && fleetseries.Disaggregated(rolesOf(rd.fams, rd.names.Role))
		return
	}
	rd.snap.roles = cat.Roles()
	rd.disaggregated = cat.Disaggregated()
	if in := cat.Instances(); len(in) > 1 {
		rd.snap.instances = in
		rd.snap.by = make(map[string]*seriesValues, len(in))
		for _, i := range in {
			rd.snap.by[i] = &seriesValues{}
		}
	}
}

// rolesOf maps each role value of the running-requests gauge's series to
// itself, for fleetseries.Disaggregated when instances cannot be told
// apart.
func rolesOf(fams map[string]*dto.MetricFamily, label string) map[string]string {
	roles := map[string]string{}
	for _, name := range metricsRunning {
		if mf := fams[name]; mf != nil {
			for _, m := range mf.GetMetric() {
				for _, lp := range m.GetLabel() {
					if lp.GetName() == label {
						roles[lp.GetValue()] = lp.GetValue()
					}
				}
			}
		}
	}
	return roles
}

// labels are m's instance and role (its instance's, when m has none).
func (rd *reader) labels(m *dto.Metric) (instance, role string) {
	for _, lp := range m.GetLabel() {
		switch lp.GetName() {
		case rd.names.Instance:
			instance = lp.GetValue()
		case rd.names.Role:
			role = lp.GetValue()
		}
	}
	if role == "" && rd.snap.roles != nil {
		role = rd.snap.roles[instance]
	}
	return instance, role
}

// targets are where one series' value goes besides the pooled values:
// its instance's values (nil when it has no row), and whether it counts
// in a pooled per-request count (fleetseries.CountsInPool).
func (rd *reader) targets(m *dto.Metric) (instance *seriesValues, inPool bool) {
	in, role := rd.labels(m)
	return rd.snap.by[in], fleetseries.CountsInPool(role, rd.disaggregated)
}

// scalar reads the first of names that is exposed (counters also as
// name_total) with a usable value, over all its label sets.
func (rd *reader) scalar(names []string, counter, perRequest bool, get func(*seriesValues) *metricsValue) {
	for _, name := range names {
		cands := []string{name}
		if counter {
			cands = []string{name + "_total", name}
		}
		for _, c := range cands {
			mf, ok := rd.fams[c]
			if !ok {
				continue
			}
			found := false
			for _, m := range mf.GetMetric() {
				x, ok := metricsScalar(m)
				if !ok || math.IsNaN(x) || math.IsInf(x, 0) {
					continue
				}
				found = true
				inst, inPool := rd.targets(m)
				if !perRequest || inPool {
					get(&rd.snap.seriesValues).add(x)
				}
				if inst != nil {
					get(inst).add(x)
				}
			}
			if found {
				return
			}
		}
	}
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

// histo reads the first of names that is exposed as a histogram, summing
// its count and sum over its label sets; a histogram exposed without a
// TYPE line arrives as untyped name_count and name_sum families, which
// are read too, paired by label set. For a per-request histogram the
// pooled count leaves the prefill pool out and the pooled sum does not
// (fleetseries.CountsInPool).
func (rd *reader) histo(names []string, perRequest bool, get func(*seriesValues) *metricsHisto) {
	observe := func(m *dto.Metric, count, sum float64) {
		inst, inPool := rd.targets(m)
		h := get(&rd.snap.seriesValues)
		h.sum += sum
		h.ok = true
		if !perRequest || inPool {
			h.count += count
		}
		if inst != nil {
			h := get(inst)
			h.count, h.sum, h.ok = h.count+count, h.sum+sum, true
		}
	}
	for _, name := range names {
		found := false
		if mf, ok := rd.fams[name]; ok {
			for _, m := range mf.GetMetric() {
				hg := m.GetHistogram()
				if hg == nil || math.IsNaN(hg.GetSampleSum()) || math.IsInf(hg.GetSampleSum(), 0) {
					continue
				}
				count := float64(hg.GetSampleCount())
				if hg.GetSampleCountFloat() > 0 {
					count += hg.GetSampleCountFloat()
				}
				found = true
				observe(m, count, hg.GetSampleSum())
			}
		}
		if !found {
			counts, sums := rd.fams[name+"_count"], rd.fams[name+"_sum"]
			if counts != nil && sums != nil {
				bySig := map[string]float64{}
				for _, m := range counts.GetMetric() {
					if x, ok := metricsScalar(m); ok && !math.IsNaN(x) && !math.IsInf(x, 0) {
						bySig[labelSignature(m)] += x
					}
				}
				for _, m := range sums.GetMetric() {
					x, ok := metricsScalar(m)
					c, paired := bySig[labelSignature(m)]
					if !ok || !paired || math.IsNaN(x) || math.IsInf(x, 0) {
						continue
					}
					found = true
					observe(m, c, x)
				}
			}
		}
		if found {
			return
		}
	}
}

// labelSignature identifies m's label set.
func labelSignature(m *dto.Metric) string {
	ls := m.GetLabel()
	kv := make([]string, 0, len(ls))
	for _, lp := range ls {
		kv = append(kv, lp.GetName()+"\xff"+lp.GetValue())
	}
	slices.Sort(kv)
	return strings.Join(kv, "\xfe")
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
// first) into its pooled sample: gauges from cur, deltas over the interval.
// The pooled means carry time past scrapes where no request finished
// (cur.carry, from prev's).
func metricsDelta(prev *metricsSnapshot, cur *metricsSnapshot) traces.MetricsSample {
	var pv *seriesValues
	var prevAt time.Duration
	if prev != nil {
		pv, prevAt = &prev.seriesValues, prev.at
		cur.carry = prev.carry
	}
	return valuesDelta(pv, &cur.seriesValues, prevAt, cur.at, &cur.carry)
}

// metricsSamples is a scrape's samples: the pooled one, then one per
// instance in name order, each with its role.
func metricsSamples(prev *metricsSnapshot, cur *metricsSnapshot) []traces.MetricsSample {
	out := make([]traces.MetricsSample, 0, 1+len(cur.instances))
	out = append(out, metricsDelta(prev, cur))
	for _, in := range cur.instances {
		var pv *seriesValues
		var prevAt time.Duration
		if prev != nil && prev.by[in] != nil {
			pv, prevAt = prev.by[in], prev.at
		}
		var carry [3]fleetseries.MeanCarry // one replica's sums grow with its counts
		s := valuesDelta(pv, cur.by[in], prevAt, cur.at, &carry)
		s.Instance, s.Role = in, cur.roles[in]
		out = append(out, s)
	}
	return out
}

// valuesDelta is one sample: gauges from cur at at, deltas since prev (at
// prevAt; nil for none); the queue, prefill and decode means carry what
// carry holds.
func valuesDelta(prev, cur *seriesValues, prevAt, at time.Duration, carry *[3]fleetseries.MeanCarry) traces.MetricsSample {
	s := traces.NewMetricsSample(at.Nanoseconds())
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
	s.IntervalNs = (at - prevAt).Nanoseconds()
	// A counter or histogram that the previous scrape did not have was
	// created since (vLLM's labelled series appear at their first
	// observation, a decode replica's NIXL histogram at its first pull):
	// it counts from zero.
	delta := func(p, c metricsValue) (float64, bool) {
		if !c.ok {
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
	} else if cur.e2e.ok {
		s.RequestsFinished = round(metricsCounterDelta(prev.e2e.count, cur.e2e.count))
	}
	if d, ok := delta(prev.routed, cur.routed); ok {
		s.Routed = round(d)
	}
	mean := func(p, c metricsHisto, carry *fleetseries.MeanCarry) int64 {
		if !c.ok {
			return traces.NotReported
		}
		dc, ds := c.count-p.count, c.sum-p.sum
		if dc < 0 { // reset
			dc, ds = c.count, c.sum
		}
		if ds < 0 {
			return traces.NotReported
		}
		if carry == nil {
			if dc <= 0 {
				return traces.NotReported
			}
			return round(ds / dc * 1e9)
		}
		m, ok := carry.Mean(ds, dc)
		if !ok {
			return traces.NotReported
		}
		return round(m * 1e9)
	}
	s.QueueTimeMeanNs = mean(prev.queueTime, cur.queueTime, &carry[0])
	s.PrefillTimeMeanNs = mean(prev.prefillTime, cur.prefillTime, &carry[1])
	s.DecodeTimeMeanNs = mean(prev.decodeTime, cur.decodeTime, &carry[2])
	if cur.kvXfer.ok {
		s.KVTransfers = round(metricsCounterDelta(prev.kvXfer.count, cur.kvXfer.count))
		s.KVTransferTimeMeanNs = mean(prev.kvXfer, cur.kvXfer, nil)
	}
	return s
}
