// Package prom reads a vLLM or SGLang server's history from Prometheus (the
// HTTP API's query_range) for a trace's time window and turns it into the
// same metrics series replay scrapes live (traces.MetricsSample), so analyze
// can put a production incident's tail beside the server's queue, KV cache
// and token rates without a replay. llm-d serves through vLLM, so its model
// servers export vLLM's names.
//
// Missing data is reported, never turned into zeros: a metric with no
// series in the window is listed in Result.Missing and its column holds
// traces.NotReported; a step with no point is a gap (Result.Gaps).
//
// A fleet (replicas behind a router, perhaps a prefill pool and a decode
// pool) is read per replica: Options.InstanceLabel names the label that
// tells the replicas apart and Options.RoleLabel the one that holds their
// role; each replica's rows then carry its role, with the KV transfers
// of vLLM's NIXL connector and the router's per-replica counts where they
// are exported.
package prom

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/tokentrace/tokentrace/internal/fleetseries"
	"github.com/tokentrace/tokentrace/traces"
)

// ErrNoSeries is returned when none of the vLLM or SGLang metrics has a
// series in the window.
var ErrNoSeries = errors.New("no vLLM or SGLang series")

// ErrLabel is returned when Options.InstanceLabel or Options.RoleLabel is
// on none of the servers' series, or does not tell them apart; the error
// lists the labels the series have.
var ErrLabel = errors.New("unusable label")

// Defaults of Options.
const (
	DefaultStep    = 5 * time.Second
	DefaultTimeout = 30 * time.Second
	DefaultRetries = 2
	// DefaultInstanceLabel is Prometheus' own target label: one scrape
	// target per server.
	DefaultInstanceLabel = "instance"
	// PrefillRole is the role value of a prefill pool (llm-d's
	// llm-d.ai/role and tokentrace sim's role label): its replicas finish
	// each request once more, before the decode replica that answers it.
	PrefillRole = fleetseries.PrefillRole
)

// Options say which Prometheus to ask and for what. Start from
// DefaultOptions: a field's zero is a value of its own, never its default.
type Options struct {
	// URL is the Prometheus base URL (http://prometheus:9090). Required;
	// credentials in it are refused (use the *File options). Defaults to
	// "".
	URL string
	// Start is the wall time of the trace's arrival offset 0. Required.
	// Defaults to the zero time.
	Start time.Time
	// Duration is the window length. Required. Defaults to 0.
	Duration time.Duration
	// Step is the resolution of the series (whole seconds); rates and
	// means are taken over one step. Defaults to DefaultStep.
	Step time.Duration
	// Selector holds extra label matchers for every series, e.g.
	// `job="vllm",model_name="llama"` ("": all series). Defaults to "".
	Selector string
	// InstanceLabel is the label that tells the servers apart. Replicas
	// scraped through one endpoint (tokentrace sim's fleet) or known by
	// their pod name are told apart by another, e.g. "pod". Defaults to
	// DefaultInstanceLabel ("instance").
	InstanceLabel string
	// RoleLabel is the label holding each server's role in a fleet, e.g.
	// "role", or llm-d's pod label llm-d.ai/role where the scrape
	// configuration copies it onto the series (as "llm_d_ai_role", say);
	// "": no roles. A role label that no series carries is an error
	// (ErrLabel) listing the labels the series have. Defaults to "".
	RoleLabel string
	// BearerTokenFile and BasicAuthFile ("user:password") hold credentials;
	// their contents never appear in errors or logs. Default to "" (none).
	BearerTokenFile, BasicAuthFile string
	// Timeout bounds each query (> 0). Defaults to DefaultTimeout.
	Timeout time.Duration
	// Retries is how many times a failed query is retried, with a short
	// backoff (0: never). Defaults to DefaultRetries.
	Retries int
	// Client is the HTTP client (nil: http.DefaultClient's transport).
	// Defaults to nil.
	Client *http.Client
}

