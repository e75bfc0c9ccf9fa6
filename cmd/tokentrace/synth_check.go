package main

// synth check: how faithful a synthetic trace is to a real one.

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/tokentrace/tokentrace/synth"
	"github.com/tokentrace/tokentrace/traces"
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
		model  string
		rf     readFlags
	)
	return &cli.Command{
		Name:      "check",
		Usage:     "measure how faithful a synthetic trace is to a real one",
		UsageText: "tokentrace synth check [--json] [--model MODEL] REAL SYNTH",
		Description: `check compares SYNTH with REAL: two-sample KS and Wasserstein distances
of input tokens, output tokens, inter-arrival gaps and per-minute rate;
per-minute rate error; burstiness (CV, index of dispersion at 1s/10s/60s);
category shares; prefix reuse; session and turn counts; with follow-up
turns, input length by turn index (context growth) and think time. Each
thresholded figure passes or fails; the exit code is 1 when any fails. A
failed check says which conclusions it can change and what to change in
SYNTH (an option, a command). A windowed figure needs 10 full windows in
both traces (a 60 s trace has no per-minute rate to compare): with fewer it
is skipped with the reason, and does not fail. Each check fails only beyond
both its threshold and its noise floor (the difference two traces drawn
alike exceed by chance, from their sizes and sessions) at --confidence.
With --model (the model SYNTH was generated from), a failed check's option
change is tried before it is said: check generates from MODEL with
SYNTH's options and each change, keeps the changes that bring their check
within its limit and make no passing check fail, and prints them as the
synth gen and synth check commands that make and check the fixed workload
(a new file beside SYNTH).
JSON keys are stable: ks.input_tokens, ks.output_tokens, ks.interarrival,
wasserstein.*, rate_error, dispersion.1s/10s/60s, cv,
category_share_max_diff, prefix_reuse, sessions, turns, pass, confidence,
check_confidence, each check's threshold, noise_floor and limit, and with
follow-ups input_by_turn, prefix_reuse_by_turn, prefix_reuse_by_category,
context_growth, ks.think; with --model, fixes.

Examples:
  tokentrace synth check --json trace.parquet synth.parquet
  tokentrace synth check --model model.json trace.parquet synth.parquet`,
		Flags: append([]cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "print the report as JSON", Destination: &asJSON},
			&cli.StringFlag{Name: "model", Usage: "the model SYNTH was generated from: try fixes by generating and checking, print those that help", Destination: &model},
			&cli.Float64Flag{Name: "confidence", Value: th.Confidence, Usage: "probability that a trace drawn like REAL passes every check (sets each check's noise floor)", Destination: &th.Confidence},
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
			switch {
			case rep.Pass:
			case model != "":
				if rep.Fixes, err = tryFixes(c, model, a, real, syn, synMeta, th); err != nil {
					return err
				}
			case synMeta.Source == synth.SourceGen:
				fmt.Fprintf(stdio(c).err, "synth check: with --model MODEL (the model %s was generated from), check tries fixes by generating and checking, and prints those that help\n", a[1])
			}
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

// tryFixes runs synth.FindFixes from the model SYNTH (files[1]) was
// generated from, with the options its metadata records, and says the
// fixes kept as the commands that make and check the fixed workload.
func tryFixes(c *cli.Context, model string, files []string, real, syn []traces.Record, synMeta traces.Meta, th synth.Thresholds) (*synth.FixReport, error) {
	m, err := synth.ReadModelFile(model)
	if err != nil {
		return nil, fmt.Errorf("synth check: %w", err)
	}
	opts, ok, err := synth.GenOptionsOf(synMeta)
	if err != nil {
		return nil, fmt.Errorf("synth check: %s: %w", files[1], err)
	}
	if !ok {
		return &synth.FixReport{Note: files[1] + " was not made by synth gen (its metadata records no generation options), so no fix was tried"}, nil
	}
	if same, err := m.Regenerates(c.Context, opts, syn); err != nil {
		return nil, fmt.Errorf("synth check: %w", err)
	} else if !same {
		return &synth.FixReport{Note: model + " with the options " + files[1] + " records does not generate " + files[1] + " (another model, or a changed trace), so no fix was tried"}, nil
	}
	fixed, fixes, final, err := m.FindFixes(c.Context, real, opts, th)
	if err != nil {
		return nil, fmt.Errorf("synth check: %w", err)
	}
	fr := synth.NewFixReport(fixes, final)
	fr.Terms = cliTerms{}
	if len(fixes) > 0 {
		out := fixedName(files[1], model, files[0])
		fr.Commands = []string{genCommand(fixed, model, out), checkCommand(c, model, files[0], out)}
	}
	return fr, nil
}

// fixedName is a new file beside synthFile for the fixed workload: its
// name with .fixed before the extension, never one of the inputs.
func fixedName(synthFile string, inputs ...string) string {
	dir, base := filepath.Dir(synthFile), filepath.Base(synthFile)
	if synthFile == "-" {
		dir, base = ".", "synth.parquet"
	}
	ext := ""
	for _, e := range []string{".jsonl.zst", ".parquet", ".jsonl", ".csv"} {
		if strings.HasSuffix(base, e) {
			ext = e
			break
		}
	}
	stem := strings.TrimSuffix(base, ext)
	if ext == "" {
		ext = ".parquet"
	}
	inputs = append(inputs, synthFile)
	for i := 1; ; i++ {
		name := stem + ".fixed" + ext
		if i > 1 {
			name = stem + ".fixed" + strconv.Itoa(i) + ext
		}
		p := filepath.Join(dir, name)
		if !slices.ContainsFunc(inputs, func(in string) bool { return sameFile(in, p) }) {
			return p
		}
	}
}

// sameFile says whether a and b name one file.
func sameFile(a, b string) bool {
	if filepath.Clean(a) == filepath.Clean(b) {
		return true
	}
	sa, err1 := os.Stat(a)
	sb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(sa, sb)
}

// genCommand is the synth gen command line of o.
func genCommand(o synth.GenOptions, model, out string) string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	parts := []string{"tokentrace synth gen", "--seed", strconv.FormatUint(o.Seed, 10), "--duration", o.Duration.String()}
	for _, s := range []struct {
		name string
		v    float64
	}{{"rate-scale", o.RateScale}, {"length-scale", o.LengthScale}, {"input-length-scale", o.InputLengthScale}, {"output-length-scale", o.OutputLengthScale}} {
		if s.v != 0 && s.v != 1 {
			parts = append(parts, "--"+s.name, f(s.v))
		}
	}
	if len(o.Mix) > 0 {
		keys := make([]string, 0, len(o.Mix))
		for k := range o.Mix {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var mix []string
		for _, k := range keys {
			mix = append(mix, k+"="+f(o.Mix[k]))
		}
		parts = append(parts, "--mix", shellWord(strings.Join(mix, ",")))
	}
	if o.Gaps != "" && o.Gaps != synth.DefaultGaps {
		parts = append(parts, "--gaps", o.Gaps)
	}
	if o.MaxContextTokens > 0 {
		parts = append(parts, "--max-context-tokens", strconv.Itoa(o.MaxContextTokens))
	}
	parts = append(parts, "--out", shellWord(out), shellWord(model))
	return strings.Join(parts, " ")
}

// checkCommand is this synth check's command line for the fixed workload
// out: the flags given (but --json), --model, REAL and out.
func checkCommand(c *cli.Context, model, real, out string) string {
	parts := []string{"tokentrace synth check"}
	for _, name := range c.FlagNames() {
		if c.IsSet(name) && name != "json" && name != "model" {
			v := fmt.Sprint(c.Value(name))
			if b, ok := c.Value(name).(bool); ok {
				if b {
					parts = append(parts, "--"+name)
				}
				continue
			}
			parts = append(parts, "--"+name, shellWord(v))
		}
	}
	parts = append(parts, "--model", shellWord(model), shellWord(real), shellWord(out))
	return strings.Join(parts, " ")
}
