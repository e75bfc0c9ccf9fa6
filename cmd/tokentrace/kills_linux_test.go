package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/capture"
	"github.com/tokentrace/tokentrace/replay"
	"github.com/tokentrace/tokentrace/traces"
)

// Kill-and-rerun: capture, validate and closed-session replay killed
// (SIGKILL: no clean-up runs) in the middle of their work leave no file
// under a final output name, and the next run of the same command removes
// what the killed one left (hidden partial outputs, spilled runs); what a
// killed run had finished (replay's journal) is kept, never overwritten.

// startChild runs the CLI with args as a child process; in feeds its
// standard input in chunks (the rest is left unread when it is killed).
func startChild(t *testing.T, in []byte, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = childEnviron(args)
	var stdin interface {
		Write([]byte) (int, error)
		Close() error
	}
	if in != nil {
		p, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdin = p
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if stdin != nil {
		go func() {
			for b := in; len(b) > 0; {
				n := min(len(b), 256<<10)
				if _, err := stdin.Write(b[:n]); err != nil {
					return
				}
				b = b[n:]
			}
			stdin.Close()
		}()
	}
	return cmd
}

// kill SIGKILLs cmd and waits for it.
func kill(cmd *exec.Cmd) {
	cmd.Process.Kill()
	cmd.Wait()
}

// age makes the entries matching the patterns a minute old, as the
// leftovers of a run killed before the next one started (a run's own
// entries are safe from sweeps in its first seconds).
func age(t *testing.T, patterns ...string) []string {
	t.Helper()
	old := time.Now().Add(-time.Minute)
	var all []string
	for _, p := range patterns {
		m, _ := filepath.Glob(p)
		for _, n := range m {
			os.Chtimes(n, old, old)
		}
		all = append(all, m...)
	}
	return all
}

// spillingLogs are two minutes of sample logs, enough for a capture with
// --sort-memory-mib 1 to spill sorted runs; made once for the tests that
// need it (they take seconds to write).
func spillingLogs(t *testing.T) []byte {
	t.Helper()
	b, err := spillingLogsOnce()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var spillingLogsOnce = sync.OnceValues(func() ([]byte, error) {
	so := capture.DefaultSampleOptions()
	so.Duration = 120 * time.Second
	var b bytes.Buffer
	err := capture.WriteSampleLogs(context.Background(), &b, 1, so)
	return b.Bytes(), err
})

// TestCaptureKilledAndRerun kills a capture that spilled sorted runs and
// then runs it again with the same temporary directory and output.
func TestCaptureKilledAndRerun(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a child process")
	}
	t.Parallel()
	logs := spillingLogs(t)
	tmp, dir := t.TempDir(), t.TempDir()
	out := filepath.Join(dir, "trace.parquet")
	runs := filepath.Join(tmp, "tokentrace-capture-*")
	cmd := startChild(t, logs, "capture", "--sort-memory-mib", "1", "--temp-dir", tmp, "--out", out, "-")
	waitFor(t, func() bool { m, _ := filepath.Glob(filepath.Join(runs, "run-*")); return len(m) > 0 }, "a spilled run")
	kill(cmd)
	checkLeftovers(t, "capture killed", dir, true)
	if _, err := os.Stat(out); err == nil {
		t.Fatalf("killed capture left %s", out)
	}
	left := age(t, runs, filepath.Join(dir, ".*.partial-*"))
	if len(left) == 0 {
		t.Fatal("the killed capture left nothing to clean up: the test did not kill it mid-run")
	}
	// The next run, with room enough not to spill, still removes them
	// (on the first eighth of the logs: the run's size does not matter).
	head := logs[:bytes.LastIndexByte(logs[:len(logs)/8], '\n')+1]
	if code, _, se := runCLIChild(t, "", bytes.NewReader(head), "capture", "--temp-dir", tmp, "--out", out, "-"); code != 0 {
		t.Fatalf("capture again: exit %d: %s", code, se)
	}
	if m, _ := filepath.Glob(runs); len(m) > 0 {
		t.Errorf("capture again left the killed run's %v", m)
	}
	if p := partials(dir); len(p) > 0 {
		t.Errorf("capture again left %v", p)
	}
	if err := fileComplete(out); err != nil {
		t.Errorf("capture again: %v", err)
	}
}

// TestValidateKilledAndRerun kills a validate that is writing its runs'
// results into --out-dir and runs it again.
func TestValidateKilledAndRerun(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a child process")
	}
	t.Parallel()
	trace := writeReplayTrace(t, 500) // 1 s of trace a run, in real time
	dir := t.TempDir()
	outDir := filepath.Join(dir, "runs")
	args := []string{"validate", "--quiet", "--resamples", "100", "--target", "a=sim", "--target", "b=sim:max-num-seqs=4", "--out-dir", outDir}
	cmd := startChild(t, nil, append(append(args, "--realtime"), trace, trace)...)
	waitFor(t, func() bool { m, _ := filepath.Glob(filepath.Join(outDir, "*.parquet")); return len(m) > 0 }, "a run's results")
	kill(cmd)
	checkLeftovers(t, "validate killed", outDir, true)
	age(t, filepath.Join(outDir, ".*"), filepath.Join(outDir, "*"))
	if code, _, se := runCLIChild(t, "", nil, append(args, trace, trace)...); code != 0 {
		t.Fatalf("validate again: exit %d: %s", code, se)
	}
	if p := partials(outDir); len(p) > 0 {
		t.Errorf("validate again left %v", p)
	}
	names := checkLeftovers(t, "validate again", outDir, false)
	if len(names) != 4 {
		t.Errorf("validate again wrote %v; want the 4 runs' results", names)
	}
}

