package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/tokentrace/tokentrace/capture"
	"github.com/tokentrace/tokentrace/internal/fserr"
	"github.com/tokentrace/tokentrace/replay"
	"github.com/tokentrace/tokentrace/synth"
	"github.com/tokentrace/tokentrace/traces"
	"github.com/urfave/cli/v2"
)

// DemoOptions are the demo's knobs; the defaults (DefaultDemoOptions) run
// in about a minute on two cores.
type DemoOptions struct {
	// Out is the directory the demo writes into. Defaults to DefaultDemoOut.
	Out string
	// Seed seeds the sample logs and the synthetic workload. Defaults to 1.
	Seed int64
	// Duration is the span of the sample traffic. Defaults to
	// DefaultDemoDuration.
	Duration time.Duration
	// Speed is the replay speed (2 = twice as fast as recorded). Defaults
	// to DefaultDemoSpeed.
	Speed float64
}

// Demo defaults.
const (
	DefaultDemoOut      = "tokentrace-demo"
	DefaultDemoDuration = 60 * time.Second
	DefaultDemoSpeed    = 1.0
	// demoRate is the sample's new conversations per second; with
	// follow-up turns that is about 8 requests/s, roughly two thirds of the
	// demo simulator's capacity (see demoTarget).
	demoRate = 3.0
)

// DefaultDemoOptions returns every DemoOptions default.
func DefaultDemoOptions() DemoOptions {
	return DemoOptions{Out: DefaultDemoOut, Seed: 1, Duration: DefaultDemoDuration, Speed: DefaultDemoSpeed}
}

