package main

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
	"github.com/tokentrace/tokentrace/replay/sweep"
	"github.com/tokentrace/tokentrace/sim"
	"github.com/tokentrace/tokentrace/sim/twin"
	"github.com/tokentrace/tokentrace/traces"
)

// runSweep is the sweep command: it maps a to sweep's options, reads the
// trace, runs the sweep and prints its table (or JSON), warnings and
// answer, and draws its charts.
func runSweep(ctx context.Context, a *sweepArgs, s streams) error {
	cfg, err := a.options()
	if err != nil {
		return err
	}
	charts, err := chartFlag(a.chart, a.outDir)
	if err != nil {
		return err
	}
	recs, meta, err := traceInOf(s, &a.read, "sweep", "sweep sorts the trace by arrival").read(a.trace)
	if err != nil {
		return err
	}
	if !a.quiet {
		cfg.Log = s.err
	}
	defer replay.TuneProcess(1)()
	res, err := sweep.Run(ctx, recs, meta, cfg)
	if err != nil {
		return flagged(err, sweepFlags)
	}
	if err := writeCharts(res, charts, s.err); err != nil {
		return err
	}
	if a.asJSON {
		return res.WriteJSON(s.out)
	}
	res.WriteTable(s.out)
	for _, w := range res.Warnings {
		fmt.Fprintf(s.out, "warning: %s\n", w)
	}
	fmt.Fprintf(s.out, "\n%s\n", res.Answer())
	if cfg.Replay.URL == "" {
		printTrust(s.out, &cfg.Sim)
	}
	return nil
}

// printTrust prints, beside a verdict on a fitted twin, how far the twin
// was found to hold (its last check).
func printTrust(w io.Writer, o *sim.Options) {
	for _, l := range twin.TrustLines(o, cliTerms{}) {
		fmt.Fprintln(w, l)
	}
}

// options maps the flags to sweep's options. Bad values fail here, before
// the trace is read, as usage errors naming the flag.
func (a *sweepArgs) options() (sweep.Options, error) {
	cfg := sweep.DefaultOptions()
	cfg.OutDir, cfg.Ext, cfg.Search, cfg.Tolerance, cfg.Repeat, cfg.Measure = a.outDir, a.ext, a.search, a.tol, a.repeat, measureStep
	var err error
	if a.repeat < 1 || a.repeat > 100 {
		return cfg, usageErrorf("--repeat: want 1 to 100 runs per speed, got %d", a.repeat)
	}
	if cfg.SLO, err = traces.ParseSLO(a.slo); err != nil {
		return cfg, usageErrorf("--slo: %w", err)
	}
	if cfg.SLO.IsZero() {
		return cfg, usageErrorf("--slo: required, e.g. ttft=1s,tpot=50ms")
	}
	if cfg.Percentile, err = analyze.ParsePercentile(a.pct); err != nil {
		return cfg, usageErrorf("--slo-percentile: %w", err)
	}
	if cfg.Speeds, err = sweep.ParseSpeeds(a.speeds); err != nil {
		return cfg, usageError(err, sweepFlags)
	}
	if a.search {
		if cfg.Low, cfg.High, err = searchFlags(a.searchRange, a.tol); err != nil {
			return cfg, err
		}
	}
	o := a.o
	if a.window != "" {
		if o.WindowFrom, o.WindowTo, err = replay.ParseWindow(a.window); err != nil {
			return cfg, usageError(err, replayFlags)
		}
	}
	if err := runRecordOptions(&o, nil, a.metadata.v, a.modelMap.v, true); err != nil {
		return cfg, err
	}
	if err := a.target(&o, &cfg); err != nil {
		return cfg, err
	}
	cfg.Replay = o
	if err := cfg.Validate(); err != nil {
		return cfg, usageError(err, sweepFlags)
	}
	return cfg, nil
}

// target points the sweep at what --target (or --url) names: a server, or
// a fresh built-in simulator per step as the --sim-* flags and the spec's
// keys configure it (the default).
func (a *sweepArgs) target(o *replay.Options, cfg *sweep.Options) error {
	spec, given := a.targetSpec, a.targetSet || a.targetSpec != ""
	switch {
	case given && o.URL != "":
		return usageErrorf("--url %s and --target %s both name the target: give one (--target takes a URL too)", replay.RedactURL(o.URL), replay.RedactURL(spec))
	case given && a.sim.config != "":
		return usageErrorf("--sim-config %s and --target %s both configure the target: give the keys once (--target sim:%s)", a.sim.config, spec, a.sim.config)
	case o.URL != "":
		return serverOptions(o)
	case !given:
		spec = "sim"
	}
	base, err := a.sim.options()
	if err != nil {
		return err
	}
	to, err := replay.ParseTarget(spec, base)
	if err != nil {
		return usageError(err, replayFlags)
	}
	if to.Sim != nil {
		cfg.Sim = *to.Sim
		return nil
	}
	o.URL = to.URL
	return serverOptions(o)
}

// serverOptions checks the replay options of a sweep against a server.
func serverOptions(o *replay.Options) error {
	if err := o.Validate(); err != nil {
		return usageError(err, replayFlags)
	}
	return nil
}

// options is the simulator the --sim-* flags configure, --sim-config's
// keys applied last.
// sweepSimOptionFlags are sweep's --sim-* flags by the simulator's options.
var sweepSimOptionFlags = map[string]string{
	"Options.MaxNumSeqs": "--sim-max-num-seqs", "Options.MaxNumBatchedTokens": "--sim-max-num-batched-tokens",
	"Options.NumGPUBlocks": "--sim-num-gpu-blocks", "Options.StepFixed": "--sim-step-fixed",
	"Options.PrefillPerToken": "--sim-prefill-per-token", "Options.DecodePerSeq": "--sim-decode-per-seq",
	"Options.AttnPerContextToken": "--sim-attn-per-context-token",
}

func (f *sweepSimFlags) options() (sim.Options, error) {
	o := sim.DefaultOptions()
	if err := sim.ApplyPreset(&o, f.preset); err != nil {
		return o, usageErrorf("--sim-preset: %w", err)
	}
	o.PerRequestMetrics = f.perRequestMetrics
	// A flag given, 0 included, overrides the preset's value.
	for name, x := range map[string]struct {
		v   int
		dst *int
	}{"sim-max-num-seqs": {f.maxSeqs, &o.MaxNumSeqs}, "sim-max-num-batched-tokens": {f.maxBatched, &o.MaxNumBatchedTokens}, "sim-num-gpu-blocks": {f.blocks, &o.NumGPUBlocks}} {
		if f.set[name] {
			*x.dst = x.v
		}
	}
	for name, x := range map[string]struct {
		v   time.Duration
		dst *time.Duration
	}{"sim-step-fixed": {f.stepFixed, &o.StepFixed}, "sim-prefill-per-token": {f.prefill, &o.PrefillPerToken}, "sim-decode-per-seq": {f.decode, &o.DecodePerSeq}, "sim-attn-per-context-token": {f.attn, &o.AttnPerContextToken}} {
		if f.set[name] {
			*x.dst = x.v
		}
	}
	if err := o.Validate(); err != nil {
		return o, usageError(fmt.Errorf("sim: %w", err), sweepSimOptionFlags)
	}
	if err := sim.ApplyConfig(&o, f.config); err != nil {
		return o, usageErrorf("--sim-config: %w", err)
	}
	return o, nil
}

// measureStep is sweep.Options.Measure: a step's throughput and latency
// percentiles as analyze computes them.
func measureStep(ctx context.Context, recs []traces.Record, slo traces.SLO) (sweep.Measures, error) {
	ao := analyzeOptions()
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
