package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/tokentrace/tokentrace/replay"
)

// childEnv makes the test binary run the CLI instead of the tests: its value
// is the command line, arguments separated by \x1f. Tests that must SIGKILL
// a command start it this way (see startChild).
const childEnv = "TOKENTRACE_TEST_MAIN"

// TestMain tunes the process as the CLI does before a replay (see
// replay.TuneProcess): the lateness these tests check depends on it. It
// fails the run when a test left a command's output in the package
// directory (see strayOutputs).
func TestMain(m *testing.M) {
	if args := os.Getenv(childEnv); args != "" {
		// As main does: Ctrl-C and SIGTERM cancel the command's context.
		ctx, stop := signalContext()
		code := Main(ctx, strings.Split(args, "\x1f"), os.Stdin, os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	// The tests that run side by side (t.Parallel) mostly wait on real
	// time (replays, scrapes, child processes): more of them run at once
	// than there are CPUs, unless -test.parallel says how many.
	flag.Parse()
	if !flagGiven("test.parallel") {
		flag.Set("test.parallel", strconv.Itoa(max(runtime.GOMAXPROCS(0), parallelTests)))
	}
	restore := replay.TuneProcess(1)
	before := packageEntries()
	code := m.Run()
	restore()
	removeSharedFaultInputs()
	removeSharedDemoData()
	if stray := strayOutputs(before, packageEntries()); len(stray) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: the tests left %s in cmd/tokentrace: a command ran with its default output in the working directory; give it one under t.TempDir()\n", strings.Join(stray, ", "))
		code = 1
	}
	os.Exit(code)
}

// parallelTests is how many tests that call t.Parallel run at once.
const parallelTests = 6

// cpuHeavy is held by a test that runs beside others (t.Parallel) and
// keeps a CPU busy (simulated validations, many short commands), or that
// must not run beside such a test (a real-time run whose figures a starved
// CPU would move): one such test at a time, so that the tests beside it
// that replay in real time keep their timing.
var cpuHeavy = make(chan struct{}, 1)

// heavyCPU waits for cpuHeavy and holds it until t ends.
func heavyCPU(t *testing.T) {
	cpuHeavy <- struct{}{}
	t.Cleanup(func() { <-cpuHeavy })
}

// flagGiven says whether the command line set the flag name.
func flagGiven(name string) bool {
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// packageEntries lists the package directory, the tests' working directory.
func packageEntries() map[string]bool {
	entries, _ := os.ReadDir(".")
	names := make(map[string]bool, len(entries))
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() {
			name += "/"
		}
		names[name] = true
	}
	return names
}

// strayOutputs returns the entries of after that are not in before and
// look like a command's output (replay's results.parquet and its metrics,
// sweep's sweep/, reports): a test that ran a command with its default
// output wrote them into the clone, where they get committed by accident.
// Profiles that go test writes on request are not outputs.
func strayOutputs(before, after map[string]bool) []string {
	var stray []string
	for name := range after {
		if before[name] || name == "testdata/" {
			continue
		}
		switch {
		case strings.HasSuffix(name, "/"), slices.Contains([]string{".parquet", ".jsonl", ".json", ".html", ".csv", ".txt", ".key", ".png", ".svg", ".gz"}, filepath.Ext(name)):
			stray = append(stray, name)
		}
	}
	slices.Sort(stray)
	return stray
}

// faultInputs are the files the writing commands read.
type faultInputs struct {
	logs, mooncake, trace, model, replayTrace, results string
}

// sharedFaultInputs holds the inputs the fault tests share: they only read
// them, and making them (sample logs, an import, a fit and a replay) is
// the larger part of each test's time under the race detector.
var sharedFaultInputs struct {
	sync.Mutex
	in  faultInputs
	dir string
}

// removeSharedFaultInputs runs after every test (TestMain).
func removeSharedFaultInputs() {
	if d := sharedFaultInputs.dir; d != "" {
		os.RemoveAll(d)
	}
}