// DefaultOptions returns every option's default, the values the field docs
// name; set URL, Start and Duration before use.
func DefaultOptions() Options {
	return Options{Step: DefaultStep, InstanceLabel: DefaultInstanceLabel, Timeout: DefaultTimeout, Retries: DefaultRetries}
}

// Result is the fetched series.
type Result struct {
	// Samples has one point per step of the window (Steps of them), then
	// with several instances Steps more per instance; TimeNs is the offset
	// from Options.Start, as in a replay's metrics file.
	Samples []traces.MetricsSample
	Steps   int
	// Missing lists the metrics that had no series in the window.
	Missing []string
	// Gaps counts steps where a metric that has series had no point.
	Gaps int
	// Resets counts counter resets (a server restart) seen in the window.
	Resets int
	// Instances are the distinct values of Options.InstanceLabel seen
	// (several servers behind one gateway show up here).
	Instances []string
	// Roles maps each instance to its value of Options.RoleLabel ("" when
	// it has none); nil without a role label.
	Roles map[string]string
	// NotExported lists the fleet's optional columns with no series in
	// the window (kv_transfer_time_mean_ns, kv_transfers: no NIXL
	// connector; routed: no per-replica router counts). They are not in
	// Missing: a server without disaggregation has no KV transfers.
	NotExported []string
	// Warnings are Prometheus' own warnings.
	Warnings []string
}

// column is how one sample column is read. Gauges are aggregated by
// Prometheus (over everything, and by instance); counters are fetched raw,
// per series, and differenced here between consecutive steps (a drop is a
// counter reset: the new value is the increase), which is exact whatever
// the scrape interval, unlike increase() over a step shorter than two
// scrapes. vLLM renamed a few metrics over time and SGLang names its own,
// so each column lists alternatives tried in order; for a ratio, num[i]
// goes with den[i] (never one engine's numerator over another's
// denominator).
type column struct {
	name  string
	agg   string   // the gauges' aggregation: sum or avg
	gauge []string // gauge names
	num   []string // counter names whose increase is the value ...
	den   []string // ... divided by the increase of den[i] when num[i] answered, if set
	scale float64  // applied to the value (seconds → ns)
	set   func(s *traces.MetricsSample, v float64)
	// perRequest marks a count of finished requests (the column itself,
	// or the denominator of a per-request mean): under disaggregation the
	// pooled rows count a prefill replica's finishes out, so each request
	// counts once and a pooled mean is the time a request spent in that
	// phase on both pools.
	perRequest bool
	// optional marks a fleet's column: without series it goes to
	// Result.NotExported, not Result.Missing.
	optional bool
}