func demoCommand() *cli.Command {
	o := DefaultDemoOptions()
	return &cli.Command{
		Name:  "demo",
		Usage: "run the whole pipeline on made-up logs against the built-in simulator",
		UsageText: `tokentrace demo [--out DIR]

Example:
   tokentrace demo                 # writes ./tokentrace-demo/, prints where the report is
   tokentrace demo --out /tmp/tt   # elsewhere`,
		Description: `The demo needs no GPU and no network. It
  1. generates made-up gateway logs (the generator is capture.WriteSampleLogs,
     also runnable as go run ./testdata/samplelogs/gen),
  2. captures them into a redacted trace (no text leaves capture),
  3. fits a synthetic workload model and generates a synthetic trace,
  4. replays the real and the synthetic trace against the built-in simulator,
     configured so the traffic burst causes a p99 problem,
  5. analyzes both runs (tail attribution exact from the server's own timings),
     compares them, and writes a self-contained HTML report.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "out", Value: o.Out, Destination: &o.Out, Usage: "directory to write into (created)"},
			&cli.Int64Flag{Name: "seed", Value: o.Seed, Destination: &o.Seed, Usage: "seed of the sample logs and the synthetic workload"},
			&cli.DurationFlag{Name: "duration", Value: o.Duration, Destination: &o.Duration, Usage: "span of the sample traffic"},
			&cli.Float64Flag{Name: "speed", Value: o.Speed, Destination: &o.Speed, Usage: "replay speed (2 = twice as fast as recorded)"},
		},
		Action: func(c *cli.Context) error {
			if _, err := args(c, 0, 0, "none"); err != nil {
				return err
			}
			if o.Duration <= 0 {
				return usageErrorf("--duration %v: want a positive duration such as 40s", o.Duration)
			}
			if o.Speed <= 0 {
				return usageErrorf("--speed %v: want a positive factor such as 2", o.Speed)
			}
			defer replay.TuneProcess(2)() // two replays run side by side
			return runDemo(c.Context, o, stdio(c).out)
		},
	}
}

// runDemo is the demo pipeline; each step is the library call the matching
// command makes.
func runDemo(ctx context.Context, o DemoOptions, out io.Writer) error {
	start := time.Now()
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return fserr.Wrap("create", o.Out, err)
	}
	d := &demo{o: o, out: out, start: start}
	d.cmds = demoCommands{o: o, path: d.path}
	path, step, cmds := d.path, d.step, d.cmds
	// The replays run in real time on this machine: a busy host moves the
	// simulator's timings and the client's lateness, so say how busy.
	fmt.Fprintf(out, "Host: %s. The simulator runs in real time here, so its timings and each replay's lateness depend on the host's load.\n", hostLoad())

	// 1. Sample logs.
	so := capture.DefaultSampleOptions()
	so.Duration, so.Rate = o.Duration, demoRate
	var logs bytes.Buffer
	if err := capture.WriteSampleLogs(ctx, &logs, o.Seed, so); err != nil {
		return fmt.Errorf("demo: sample logs: %w", err)
	}
	if err := writeGzip(path("gateway-logs.jsonl.gz"), logs.Bytes()); err != nil {
		return err
	}
	step(1, []string{cmds.logs()}, "made-up gateway logs (%d KB of chat requests over %v) → %s", logs.Len()>>10, o.Duration, path("gateway-logs.jsonl.gz"))

	// 2. Capture.
	co := capture.DefaultOptions()
	capRes, err := capture.Capture(ctx, co, []capture.Input{{Name: "gateway-logs.jsonl", R: bytes.NewReader(logs.Bytes())}})
	if err != nil {
		return fmt.Errorf("demo: capture: %w", err)
	}
	capRes.Meta.Command = "tokentrace demo"
	real := capRes.Records
	if err := traces.WriteAll(path("trace.parquet"), capRes.Meta, real); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	cats := map[string]bool{}
	sessions := map[int64]bool{}
	for i := range real {
		cats[real[i].Category] = true
		sessions[real[i].Session] = true
	}
	step(2, []string{cmds.capture()}, "captured %d requests, %d prefix categories, %d sessions, no text → %s", len(real), len(cats)-boolInt(cats[""]), len(sessions)-boolInt(sessions[0]), path("trace.parquet"))

	// 3. Synth fit + gen.
	fo := synth.DefaultFitOptions()
	fo.Meta = capRes.Meta
	model, err := synth.Fit(ctx, real, fo)
	if err != nil {
		return fmt.Errorf("demo: synth fit: %w", err)
	}
	if err := synth.WriteModelFile(path("model.json"), model); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	gopts := synth.DefaultGenOptions()
	gopts.Seed, gopts.Duration = uint64(o.Seed), o.Duration
	w, err := traces.Create(path("synth.parquet"), model.GenMeta(gopts))
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if _, err := model.Generate(ctx, gopts, w); err != nil {
		w.Close()
		return fmt.Errorf("demo: synth gen: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("demo: write %s: %w", path("synth.parquet"), err)
	}
	syn, synMeta, err := traces.ReadAll(path("synth.parquet"))
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	chk := synth.Check(real, syn, synth.DefaultThresholds())
	var failed []string
	for _, c := range chk.Checks {
		if !c.Pass {
			failed = append(failed, c.Name)
		}
	}
	step(3, []string{cmds.fit(), cmds.gen()}, "fitted %s and generated %d synthetic requests → %s (%s)", path("model.json"), len(syn), path("synth.parquet"), fidelityWords(failed))

	// 4–5. Replay both against the simulator.
	// The replays run side by side but report in step order: the second
	// waits for the first's lines (wait), each closes printed when done.
	// The two replays run side by side, each against its own simulator:
	// half the wall time, and neither run disturbs the other's server.
	synErr := make(chan error, 1)
	ready, realDone, synDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
	close(ready)
	go func() {
		_, err := d.replay(ctx, demoReplay{5, "synthetic", "synth.parquet", "synth.results", syn, synMeta}, realDone, synDone)
		synErr <- err
	}()
	_, err = d.replay(ctx, demoReplay{4, "real", "trace.parquet", "real.results", real, capRes.Meta}, ready, realDone)
	if serr := <-synErr; err == nil {
		err = serr
	}
	if err != nil {
		return err
	}

	if err := demoReport(ctx, out, path, func(n int, format string, a ...any) {
		step(n, []string{cmds.analyze(), cmds.compare()}, format, a...)
	}); err != nil {
		return err
	}
	fmt.Fprintf(out, "Done in %.0fs (host: %s).\n", time.Since(start).Seconds(), hostLoad())
	return nil
}

// demo is one run of the demo: where it writes and how it reports its
// steps.
type demo struct {
	o     DemoOptions
	out   io.Writer
	start time.Time
	cmds  demoCommands
	mu    sync.Mutex // the two replays report from their own goroutines
}

func (d *demo) path(name string) string { return filepath.Join(d.o.Out, name) }

// step reports step n of 6 with the time since the start, and under it
// the commands that reproduce it.
func (d *demo) step(n int, cmds []string, format string, a ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	fmt.Fprintf(d.out, "[%d/6 %5.1fs] %s\n", n, time.Since(d.start).Seconds(), fmt.Sprintf(format, a...))
	for _, c := range cmds {
		fmt.Fprintf(d.out, "  $ %s\n", c)
	}
}

// demoReplay is one of the demo's replays: step n replays the trace
// (the file, its records and metadata; its label names the run) into
// name.parquet.
type demoReplay struct {
	n                  int
	label, trace, name string
	recs               []traces.Record
	meta               traces.Meta
}

// replay replays r's records against a fresh simulator, scraping its
// /metrics as the replay command does, and writes the results and the
// series. It reports as step r.n once wait is closed, and closes printed
// when done.
func (d *demo) replay(ctx context.Context, r demoReplay, wait <-chan struct{}, printed chan<- struct{}) (*replay.Result, error) {
	defer close(printed)
	so, err := demoSim()
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	// Scrape the simulator's /metrics during the run, as `replay` does,
	// so the report can show the server's waiting queue.
	to := replay.DefaultTargetOptions()
	to.Sim, to.ScrapeBuiltin = &so, true
	tgt, err := replay.StartTarget(ctx, to)
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	defer tgt.Close()
	ro := replay.DefaultOptions()
	tgt.Apply(&ro)
	ro.Run = r.label
	ro.Speed = d.o.Speed
	ro.ContinuousUsage = true // per-chunk token counts → per-token ITL
	ro.DescribeServer = true  // as replay does
	ro.Journal = d.path(r.name + ".journal.jsonl")
	res, err := replay.Run(ctx, r.recs, r.meta, ro)
	if err != nil {
		return nil, fmt.Errorf("demo: replay %s: %w", r.label, err)
	}
	samples, _ := tgt.Finish(ctx, res)
	res.Meta.Command = "tokentrace demo"
	out := d.path(r.name + ".parquet")
	if err := traces.WriteAll(out, res.Meta, res.Records); err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	sm := res.Meta
	sm.Source = "replay-metrics"
	if err := traces.WriteSamples(traces.SamplesPathFor(out), sm, samples); err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	os.Remove(ro.Journal)
	<-wait
	d.step(r.n, []string{d.cmds.replay(r.label, r.trace, r.name+".parquet")}, "replayed the %s trace at %gx against the simulator: %d ok, %d failed, %s → %s",
		r.label, d.o.Speed, res.Summary.OK, res.Summary.Failed, timingKept(res.Summary.LatenessP99), out)
	return res, nil
}
