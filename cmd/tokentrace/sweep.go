package main

// sweep: flags to sweep.Options and one sweep.Run; the engine, its verdicts,
// table, JSON and chart live in replay/sweep. Step throughput and latency
// percentiles come from analyze, wired here (replay never imports analyze).

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/tokentrace/tokentrace/analyze"
	"github.com/tokentrace/tokentrace/replay"
	"github.com/tokentrace/tokentrace/replay/sim"
	"github.com/tokentrace/tokentrace/replay/sweep"
	"github.com/tokentrace/tokentrace/traces"
	"github.com/urfave/cli/v2"
)

// measureStep is sweep.Options.Measure: a step's throughput and latency
// percentiles as analyze computes them.
func measureStep(ctx context.Context, recs []traces.Record, slo traces.SLO) (sweep.Measures, error) {
	ao := analyze.DefaultOptions()
	ao.SLO = slo
	rep, err := analyze.Analyze(ctx, recs, ao)
	if err != nil {
		return sweep.Measures{}, err
	}
	m := sweep.Measures{
		RPS: rep.Throughput.RequestsPerS, OutTokPerS: rep.Throughput.OutputTokensPerS,
		TTFTP50Ms: rep.TTFT.P50, TTFTP99Ms: rep.TTFT.P99,
		TPOTP50Ms: rep.TPOT.P50, TPOTP99Ms: rep.TPOT.P99,
		E2EP99Ms: rep.E2E.P99,
	}
	if rep.GoodRatio != nil {
		m.GoodRatio = *rep.GoodRatio
	}
	return m, nil
}

// sweepSimFlags are the built-in simulator's flags (those of tokentrace
// sim, prefixed sim-), shared by sweep.
type sweepSimFlags struct {
	preset                           string
	maxSeqs, maxBatched, blocks      int
	stepFixed, prefill, decode, attn time.Duration
	perRequestMetrics                bool
	config                           string
}

func (f *sweepSimFlags) flags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "sim-preset", Value: sim.DefaultPreset, Destination: &f.preset, Usage: "built-in simulator: deployment preset (" + strings.Join(sim.PresetNames(), ", ") + ")"},
		&cli.IntFlag{Name: "sim-max-num-seqs", Destination: &f.maxSeqs, Usage: "built-in simulator: max running sequences", DefaultText: "preset's"},
		&cli.IntFlag{Name: "sim-max-num-batched-tokens", Destination: &f.maxBatched, Usage: "built-in simulator: token budget per step", DefaultText: "preset's"},
		&cli.IntFlag{Name: "sim-num-gpu-blocks", Destination: &f.blocks, Usage: "built-in simulator: KV cache blocks", DefaultText: "preset's"},
		&cli.DurationFlag{Name: "sim-step-fixed", Value: -1, Destination: &f.stepFixed, Usage: "built-in simulator: fixed cost per step", DefaultText: "preset's"},
		&cli.DurationFlag{Name: "sim-prefill-per-token", Value: -1, Destination: &f.prefill, Usage: "built-in simulator: cost per prefill token", DefaultText: "preset's"},
		&cli.DurationFlag{Name: "sim-decode-per-seq", Value: -1, Destination: &f.decode, Usage: "built-in simulator: cost per decoding sequence", DefaultText: "preset's"},
		&cli.DurationFlag{Name: "sim-attn-per-context-token", Value: -1, Destination: &f.attn, Usage: "built-in simulator: cost per context token read", DefaultText: "preset's"},
		&cli.BoolFlag{Name: "sim-per-request-metrics", Value: true, Destination: &f.perRequestMetrics, Usage: "built-in simulator: return vLLM's per-request metrics"},
		&cli.StringFlag{Name: "sim-config", Destination: &f.config, Usage: "built-in simulator: configuration keys applied last, KEY=VALUE,... (a fleet: replicas=4,router=prefix-aware)"},
	}
}

func (f *sweepSimFlags) options() (sim.Options, error) {
	o := sim.DefaultOptions()
	if err := sim.ApplyPreset(&o, f.preset); err != nil {
		return o, usageErrorf("--sim-preset: %w", err)
	}
	o.PerRequestMetrics = f.perRequestMetrics
	for _, x := range []struct {
		v   int
		dst *int
	}{{f.maxSeqs, &o.MaxNumSeqs}, {f.maxBatched, &o.MaxNumBatchedTokens}, {f.blocks, &o.NumGPUBlocks}} {
		if x.v != 0 {
			*x.dst = x.v
		}
	}
	for _, x := range []struct {
		v   time.Duration
		dst *time.Duration
	}{{f.stepFixed, &o.StepFixed}, {f.prefill, &o.PrefillPerToken}, {f.decode, &o.DecodePerSeq}, {f.attn, &o.AttnPerContextToken}} {
		if x.v >= 0 {
			*x.dst = x.v
		}
	}
	if err := o.Validate(); err != nil {
		return o, usageErrorf("sim: %w", err)
	}
	if err := sim.ApplyConfig(&o, f.config); err != nil {
		return o, usageErrorf("--sim-config: %w", err)
	}
	return o, nil
}