// SGLang's names, from sgl-project/sglang python/sglang/srt/metrics/collector.py
// (commit 93d04878cfb9b08645fae7b11bd340ee33b34acf) and
// python/sglang/srt/managers/scheduler_metrics_mixin.py, mapped only where
// the meaning is vLLM's:
//
//   - sglang:num_queue_reqs, sglang:num_running_reqs (gauges): requests in
//     the waiting queue and in the running batch.
//   - sglang:token_usage (gauge): used KV-pool tokens over the pool's size,
//     a fraction in [0, 1]; cached tokens no request holds count as free, as
//     in vLLM's block usage (with SGLang's default page size of 1 token,
//     tokens and blocks are the same thing).
//   - sglang:cached_tokens_total / sglang:prompt_tokens_total (counters):
//     prompt tokens served from the prefix cache over prompt tokens, vLLM's
//     hits/queries in tokens. The sglang:cache_hit_rate gauge (the last
//     prefill batch's rate, 0 after a decode batch) is not used.
//   - sglang:queue_time_seconds (histogram): time from entering the waiting
//     queue to the first forward pass, vLLM's queue time; SGLang observes it
//     when a request leaves the queue, vLLM when it finishes.
//   - sglang:num_requests_total, sglang:e2e_request_latency_seconds_count
//     (counters): finished requests, every finish reason.
//   - sglang:prompt_tokens_total, sglang:generation_tokens_total (counters):
//     counted when a request finishes, where vLLM counts per engine step, so
//     they lag by a request's duration.
//
// Unmapped, so reported missing for an SGLang server: preemptions
// (sglang:num_retracted_reqs is a gauge of the last batch, not a count),
// prefill and decode time (SGLang has no per-request prefill/decode
// histograms in that collector). SGLang's scheduler gauges carry tp_rank and
// pp_rank labels; when more than one scheduler of a server exports them
// (--enable-metrics-for-all-schedulers, pipeline stages) they repeat the
// same state, so they are collapsed with max before the sum (sglangGauge).
func columns() []column {
	i64 := func(dst func(s *traces.MetricsSample) *int64) func(s *traces.MetricsSample, v float64) {
		return func(s *traces.MetricsSample, v float64) { *dst(s) = int64(math.Round(v)) }
	}
	hist := func(names ...string) (sums, counts []string) {
		for _, n := range names {
			sums, counts = append(sums, n+"_sum"), append(counts, n+"_count")
		}
		return sums, counts
	}
	qn, qd := hist("vllm:request_queue_time_seconds", "sglang:queue_time_seconds")
	pn, pd := hist("vllm:request_prefill_time_seconds")
	dn, dd := hist("vllm:request_decode_time_seconds")
	return []column{
		{name: "waiting", agg: "sum", gauge: []string{"vllm:num_requests_waiting", "sglang:num_queue_reqs"}, set: i64(func(s *traces.MetricsSample) *int64 { return &s.Waiting })},
		{name: "running", agg: "sum", gauge: []string{"vllm:num_requests_running", "sglang:num_running_reqs"}, set: i64(func(s *traces.MetricsSample) *int64 { return &s.Running })},
		{name: "kv_cache_usage", agg: "avg", gauge: []string{"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage"}, set: func(s *traces.MetricsSample, v float64) { s.KVCacheUsage = v }},
		{name: "prefix_hit_rate",
			num: []string{"vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total", "sglang:cached_tokens_total"},
			den: []string{"vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total", "sglang:prompt_tokens_total"},
			set: func(s *traces.MetricsSample, v float64) { s.PrefixHitRate = v }},
		{name: "preemptions", num: []string{"vllm:num_preemptions_total"}, set: i64(func(s *traces.MetricsSample) *int64 { return &s.Preemptions })},
		{name: "queue_time_mean_ns", num: qn, den: qd, scale: 1e9, perRequest: true, set: i64(func(s *traces.MetricsSample) *int64 { return &s.QueueTimeMeanNs })},
		{name: "prefill_time_mean_ns", num: pn, den: pd, scale: 1e9, perRequest: true, set: i64(func(s *traces.MetricsSample) *int64 { return &s.PrefillTimeMeanNs })},
		{name: "decode_time_mean_ns", num: dn, den: dd, scale: 1e9, perRequest: true, set: i64(func(s *traces.MetricsSample) *int64 { return &s.DecodeTimeMeanNs })},
		{name: "requests_finished", num: []string{"vllm:request_success_total", "vllm:e2e_request_latency_seconds_count", "sglang:num_requests_total", "sglang:e2e_request_latency_seconds_count"}, perRequest: true, set: i64(func(s *traces.MetricsSample) *int64 { return &s.RequestsFinished })},
		{name: "prompt_tokens", num: []string{"vllm:prompt_tokens_total", "sglang:prompt_tokens_total"}, set: i64(func(s *traces.MetricsSample) *int64 { return &s.PromptTokens })},
		{name: "generation_tokens", num: []string{"vllm:generation_tokens_total", "sglang:generation_tokens_total"}, set: i64(func(s *traces.MetricsSample) *int64 { return &s.GenerationTokens })},
		// The fleet's (where their names come from: fleetseries): KV
		// pulls as vLLM's NIXL connector observes them on the pulling
		// (decode) side, and the requests a router sent each replica.
		{name: "kv_transfer_time_mean_ns", num: []string{fleetseries.NIXLTransferTime + "_sum"}, den: []string{fleetseries.NIXLTransferTime + "_count"}, scale: 1e9, optional: true, set: i64(func(s *traces.MetricsSample) *int64 { return &s.KVTransferTimeMeanNs })},
		{name: "kv_transfers", num: []string{fleetseries.NIXLTransferTime + "_count"}, optional: true, set: i64(func(s *traces.MetricsSample) *int64 { return &s.KVTransfers })},
		{name: "routed", num: []string{fleetseries.RouterDecisions + "_total"}, optional: true, set: i64(func(s *traces.MetricsSample) *int64 { return &s.Routed })},
	}
}

