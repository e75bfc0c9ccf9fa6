package main

// sweep: flags to sweep.Options and one sweep.Run; the engine, its verdicts,
// table, JSON and chart live in replay/sweep. Step throughput and latency
// percentiles come from analyze, wired here (replay never imports analyze).
// The flags land in sweepArgs; runSweep (sweep_run.go) is the body.

import (
	"fmt"
	"strings"
	"time"

	"github.com/tokentrace/tokentrace/replay"
	"github.com/tokentrace/tokentrace/replay/sweep"
	"github.com/tokentrace/tokentrace/sim"
	"github.com/urfave/cli/v2"
)

// sweepArgs are the sweep command's flags as given, and its trace.
type sweepArgs struct {
	o                                                         replay.Options
	trace, targetSpec                                         string
	targetSet                                                 bool // --target given, if empty
	slo, speeds, pct, outDir, chart, window, searchRange, ext string
	search, quiet, asJSON                                     bool
	repeat                                                    int
	tol                                                       float64
	modelMap, metadata                                        headerFlag
	sim                                                       sweepSimFlags
	read                                                      readFlags
}

// sweepSimFlags are the built-in simulator's flags (those of tokentrace
// sim, prefixed sim-), shared by sweep.
type sweepSimFlags struct {
	preset                           string
	maxSeqs, maxBatched, blocks      int
	stepFixed, prefill, decode, attn time.Duration
	perRequestMetrics                bool
	config                           string
	// set are the flags given: the others keep the preset's values.
	set map[string]bool
}

func sweepCommand() *cli.Command {
	d := sweep.DefaultOptions()
	d.Replay.Terms = cliTerms{replayFlags}
	a := &sweepArgs{o: d.Replay, speeds: sweep.DefaultSpeeds, pct: fmt.Sprintf("%g", d.Percentile), outDir: sweep.DefaultOutDir, ext: d.Ext,
		searchRange: fmt.Sprintf("%g,%g", d.Low, d.High), repeat: d.Repeat, tol: d.Tolerance}
	return &cli.Command{
		Name:        "sweep",
		Usage:       "find how much faster than recorded a trace can run before the SLOs break",
		UsageText:   sweepUsageText,
		Description: sweepDescription,
		Flags:       append(append(a.flags(), a.sim.flags()...), a.read.flags()...),
		Action: func(c *cli.Context) error {
			pos, err := args(c, 1, 1, "TRACE")
			if err != nil {
				return err
			}
			a.trace, a.targetSet = pos[0], c.IsSet("target")
			a.sim.set = map[string]bool{}
			for name := range setFlags(c) {
				a.sim.set[name] = true
			}
			return runSweep(c.Context, a, stdio(c))
		},
	}
}

// flags binds the command's own flags to a.
func (a *sweepArgs) flags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "target", Usage: "what every step replays against: sim (a fresh built-in simulator per step, configured by the --sim-* flags), sim:KEY=VALUE,... (keys over them: sim:max-num-seqs=32, a fleet sim:replicas=4,router=prefix-aware) or a server's URL", DefaultText: "sim", Destination: &a.targetSpec},
		&cli.StringFlag{Name: "url", Usage: "server base URL (the same as --target URL)", Destination: &a.o.URL},
		&cli.StringFlag{Name: "model", Usage: "model name for every request (default: each record's, else the server's first)", Destination: &a.o.Model},
		&cli.GenericFlag{Name: "model-map", Value: &a.modelMap, Usage: "prod-name=served-name (repeatable); unmapped names use --model"},
		&cli.StringFlag{Name: "slo", Usage: "SLOs every step must meet, e.g. ttft=1s,tpot=50ms (required)", Destination: &a.slo},
		&cli.StringFlag{Name: "slo-percentile", Value: a.pct, Usage: "percentile the SLOs are judged at (p99, 99.9, ...)", Destination: &a.pct},
		&cli.StringFlag{Name: "speeds", Value: a.speeds, Usage: "speeds to replay at (× the recorded rate)", Destination: &a.speeds},
		&cli.BoolFlag{Name: "search", Usage: "binary-search the highest speed meeting the SLOs instead of --speeds", Destination: &a.search},
		&cli.StringFlag{Name: "search-range", Value: a.searchRange, Usage: "--search: LOW,HIGH speeds", Destination: &a.searchRange},
		&cli.Float64Flag{Name: "search-tolerance", Value: a.tol, Usage: "--search: stop when HIGH/LOW ≤ 1+this", Destination: &a.tol},
		&cli.IntFlag{Name: "repeat", Value: a.repeat, Usage: "replay every speed N times; a speed meets the SLOs only if every run does, and its row shows the worst run", Destination: &a.repeat},
		&cli.StringFlag{Name: "out-dir", Value: a.outDir, Usage: "directory for one results file per step and the chart", Destination: &a.outDir},
		&cli.StringFlag{Name: "ext", Value: a.ext, Usage: "results file extension (.parquet, .jsonl, .jsonl.zst, .csv)", Destination: &a.ext},
		&cli.StringFlag{Name: "chart", Usage: "chart file(s), .svg, .png or .pdf, comma-separated (default: OUT-DIR/sweep.svg; none = no chart)", Destination: &a.chart},
		&cli.StringFlag{Name: "window", Usage: "replay only arrivals in FROM,TO (e.g. 0s,60s)", Destination: &a.window},
		&cli.IntFlag{Name: "max-concurrency", Usage: "cap in-flight requests (0 = none)", Destination: &a.o.MaxConcurrency},
		&cli.DurationFlag{Name: "timeout", Value: a.o.Timeout, Usage: "per-request timeout", Destination: &a.o.Timeout},
		&cli.BoolFlag{Name: "json", Usage: "print the steps and the answer as JSON", Destination: &a.asJSON},
		&cli.StringFlag{Name: "label", Usage: "name of this sweep, stored in every step's metadata (run.label)", Destination: &a.o.Label},
		&cli.GenericFlag{Name: "metadata", Value: &a.metadata, Usage: "key=value stored in every step's metadata as run.meta.KEY (repeatable)"},
		&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no per-step lines on stderr", Destination: &a.quiet},
	}
}

