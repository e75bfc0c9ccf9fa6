package main

// validate: flags to validate.Options, the two workloads read (or the
// synthetic one generated from a model), one validate.Run, and its text,
// JSON and HTML. The runs, the statistics and the verdicts live in
// package validate.

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/tokentrace/tokentrace/internal/atomicfile"
	"github.com/tokentrace/tokentrace/replay"
	"github.com/tokentrace/tokentrace/sim"
	"github.com/tokentrace/tokentrace/synth"
	"github.com/tokentrace/tokentrace/traces"
	"github.com/tokentrace/tokentrace/validate"
	"github.com/urfave/cli/v2"
)

const validateUsageText = `tokentrace validate --target NAME=SPEC --target NAME=SPEC [flags] REAL SYNTHETIC

Examples:
  tokentrace validate --target a=sim --target b=sim:prefix-caching=false,prefill-per-token=30us real.parquet matrix.parquet
  tokentrace validate --target a=sim --target b=sim:max-num-seqs=64 --slo ttft=500ms --html v.html real.parquet model.json
  tokentrace validate --target old=http://vllm-a:8000 --target new=http://vllm-b:8000 --repeat 3 real.parquet synth.parquet`

var validateDescription = `validate runs REAL (a captured or imported trace) and SYNTHETIC (a trace from
synth gen or synth matrix, or a model from synth fit, generated with --seed over
REAL's span) against every --target, and asks for each target against the
first (the baseline) and each metric: does the synthetic workload reach the
same conclusion as the real one? Verdicts: holds, reversed, magnitude off (same
direction, effects disagree beyond the intervals and --magnitude-tolerance),
not significant on real / on synthetic. Intervals are seeded bootstrap
intervals of the relative change (paired by request when both runs hold the
same requests). The headline is the decision: which conclusions keep their
direction and significance on real traffic (holds, magnitude off) and which
do not (reversed, significant on one side only).

Where a conclusion breaks, --explain ablation (the default when every target
simulates offline) reruns the synthetic workload with one property of the
real one transplanted at a time (prompt lengths, output lengths, arrivals,
prefix reuse, sessions) and names the properties that restore the real
conclusion (proven) or close part of the gap, each with the figures its
transplant changed; where no single property restores a conclusion, it runs
the real workload with one synthetic property at a time (is the real one
necessary?) and pairs of the nearest properties, within
--combination-budget extra runs. With URL targets it says what that would
cost and runs it only when asked. Without it (--explain none) the reasons
are a prior from what the configuration change acts through. Next steps say
what to change in the synthetic workload, with commands that run as printed
(new files, then validate again) where one can make the change.

A target is NAME=SPEC, SPEC as replay --target takes it: a running
vLLM-compatible server's URL, or sim[:KEY=VALUE,...] (the built-in
simulator; keys: ` + strings.Join(sim.ConfigKeys(), ", ") + `).
Simulator targets run offline in virtual time (deterministic, fast) unless
--realtime. Every workload is held in memory.`