func sweepCommand() *cli.Command {
	o := replay.DefaultOptions()
	var (
		slo, speeds, pct, outDir, chart, window, searchRange, ext string
		search, quiet, asJSON                                     bool
		repeat                                                    = 1
		tol                                                       = sweep.DefaultSearchTolerance
		modelMap                                                  headerFlag
		metadata                                                  headerFlag
		sf                                                        sweepSimFlags
		rf                                                        readFlags
	)
	flags := []cli.Flag{
		&cli.StringFlag{Name: "url", Usage: "server base URL (default: a fresh built-in simulator per step)", Destination: &o.URL},
		&cli.StringFlag{Name: "model", Usage: "model name for every request (default: each record's, else the server's first)", Destination: &o.Model},
		&cli.GenericFlag{Name: "model-map", Value: &modelMap, Usage: "prod-name=served-name (repeatable); unmapped names use --model"},
		&cli.StringFlag{Name: "slo", Usage: "SLOs every step must meet, e.g. ttft=1s,tpot=50ms (required)", Destination: &slo},
		&cli.StringFlag{Name: "slo-percentile", Value: "99", Usage: "percentile the SLOs are judged at (p99, 99.9, ...)", Destination: &pct},
		&cli.StringFlag{Name: "speeds", Value: sweep.DefaultSpeeds, Usage: "speeds to replay at (× the recorded rate)", Destination: &speeds},
		&cli.BoolFlag{Name: "search", Usage: "binary-search the highest speed meeting the SLOs instead of --speeds", Destination: &search},
		&cli.StringFlag{Name: "search-range", Value: fmt.Sprintf("%g,%g", sweep.DefaultSearchLow, sweep.DefaultSearchHigh), Usage: "--search: LOW,HIGH speeds", Destination: &searchRange},
		&cli.Float64Flag{Name: "search-tolerance", Value: tol, Usage: "--search: stop when HIGH/LOW ≤ 1+this", Destination: &tol},
		&cli.IntFlag{Name: "repeat", Value: repeat, Usage: "replay every speed N times; a speed meets the SLOs only if every run does, and its row shows the worst run", Destination: &repeat},
		&cli.StringFlag{Name: "out-dir", Value: sweep.DefaultOutDir, Usage: "directory for one results file per step and the chart", Destination: &outDir},
		&cli.StringFlag{Name: "ext", Value: sweep.DefaultExt, Usage: "results file extension (.parquet, .jsonl, .jsonl.zst, .csv)", Destination: &ext},
		&cli.StringFlag{Name: "chart", Usage: "chart file(s), .svg, .png or .pdf, comma-separated (default: OUT-DIR/sweep.svg; none = no chart)", Destination: &chart},
		&cli.StringFlag{Name: "window", Usage: "replay only arrivals in FROM,TO (e.g. 0s,60s)", Destination: &window},
		&cli.IntFlag{Name: "max-concurrency", Usage: "cap in-flight requests (0 = none)", Destination: &o.MaxConcurrency},
		&cli.DurationFlag{Name: "timeout", Value: o.Timeout, Usage: "per-request timeout", Destination: &o.Timeout},
		&cli.BoolFlag{Name: "json", Usage: "print the steps and the answer as JSON", Destination: &asJSON},
		&cli.StringFlag{Name: "label", Usage: "name of this sweep, stored in every step's metadata (run.label)", Destination: &o.Label},
		&cli.GenericFlag{Name: "metadata", Value: &metadata, Usage: "key=value stored in every step's metadata as run.meta.KEY (repeatable)"},
		&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no per-step lines on stderr", Destination: &quiet},
	}
	flags = append(append(flags, sf.flags()...), rf.flags()...)
	return &cli.Command{
		Name:        "sweep",
		Usage:       "find how much faster than recorded a trace can run before the SLOs break",
		UsageText:   sweepUsageText,
		Description: sweepDescription,
		Flags:       flags,
		Action: func(c *cli.Context) error {
			a, err := args(c, 1, 1, "TRACE")
			if err != nil {
				return err
			}
			cfg := sweep.Options{OutDir: outDir, Ext: ext, Search: search, Tolerance: tol, Repeat: repeat, Measure: measureStep}
			if repeat < 1 || repeat > 100 {
				return usageErrorf("--repeat: want 1 to 100 runs per speed, got %d", repeat)
			}
			if cfg.SLO, err = traces.ParseSLO(slo); err != nil {
				return usageErrorf("--slo: %w", err)
			}
			if cfg.SLO.IsZero() {
				return usageErrorf("--slo: required, e.g. ttft=1s,tpot=50ms")
			}
			if cfg.Percentile, err = analyze.ParsePercentile(pct); err != nil {
				return usageErrorf("--slo-percentile: %w", err)
			}
			if cfg.Speeds, err = sweep.ParseSpeeds(speeds); err != nil {
				return usageErrorf("--%w", err)
			}
			if search {
				if cfg.Low, cfg.High, err = searchFlags(searchRange, tol); err != nil {
					return err
				}
			}
			if window != "" {
				if o.WindowFrom, o.WindowTo, err = replay.ParseWindow(window); err != nil {
					return usageError(err, replayFlags)
				}
			}
			if err := runRecordOptions(&o, nil, metadata.v, modelMap.v, true); err != nil {
				return err
			}
			if o.URL == "" {
				if cfg.Sim, err = sf.options(); err != nil {
					return err
				}
			} else {
				probe := o
				if err := probe.Validate(); err != nil {
					return usageError(err, replayFlags)
				}
			}
			charts, err := chartFlag(chart, outDir)
			if err != nil {
				return err
			}
			s := stdio(c)
			recs, meta, err := newTraceIn(c, &rf, "sweep", "sweep sorts the trace by arrival").read(a[0])
			if err != nil {
				return err
			}
			if !quiet {
				cfg.Log = s.err
			}
			cfg.Replay = o
			defer replay.TuneProcess(1)()
			res, err := sweep.Run(c.Context, recs, meta, cfg)
			if err != nil {
				return err
			}
			if err := writeCharts(res, charts, s.err); err != nil {
				return err
			}
			if asJSON {
				return res.WriteJSON(s.out)
			}
			res.WriteTable(s.out)
			for _, w := range res.Warnings {
				fmt.Fprintf(s.out, "warning: %s\n", w)
			}
			fmt.Fprintf(s.out, "\n%s\n", res.Answer())
			return nil
		},
	}
}