// sglangGauge is the PromQL for one gauge's series matching sel: SGLang's
// scheduler gauges are collapsed over tp_rank and pp_rank (several
// schedulers of one server report the same queue), other names are as is.
func sglangGauge(name, sel string) string {
	if strings.HasPrefix(name, "sglang:") {
		return "max without (tp_rank, pp_rank) (" + name + "{" + sel + "})"
	}
	return name + "{" + sel + "}"
}

// labelName is Prometheus' label name syntax.
var labelName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// Validate reports the first unusable option, naming it in a
// *traces.OptionError.
func (o *Options) Validate() error {
	u, err := url.Parse(o.URL)
	switch {
	case o.URL == "":
		return optionErr("Options.URL", "required")
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return optionErr("Options.URL", "want http(s)://host:port, got %q", redactURL(o.URL))
	case u.User != nil:
		return optionErr("Options.URL", "carries credentials: put them in %w or %w", traces.OptionRef("Options.BasicAuthFile"), traces.OptionRef("Options.BearerTokenFile"))
	case o.Start.IsZero():
		return optionErr("Options.Start", "required (the trace's wall-clock start)")
	case o.Duration <= 0:
		return optionErr("Options.Duration", "want > 0, got %v", o.Duration)
	case o.Step < time.Second || o.Step%time.Second != 0:
		return optionErr("Options.Step", "want whole seconds ≥ 1s, got %v", o.Step)
	case o.Duration/o.Step > 11000:
		return optionErr("Options.Step", "%v over %v is more than Prometheus' 11,000 points per series; use a larger step", o.Step, o.Duration)
	case o.Timeout <= 0:
		return optionErr("Options.Timeout", "want > 0, got %v", o.Timeout)
	case o.Retries < 0:
		return optionErr("Options.Retries", "want >= 0, got %d", o.Retries)
	case !labelName.MatchString(o.InstanceLabel):
		return optionErr("Options.InstanceLabel", "%q is not a Prometheus label name (letters, digits and _; a Kubernetes pod label such as llm-d.ai/role reaches the series only as the name the scrape configuration gives it)", o.InstanceLabel)
	case o.RoleLabel != "" && !labelName.MatchString(o.RoleLabel):
		return optionErr("Options.RoleLabel", "%q is not a Prometheus label name (letters, digits and _; a Kubernetes pod label such as llm-d.ai/role reaches the series only as the name the scrape configuration gives it)", o.RoleLabel)
	case o.RoleLabel != "" && o.RoleLabel == o.InstanceLabel:
		return optionErr("Options.RoleLabel", "%q is also %w: one label cannot name both a replica and its pool", o.RoleLabel, traces.OptionRef("Options.InstanceLabel"))
	}
	return nil
}

// redactURL drops userinfo, query and fragment from a URL for messages.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}

// authTransport adds a credential header; the secret lives only here.
type authTransport struct {
	header, value string
	next          http.RoundTripper
}

func (t authTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(t.header, t.value)
	return t.next.RoundTrip(r)
}