func validateCommand() *cli.Command {
	o := validate.DefaultOptions()
	o.Terms, o.Replay.Terms = cliTerms{validateFlags}, cliTerms{replayFlags}
	var (
		targets, modelMap                 headerFlag
		metrics, slo, htmlOut, apiKeyFile string
		asJSON, quiet, failIfBroken       bool
		minEffectPct                      = 100 * o.MinEffect
		rf                                readFlags
	)
	return &cli.Command{
		Name:        "validate",
		Usage:       "check whether a synthetic benchmark's conclusions hold on real traffic",
		UsageText:   validateUsageText,
		Description: validateDescription,
		Flags: append([]cli.Flag{
			&cli.GenericFlag{Name: "target", Value: &targets, Usage: "NAME=URL or NAME=sim[:KEY=VALUE,...] (repeatable, at least two; the first is the baseline)"},
			&cli.StringFlag{Name: "metrics", Usage: "metrics to judge: ttft_pN, tpot_pN, e2e_pN, goodput (default: " + validate.DefaultMetrics + ", plus goodput with --slo)", Destination: &metrics},
			&cli.StringFlag{Name: "slo", Usage: "SLOs that define goodput, e.g. ttft=500ms,tpot=50ms (default: none)", Destination: &slo},
			&cli.Float64Flag{Name: "speed", Value: o.Speed, Usage: "scale both workloads' arrival rate (2 = twice as fast)", Destination: &o.Speed},
			&cli.IntFlag{Name: "repeat", Value: o.Repeat, Usage: "runs per workload and target, pooled in the intervals (offline simulations run once)", Destination: &o.Repeat},
			&cli.BoolFlag{Name: "realtime", Usage: "replay simulator targets in real time through the HTTP client instead of simulating offline", Destination: &o.Realtime},
			&cli.Uint64Flag{Name: "seed", Value: o.Seed, Usage: "seed of the bootstrap and of a SYNTHETIC model's generation", Destination: &o.Seed},
			&cli.IntFlag{Name: "resamples", Value: o.Resamples, Usage: "bootstrap resamples", Destination: &o.Resamples},
			&cli.Float64Flag{Name: "confidence", Value: o.Confidence, Usage: "confidence level of the intervals", Destination: &o.Confidence},
			&cli.Float64Flag{Name: "min-effect-pct", Value: minEffectPct, Usage: "a relative change under this many percent is no effect", Destination: &minEffectPct},
			&cli.Float64Flag{Name: "magnitude-tolerance", Value: o.MagnitudeTolerance, Usage: "same-direction effects agree when |synthetic − real| ≤ this × |real| (or their intervals overlap)", Destination: &o.MagnitudeTolerance},
			&cli.StringFlag{Name: "explain", Value: o.Explain, Usage: "how to explain a conclusion that does not hold: none (a prior from what the change acts through), ablation (rerun the synthetic workload with one real property at a time, even on URL targets), auto (ablation when every target simulates offline)", Destination: &o.Explain},
			&cli.IntFlag{Name: "combination-budget", Value: o.CombinationBudget, Usage: "most extra runs the ablation may take, where no single property restores a conclusion, to run the real workload with one synthetic property at a time and pairs of the nearest properties (0 = none)", Destination: &o.CombinationBudget},
			&cli.StringFlag{Name: "out-dir", Usage: "write every run's results as OUT-DIR/WORKLOAD-TARGET.parquet (default: none)", Destination: &o.OutDir},
			&cli.StringFlag{Name: "html", Usage: "write an HTML report with a side-by-side chart per metric to `FILE`", Destination: &htmlOut},
			&cli.BoolFlag{Name: "json", Usage: "print the result as JSON", Destination: &asJSON},
			&cli.BoolFlag{Name: "fail-if-broken", Usage: "exit 1 when a conclusion does not hold (for CI)", Destination: &failIfBroken},
			&cli.StringFlag{Name: "model", Usage: "model name for URL targets (default: each record's, else the server's first)", Destination: &o.Replay.Model},
			&cli.GenericFlag{Name: "model-map", Value: &modelMap, Usage: "prod-name=served-name for URL targets (repeatable)"},
			&cli.StringFlag{Name: "api-key-file", Usage: "file holding a bearer token for URL targets (never logged or stored)", Destination: &apiKeyFile},
			&cli.DurationFlag{Name: "timeout", Value: o.Replay.Timeout, Usage: "per-request timeout of replays", Destination: &o.Replay.Timeout},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no per-run lines on stderr", Destination: &quiet},
		}, rf.flags()...),
		Action: func(c *cli.Context) error {
			a, err := args(c, 2, 2, "REAL SYNTHETIC")
			if err != nil {
				return err
			}
			f := validateArgs{targets: targets.v, modelMap: modelMap.v, metrics: metrics, slo: slo, apiKeyFile: apiKeyFile, minEffectPct: minEffectPct}
			if err := f.apply(&o); err != nil {
				return err
			}
			s := stdio(c)
			if !quiet {
				o.Log = s.err
			}
			res, err := runValidation(c, o, &rf, a[0], a[1], o.Seed)
			if err != nil {
				return err
			}
			return writeValidation(s, res, o.Targets, htmlOut, asJSON, failIfBroken)
		},
	}
}

// validateArgs are validate's flags that do not map one to one onto an
// option.
type validateArgs struct {
	targets, modelMap        []string
	metrics, slo, apiKeyFile string
	minEffectPct             float64
}

