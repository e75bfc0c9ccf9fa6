package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tokentrace/tokentrace/synth"
	"github.com/tokentrace/tokentrace/traces"
	"github.com/urfave/cli/v2"
)

func synthCommand() *cli.Command {
	return &cli.Command{
		Name:  "synth",
		Usage: "fit a workload model, generate synthetic traces, build the benchmark matrix, check fidelity",
		UsageText: `tokentrace synth COMMAND [flags] ARGS...

Examples:
  tokentrace synth fit --out model.json trace.parquet
  tokentrace synth gen --seed 1 --duration 1h --rate-scale 2 --out synth.parquet model.json
  tokentrace synth matrix --out matrix.parquet
  tokentrace synth check --json trace.parquet synth.parquet`,
		Description: `synth fits a content-free model of a trace (lengths, their joint shape,
categories, prefix reuse, sessions, the arrival rate over time and the gaps
within it), generates synthetic traces from it (same schema, byte-identical
for the same seed and flags, optionally rescaled), builds the classic
fixed-length benchmark matrix, and measures how faithful a synthetic trace
is to a real one. Flags go before arguments.`,
		Subcommands: []*cli.Command{synthFitCommand(), synthGenCommand(), synthMatrixCommand(), synthCheckCommand()},
	}
}

// synthOut opens the output trace ("-" = JSON lines on stdout).
func synthOut(c *cli.Context, out string, m traces.Meta) (traces.Writer, error) {
	if out == "-" {
		return traces.NewJSONLWriter(synthStdout{stdio(c).out}, m)
	}
	return traces.Create(out, m) // its error names the file
}

type synthStdout struct{ io.Writer }

func (synthStdout) Close() error { return nil }

// synthCommandLine rebuilds the command line for Meta.Command.
func synthCommandLine(c *cli.Context, sub string) string {
	parts := []string{"tokentrace synth " + sub}
	for _, name := range c.FlagNames() {
		// --out is left out so the same seed and flags give the same bytes
		// whatever the output file is called.
		if c.IsSet(name) && name != "out" {
			parts = append(parts, fmt.Sprintf("--%s %v", name, c.Value(name)))
		}
	}
	parts = append(parts, recordedArgs(c.Args().Slice())...)
	return strings.Join(parts, " ")
}

func synthFitCommand() *cli.Command {
	var (
		o   = synth.DefaultFitOptions()
		out = "-"
		rf  readFlags
	)
	return &cli.Command{
		Name:      "fit",
		Usage:     "fit a workload model to a trace",
		UsageText: "tokentrace synth fit [--bin 4s] --out model.json TRACE",
		Description: `fit reads TRACE (.parquet, .jsonl[.zst], .csv; "-" = stdin) and writes a
readable, versioned JSON model: per traffic class and prefix category the
histograms of prefix, input and output tokens (output conditioned on input
ranges), category mix, block reuse, session structure, and the arrival
process as counts per --bin plus within-bin gap distributions (empirical
histograms and exponential/gamma/Weibull MLE fits). No raw records.
TRACE is read once, in arrival order, and memory does not grow with its
length; records up to --reorder-window places out of (arrival_ns, seq)
order are put back in order, one further out is an error. Bad rows are
skipped and named on stderr (--strict fails on the first).

Example:
  tokentrace synth fit --out model.json trace.parquet`,
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "out", Value: out, Usage: "model file (- = stdout)", Destination: &out},
			&cli.DurationFlag{Name: "bin", Value: o.Bin, Usage: "width of the arrival-rate bins", Destination: &o.Bin},
			&cli.DurationFlag{Name: "cluster-gap", Value: o.ClusterGap, Usage: "arrivals closer than this form one cluster (0 = only same-instant arrivals)", Destination: &o.ClusterGap},
			&cli.IntFlag{Name: "length-bins", Value: o.LengthBins, Usage: "max bins of each input/prefix length histogram", Destination: &o.LengthBins},
			&cli.IntFlag{Name: "joint-bins", Value: o.JointBins, Usage: "input ranges the output length is conditioned on", Destination: &o.JointBins},
			&cli.IntFlag{Name: "min-bin-count", Value: o.MinBinCount, Usage: "fewest values per histogram bin", Destination: &o.MinBinCount},
			&cli.IntFlag{Name: "min-category-records", Value: o.MinCategoryRecords, Usage: "smaller categories are pooled", Destination: &o.MinCategoryRecords},
			&cli.DurationFlag{Name: "quantum", Value: o.Quantum, Usage: "arrival-time grid of a coarsened trace (0 = detect, negative = none)", Destination: &o.Quantum},
			&cli.IntFlag{Name: "reorder-window", Value: o.ReorderWindow, Usage: "records held to restore arrival order (0 = none)", Destination: &o.ReorderWindow},
		}, rf.flags()...),
		Action: func(c *cli.Context) error {
			a, err := args(c, 1, 1, "TRACE")
			if err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return usageErrorf("synth fit: %w", err)
			}
			r, err := newTraceIn(c, &rf, "synth fit", "synth fit puts them back in order (--reorder-window)").open(a[0])
			if err != nil {
				return err
			}
			defer r.Close()
			fo := o
			fo.File = filepath.Base(a[0])
			m, err := synth.FitReader(c.Context, r, fo)
			if err != nil {
				return fmt.Errorf("synth fit %s: %w", a[0], err)
			}
			if out == "-" {
				_, err = m.WriteTo(stdio(c).out)
				return err
			}
			if err := synth.WriteModelFile(out, m); err != nil {
				return err
			}
			fmt.Fprintf(stdio(c).err, "synth fit: %d records, %d classes, span %v -> %s\n",
				m.FittedOn.Records, len(m.Classes), time.Duration(m.SpanNs).Round(time.Millisecond), out)
			return nil
		},
	}
}

