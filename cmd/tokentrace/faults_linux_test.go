package main

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// The fault suite: every command that writes a file, under the faults a
// production run meets (a full disk, a directory it may not write, a
// directory that disappears, SIGKILL mid-write). Each case checks the exit
// code, the message, and what is on disk afterwards: no file under a final
// output name is ever incomplete.

// prepareFaultInputs makes the inputs once per test binary (TestMain
// removes them); a later test reuses them.
func prepareFaultInputs(t *testing.T) faultInputs {
	t.Helper()
	sharedFaultInputs.Lock()
	defer sharedFaultInputs.Unlock()
	if sharedFaultInputs.dir != "" {
		return sharedFaultInputs.in
	}
	src, err := os.MkdirTemp("", "tokentrace-fault-inputs-")
	if err != nil {
		t.Fatal(err)
	}
	in := faultInputs{
		logs:    filepath.Join(src, "gateway.jsonl"),
		trace:   filepath.Join(src, "mooncake.parquet"),
		model:   filepath.Join(src, "model.json"),
		results: filepath.Join(src, "results.parquet"),
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(src)
		}
	}()
	// about 1,400 requests: a trace well over 16 KiB in every format
	writeTestFile(t, in.logs, sampleLogs(t, 30*time.Second, 0))
	// The Mooncake sample's prefix blocks make a trace well over 16 KiB in every format.
	if in.mooncake, err = filepath.Abs("../../testdata/publictraces/mooncake_conversation_head500.jsonl"); err != nil {
		t.Fatal(err)
	}
	in.replayTrace = writeTraceN(t, filepath.Join(src, "replay.jsonl"), 400) // 0.8 s of trace
	for _, args := range [][]string{
		{"import", "--format", "mooncake", "--out", in.trace, in.mooncake},
		{"synth", "fit", "--out", in.model, in.trace},
		{"replay", "--quiet", "--max-lateness", "10s", "--out", in.results, in.replayTrace},
	} {
		runMain(t, args...)
	}
	ok = true
	sharedFaultInputs.in, sharedFaultInputs.dir = in, src
	return in
}

// faultWriter is one command that writes a file under dir.
type faultWriter struct {
	why  string
	args func(dir string) []string
	out  string // the output's base name
	// small outputs fit in 16 KiB: the full-disk case fills the disk first
	small bool
}

func faultWriters(in faultInputs) []faultWriter {
	at := func(dir, name string) string { return filepath.Join(dir, name) }
	return []faultWriter{
		{"capture to Parquet", func(d string) []string { return []string{"capture", "--out", at(d, "t.parquet"), in.logs} }, "t.parquet", false},
		{"capture to JSONL", func(d string) []string { return []string{"capture", "--out", at(d, "t.jsonl"), in.logs} }, "t.jsonl", false},
		{"import to Parquet", func(d string) []string {
			return []string{"import", "--format", "mooncake", "--out", at(d, "a.parquet"), in.mooncake}
		}, "a.parquet", false},
		{"import to CSV", func(d string) []string {
			return []string{"import", "--format", "mooncake", "--out", at(d, "a.csv"), in.mooncake}
		}, "a.csv", false},
		{"export to Mooncake JSONL", func(d string) []string {
			return []string{"export", "--format", "mooncake", "--out", at(d, "m.jsonl"), in.trace}
		}, "m.jsonl", false},
		{"synth fit's model", func(d string) []string { return []string{"synth", "fit", "--out", at(d, "model.json"), in.trace} }, "model.json", false},
		{"synth gen's trace", func(d string) []string {
			return []string{"synth", "gen", "--seed", "1", "--duration", "10m", "--out", at(d, "s.parquet"), in.model}
		}, "s.parquet", false},
		{"analyze's HTML report", func(d string) []string { return []string{"analyze", "--html", at(d, "r.html"), in.results} }, "r.html", false},
		{"analyze's per-request attribution", func(d string) []string {
			return []string{"analyze", "--requests-out", at(d, "attr.csv"), in.results}
		}, "attr.csv", false},
		{"analyze's vllm bench JSON", func(d string) []string {
			return []string{"analyze", "--vllm-json", at(d, "bench.json"), in.results}
		}, "bench.json", true},
		{"replay's results and journal", func(d string) []string {
			return []string{"replay", "--quiet", "--max-lateness", "10s", "--out", at(d, "res.parquet"), in.replayTrace}
		}, "res.parquet", false},
	}
}

