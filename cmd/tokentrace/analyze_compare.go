package main

import (
	"cmp"
	"fmt"
	"io"
	"strings"

	"github.com/tokentrace/tokentrace/analyze"
	"github.com/tokentrace/tokentrace/internal/atomicfile"
	"github.com/urfave/cli/v2"
)

// analyzeCompareCommand is analyze compare: two runs metric by metric.
func analyzeCompareCommand() *cli.Command {
	f := &analyzeFlags{o: analyzeOptions()}
	cd := analyze.DefaultCompareOptions()
	flags := append(f.common(),
		&cli.Uint64Flag{Name: "seed", Usage: "bootstrap seed", Value: cd.Seed, Destination: &f.seed},
		&cli.IntFlag{Name: "resamples", Usage: "bootstrap resamples", Value: cd.Resamples, Destination: &f.resamples},
		&cli.Float64Flag{Name: "confidence", Usage: "confidence level of the intervals", Value: cd.Confidence, Destination: &f.confidence},
		&cli.IntFlag{Name: "max-sample", Usage: "values per side kept for the bootstrap (evenly spaced order statistics)", Value: cd.MaxSample, Destination: &f.compareMaxSample},
		&cli.Float64Flag{Name: "threshold-pct", Usage: "relative change (%) under which metrics without an interval are unchanged", Value: 100 * cd.Threshold, Destination: &f.compareThresholdPct},
		&cli.StringFlag{Name: "mode", Usage: "change: B against the baseline A (better/worse); fidelity: does B (a synthetic run) reproduce A (the real one) (same/differs)", Value: cd.Mode, Destination: &f.compareMode},
		&cli.Float64Flag{Name: "practical-pct", Usage: "--mode fidelity: relative difference (%) under which a metric is the same even when its interval excludes zero", Value: 100 * cd.PracticalDiff, Destination: &f.practicalPct},
		&cli.Float64Flag{Name: "min-change-ms", Usage: "latency differences under this many ms count as no change (noise)", Value: cd.MinChangeMs, Destination: &f.minChangeMs},
		&cli.DurationFlag{Name: "max-lateness", Usage: "warn about a run whose client lateness p99 exceeds this: it did not keep its recorded timing (replay's --max-lateness)", Value: cd.MaxLateness, Destination: &f.maxLateness},
		&cli.StringFlag{Name: "label-a", Usage: "name of the first run (default: its file name)", Destination: &f.labelA},
		&cli.StringFlag{Name: "label-b", Usage: "name of the second run (default: its file name)", Destination: &f.labelB},
		&cli.StringFlag{Name: "html", Usage: "also write a self-contained HTML comparison with charts to this `FILE`", Destination: &f.html},
	)
	return &cli.Command{
		Name:  "compare",
		Usage: "compare two runs metric by metric, with bootstrap intervals and verdicts",
		UsageText: `tokentrace analyze compare [flags] A B

A and B are results files; give the shards of one run as a comma-separated list.

Examples:
  tokentrace analyze compare before.parquet after.parquet
  tokentrace analyze compare --mode fidelity --label-a real --label-b synthetic real-results.parquet synth-results.parquet
  tokentrace analyze compare --slo ttft=500ms --label-a before --label-b after before.parquet after-0.parquet,after-1.parquet
  tokentrace analyze compare --json --seed 7 a.parquet b.parquet
  tokentrace analyze compare --html compare.html before.parquet after.parquet`,
		Description: `compare analyzes A and B with the same options and prints a one-line
conclusion, then every metric side by side with its change, a seeded
bootstrap confidence interval of the change of each latency's p50 and p99,
and a verdict, the tail attribution of both runs, and the metadata that
differs, shortened; first, a warning for a run over --max-lateness.

--mode change (default): A is the baseline; verdicts better, worse, no
significant change.
--mode fidelity: A is the real traffic's run, B a synthetic workload's;
verdicts same within interval, same within threshold (--practical-pct),
differs; the conclusion says whether B reaches A's conclusion (tail cause and
key percentiles). Lateness is left out of the verdicts there: it judges each
run's validity, not the workload.`,
		Flags: flags,
		Action: func(c *cli.Context) error {
			names, err := args(c, 2, 2, "results A and B")
			if err != nil {
				return err
			}
			o, err := f.options()
			if err != nil {
				return err
			}
			if f.confidence <= 0 || f.confidence >= 1 {
				return usageErrorf("--confidence %v: want a level strictly between 0 and 1, e.g. 0.95", f.confidence)
			}
			if f.resamples < 10 {
				return usageErrorf("--resamples %d: want at least 10", f.resamples)
			}
			if f.compareMode != analyze.ModeChange && f.compareMode != analyze.ModeFidelity {
				return usageErrorf("--mode %q: want change or fidelity", f.compareMode)
			}
			if f.practicalPct <= 0 || f.minChangeMs < 0 {
				return usageErrorf("--practical-pct and --min-change-ms: want positive values")
			}
			if f.compareThresholdPct < 0 {
				return usageErrorf("--threshold-pct %v: want a percentage >= 0", f.compareThresholdPct)
			}
			co := analyze.DefaultCompareOptions()
			co.Terms = cliTerms{}
			co.Seed, co.Resamples, co.Confidence, co.MaxSample = f.seed, f.resamples, f.confidence, f.compareMaxSample
			co.Threshold, co.Mode, co.PracticalDiff = f.compareThresholdPct/100, f.compareMode, f.practicalPct/100
			co.MinChangeMs, co.MaxLateness = f.minChangeMs, f.maxLateness
			// The runs are named by their files unless labelled.
			co.LabelA, co.LabelB = cmp.Or(f.labelA, names[0]), cmp.Or(f.labelB, names[1])
			if err := co.Validate(); err != nil {
				return usageError(fmt.Errorf("analyze compare: %w", err), nil)
			}
			cmp, err := analyze.CompareFiles(c.Context, strings.Split(names[0], ","), strings.Split(names[1], ","), o, co)
			if err != nil {
				return analyzeError(err)
			}
			s := stdio(c)
			if f.asJSON {
				err = cmp.WriteJSON(s.out)
			} else {
				err = cmp.WriteText(s.out)
			}
			if err != nil {
				return fmt.Errorf("write comparison: %w", err)
			}
			if f.html != "" {
				if err := atomicfile.WriteFile(f.html, func(w io.Writer) error { return cmp.WriteHTML(w) }); err != nil {
					return err
				}
				fmt.Fprintf(s.err, "wrote %s\n", f.html)
			}
			return nil
		},
	}
}