func synthGenCommand() *cli.Command {
	var (
		o   = synth.DefaultGenOptions()
		out = "-"
		mix string
	)
	return &cli.Command{
		Name:      "gen",
		Usage:     "generate a synthetic trace from a model",
		UsageText: "tokentrace synth gen [--seed S] [--duration D] [--rate-scale X] [--length-scale Y] [--input-length-scale Y] [--output-length-scale Y] [--mix category=share,...] --out OUT MODEL",
		Description: `gen writes a trace drawn from MODEL (from synth fit). The same model,
seed and flags give byte-identical output. --duration defaults to the fitted
trace's span; beyond it the fitted rate profile repeats. --rate-scale
multiplies the arrival rate in every bin and keeps lengths; --length-scale
multiplies input, output and prefix lengths, --input-length-scale prompts
alone and --output-length-scale outputs alone (a follow-up resends the
unscaled output, so prompts do not change); --mix overrides category shares
as shares of requests
("none" = no shared prefix, "tail" = the pooled small categories; unlisted
categories share the rest in their fitted proportions).

Example:
  tokentrace synth gen --seed 7 --duration 30m --rate-scale 2 --out synth.parquet model.json`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "out", Value: out, Usage: "output trace (.parquet, .jsonl, .jsonl.zst, .csv; - = JSON lines on stdout)", Destination: &out},
			&cli.Uint64Flag{Name: "seed", Value: o.Seed, Usage: "random seed", Destination: &o.Seed},
			&cli.DurationFlag{Name: "duration", Value: o.Duration, Usage: "trace duration (0 = the fitted span)", Destination: &o.Duration},
			&cli.Float64Flag{Name: "rate-scale", Value: o.RateScale, Usage: "multiply the arrival rate", Destination: &o.RateScale},
			&cli.Float64Flag{Name: "length-scale", Value: o.LengthScale, Usage: "multiply input, output and prefix lengths", Destination: &o.LengthScale},
			&cli.Float64Flag{Name: "input-length-scale", Value: o.InputLengthScale, Usage: "multiply input and prefix lengths alone (on top of --length-scale)", Destination: &o.InputLengthScale},
			&cli.Float64Flag{Name: "output-length-scale", Value: o.OutputLengthScale, Usage: "multiply output lengths alone (on top of --length-scale; follow-ups resend the unscaled output, so prompts do not change)", Destination: &o.OutputLengthScale},
			&cli.StringFlag{Name: "mix", Usage: "category shares, e.g. sys-a=0.5,none=0.2", Destination: &mix},
			&cli.StringFlag{Name: "gaps", Value: o.Gaps, Usage: "within-bin gaps: " + strings.Join(synth.GapsModes, " or "), Destination: &o.Gaps},
			&cli.IntFlag{Name: "max-context-tokens", Value: o.MaxContextTokens, Usage: "cap of a follow-up turn's input (0 = the longest fitted input)", Destination: &o.MaxContextTokens},
		},
		Action: func(c *cli.Context) error {
			a, err := args(c, 1, 1, "MODEL")
			if err != nil {
				return err
			}
			if o.Mix, err = synth.ParseMix(mix); err != nil {
				return usageErrorf("synth gen: %w", err)
			}
			if err := o.Validate(); err != nil {
				return usageErrorf("synth gen: %w", err)
			}
			var m *synth.Model
			if a[0] == "-" {
				m, err = synth.LoadModel(stdio(c).in)
			} else {
				m, err = synth.ReadModelFile(a[0])
			}
			if err != nil {
				return err
			}
			meta := m.GenMeta(o)
			meta.Command = synthCommandLine(c, "gen")
			w, err := synthOut(c, out, meta)
			if err != nil {
				return err
			}
			n, err := m.Generate(c.Context, o, w)
			if cerr := w.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				if out != "-" {
					os.Remove(out)
				}
				return fmt.Errorf("synth gen: %w", err)
			}
			if out != "-" {
				fmt.Fprintf(stdio(c).err, "synth gen: %d records -> %s\n", n, out)
			}
			return nil
		},
	}
}