// checkLeftovers reads every file left in dir: a file under an ordinary name
// must be complete; one whose name says it is cut short (".incomplete.",
// or a hidden ".partial-" file when partial is set, after a SIGKILL) must
// still read up to its damage. It returns the names it found.
func checkLeftovers(t *testing.T, why, dir string, partial bool) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		name, path := e.Name(), filepath.Join(dir, e.Name())
		names = append(names, name)
		switch {
		case partial && strings.HasPrefix(name, ".") && strings.Contains(name, ".partial-"):
		case strings.Contains(name, ".incomplete."):
			if _, _, err := traces.ReadAll(path); err != nil && !errors.Is(err, traces.ErrTruncated) {
				t.Errorf("%s: %s does not read up to its damage: %v", why, name, err)
			}
		default:
			if err := fileComplete(path); err != nil {
				t.Errorf("%s: %s is left under a final name but is incomplete: %v", why, name, err)
			}
		}
	}
	return names
}

// fileComplete reads a file to its end by its kind.
func fileComplete(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	switch ext := filepath.Ext(path); {
	case ext == ".json":
		if !json.Valid(b) {
			return errors.New("not valid JSON")
		}
	case ext == ".html":
		if !bytes.Contains(b, []byte("</html>")) {
			return errors.New("no </html>")
		}
	case strings.HasPrefix(filepath.Base(path), "attr"):
		if _, err := csv.NewReader(bytes.NewReader(b)).ReadAll(); err != nil {
			return err
		}
	default:
		_, _, err := traces.ReadAll(path)
		return err
	}
	return nil
}

// TestFaultFullDisk writes each command's output onto a 16 KiB tmpfs (the
// test mounts it; root only): each fails with exit 1 saying the disk is
// full, and nothing under an output name is left; replay's cut journal is
// left under a name that says it is incomplete, and reads up to the cut.
func TestFaultFullDisk(t *testing.T) {
	full := mountTmpfs(t, "size=16k", 0)
	in := prepareFaultInputs(t)
	for _, w := range faultWriters(in) {
		if w.small {
			fill(t, filepath.Join(full, "fill"))
		}
		code, _, se := runCLI(nil, w.args(full)...)
		os.Remove(filepath.Join(full, "fill"))
		if code != exitFailure || !strings.Contains(se, "no space left on device") {
			t.Errorf("%s onto a full disk: exit %d, stderr %q; want exit 1 saying no space left", w.why, code, se)
		}
		if strings.Contains(se, "holds every finished request") {
			t.Errorf("%s: claims a complete journal on a full disk: %q", w.why, se)
		}
		for _, n := range checkLeftovers(t, w.why, full, false) {
			if !strings.Contains(n, ".incomplete.") {
				t.Errorf("%s: %s left on the full disk", w.why, n)
			}
			os.Remove(filepath.Join(full, n))
		}
	}
}