func (o *Options) transport() (http.RoundTripper, error) {
	var rt http.RoundTripper = http.DefaultTransport
	if o.Client != nil && o.Client.Transport != nil {
		rt = o.Client.Transport
	}
	read := func(option, path string) (string, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			var pe *os.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return "", optionErr(option, "%s: %w", path, err)
		}
		s := strings.TrimSpace(string(b))
		if s == "" {
			return "", optionErr(option, "%s is empty", path)
		}
		return s, nil
	}
	if o.BearerTokenFile != "" {
		tok, err := read("Options.BearerTokenFile", o.BearerTokenFile)
		if err != nil {
			return nil, err
		}
		rt = authTransport{"Authorization", "Bearer " + tok, rt}
	}
	if o.BasicAuthFile != "" {
		up, err := read("Options.BasicAuthFile", o.BasicAuthFile)
		if err != nil {
			return nil, err
		}
		user, pass, ok := strings.Cut(up, ":")
		if !ok {
			return nil, optionErr("Options.BasicAuthFile", "%s: want user:password", o.BasicAuthFile)
		}
		req, _ := http.NewRequest("GET", "http://x", nil)
		req.SetBasicAuth(user, pass)
		rt = authTransport{"Authorization", req.Header.Get("Authorization"), rt}
	}
	return rt, nil
}

// Fetch reads the window's series from Prometheus. With several instances
// the result holds the pooled rows (Instance "") and then each instance's
// rows; missing metrics, gaps and resets are counted on the pooled series.
func Fetch(ctx context.Context, o Options) (*Result, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	rt, err := o.transport()
	if err != nil {
		return nil, err
	}
	client, err := api.NewClient(api.Config{Address: o.URL, RoundTripper: rt})
	if err != nil {
		return nil, fmt.Errorf("prom: %s: %w", redactURL(o.URL), err)
	}
	n := int(o.Duration/o.Step) + 1
	f := &fetch{o: &o, papi: v1.NewAPI(client), n: n, res: &Result{Steps: n},
		r: v1.Range{Start: o.Start, End: o.Start.Add(time.Duration(n-1) * o.Step), Step: o.Step}}
	if err := o.instances(ctx, f.papi, f.r, f.res); err != nil {
		return nil, err
	}
	f.perInstance = len(f.res.Instances) > 1
	rows := f.newRows()
	f.setOutOfPool()
	required := 0
	for _, c := range columns() {
		if !c.optional {
			required++
		}
		vals, err := f.values(ctx, c)
		if err != nil {
			return nil, err
		}
		if vals[""] == nil {
			if c.optional {
				f.res.NotExported = append(f.res.NotExported, c.name)
			} else {
				f.res.Missing = append(f.res.Missing, c.name)
			}
			continue
		}
		f.fill(rows, c, vals)
	}
	if len(f.res.Missing) == required {
		return nil, f.noSeries()
	}
	f.res.Samples = rows[""]
	if f.perInstance {
		for _, in := range f.res.Instances {
			f.res.Samples = append(f.res.Samples, rows[in]...)
		}
	}
	return f.res, nil
}

// fetch is one Fetch: the window's range of n steps and what it has
// found so far.
type fetch struct {
	o           *Options
	papi        v1.API
	r           v1.Range
	n           int
	res         *Result
	perInstance bool
	// outOfPool, under disaggregation, tells the series that the pooled
	// per-request counts leave out (nil: none).
	outOfPool func(model.Metric) bool
}

// newRows are the window's empty rows: the pooled series (key "") and,
// with several instances, each instance's with its role.
func (f *fetch) newRows() map[string][]traces.MetricsSample {
	series := func(instance string) []traces.MetricsSample {
		rows := make([]traces.MetricsSample, f.n)
		for i := range rows {
			s := traces.NewMetricsSample(int64(i) * int64(f.o.Step))
			if i > 0 {
				s.IntervalNs = int64(f.o.Step)
			}
			s.Instance = instance
			if instance != "" {
				s.Role = f.res.Roles[instance]
			}
			rows[i] = s
		}
		return rows
	}
	rows := map[string][]traces.MetricsSample{"": series("")}
	if f.perInstance {
		for _, in := range f.res.Instances {
			rows[in] = series(in)
		}
	}
	return rows
}

// setOutOfPool: under disaggregation a request finishes on a prefill
// replica, then on the decode replica that answers it: the pooled
// per-request counts leave the prefill pool's out, so each request counts
// once.
func (f *fetch) setOutOfPool() {
	if f.o.RoleLabel != "" && fleetseries.Disaggregated(f.res.Roles) {
		role := model.LabelName(f.o.RoleLabel)
		f.outOfPool = func(m model.Metric) bool {
			return !fleetseries.CountsInPool(string(m[role]), true)
		}
	}
}