func synthMatrixCommand() *cli.Command {
	o := synth.DefaultMatrixOptions()
	out := "-"
	return &cli.Command{
		Name:      "matrix",
		Usage:     "build the classic fixed-length benchmark matrix as one trace",
		UsageText: "tokentrace synth matrix [--rows ROWS] [--row-duration 1m] --out OUT",
		Description: `matrix writes one trace with a class per row, rows in sequence (separated
by --row-gap), so one replay runs them all and analyze --by class reports
per row. A row is

  IN/OUT@LOAD[+PREFIXw|c]     LOAD = RATErps | sat

e.g. 256/128@1rps (256 input, 128 output tokens at 1 req/s for
--row-duration), 2048/1024@sat (--sat-requests at once: saturation),
4096/256+2048w@1rps (a 2048-token prefix shared by the row's requests:
warm after the first; "c" = cold, no shared prefix). IN includes the prefix.

Example:
  tokentrace synth matrix --rows '256/128@1rps,2048/1024@sat,4096/256+2048w@1rps' --out matrix.parquet`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "out", Value: out, Usage: "output trace (- = JSON lines on stdout)", Destination: &out},
			&cli.StringFlag{Name: "rows", Value: o.Rows, Usage: "comma-separated rows IN/OUT@RATErps|sat[+PREFIXw|c]", Destination: &o.Rows},
			&cli.DurationFlag{Name: "row-duration", Value: o.RowDuration, Usage: "duration of a rate row", Destination: &o.RowDuration},
			&cli.IntFlag{Name: "sat-requests", Value: o.SatRequests, Usage: "requests of a saturation row", Destination: &o.SatRequests},
			&cli.DurationFlag{Name: "row-gap", Value: o.RowGap, Usage: "idle time between rows", Destination: &o.RowGap},
			&cli.StringFlag{Name: "arrival", Value: o.Arrival, Usage: "arrivals of rate rows: poisson or uniform", Destination: &o.Arrival},
			&cli.Uint64Flag{Name: "seed", Value: o.Seed, Usage: "random seed (poisson arrivals)", Destination: &o.Seed},
			&cli.StringFlag{Name: "model", Usage: "model name written to every row", Destination: &o.Model},
		},
		Action: func(c *cli.Context) error {
			if _, err := args(c, 0, 0, "none"); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return usageErrorf("synth matrix: %w", err)
			}
			recs, meta, err := synth.Matrix(o)
			if err != nil {
				return usageErrorf("synth matrix: %w", err)
			}
			meta.Command = synthCommandLine(c, "matrix")
			w, err := synthOut(c, out, meta)
			if err != nil {
				return err
			}
			if _, err := w.Write(recs); err != nil {
				w.Close()
				return fmt.Errorf("synth matrix: %w", err)
			}
			if err := w.Close(); err != nil {
				return fmt.Errorf("synth matrix: %w", err)
			}
			if out != "-" {
				fmt.Fprintf(stdio(c).err, "synth matrix: %d records -> %s\n", len(recs), out)
			}
			return nil
		},
	}
}