// TestFaultFullDiskJournalOnly puts only replay's journal on a full disk:
// replay says so at once, stops sending, still writes the complete results
// (every finished request) and exits 1 without calling the journal complete.
func TestFaultFullDiskJournalOnly(t *testing.T) {
	full := mountTmpfs(t, "size=16k", 0)
	trace := writeReplayTrace(t, 2000) // 4 s of trace, a journal far over 16 KiB
	out := filepath.Join(t.TempDir(), "res.parquet")
	journal := filepath.Join(full, "j.jsonl")
	code, _, se := runCLI(nil, "replay", "--quiet", "--max-lateness", "10s", "--journal", journal, "--out", out, trace)
	if code != exitFailure || !strings.Contains(se, "journal write failed") || !strings.Contains(se, "sending stopped") {
		t.Errorf("exit %d, stderr %q; want exit 1 saying the journal failed and sending stopped", code, se)
	}
	if strings.Contains(se, "holds every finished request") {
		t.Errorf("claims a complete journal: %q", se)
	}
	res, _, err := traces.ReadAll(out)
	if err != nil {
		t.Fatalf("results after a journal failure: %v", err)
	}
	if len(res) == 0 || len(res) >= 2000 {
		t.Errorf("results hold %d of 2000 requests: sending should have stopped early, after some finished", len(res))
	}
	if names := checkLeftovers(t, "journal on a full disk", full, false); len(names) != 0 {
		t.Errorf("left on the full disk: %v (the results hold every finished request; the cut journal goes)", names)
	}
}

// TestFaultNotWritable gives each command an output directory it may not
// write (read-only as root, mode 0555 otherwise): exit 1, a message naming
// the output and the cause, nothing left.
func TestFaultNotWritable(t *testing.T) {
	var dir string
	if os.Geteuid() == 0 { // root ignores mode bits: a read-only mount refuses it
		dir = mountTmpfs(t, "size=1m", syscall.MS_RDONLY)
	} else {
		dir = t.TempDir()
		os.Chmod(dir, 0o555)
		t.Cleanup(func() { os.Chmod(dir, 0o755) })
	}
	in := prepareFaultInputs(t)
	for _, w := range faultWriters(in) {
		code, _, se := runCLI(nil, w.args(dir)...)
		denied := strings.Contains(se, "permission denied") || strings.Contains(se, "read-only file system")
		if code != exitFailure || !denied || !strings.Contains(se, w.out) {
			t.Errorf("%s into a directory it may not write: exit %d, stderr %q; want exit 1 naming %s and the cause", w.why, code, se, w.out)
		}
		if names := checkLeftovers(t, w.why, dir, false); len(names) != 0 {
			t.Errorf("%s: left %v", w.why, names)
		}
	}
}

// TestFaultMissingDirectory names an output directory that does not exist:
// exit 1 naming the output, nothing created.
func TestFaultMissingDirectory(t *testing.T) {
	in := prepareFaultInputs(t)
	gone := filepath.Join(t.TempDir(), "gone")
	for _, w := range faultWriters(in) {
		code, _, se := runCLI(nil, w.args(gone)...)
		if code != exitFailure || !strings.Contains(se, "no such file or directory") || !strings.Contains(se, w.out) {
			t.Errorf("%s into a missing directory: exit %d, stderr %q; want exit 1 naming %s", w.why, code, se, w.out)
		}
		if _, err := os.Stat(gone); !os.IsNotExist(err) {
			t.Errorf("%s: created %s (%v)", w.why, gone, err)
		}
	}
}

