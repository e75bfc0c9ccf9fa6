package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tokentrace/tokentrace/analyze"
	"github.com/tokentrace/tokentrace/internal/atomicfile"
	"github.com/tokentrace/tokentrace/traces"
	"github.com/urfave/cli/v2"
)

// Output formats of analyze.
var analyzeFormats = []string{"text", "json", "vllm"}

// analyzeFlags are the analysis flags shared by analyze and analyze compare.
type analyzeFlags struct {
	o                   analyze.Options
	slo, tail           string
	asJSON              bool
	format              string
	percentileMetrics   string
	metricPercentiles   string
	vllmJSON            string
	requestsOut, html   string
	maxConc             int
	requestRate         float64
	seed                uint64
	resamples           int
	confidence          float64
	labelA, labelB      string
	compareMaxSample    int
	compareThresholdPct float64
	compareMode         string
	practicalPct        float64
	minChangeMs         float64
	maxLateness         time.Duration
}

func (f *analyzeFlags) common() []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{Name: "slo", Usage: "goodput SLOs, e.g. ttft=500ms,tpot=50ms,e2e=10s (any subset)", Destination: &f.slo},
		&cli.StringFlag{Name: "tail", Usage: "tail percentile for the attribution", Value: fmt.Sprintf("p%g", analyze.DefaultTailPercentile), Destination: &f.tail},
		&cli.StringFlag{Name: "tail-metric", Usage: "metric that selects the tail: " + strings.Join(analyze.TailMetrics, ", "), Value: analyze.DefaultTailMetric, Destination: &f.o.TailMetric},
		&cli.BoolFlag{Name: "ignore-server-timings", Usage: "estimate the attribution even where server timings exist", Destination: &f.o.IgnoreServerTimings},
		&cli.BoolFlag{Name: "json", Usage: "print JSON (same as --format json)", Destination: &f.asJSON},
		&cli.StringFlag{Name: "class", Usage: "analyze only the rows of this `CLASS` (e.g. interactive, beside a replay --background batch load)", Destination: &f.o.Class},
		&cli.IntFlag{Name: "exact-rows", Usage: "memory budget in result rows (about 300 bytes each): past it percentiles come from log histograms (within 0.05 %, flagged approx/~) and attribution, timeline and charts from a sample of at most this many rows; --requests-out then fails", Value: analyze.DefaultExactRows, Destination: &f.o.ExactRows},
	}, readFlagsInto(&f.o.Read)...)
}

// options validates the shared flags into analyze.Options.
func (f *analyzeFlags) options() (analyze.Options, error) {
	o := f.o
	var err error
	if o.SLO, err = traces.ParseSLO(f.slo); err != nil {
		return o, usageErrorf("--slo: %w", err)
	}
	if o.TailPercentile, err = analyze.ParsePercentile(f.tail); err != nil {
		return o, usageErrorf("--tail: %w", err)
	}
	if err := o.Validate(); err != nil {
		return o, usageErrorf("analyze: %w", err)
	}
	return o, nil
}

const analyzeUsageText = `tokentrace analyze [flags] RESULTS...
tokentrace analyze compare [flags] A B

Examples:
  tokentrace analyze results.parquet
  tokentrace analyze --slo ttft=500ms,tpot=50ms --by class --html report.html results.parquet
  tokentrace analyze --tail p99 --tail-metric ttft --requests-out attribution.csv results.parquet
  tokentrace analyze --window 10s shard-0.parquet shard-1.parquet shard-2.parquet
  tokentrace analyze --format vllm --percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,99 results.parquet
  tokentrace analyze compare synth-results.parquet real-results.parquet`

const analyzeDescription = `analyze reads results files (any tokentrace codec; several files, e.g. the
shards of one replay, are pooled) and reports requests by status, duration,
throughput, peak concurrency, and mean/std/p50/p90/p95/p99/p99.9/max of TTFT,
TPOT, ITL (per chunk and per token), E2E and client lateness, with TTFT and
E2E also from the scheduled time (coordinated-omission-safe). Percentiles use
numpy's linear interpolation; failed requests are excluded from latencies.

It then attributes each request's latency to client lateness, queueing,
prefill, decode and the remainder: exactly where the results carry server
timings, otherwise estimated (prefill fitted on the least-loaded requests as
a function of uncached prompt tokens). For the tail (--tail, on
--tail-metric) it gives each component's share, the dominant cause, when the
tail happened, the load around it, and a diagnosis in words.`

