package main

// postmortem: the server's Prometheus history for a captured trace's window
// (capture/prom), stored beside the trace as its metrics series, then the
// trace analyzed with it. A command of its own rather than analyze
// --prometheus: it talks to a production system with credentials and a
// time window, and the series it stores make later analyze runs work
// offline, without Prometheus.

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/tokentrace/tokentrace/internal/atomicfile"

	"github.com/tokentrace/tokentrace/analyze"
	"github.com/tokentrace/tokentrace/capture/prom"
	"github.com/tokentrace/tokentrace/traces"
	"github.com/urfave/cli/v2"
)

const postmortemUsageText = `tokentrace postmortem --prometheus URL [flags] TRACE

Examples:
  tokentrace capture --keep-start --key-file capture.key --out incident.parquet gateway.jsonl.gz
  tokentrace postmortem --prometheus http://prometheus:9090 --selector 'job="vllm"' --html incident.html incident.parquet
  tokentrace postmortem --prometheus http://prometheus:9090 --instance-label pod --role-label llm_d_ai_role incident.parquet
  tokentrace postmortem --prometheus http://prometheus:9090 --what-if replicas=3 --what-if max-num-seqs=64 incident.parquet`

const postmortemDescription = `postmortem reads vLLM's series, or SGLang's where they mean the same
(running and waiting requests, KV-cache usage, preemptions, prefix-cache
hits, queue/prefill/decode time means, prompt and generation tokens) from
Prometheus' query_range API for the trace's window, stores them beside the
trace (TRACE.metrics.parquet, the format replay's scraper writes), and analyzes the trace with them: the tail,
its attribution, and what the server was doing around it. Metrics with no
series, gaps and counter resets are reported, never read as zeros.

A fleet is read per replica: --instance-label names the label that tells
the replicas apart (default instance, one scrape target per server; pod for
replicas behind one endpoint), --role-label the one holding each replica's
pool (llm-d's llm-d.ai/role as the scrape configuration copies it, e.g.
llm_d_ai_role). The report then has a table per pool and names the
saturated pool; vLLM's NIXL KV-transfer histogram and a router's
per-replica counts are read where exported. A label that no series has is
an error listing the labels they have.

The window starts at the trace's recorded start (capture --keep-start) or
--start; credentials come from files and never reach output or errors.

--what-if KEYS asks what the incident's requests would have seen with a
change (simulator keys: replicas=3, router=prefix-aware, max-num-seqs=64):
a twin of the server is fitted from the incident's own window (the trace's
logged latencies and the history just stored; sim fit), written beside the
trace (TRACE.twin.conf), checked against the incident itself, and asked.`