// TestFaultDirectoryDisappearsMidWrite removes the output directory while a
// command writes into it: import streaming from stdin, and replay with its
// journal beside the results. Both fail with exit 1; replay notices the
// vanished journal within a sync period, stops sending, and does not claim
// a journal holds anything.
func TestFaultDirectoryDisappearsMidWrite(t *testing.T) {
	t.Run("import", func(t *testing.T) {
		rows, err := os.ReadFile("../../testdata/publictraces/mooncake_conversation_head500.jsonl")
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(t.TempDir(), "out")
		os.Mkdir(dir, 0o755)
		pr, pw := io.Pipe()
		type result struct {
			code int
			se   string
		}
		done := make(chan result, 1)
		go func() {
			code, _, se := runCLI(pr, "import", "--format", "mooncake", "--out", filepath.Join(dir, "a.jsonl"), "-")
			done <- result{code, se}
		}()
		half := bytes.Index(rows[len(rows)/2:], []byte("\n")) + len(rows)/2 + 1
		pw.Write(rows[:half])
		waitFor(t, func() bool { return len(partials(dir)) > 0 }, "import's temporary file")
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		pw.Write(rows[half:])
		pw.Close()
		r := <-done
		if r.code != exitFailure || !strings.Contains(r.se, "a.jsonl") || !strings.Contains(r.se, "no such file or directory") {
			t.Errorf("exit %d, stderr %q; want exit 1 naming a.jsonl", r.code, r.se)
		}
	})
	t.Run("replay", func(t *testing.T) {
		trace := writeReplayTrace(t, 2000) // 4 s of trace
		dir := filepath.Join(t.TempDir(), "out")
		os.Mkdir(dir, 0o755)
		out := filepath.Join(dir, "res.parquet")
		type result struct {
			code int
			se   string
		}
		done := make(chan result, 1)
		start := time.Now()
		go func() {
			code, _, se := runCLI(nil, "replay", "--quiet", "--max-lateness", "10s", "--out", out, trace)
			done <- result{code, se}
		}()
		waitFor(t, func() bool { // the header and a first batch: the run is going
			b, _ := os.ReadFile(out + ".journal.jsonl")
			return bytes.Count(b, []byte("\n")) >= 2
		}, "replay's first journaled batch")
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		r := <-done
		if r.code != exitFailure || !strings.Contains(r.se, "removed or replaced") || !strings.Contains(r.se, "sending stopped") {
			t.Errorf("exit %d, stderr %q; want exit 1 saying the journal was removed and sending stopped", r.code, r.se)
		}
		if strings.Contains(r.se, "holds every finished request") {
			t.Errorf("claims the vanished journal holds the requests: %q", r.se)
		}
		t.Logf("replay ended %v after start (trace: 4 s)", time.Since(start).Round(time.Millisecond))
	})
}

// TestFaultSIGKILLMidWrite kills import (a child process streaming from a
// pipe) while its output is half written: the output name does not exist,
// and the only thing left is the hidden temporary file, whose name says it
// is partial. (replay's journal under SIGKILL: TestReplaySIGKILLKeepsJournal.)
func TestFaultSIGKILLMidWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a child process")
	}
	rows, err := os.ReadFile("../../testdata/publictraces/mooncake_conversation_head500.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{"a.jsonl", "a.parquet", "a.csv.zst"} {
		dir := t.TempDir()
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), childEnv+"="+strings.Join([]string{"tokentrace", "import", "--format", "mooncake", "--out", filepath.Join(dir, out), "-"}, "\x1f"))
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		bw := bufio.NewWriter(stdin)
		bw.Write(rows[:bytes.LastIndexByte(rows[:len(rows)/2], '\n')+1])
		bw.Flush()
		waitFor(t, func() bool { return len(partials(dir)) > 0 }, "import's temporary file")
		cmd.Process.Kill()
		cmd.Wait()
		names := checkLeftovers(t, "import killed writing "+out, dir, true)
		if len(names) != 1 || !strings.HasPrefix(names[0], "."+out+".partial-") {
			t.Errorf("import killed writing %s left %v; want only its .partial- file", out, names)
		}
		// The next run writing the same output recognises the killed
		// run's leftover (unlocked, and older than a run's first seconds)
		// and removes it.
		old := time.Now().Add(-time.Minute)
		for _, n := range names {
			os.Chtimes(filepath.Join(dir, n), old, old)
		}
		if code, _, se := runCLI(bytes.NewReader(rows), "import", "--format", "mooncake", "--out", filepath.Join(dir, out), "-"); code != 0 {
			t.Fatalf("import again: exit %d: %s", code, se)
		}
		if left := partials(dir); len(left) != 0 {
			t.Errorf("import of %s again left the killed run's %v", out, left)
		}
	}
}

