package main

// sim fit and sim check: the simulator calibrated to a user's own server
// (sim/twin), and how far the calibration holds.

import (
	"errors"
	"fmt"
	"iter"
	"os"

	"github.com/tokentrace/tokentrace/replay"
	"github.com/tokentrace/tokentrace/sim"
	"github.com/tokentrace/tokentrace/sim/twin"
	"github.com/tokentrace/tokentrace/traces"
	"github.com/urfave/cli/v2"
)

const simFitUsageText = `tokentrace sim fit --out TWIN [flags] RESULTS...

Examples:
  tokentrace replay --target http://my-vllm:8000 --speed 0.5 --out safe.parquet trace.parquet
  tokentrace sim fit --out twin.conf safe.parquet
  tokentrace sim fit --out twin.conf --prior preset=phi4-mini-l4 low.parquet high.parquet
  tokentrace sim fit --out twin.conf incident.parquet`

const simFitDescription = `sim fit fits the simulator's engine model to measured runs of your own
server and writes it as a simulator configuration file: a target
everywhere as sim:config=TWIN (replay, sweep, validate), keys after it
applying on top (sim:config=twin.conf,replicas=4,router=prefix-aware).

It reads, where present: per-chunk times of a streaming replay's results
(each engine step's end), per-request server timings, the metrics series
beside each file (RESULTS.metrics.parquet: replay's scrape or postmortem's
Prometheus history), and a captured trace's logged first- and last-token
times. It fits the per-step fixed cost, the prefill cost per token, the
decode cost per sequence in the batch and per context token, the batch
limit (max-num-seqs) and the token budget where the data shows them
binding, and a fleet's shape where the rows name replicas. What the data
cannot identify keeps the prior (--prior) and the report, printed and kept
in the file as comments, says so.`

const simCheckUsageText = `tokentrace sim check --twin TWIN [flags] RESULTS...

Examples:
  tokentrace sim check --twin twin.conf busy.parquet
  tokentrace sim check --twin twin.conf --out predicted.parquet busy-a.parquet busy-b.parquet
  tokentrace sim check --twin twin.conf --what-if replicas=3 --what-if max-num-seqs=64 incident.parquet`

const simCheckDescription = `sim check re-runs each results file's trace (its sends, lengths, sessions
and prefixes) on the twin offline and prints the predicted TTFT, TPOT, ITL
and E2E percentiles beside the measured ones with the error of each.
Results of the same trace given together show the server's own run-to-run
spread, and a twin is not asked to be closer than 1.5× that spread. The
check's summary is recorded in the twin file, and commands that run the
twin (sweep, validate) print it beside their verdicts. Exit 1 when a
metric is off by more than --tolerance (p99: twice it).

--what-if KEYS asks the twin what the same requests would have seen with a
change (simulator configuration keys over the twin: replicas=3,
router=prefix-aware, max-num-seqs=64, prefill-replicas=1,decode-replicas=3):
the answer is printed beside the twin's own prediction of the run, and is
worth as much as the check above it.`

func simFitCommand() *cli.Command {
	var out, prior string
	var rf readFlags
	o := twin.DefaultFitOptions()
	o.Terms = cliTerms{}
	return &cli.Command{
		Name:        "fit",
		Usage:       "fit the simulator to measured runs of your server and write it as a twin",
		UsageText:   simFitUsageText,
		Description: simFitDescription,
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "out", Usage: "write the twin (a simulator configuration file) here (required)", Destination: &out},
			&cli.StringFlag{Name: "prior", Usage: "simulator configuration whose values the parameters the data cannot identify keep, e.g. preset=phi4-mini-l4", Destination: &prior},
			&cli.Uint64Flag{Name: "seed", Value: o.Seed, Usage: "seed of the sampled steps", Destination: &o.Seed},
			&cli.DurationFlag{Name: "chunk-jitter", Value: o.ChunkJitter, Usage: "widest spread at the client of the chunks of one engine step", Destination: &o.ChunkJitter},
			&cli.IntFlag{Name: "sim-rows", Value: o.SimRows, Usage: "rows of each input simulated to confirm the limits and report residuals (-1 = none)", Destination: &o.SimRows},
		}, rf.flags()...),
		Action: func(c *cli.Context) error {
			names, err := args(c, 1, -1, "results files")
			if err != nil {
				return err
			}
			if out == "" {
				return usageErrorf("sim fit: --out is required (where to write the twin)")
			}
			if err := sim.ApplyConfig(&o.Prior, prior); err != nil {
				return usageErrorf("--prior: %w", err)
			}
			// The options are checked before any input is read.
			if err := o.Validate(); err != nil {
				return usageError(err, nil)
			}
			inputs, prompt, err := twinRuns(c, &rf, "sim fit", "kept: the fit orders rows by send time", names, true)
			if err != nil {
				return err
			}
			o.Prompt = prompt
			res, err := twin.Fit(c.Context, inputs, o)
			if err != nil {
				return err
			}
			if err := res.WriteFile(out); err != nil {
				return err
			}
			s := stdio(c)
			fmt.Fprintf(s.out, "twin: sim:config=%s\n", out)
			for _, l := range res.Lines() {
				fmt.Fprintln(s.out, "  "+l)
			}
			return res.Report.WriteText(s.out, "")
		},
	}
}