func postmortemCommand() *cli.Command {
	var (
		o                   = prom.DefaultOptions()
		start, slo, html    string
		metricsOut, tailMet string
		tail, jsonOut       string
		whatIf              headerFlag
		rf                  readFlags
	)
	return &cli.Command{
		Name:        "postmortem",
		Usage:       "explain a production tail from a captured trace and the server's Prometheus history",
		UsageText:   postmortemUsageText,
		Description: postmortemDescription,
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "prometheus", Usage: "Prometheus base URL (required)", Destination: &o.URL},
			&cli.StringFlag{Name: "start", Usage: "wall time of the trace's first arrival, RFC 3339 (default: the trace's capture.start when captured with --keep-start)", Destination: &start},
			&cli.DurationFlag{Name: "step", Value: o.Step, Usage: "series resolution (whole seconds)", Destination: &o.Step},
			&cli.StringFlag{Name: "selector", Usage: `extra label matchers for every series, e.g. job="vllm",instance="a:8000"`, Destination: &o.Selector},
			&cli.StringFlag{Name: "instance-label", Value: o.InstanceLabel, Usage: "label that tells the servers apart, e.g. pod for a fleet behind one endpoint", Destination: &o.InstanceLabel},
			&cli.StringFlag{Name: "role-label", Usage: "label holding each server's role in a fleet (its pool), e.g. role or llm_d_ai_role (default: no roles)", Destination: &o.RoleLabel},
			&cli.StringFlag{Name: "bearer-token-file", Usage: "file holding a bearer token for Prometheus", Destination: &o.BearerTokenFile},
			&cli.StringFlag{Name: "basic-auth-file", Usage: "file holding user:password for Prometheus", Destination: &o.BasicAuthFile},
			&cli.DurationFlag{Name: "timeout", Value: o.Timeout, Usage: "timeout of each query", Destination: &o.Timeout},
			&cli.StringFlag{Name: "metrics-out", Usage: "where to store the series (default: beside TRACE, e.g. incident.metrics.parquet)", Destination: &metricsOut},
			&cli.StringFlag{Name: "slo", Usage: "SLOs for goodput, e.g. ttft=500ms,tpot=50ms", Destination: &slo},
			&cli.StringFlag{Name: "tail-metric", Value: analyze.MetricTTFT, Usage: "latency whose tail is explained: ttft or e2e", Destination: &tailMet},
			&cli.StringFlag{Name: "tail", Usage: "tail percentile for the attribution", Value: fmt.Sprintf("p%g", analyze.DefaultTailPercentile), Destination: &tail},
			&cli.StringFlag{Name: "html", Usage: "also write the HTML report here", Destination: &html},
			&cli.StringFlag{Name: "json", Usage: "also write the report as JSON here", Destination: &jsonOut},
			&cli.GenericFlag{Name: "what-if", Value: &whatIf, Usage: "ask a twin fitted from the incident's window what a change would have done, e.g. replicas=3 (repeatable)"},
		}, rf.flags()...),
		Action: func(c *cli.Context) error {
			a, err := args(c, 1, 1, "TRACE")
			if err != nil {
				return err
			}
			if err := checkWhatIfs(whatIf.v); err != nil {
				return err
			}
			pm := postmortemArgs{trace: a[0], start: start, slo: slo, html: html, metricsOut: metricsOut,
				tailMetric: tailMet, tail: tail, jsonOut: jsonOut, rf: &rf,
				in: newTraceIn(c, &rf, "postmortem", "kept: the analysis does not depend on order")}
			if err := pm.window(&o); err != nil {
				return err
			}
			samples, err := pm.fetchSeries(c, o)
			if err != nil {
				return err
			}
			if err := pm.report(c); err != nil {
				return err
			}
			if len(whatIf.v) > 0 {
				return postmortemWhatIf(c, pm.in, a[0], samples, whatIf.v, twinPathFor(a[0]), stdio(c).out)
			}
			return nil
		},
	}
}

// postmortemArgs are postmortem's trace and the flags that are not
// Prometheus options.
type postmortemArgs struct {
	trace, start, slo, html, metricsOut string
	tailMetric, tail, jsonOut           string
	rf                                  *readFlags
	in                                  *traceIn
}

// window sets o's window from the trace: from its recorded start (or
// --start) over every arrival, plus a minute for the last requests to
// finish, and no later than now.
func (pm *postmortemArgs) window(o *prom.Options) error {
	r, err := pm.in.open(pm.trace)
	if err != nil {
		return err
	}
	meta, last, err := lastArrival(r, pm.trace)
	if err != nil {
		return err
	}
	start := pm.start
	if start == "" {
		if meta.Get("capture.start_precision") != "exact" {
			return usageErrorf("--start: %s does not record its exact start (capture with --keep-start, or give --start)", pm.trace)
		}
		start = meta.Get("capture.start")
	}
	if o.Start, err = time.Parse(time.RFC3339Nano, start); err != nil {
		return usageErrorf("--start %q: want RFC 3339, e.g. 2026-11-22T03:00:00Z", start)
	}
	o.Duration = time.Duration(last) + time.Minute
	if end := time.Now(); o.Start.Add(o.Duration).After(end) && end.After(o.Start) {
		o.Duration = max(end.Sub(o.Start).Truncate(o.Step), o.Step) // no history after now
	}
	if err := o.Validate(); err != nil {
		return usageError(err, promFlags)
	}
	return nil
}

// fetchSeries reads the window's series from Prometheus, stores them at
// --metrics-out (beside the trace by default) and returns them.
func (pm *postmortemArgs) fetchSeries(c *cli.Context, o prom.Options) ([]traces.MetricsSample, error) {
	res, err := prom.Fetch(c.Context, o)
	if errors.Is(err, prom.ErrLabel) {
		return nil, usageError(err, promFlags)
	}
	if err != nil {
		return nil, err
	}
	fetchLine(stdio(c).err, &o, res)
	if pm.metricsOut == "" {
		pm.metricsOut = traces.SamplesPathFor(pm.trace)
	}
	if err := storeSeries(&o, res, pm.metricsOut); err != nil {
		return nil, err
	}
	return res.Samples, nil
}