// TestClosedReplayKilledAndRerun kills a closed-session replay mid-run:
// its results file does not exist, its journal holds the finished
// requests; the next run keeps that journal aside (it is the killed run's
// only record), says where, and writes its own results.
func TestClosedReplayKilledAndRerun(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a child process")
	}
	t.Parallel()
	dir := t.TempDir()
	m := traces.NewMeta("test")
	m.BlockSize = 16
	recs := growingAgentTrace(8, 5, 16, 3)
	for i := range recs { // think long enough for the kill to land mid-run
		if recs[i].ThinkNs > 0 {
			recs[i].ThinkNs *= 20
		}
	}
	trace := writeTrace(t, filepath.Join(dir, "agents.jsonl"), m, recs)
	out := filepath.Join(dir, "res.parquet")
	journal := replay.JournalPath(out)
	// A server whose steps take 1 ms whatever they hold: the run's time is
	// the trace's think times, not the simulated model's.
	args := []string{"replay", "--quiet", "--sessions", "closed", "--target", "sim:step-fixed=1ms,prefill-per-token=0s,decode-per-seq=0s,attn-per-context-token=0s", "--max-lateness", "1m", "--out", out, trace}
	cmd := startChild(t, nil, args...)
	rows := func() int {
		got, _, _ := traces.ReadAll(journal)
		return len(got)
	}
	waitFor(t, func() bool { return rows() >= 8 }, "8 finished requests in the journal")
	kill(cmd)
	killed := rows()
	if _, err := os.Stat(out); err == nil {
		t.Fatalf("killed replay left %s", out)
	}
	checkLeftovers(t, "closed replay killed", dir, true)
	age(t, filepath.Join(dir, ".*.partial-*"))
	code, _, se := runCLIChild(t, "", nil, args...)
	if code != 0 {
		t.Fatalf("replay again: exit %d: %s", code, se)
	}
	if p := partials(dir); len(p) > 0 {
		t.Errorf("replay again left %v", p)
	}
	if got, _, err := traces.ReadAll(out); err != nil || len(got) != len(recs) {
		t.Errorf("replay again: %d results, %v; want %d", len(got), err, len(recs))
	}
	kept, _ := filepath.Glob(filepath.Join(dir, "res.parquet.journal.*.jsonl"))
	if len(kept) != 1 || !strings.Contains(se, kept[0]) {
		t.Fatalf("replay again kept %v of the killed run's journal, saying:\n%s", kept, se)
	}
	if got, _, err := traces.ReadAll(kept[0]); (err != nil && !strings.Contains(err.Error(), "truncated")) || len(got) < killed {
		t.Errorf("the killed run's journal, kept as %s: %d rows, %v; want the %d it had", kept[0], len(got), err, killed)
	}
}