// TestCaptureSIGINTRemovesRuns interrupts a capture (a child process
// reading a pipe) after it spilled sorted runs: it exits with an error, the
// runs' directory is gone and no output exists.
func TestCaptureSIGINTRemovesRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("signals a child process")
	}
	t.Parallel() // the capture runs in a child process; the test waits on it
	logs := spillingLogs(t)
	tmp, dir := t.TempDir(), t.TempDir()
	out := filepath.Join(dir, "trace.parquet")
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"="+strings.Join([]string{"tokentrace", "capture", "--sort-memory-mib", "1", "--temp-dir", tmp, "--out", out, "-"}, "\x1f"))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	runs := func() []string {
		m, _ := filepath.Glob(filepath.Join(tmp, "tokentrace-capture-*", "run-*"))
		return m
	}
	// Write until a run is spilled, then stop feeding and interrupt.
	go func() {
		b := logs
		for len(b) > 0 && len(runs()) == 0 {
			n := min(len(b), 256<<10)
			if _, err := stdin.Write(b[:n]); err != nil {
				return
			}
			b = b[n:]
		}
	}()
	waitFor(t, func() bool { return len(runs()) > 0 }, "a spilled run")
	// Ctrl-C in a shell stops the whole pipeline: the writer goes too.
	cmd.Process.Signal(os.Interrupt)
	stdin.Close()
	err = cmd.Wait()
	if err == nil {
		t.Fatalf("interrupted capture exited 0; stderr %q", stderr.String())
	}
	if left, _ := os.ReadDir(tmp); len(left) > 0 {
		t.Errorf("interrupted capture left %d entries in its temporary directory, first %s", len(left), left[0].Name())
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("interrupted capture wrote %s", out)
	}
}

// TestOutputsAreAtomic checks the rule behind the suite in the source: no
// product or command creates a file by name except through
// internal/atomicfile, besides the files that are appended in place on
// purpose (replay's journal, capture's new key file, the profiles) and
// Parquet's spill file in the temporary directory.
func TestOutputsAreAtomic(t *testing.T) {
	allowed := map[string]string{
		"replay/journal.go":                "the journal is appended in place so that it survives a crash",
		"capture/capture.go":               "a new key file is created with O_EXCL and removed if cut short",
		"cmd/tokentrace/profile.go":        "--cpuprofile and --exectrace, written as the command runs",
		"traces/parquet.go":                "the sort's spill file in the temporary directory",
		"traces/formats/import_baseten.go": "a piped Baseten Parquet trace copied to the temporary directory for random access, removed on Close",
		"capture/spool.go":                 "capture's sorted runs in their temporary directory",
		"capture/sessions.go":              "capture's spilled session counts in the same directory",
		"internal/tempfile/tempfile.go":    "temporary files and directories (synth fit's spills, stdin's Parquet, the sorts' run directories), locked while in use so that a later run removes what a killed one left",
		"internal/promtest/promtest.go":    "tests' Prometheus configuration",
		"internal/golden/golden.go":        "tests' golden files, rewritten with -update",
	}
	root := "../.."
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() && (rel == "testdata" || rel == "internal/atomicfile" || strings.HasPrefix(d.Name(), ".")) && rel != "." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, call := range []string{"os.Create(", "os.WriteFile(", "os.OpenFile(", "os.CreateTemp("} {
			if bytes.Contains(b, []byte(call)) {
				if allowed[filepath.ToSlash(rel)] == "" {
					t.Errorf("%s calls %s: outputs go through internal/atomicfile", rel, call)
				}
				seen[filepath.ToSlash(rel)] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for f := range allowed {
		if !seen[f] {
			t.Errorf("%s is allowed to create files but no longer does: drop it from the list", f)
		}
	}
}

// mountTmpfs mounts a tmpfs with opts under a temporary directory, or skips
// the test where that is not allowed (not root).
func mountTmpfs(t *testing.T, opts string, flags uintptr) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", flags, opts); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v): internal/atomicfile's and replay's tests cover failed writes without one", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, 0) })
	return dir
}

// fill writes name until the disk is full.
func fill(t *testing.T, name string) {
	t.Helper()
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 4096)
	for {
		if _, err := f.Write(b); err != nil {
			return
		}
	}
}

// partials lists the hidden temporary files atomicfile writes in dir.
func partials(dir string) []string {
	m, _ := filepath.Glob(filepath.Join(dir, ".*.partial-*"))
	return m
}

// waitFor polls cond for up to 30 s.
func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after 30 s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