// values are column c's values by instance ("" pooled), per step (NaN =
// no data): a gauge's, a counter's increase, or a ratio of two counters'
// increases (the numerator summed over every replica: a mean's time is
// spent on both pools).
func (f *fetch) values(ctx context.Context, c column) (map[string][]float64, error) {
	if c.gauge != nil {
		return f.o.gaugeValues(ctx, f.papi, c.agg, c.gauge, f.perInstance, f.r, f.n, f.res)
	}
	skip := f.outOfPool
	if !c.perRequest || c.den != nil {
		skip = nil
	}
	vals, idx, err := f.o.counterValues(ctx, f.papi, c.num, skip, f.r, f.n, f.res)
	if err != nil || vals == nil || c.den == nil {
		return vals, err
	}
	skip = f.outOfPool
	if !c.perRequest {
		skip = nil
	}
	den, _, err := f.o.counterValues(ctx, f.papi, c.den[idx:idx+1], skip, f.r, f.n, f.res)
	if err != nil {
		return nil, err
	}
	for k, v := range vals {
		divide(v, den[k], c.perRequest)
	}
	return vals, nil
}

// fill sets column c of rows from vals, counting the pooled series' gaps.
func (f *fetch) fill(rows map[string][]traces.MetricsSample, c column, vals map[string][]float64) {
	for key, rs := range rows {
		for i, v := range vals[key] {
			switch {
			case math.IsNaN(v):
				if key == "" && !c.optional && (i > 0 || c.gauge != nil) { // a counter has no increase at the first step
					f.res.Gaps++
				}
			case math.IsInf(v, 0):
				// a ratio over zero events stays NotReported
			default:
				if c.scale != 0 {
					v *= c.scale
				}
				c.set(&rs[i], v)
			}
		}
	}
}

// noSeries is the ErrNoSeries of a window where no required column has
// a series.
func (f *fetch) noSeries() error {
	sel := "no selector"
	if f.o.Selector != "" {
		sel = "selector " + f.o.Selector
	}
	return fmt.Errorf("prom: %w at %s for %s–%s (%s): the window is outside Prometheus' retention, or the selector or job matches no vLLM or SGLang server",
		ErrNoSeries, redactURL(f.o.URL), f.r.Start.UTC().Format(time.RFC3339), f.r.End.UTC().Format(time.RFC3339), sel)
}

// instances fills res.Instances (and res.Roles with a role label) from
// the running-requests gauge over the window. A label that no series
// carries, or an instance label under which one instance has two roles
// (it does not tell the replicas apart), is an ErrLabel listing the labels
// the series have.
func (o *Options) instances(ctx context.Context, papi v1.API, r v1.Range, res *Result) error {
	by := o.InstanceLabel
	if o.RoleLabel != "" {
		by += ", " + o.RoleLabel
	}
	m, err := o.queryRange(ctx, papi, "count by ("+by+") ("+runningSel(o.Selector)+")", r, res)
	if err != nil {
		return err
	}
	il, rl := model.LabelName(o.InstanceLabel), model.LabelName(o.RoleLabel)
	var cat fleetseries.Catalog
	for _, ss := range m {
		cat.Add(string(ss.Metric[il]), string(ss.Metric[rl]))
	}
	if len(m) == 0 {
		return nil // no series at all: Fetch says so after reading every metric
	}
	if p := cat.Problem(fleetseries.Names{
		Instance: o.InstanceLabel, InstanceOption: "Options.InstanceLabel", InstanceOptional: o.InstanceLabel == DefaultInstanceLabel,
		Role: o.RoleLabel, RoleOption: "Options.RoleLabel",
	}); p != nil {
		return o.labelError(ctx, papi, r, res, p)
	}
	res.Instances = cat.Instances()
	if o.RoleLabel != "" {
		res.Roles = map[string]string{}
		maps.Copy(res.Roles, cat.Roles())
		if none := cat.NoRole(); len(none) > 0 {
			res.Warnings = append(res.Warnings, fmt.Sprintf("instances %s have no %s label: they belong to no pool", strings.Join(none, ", "), o.RoleLabel))
		}
	}
	if n := cat.Unlabelled(); n > 0 && o.InstanceLabel != DefaultInstanceLabel {
		res.Warnings = append(res.Warnings, fmt.Sprintf("%d series of the running-requests gauge have no %s label: they count in the pooled rows only", n, o.InstanceLabel))
	}
	return nil
}