const sweepUsageText = `tokentrace sweep [flags] TRACE

Examples:
  tokentrace sweep --slo ttft=1s,tpot=50ms --speeds 0.5,1,1.5,2,3 trace.parquet           # built-in simulator
  tokentrace sweep --slo ttft=1s --search --slo-percentile 99 --url http://vllm:8000 trace.parquet
  tokentrace sweep --slo ttft=500ms --sim-preset tiny --out-dir sweep --chart sweep/knee.png trace.parquet`

const sweepDescription = `sweep replays the same trace at several speeds (or binary-searches the
highest speed that still meets every SLO at --slo-percentile), against --url
or a fresh built-in simulator per step. Each step's results go to
OUT-DIR/speed-S.parquet. It prints a table (offered and achieved rate,
throughput, TTFT/TPOT percentiles, each SLO metric at the percentile,
goodput), draws throughput against p50/p99 latency with the knee marked, and
answers in one line: "this trace can run at 2.3× its recorded rate before
p99 TTFT exceeds 1 s". Failed requests count as infinitely slow.`

// searchFlags checks --search-range (LOW,HIGH) and --search-tolerance.
func searchFlags(searchRange string, tol float64) (low, high float64, err error) {
	lo, hi, ok := strings.Cut(searchRange, ",")
	low, err = strconv.ParseFloat(strings.TrimSpace(lo), 64)
	if err == nil && ok {
		high, err = strconv.ParseFloat(strings.TrimSpace(hi), 64)
	}
	if !ok || err != nil || !(low > 0) || !(high > low) || math.IsInf(high, 0) {
		return 0, 0, usageErrorf("--search-range: want LOW,HIGH with 0 < LOW < HIGH, got %q", searchRange)
	}
	if !(tol > 0) || tol >= 1 {
		return 0, 0, usageErrorf("--search-tolerance: want 0 < tol < 1, got %g", tol)
	}
	return low, high, nil
}

// chartFlag is --chart's files: OUT-DIR/sweep.svg when not given (none
// without an OUT-DIR), none for "none", each .svg, .png or .pdf.
func chartFlag(chart, outDir string) ([]string, error) {
	if chart == "" && outDir != "" {
		chart = filepath.Join(outDir, "sweep.svg")
	}
	if chart == "none" || chart == "" {
		return nil, nil
	}
	var names []string
	for _, ch := range strings.Split(chart, ",") {
		if ce := strings.ToLower(filepath.Ext(ch)); ch != "" && ce != ".svg" && ce != ".png" && ce != ".pdf" {
			return nil, usageErrorf("--chart %s: want .svg, .png or .pdf", ch)
		}
		if ch != "" {
			names = append(names, ch)
		}
	}
	return names, nil
}

// writeCharts draws the sweep's chart into each file (none without steps).
func writeCharts(res *sweep.Result, names []string, stderr io.Writer) error {
	if len(res.Steps) == 0 {
		return nil
	}
	for _, ch := range names {
		if err := os.MkdirAll(filepath.Dir(ch), 0o755); err != nil {
			return fmt.Errorf("--chart: %w", err)
		}
		if err := res.WriteChart(ch); err != nil {
			return fmt.Errorf("write chart %s: %w", ch, err)
		}
		fmt.Fprintf(stderr, "wrote %s\n", ch)
	}
	return nil
}
