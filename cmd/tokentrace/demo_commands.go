package main

// The commands the demo prints under each step: each reproduces its step
// with the demo's configuration, so a reader can rerun, vary and compare
// one step with the ordinary commands (a test runs every one of them).

import (
	"strconv"
	"strings"

	"github.com/tokentrace/tokentrace/replay"
	"github.com/tokentrace/tokentrace/sim"
)

// demoTarget is the simulator the demo replays against, as replay
// --target takes it: an 8B-class model on an H100 (the default preset)
// whose batch is capped at 32 sequences (a deployment tuned for latency).
// The sample keeps about 22 requests in flight, so the batch has room at
// the median, but the sample's 6-second burst of new conversations
// overflows it and queues: a healthy p50 TTFT with a p99 spike, the
// classic queueing symptom.
const demoTarget = "sim:max-num-seqs=32"

// demoSim is demoTarget's simulator, as replay --target starts it.
func demoSim() (sim.Options, error) {
	to, err := replay.ParseTarget(demoTarget, replay.BuiltinSim())
	if err != nil {
		return sim.Options{}, err
	}
	return *to.Sim, nil
}

// demoCommands builds the command lines of a demo run.
type demoCommands struct {
	o    DemoOptions
	path func(name string) string
}

// p is a demo file's path as a shell word.
func (c demoCommands) p(name string) string { return shellWord(c.path(name)) }

func (c demoCommands) dur() string { return c.o.Duration.String() }

func (c demoCommands) seed() string { return strconv.FormatInt(c.o.Seed, 10) }

func (c demoCommands) logs() string {
	return "go run ./testdata/samplelogs/gen --seed " + c.seed() + " --rate " + strconv.FormatFloat(demoRate, 'g', -1, 64) +
		" --duration " + c.dur() + " --out " + c.p("gateway-logs.jsonl.gz")
}

func (c demoCommands) capture() string {
	return "tokentrace capture --out " + c.p("trace.parquet") + " " + c.p("gateway-logs.jsonl.gz")
}

func (c demoCommands) fit() string {
	return "tokentrace synth fit --out " + c.p("model.json") + " " + c.p("trace.parquet")
}

func (c demoCommands) gen() string {
	return "tokentrace synth gen --seed " + c.seed() + " --duration " + c.dur() + " --out " + c.p("synth.parquet") + " " + c.p("model.json")
}

// replay is the replay of trace (its run label label) into out.
func (c demoCommands) replay(label, trace, out string) string {
	cmd := "tokentrace replay --target " + demoTarget + " --run " + label + " --continuous-usage"
	if c.o.Speed != 1 {
		cmd += " --speed " + strconv.FormatFloat(c.o.Speed, 'g', -1, 64)
	}
	return cmd + " --out " + c.p(out) + " " + c.p(trace)
}

func (c demoCommands) analyze() string {
	return "tokentrace analyze " + demoAnalyzeFlags + " --html " + c.p("report.html") + " " + c.p("real.results.parquet")
}

func (c demoCommands) compare() string {
	return "tokentrace analyze compare --mode fidelity " + demoAnalyzeFlags + " --label-a real --label-b synthetic --html " + c.p("compare.html") +
		" " + c.p("real.results.parquet") + " " + c.p("synth.results.parquet")
}

// shellWord is s as one word of a POSIX shell: as it is when it holds
// nothing a shell reads specially, else in single quotes.
func shellWord(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=,+@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