func simCheckCommand() *cli.Command {
	var file, out string
	co := twin.DefaultCheckOptions()
	var whatIf headerFlag
	var rf readFlags
	return &cli.Command{
		Name:        "check",
		Usage:       "compare a twin's predictions with measured runs it was not fitted on",
		UsageText:   simCheckUsageText,
		Description: simCheckDescription,
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "twin", Usage: "the twin (sim fit's file; or any simulator configuration file) (required)", Destination: &file},
			&cli.StringFlag{Name: "out", Usage: "also write the predicted rows (results) here", Destination: &out},
			&cli.Float64Flag{Name: "tolerance", Value: co.Tolerance, Usage: "largest relative error of p50 and p90 (p99: twice it)", Destination: &co.Tolerance},
			&cli.GenericFlag{Name: "what-if", Value: &whatIf, Usage: "also predict the runs with these simulator keys over the twin, e.g. replicas=3 or max-num-seqs=64 (repeatable)"},
		}, rf.flags()...),
		Action: func(c *cli.Context) error {
			names, err := args(c, 1, -1, "results files")
			if err != nil {
				return err
			}
			if file == "" {
				return usageErrorf("sim check: --twin is required")
			}
			co.WhatIfs = whatIf.v
			// The options are checked before any input is read.
			if err := co.Validate(); err != nil {
				return usageError(err, nil)
			}
			o := replay.BuiltinSim()
			if err := sim.ApplyConfig(&o, "config="+file); err != nil {
				return usageErrorf("--twin: %w", err)
			}
			for _, w := range whatIf.v {
				x := o
				if err := sim.ApplyConfig(&x, w); err != nil {
					return usageErrorf("--what-if: %w", err)
				}
			}
			inputs, prompt, err := twinRuns(c, &rf, "sim check", "kept: the check orders rows by send time", names, false)
			if err != nil {
				return err
			}
			co.Prompt = prompt
			res, err := runCheck(c, o, inputs, co, out)
			if err != nil {
				return err
			}
			if err := res.WriteText(stdio(c).out); err != nil {
				return err
			}
			if err := twin.RecordCheck(file, res.Summary()); err != nil {
				return err
			}
			if !res.Pass {
				return withCode(exitFailure, errors.New("sim check: the twin's predictions are off beyond --tolerance"))
			}
			return nil
		},
	}
}

// runCheck runs the check, writing the predicted rows to out when set.
func runCheck(c *cli.Context, o sim.Options, inputs []twin.Input, co twin.CheckOptions, out string) (*twin.CheckResult, error) {
	if out == "" {
		return twin.Check(c.Context, o, inputs, co)
	}
	m := traces.NewMeta("sim check")
	m.Set("replay.target", "sim:"+sim.FormatConfig(o))
	w, err := traces.Create(out, m)
	if err != nil {
		return nil, err
	}
	batch := make([]traces.Record, 0, 1024)
	flush := func() error {
		_, err := w.Write(batch)
		batch = batch[:0]
		return err
	}
	co.Predicted = func(r traces.Record) error {
		batch = append(batch, r.Clone())
		if len(batch) == cap(batch) {
			return flush()
		}
		return nil
	}
	res, err := twin.Check(c.Context, o, inputs, co)
	if err == nil {
		err = flush()
	}
	if err != nil {
		traces.Abort(w)
		return nil, err
	}
	return res, w.Close()
}

// twinRuns reads the measured runs names for cmd (sim fit or sim check):
// their rows, with each run's metrics series when samples is set, and the
// prompts the first run's rows were sent with.
func twinRuns(c *cli.Context, rf *readFlags, cmd, order string, names []string, samples bool) ([]twin.Input, twin.PromptFunc, error) {
	in := newTraceIn(c, rf, cmd, order)
	inputs, err := twinInputs(in, names, samples)
	if err != nil {
		return nil, nil, err
	}
	prompt, err := twinPrompt(in, names[0])
	return inputs, prompt, err
}

// twinInputs are the named results files as inputs read on demand, with
// the metrics series beside each (when samples is set and one is there).
func twinInputs(in *traceIn, names []string, samples bool) ([]twin.Input, error) {
	var inputs []twin.Input
	for _, name := range names {
		x := twin.Input{Name: name, Rows: readRows(in, name)}
		if samples {
			if p := traces.SamplesPathFor(name); fileExists(p) {
				s, _, err := traces.ReadSamples(p)
				if err != nil {
					return nil, fmt.Errorf("read %s: %w", p, err)
				}
				x.Samples = s
			}
		}
		inputs = append(inputs, x)
	}
	return inputs, nil
}

// readRows streams the rows of the named file.
func readRows(in *traceIn, name string) iter.Seq2[traces.Record, error] {
	return func(yield func(traces.Record, error) bool) {
		r, err := in.open(name)
		if err != nil {
			yield(traces.Record{}, err)
			return
		}
		defer r.Close()
		for rec, err := range traces.All(r) {
			if !yield(rec, err) || err != nil {
				return
			}
		}
	}
}

// twinPrompt builds the prompts replay would send for the rows of name
// (its block size), so a simulation sees the same shared prefixes.
func twinPrompt(in *traceIn, name string) (twin.PromptFunc, error) {
	r, err := in.open(name)
	if err != nil {
		return nil, err
	}
	m := r.Meta()
	bs, run := m.BlockSize, m.Get(replay.MetaRun)
	r.Close()
	ro := replay.DefaultOptions()
	if run != "" {
		ro.Run = run
	}
	return func(rec *traces.Record) []int32 { return replay.PromptTokens(rec, ro, bs) }, nil
}

func fileExists(name string) bool {
	_, err := os.Stat(name)
	return err == nil
}
