package main

// synth check: how faithful a synthetic trace is to a real one.

import (
	"fmt"

	"github.com/tokentrace/tokentrace/synth"
	"github.com/urfave/cli/v2"
)

// synthCheckFlags are synth check's flags for synth.Thresholds.
var synthCheckFlags = map[string]string{
	"Thresholds.KSLengths": "--max-ks-lengths", "Thresholds.KSGaps": "--max-ks-gaps", "Thresholds.RateError": "--max-rate-error",
	"Thresholds.Dispersion": "--max-dispersion-error", "Thresholds.CV": "--max-cv-error", "Thresholds.CategoryShare": "--max-share-diff",
	"Thresholds.PrefixReuse": "--max-prefix-reuse-diff", "Thresholds.ContextGrowth": "--max-context-growth", "Thresholds.KSThink": "--max-ks-think",
}

func synthCheckCommand() *cli.Command {
	th := synth.DefaultThresholds()
	var (
		asJSON bool
		rf     readFlags
	)
	return &cli.Command{
		Name:      "check",
		Usage:     "measure how faithful a synthetic trace is to a real one",
		UsageText: "tokentrace synth check [--json] REAL SYNTH",
		Description: `check compares SYNTH with REAL: two-sample KS and Wasserstein distances
of input tokens, output tokens, inter-arrival gaps and per-minute rate;
per-minute rate error; burstiness (CV, index of dispersion at 1s/10s/60s);
category shares; prefix reuse; session and turn counts; with follow-up
turns, input length by turn index (context growth) and think time. Each
thresholded figure passes or fails; the exit code is 1 when any fails. A
failed check says which conclusions it can change and what to change in
SYNTH (an option, a command). A windowed figure needs 10 full windows in
both traces (a 60 s trace has no per-minute rate to compare): with fewer it
is skipped with the reason, and does not fail.
JSON keys are stable: ks.input_tokens, ks.output_tokens, ks.interarrival,
wasserstein.*, rate_error, dispersion.1s/10s/60s, cv,
category_share_max_diff, prefix_reuse, sessions, turns, pass, and with
follow-ups input_by_turn, context_growth, ks.think.

Example:
  tokentrace synth check --json trace.parquet synth.parquet`,
		Flags: append([]cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "print the report as JSON", Destination: &asJSON},
			&cli.Float64Flag{Name: "max-ks-lengths", Value: th.KSLengths, Usage: "limit of ks.input_tokens and ks.output_tokens", Destination: &th.KSLengths},
			&cli.Float64Flag{Name: "max-ks-gaps", Value: th.KSGaps, Usage: "limit of ks.interarrival", Destination: &th.KSGaps},
			&cli.Float64Flag{Name: "max-rate-error", Value: th.RateError, Usage: "limit of rate_error", Destination: &th.RateError},
			&cli.Float64Flag{Name: "max-dispersion-error", Value: th.Dispersion, Usage: "limit of each dispersion.* relative error", Destination: &th.Dispersion},
			&cli.Float64Flag{Name: "max-cv-error", Value: th.CV, Usage: "limit of the cv relative error", Destination: &th.CV},
			&cli.Float64Flag{Name: "max-share-diff", Value: th.CategoryShare, Usage: "limit of category_share_max_diff", Destination: &th.CategoryShare},
			&cli.Float64Flag{Name: "max-prefix-reuse-diff", Value: th.PrefixReuse, Usage: "limit of prefix_reuse", Destination: &th.PrefixReuse},
			&cli.Float64Flag{Name: "max-context-growth", Value: th.ContextGrowth, Usage: "limit of context_growth (input by turn index)", Destination: &th.ContextGrowth},
			&cli.Float64Flag{Name: "max-ks-think", Value: th.KSThink, Usage: "limit of ks.think (think time before follow-ups)", Destination: &th.KSThink},
		}, rf.flags()...),
		Action: func(c *cli.Context) error {
			a, err := args(c, 2, 2, "REAL SYNTH")
			if err != nil {
				return err
			}
			if err := th.Validate(); err != nil {
				return usageError(fmt.Errorf("synth check: %w", err), synthCheckFlags)
			}
			in := newTraceIn(c, &rf, "synth check", "synth check sorts the trace by arrival")
			real, _, err := in.read(a[0])
			if err != nil {
				return fmt.Errorf("synth check: %w", err)
			}
			syn, synMeta, err := in.read(a[1])
			if err != nil {
				return fmt.Errorf("synth check: %w", err)
			}
			rep := synth.Check(real, syn, th)
			rep.Advise(synMeta.Source, a[0], cliTerms{})
			if asJSON {
				err = rep.WriteJSON(stdio(c).out)
			} else {
				err = rep.WriteText(stdio(c).out)
			}
			if err != nil {
				return err
			}
			if !rep.Pass {
				return withCode(exitFailure, fmt.Errorf("synth check: %s does not match %s within the thresholds", a[1], a[0]))
			}
			return nil
		},
	}
}