func (f *sweepSimFlags) flags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "sim-preset", Value: sim.DefaultPreset, Destination: &f.preset, Usage: "built-in simulator: deployment preset (" + strings.Join(sim.PresetNames(), ", ") + ")"},
		&cli.IntFlag{Name: "sim-max-num-seqs", Destination: &f.maxSeqs, Usage: "built-in simulator: max running sequences", DefaultText: "preset's"},
		&cli.IntFlag{Name: "sim-max-num-batched-tokens", Destination: &f.maxBatched, Usage: "built-in simulator: token budget per step", DefaultText: "preset's"},
		&cli.IntFlag{Name: "sim-num-gpu-blocks", Destination: &f.blocks, Usage: "built-in simulator: KV cache blocks", DefaultText: "preset's"},
		&cli.DurationFlag{Name: "sim-step-fixed", Destination: &f.stepFixed, Usage: "built-in simulator: fixed cost per step", DefaultText: "preset's"},
		&cli.DurationFlag{Name: "sim-prefill-per-token", Destination: &f.prefill, Usage: "built-in simulator: cost per prefill token", DefaultText: "preset's"},
		&cli.DurationFlag{Name: "sim-decode-per-seq", Destination: &f.decode, Usage: "built-in simulator: cost per decoding sequence", DefaultText: "preset's"},
		&cli.DurationFlag{Name: "sim-attn-per-context-token", Destination: &f.attn, Usage: "built-in simulator: cost per context token read", DefaultText: "preset's"},
		&cli.BoolFlag{Name: "sim-per-request-metrics", Value: true, Destination: &f.perRequestMetrics, Usage: "built-in simulator: return vLLM's per-request metrics"},
		&cli.StringFlag{Name: "sim-config", Destination: &f.config, Usage: "built-in simulator: configuration keys applied last, KEY=VALUE,... (the same as --target sim:KEY=VALUE,...)"},
	}
}

const sweepUsageText = `tokentrace sweep [flags] TRACE

Examples:
  tokentrace sweep --slo ttft=1s,tpot=50ms --speeds 0.5,1,1.5,2,3 trace.parquet           # built-in simulator
  tokentrace sweep --slo ttft=1s --search --slo-percentile 99 --url http://vllm:8000 trace.parquet
  tokentrace sweep --slo ttft=500ms --target sim:replicas=4,router=prefix-aware --speeds 1,2,4 trace.parquet
  tokentrace sweep --slo ttft=500ms --sim-preset tiny --out-dir sweep --chart sweep/knee.png trace.parquet`

const sweepDescription = `sweep replays the same trace at several speeds (or binary-searches the
highest speed that still meets every SLO at --slo-percentile), against
--target: a server's URL, or a fresh built-in simulator per step (sim, or
sim:KEY=VALUE,... with the keys of tokentrace sim's flags, a fleet included;
the --sim-* flags set the same simulator, the keys apply over them). Each
step's results go to OUT-DIR/speed-S.parquet. It prints a table (offered
and achieved rate, throughput, TTFT/TPOT percentiles, each SLO metric at
the percentile, goodput), draws throughput against p50/p99 latency with the
knee marked, and answers in one line: "this trace can run at 2.3× its
recorded rate before p99 TTFT exceeds 1 s". Failed requests count as
infinitely slow.`