// apply parses the flags into o (targets, SLOs, metrics, the model map,
// the API key) and validates o before any input is read: a usage error
// names the flag.
func (f validateArgs) apply(o *validate.Options) error {
	for _, t := range f.targets {
		tg, err := validate.ParseTarget(t, replay.BuiltinSim())
		if err != nil {
			if te := (*validate.TargetError)(nil); errors.As(err, &te) {
				return usageErrorf("--target %s: %w", te.Target, te.Err)
			}
			return usageError(err, validateFlags)
		}
		o.Targets = append(o.Targets, tg)
	}
	if len(o.Targets) < 2 {
		return usageErrorf("--target: give at least two (the first is the baseline), e.g. --target a=sim --target b=sim:max-num-seqs=64")
	}
	var err error
	if o.SLO, err = traces.ParseSLO(f.slo); err != nil {
		return usageErrorf("--slo: %w", err)
	}
	o.Metrics = validate.DefaultMetricsFor(o.SLO)
	if f.metrics != "" {
		if o.Metrics, err = validate.ParseMetrics(f.metrics); err != nil {
			return usageErrorf("--metrics: %w", err)
		}
	}
	o.MinEffect = f.minEffectPct / 100
	if o.Replay.ModelMap, err = replay.ParseModelMap(f.modelMap); err != nil {
		return usageError(err, replayFlags)
	}
	if f.apiKeyFile != "" {
		if o.Replay.APIKey, err = readAPIKey(f.apiKeyFile); err != nil {
			return err
		}
	}
	if err := o.Validate(); err != nil {
		return usageError(err, validateFlags)
	}
	return nil
}

// runValidation reads the real workload (a trace) and the synthetic one
// (a trace, or a model generated with seed) and runs them on every
// target.
func runValidation(c *cli.Context, o validate.Options, rf *readFlags, realFile, synFile string, seed uint64) (*validate.Result, error) {
	in := newTraceIn(c, rf, "validate", "validate sorts the trace by arrival")
	src, err := in.source(realFile)
	if err != nil {
		return nil, err
	}
	real := validate.Workload{Name: "real", Source: src, File: realFile}
	syn, err := readSynthetic(c, in, synFile, real, seed)
	if err != nil {
		return nil, err
	}
	// Replays need the real-time tuning (fewer collections, more
	// Ps); offline simulations need the memory it would cost.
	if slices.ContainsFunc(o.Targets, func(t validate.Target) bool { return t.URL != "" || o.Realtime }) {
		defer replay.TuneProcess(1)()
	}
	res, err := validate.Run(c.Context, real, syn, o)
	if err != nil {
		return nil, flagged(err, validateFlags)
	}
	return res, nil
}

// writeValidation writes the result: the HTML page when asked, the text
// (or JSON) on stdout, each fitted twin's last check among the targets
// after it (on stderr beside JSON); with failIfBroken a conclusion that
// does not hold exits 1.
func writeValidation(s streams, res *validate.Result, targets []validate.Target, htmlOut string, asJSON, failIfBroken bool) error {
	if htmlOut != "" {
		if err := atomicfile.WriteFile(htmlOut, res.WriteHTML); err != nil {
			return fmt.Errorf("write %s: %w", htmlOut, err)
		}
		fmt.Fprintf(s.err, "wrote %s\n", htmlOut)
	}
	var err error
	trust := s.out // a fitted twin's last check, beside the verdicts
	if asJSON {
		err, trust = res.WriteJSON(s.out), s.err
	} else {
		err = res.WriteText(s.out)
	}
	for _, t := range targets {
		printTrust(trust, t.Sim)
	}
	if err == nil && failIfBroken && !res.Holds() {
		return withCode(1, fmt.Errorf("validate: a conclusion does not hold (--fail-if-broken)"))
	}
	return err
}

// readSynthetic reads the synthetic workload: a trace, or a synth model
// (JSON) generated over the real workload's span.
func readSynthetic(c *cli.Context, in *traceIn, name string, real validate.Workload, seed uint64) (validate.Workload, error) {
	if strings.HasSuffix(strings.ToLower(name), ".json") {
		if m, err := synth.ReadModelFile(name); err == nil {
			gen := synth.DefaultGenOptions()
			gen.Seed = seed
			w, err := validate.Generate(c.Context, "synthetic", m, real, gen)
			w.File = name
			return w, err
		}
	}
	src, err := in.source(name)
	if err != nil {
		return validate.Workload{}, err
	}
	return validate.Workload{Name: "synthetic", Source: src, File: name}, nil
}