// report analyzes the trace with the series beside it and writes the
// report: text on stdout, JSON and HTML where asked.
func (pm *postmortemArgs) report(c *cli.Context) error {
	var err error
	ao := analyzeOptions()
	ao.TailMetric, ao.Read = pm.tailMetric, pm.rf.options(c)
	if ao.TailPercentile, err = analyze.ParsePercentile(pm.tail); err != nil {
		return usageErrorf("--tail: %w", err)
	}
	if ao.SLO, err = traces.ParseSLO(pm.slo); err != nil {
		return usageErrorf("--slo: %w", err)
	}
	rep, err := analyze.AnalyzeFiles(c.Context, []string{pm.trace}, ao)
	if err != nil {
		return analyzeError(err)
	}
	s := stdio(c)
	if pm.metricsOut != traces.SamplesPathFor(pm.trace) {
		fmt.Fprintf(s.err, "postmortem: the series are in %s; analyze reads them only from %s\n", pm.metricsOut, traces.SamplesPathFor(pm.trace))
	}
	if err := rep.WriteText(s.out); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	if pm.jsonOut != "" {
		if err := atomicfile.WriteFile(pm.jsonOut, func(w io.Writer) error { return rep.WriteJSON(w) }); err != nil {
			return err
		}
	}
	if pm.html != "" {
		if err := atomicfile.WriteFile(pm.html, func(w io.Writer) error { return rep.WriteHTML(w) }); err != nil {
			return err
		}
		fmt.Fprintf(s.err, "wrote %s\n", pm.html)
	}
	return nil
}

// storeSeries writes the series read from Prometheus to path, with where
// they came from in its metadata.
func storeSeries(o *prom.Options, res *prom.Result, path string) error {
	m := traces.NewMeta("postmortem:prometheus")
	m.Set("prometheus.start", o.Start.UTC().Format(time.RFC3339Nano))
	m.Set("prometheus.step", o.Step.String())
	m.Set("prometheus.selector", o.Selector)
	m.Set("prometheus.instance_label", o.InstanceLabel)
	if o.RoleLabel != "" {
		m.Set("prometheus.role_label", o.RoleLabel)
	}
	return traces.WriteSamples(path, m, res.Samples)
}

// promFlags maps capture/prom's option names to postmortem's flags.
var promFlags = map[string]string{
	"Options.URL": "--prometheus", "Options.Start": "--start", "Options.Step": "--step",
	"Options.InstanceLabel": "--instance-label", "Options.RoleLabel": "--role-label",
}

// lastArrival reads r (the trace name) to its end, closes it and returns
// its metadata and its last arrival_ns.
func lastArrival(r traces.Reader, name string) (meta traces.Meta, last int64, err error) {
	defer r.Close()
	for rec, err := range traces.All(r) {
		if err != nil {
			return meta, 0, fmt.Errorf("read trace %s: %w", name, err)
		}
		last = max(last, rec.ArrivalNs)
	}
	return r.Meta(), last, nil
}

// fetchLine says on w what Prometheus had for the window: steps, instances,
// pools, and what was missing, broken or reset.
func fetchLine(w io.Writer, o *prom.Options, res *prom.Result) {
	fmt.Fprintf(w, "postmortem: %d steps of %v from %s; instances %v", res.Steps, o.Step, o.Start.UTC().Format(time.RFC3339), res.Instances)
	if o.RoleLabel != "" {
		fmt.Fprintf(w, "; pools %s", pools(res.Roles))
		if len(res.NotExported) > 0 {
			fmt.Fprintf(w, "; no fleet series for %v", res.NotExported)
		}
	}
	if len(res.Missing) > 0 {
		fmt.Fprintf(w, "; no series for %v (shown as not reported)", res.Missing)
	}
	if res.Gaps > 0 || res.Resets > 0 {
		fmt.Fprintf(w, "; %d gaps, %d counter resets", res.Gaps, res.Resets)
	}
	fmt.Fprintln(w)
}

// pools says which instances each role holds: "decode [decode-0 decode-1],
// prefill [prefill-0]".
func pools(roles map[string]string) string {
	by := map[string][]string{}
	for in, r := range roles {
		if r == "" {
			r = "(no role)"
		}
		by[r] = append(by[r], in)
	}
	var parts []string
	for r, ins := range by {
		slices.Sort(ins)
		parts = append(parts, fmt.Sprintf("%s %v", r, ins))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}