func analyzeCommand() *cli.Command {
	f := &analyzeFlags{o: analyzeOptions(), format: "text"}
	vd := analyze.DefaultVLLMOptions()
	var capFlags capacityFlagValues
	flags := append(f.common(),
		&cli.StringFlag{Name: "format", Usage: "output: " + strings.Join(analyzeFormats, ", ") + " (vllm = the block layout of vllm bench serve)", Value: f.format, Destination: &f.format},
		&cli.StringFlag{Name: "by", Usage: "also summarize per " + strings.Join(analyze.ByDimensions, ", "), Destination: &f.o.By},
		&cli.DurationFlag{Name: "window", Usage: "timeline window width; prints the timeline (0 = auto width, timeline only in JSON/HTML)", Destination: &f.o.Window},
		&cli.StringFlag{Name: "requests-out", Usage: "write the attribution of every successful request (seq, request_id, lateness_ns, queue_ns, prefill_ns, decode_ns, other_ns, source, tail) to this .csv or .jsonl[.zst] `FILE`; tail is true for the requests in the --tail of --tail-metric", Destination: &f.requestsOut},
		&cli.StringFlag{Name: "html", Usage: "write a self-contained HTML report with charts to this `FILE`", Destination: &f.html},
		&cli.StringFlag{Name: "vllm-json", Usage: "write the JSON of vllm bench serve --save-result to this `FILE`", Destination: &f.vllmJSON},
		&cli.StringFlag{Name: "percentile-metrics", Usage: "--format vllm / --vllm-json: metrics (" + strings.Join(analyze.VLLMMetrics, ",") + ")", Value: strings.Join(vd.PercentileMetrics, ","), Destination: &f.percentileMetrics},
		&cli.StringFlag{Name: "metric-percentiles", Usage: "--format vllm / --vllm-json: percentiles, e.g. 50,90,99", Value: percentList(vd.MetricPercentiles), Destination: &f.metricPercentiles},
		&cli.IntFlag{Name: "max-concurrency", Usage: "--format vllm: print this as the maximum request concurrency (0 = from the results' metadata, else omitted)", Value: vd.MaxConcurrency, Destination: &f.maxConc},
		&cli.IntFlag{Name: "kv-blocks", Usage: "capacity in prefix blocks (the results' block size) of the LRU cache that gives the prefix-cache hit rate the trace implies, beside the server's (0 = unbounded)", Destination: &f.o.KVBlocks},
		&cli.DurationFlag{Name: "session-idle", Usage: "a session ends this long after its last send or token (its makespan is then final)", Value: analyze.DefaultSessionIdle, Destination: &f.o.SessionIdle},
		&cli.Float64Flag{Name: "request-rate", Usage: "--format vllm: print this as the configured request rate (0 = from the metadata, else omitted)", Value: vd.RequestRate, Destination: &f.requestRate},
	)
	flags = append(flags, capacityFlags(&capFlags)...) // runflags.go
	return &cli.Command{
		Name:        "analyze",
		Usage:       "summarize results, attribute the tail latency, compare runs, write reports",
		UsageText:   analyzeUsageText,
		Description: analyzeDescription,
		Flags:       flags,
		Subcommands: []*cli.Command{
			analyzeCompareCommand(),
		},
		Action: func(c *cli.Context) error {
			names, err := args(c, 1, -1, "results files")
			if err != nil {
				return err
			}
			o, err := f.options()
			if err != nil {
				return err
			}
			if f.asJSON {
				f.format = "json"
			}
			if !slices.Contains(analyzeFormats, f.format) {
				return usageErrorf("--format %q: want one of %s", f.format, strings.Join(analyzeFormats, ", "))
			}
			vo := analyze.DefaultVLLMOptions()
			vo.MaxConcurrency, vo.RequestRate, vo.Date = f.maxConc, f.requestRate, time.Now().UTC().Format("20060102-150405")
			if vo.PercentileMetrics, err = analyze.ParseVLLMMetrics(f.percentileMetrics); err != nil {
				return usageErrorf("--percentile-metrics: %w", err)
			}
			if vo.MetricPercentiles, err = analyze.ParsePercentiles(f.metricPercentiles); err != nil {
				return usageErrorf("--metric-percentiles: %w", err)
			}
			if err := capFlags.apply(&o); err != nil {
				return err
			}
			if f.requestsOut != "" {
				if _, _, err := analyze.RequestsFormat(f.requestsOut); err != nil {
					return usageErrorf("--requests-out: %w", err)
				}
				o.KeepRequests = true
			}
			rep, err := analyze.AnalyzeFiles(c.Context, names, o)
			if err != nil {
				return analyzeError(err)
			}
			if err := attributeGroups(c.Context, rep, names); err != nil {
				return err
			}
			s := stdio(c)
			switch f.format {
			case "json":
				err = rep.WriteJSON(s.out)
			case "vllm":
				err = rep.WriteVLLM(s.out, vo)
			default:
				err = rep.WriteText(s.out)
			}
			if err != nil {
				return fmt.Errorf("write report: %w", err)
			}
			if f.vllmJSON != "" {
				if err := atomicfile.WriteFile(f.vllmJSON, func(w io.Writer) error { return rep.WriteVLLMJSON(w, vo) }); err != nil {
					return err
				}
				fmt.Fprintf(s.err, "wrote %s\n", f.vllmJSON)
			}
			if f.requestsOut != "" {
				if err := rep.WriteRequestsFile(f.requestsOut, s.out); err != nil {
					return fmt.Errorf("write per-request attribution: %w", err)
				}
				if f.requestsOut != "-" {
					fmt.Fprintf(s.err, "wrote %s\n", f.requestsOut)
				}
			}
			if f.html != "" {
				if err := atomicfile.WriteFile(f.html, func(w io.Writer) error { return rep.WriteHTML(w) }); err != nil {
					return err
				}
				fmt.Fprintf(s.err, "wrote %s\n", f.html)
			}
			return nil
		},
	}
}

// percentList is ps as --metric-percentiles takes them: "50,90,99".
func percentList(ps []float64) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = strconv.FormatFloat(p, 'g', -1, 64)
	}
	return strings.Join(s, ",")
}

// analyzeError turns "nothing to analyze" into a plain failure with the
// library's message; schema errors keep theirs.
func analyzeError(err error) error {
	if errors.Is(err, analyze.ErrNoRequests) || errors.Is(err, analyze.ErrNoOutcomes) || errors.Is(err, traces.ErrSchemaVersion) {
		return withCode(exitFailure, err)
	}
	return err
}