// runningSel is the running-requests gauge of both engines.
func runningSel(sel string) string {
	return "vllm:num_requests_running{" + sel + "} or sglang:num_running_reqs{" + sel + "}"
}

// labelError is an ErrLabel whose message starts with what (the label at
// fault, "... is on none") and lists the labels of the running-requests
// gauge's series in the window, with a few values each.
func (o *Options) labelError(ctx context.Context, papi v1.API, r v1.Range, res *Result, what error) error {
	qctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	sets, warns, _, err := papi.Series(qctx, []string{"vllm:num_requests_running{" + o.Selector + "}", "sglang:num_running_reqs{" + o.Selector + "}"}, r.Start, r.End, v1.WithLimit(1000))
	res.Warnings = append(res.Warnings, warns...)
	if err != nil {
		return fmt.Errorf("prom: %w: %w of the servers' series (listing their labels failed: %w)", ErrLabel, what, err)
	}
	labels := fleetseries.Labels{}
	for _, ls := range sets {
		for k, v := range ls {
			if k != model.MetricNameLabel {
				labels.Add(string(k), string(v))
			}
		}
	}
	return fmt.Errorf("prom: %w: %w of the %d series of the servers' running-requests gauge in the window; their labels: %s", ErrLabel, what, len(sets), labels)
}

// divide turns num into num/den step by step: NaN where den has no data,
// +Inf where den did not grow (no events: no mean, not a gap). A
// per-request mean carries a step's num whose den did not grow to the
// next step whose did (fleetseries.MeanCarry: a prefill pool's time
// before its decode pool finishes the requests).
func divide(num, den []float64, perRequest bool) {
	var carry fleetseries.MeanCarry
	for i := range num {
		switch {
		case den == nil || math.IsNaN(den[i]):
			num[i] = math.NaN()
		case den[i] == 0:
			if perRequest && !math.IsNaN(num[i]) {
				carry.Mean(num[i], 0)
			}
			num[i] = math.Inf(1)
		case perRequest && !math.IsNaN(num[i]):
			num[i], _ = carry.Mean(num[i], den[i])
		default:
			num[i] /= den[i]
		}
	}
}

// stepOf is the index of the step nearest to t (−1 outside the window).
func stepOf(t model.Time, r v1.Range, n int) int {
	i := int(t.Time().Sub(r.Start).Round(r.Step) / r.Step)
	if i < 0 || i >= n {
		return -1
	}
	return i
}

// gaugeValues is the first of names that has data, aggregated with agg
// over every series (key "") and, with perInstance, by instance; one
// value per step.
func (o *Options) gaugeValues(ctx context.Context, papi v1.API, agg string, names []string, perInstance bool, r v1.Range, n int, res *Result) (map[string][]float64, error) {
	fill := func(m model.Matrix, key func(*model.SampleStream) string, out map[string][]float64) {
		for _, ss := range m {
			k := key(ss)
			if out[k] == nil {
				out[k] = nanSlice(n)
			}
			for _, p := range ss.Values {
				if i := stepOf(p.Timestamp, r, n); i >= 0 {
					out[k][i] = float64(p.Value)
				}
			}
		}
	}
	for _, name := range names {
		sel := sglangGauge(name, o.Selector)
		m, err := o.queryRange(ctx, papi, agg+"("+sel+")", r, res)
		if err != nil {
			return nil, err
		}
		if len(m) == 0 {
			continue
		}
		out := map[string][]float64{}
		fill(m, func(*model.SampleStream) string { return "" }, out)
		if perInstance {
			m, err := o.queryRange(ctx, papi, agg+" by ("+o.InstanceLabel+") ("+sel+")", r, res)
			if err != nil {
				return nil, err
			}
			byInstance := map[string][]float64{}
			fill(m, func(ss *model.SampleStream) string { return string(ss.Metric[model.LabelName(o.InstanceLabel)]) }, byInstance)
			delete(byInstance, "") // series without the label count in the pooled value only
			maps.Copy(out, byInstance)
		}
		return out, nil
	}
	return nil, nil
}

// counterValues is the increase per step of the first of names that has
// series, summed over them (key "", leaving out the series outOfPool
// reports, if set) and by instance label, and that name's index; a
// counter that drops was reset and counts its new value. Steps no series
// covers are NaN.
func (o *Options) counterValues(ctx context.Context, papi v1.API, names []string, outOfPool func(model.Metric) bool, r v1.Range, n int, res *Result) (map[string][]float64, int, error) {
	for idx, name := range names {
		m, err := o.queryRange(ctx, papi, name+"{"+o.Selector+"}", r, res)
		if err != nil {
			return nil, -1, err
		}
		if len(m) == 0 {
			continue
		}
		out := map[string][]float64{}
		for _, ss := range m {
			in := string(ss.Metric[model.LabelName(o.InstanceLabel)])
			keys := []string{"", in}
			if in == "" {
				keys = keys[:1] // the pooled key once
			}
			if outOfPool != nil && outOfPool(ss.Metric) {
				keys = keys[1:]
			}
			for _, k := range keys {
				if out[k] == nil {
					out[k] = nanSlice(n)
				}
			}
			prev, prevOK := 0.0, false
			for _, p := range ss.Values {
				i, v := stepOf(p.Timestamp, r, n), float64(p.Value)
				if i < 0 {
					continue
				}
				if prevOK {
					d := v - prev
					if d < 0 {
						d = v
						res.Resets++
					}
					for _, k := range keys {
						if math.IsNaN(out[k][i]) {
							out[k][i] = 0
						}
						out[k][i] += d
					}
				}
				prev, prevOK = v, true
			}
		}
		return out, idx, nil
	}
	return nil, -1, nil
}

func nanSlice(n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = math.NaN()
	}
	return v
}

// queryRange runs one range query with retries; errors name the query and
// the server (without credentials), never a secret.
func (o *Options) queryRange(ctx context.Context, papi v1.API, q string, r v1.Range, res *Result) (model.Matrix, error) {
	var last error
	for attempt := 0; attempt <= o.Retries; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(time.Duration(attempt) * 500 * time.Millisecond):
			}
		}
		qctx, cancel := context.WithTimeout(ctx, o.Timeout)
		v, warns, _, err := papi.QueryRange(qctx, q, r)
		cancel()
		res.Warnings = append(res.Warnings, warns...)
		if err == nil {
			m, ok := v.(model.Matrix)
			if !ok {
				return nil, fmt.Errorf("prom: %s: query %q returned %s, not a matrix", redactURL(o.URL), q, v.Type())
			}
			return m, nil
		}
		last = err
		var perr *v1.Error
		if errors.As(err, &perr) && (perr.Type == v1.ErrBadData || perr.Type == v1.ErrBadResponse) {
			break // the query or the window is wrong: retrying will not help
		}
		if errors.As(err, &perr) && perr.Type == v1.ErrClient {
			// a 4xx: the server answered, but not as Prometheus' API
			return nil, fmt.Errorf("prom: query %s at %s: %w (the server answered but not as Prometheus' HTTP API: a wrong URL or path, or missing credentials?)", q, redactURL(o.URL), err)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	return nil, fmt.Errorf("prom: query %s at %s: %w", q, redactURL(o.URL), last)
}

// optionErr is prom's error for option (a field of Options).
func optionErr(option, format string, a ...any) error {
	return traces.OptionErrorf("prom", option, format, a...)
}
