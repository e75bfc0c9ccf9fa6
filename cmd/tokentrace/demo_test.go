package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/internal/testtraces"
	"github.com/tokentrace/tokentrace/replay"
	"github.com/tokentrace/tokentrace/traces"
)

// The demo runs the whole pipeline; a short, fast version of it must leave
// every artifact readable and every request answered.
func TestDemoEndToEnd(t *testing.T) {
	t.Parallel() // mostly waits on the real-time replays; the demo runs in a child process
	dir := t.TempDir()
	out, _ := runMainChild(t, "", "demo", "--out", dir, "--duration", "6s", "--speed", "3")
	for _, f := range []string{"gateway-logs.jsonl.gz", "trace.parquet", "model.json", "synth.parquet",
		"real.results.parquet", "synth.results.parquet", "report.html", "compare.html", "report.txt", "compare.txt"} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil || st.Size() == 0 {
			t.Errorf("demo did not write %s: %v", f, err)
		}
	}
	trace, _, err := traces.ReadAll(filepath.Join(dir, "trace.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	res, meta, err := traces.ReadAll(filepath.Join(dir, "real.results.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != len(trace) || len(res) == 0 {
		t.Fatalf("real replay has %d results for %d trace records", len(res), len(trace))
	}
	for i := range res {
		if !res[i].OK() {
			t.Fatalf("request %d: status %q (%s)", res[i].Seq, res[i].Status, res[i].Error)
		}
		if res[i].ServerQueueNs < 0 || res[i].ServerPrefillNs < 0 {
			t.Fatalf("request %d has no server timings: the demo's attribution must be exact", res[i].Seq)
		}
	}
	if meta.Command != "tokentrace demo" {
		t.Errorf("results command = %q", meta.Command)
	}
	html, _ := os.ReadFile(filepath.Join(dir, "report.html"))
	if !bytes.Contains(html, []byte("<svg")) || bytes.Contains(html, []byte("<script src=")) {
		t.Error("report.html is not a self-contained page with charts")
	}
	if !strings.Contains(out, "Tail attribution") || !strings.Contains(out, "Open the report") {
		t.Errorf("demo output lacks the attribution or the report path:\n%s", out)
	}
	// Its figures depend on the host: it says how busy the host was and
	// whether each replay kept its timing.
	if !strings.HasPrefix(out, "Host: ") || !strings.Contains(out, "depend on the host's load") || !strings.Contains(out, "Done in ") {
		t.Errorf("demo output does not say how busy the host was:\n%s", out)
	}
	for _, step := range []string{"[4/6", "[5/6"} {
		i := strings.Index(out, step)
		line, _, _ := strings.Cut(out[max(i, 0):], "\n")
		// On a busy host a replay may not keep it: either answer, said.
		if i < 0 || !(strings.Contains(line, "kept its timing (lateness p99") || strings.Contains(line, "did NOT keep its timing (lateness p99")) {
			t.Errorf("replay step %s does not say whether it kept its timing: %q", step, line)
		}
	}
}

// TestDemoPrintedCommandsReproduce runs the demo as a newcomer would, in a
// fresh directory with the default --out, then every command it printed
// in order, into a fresh tokentrace-demo/ (the demo's own files set
// aside), as the README tells a reader to: each exits 0 and reproduces its
// step. The logs are the same bytes; the trace and the synthetic trace the
// same records; each replay ran against the same simulator configuration
// with the same options (the results' metadata); the analyze commands
// write the reports. The commands the demo prints beside its two report
// blocks print what the demo showed: the real run's report byte for byte
// (on the demo's own results), and the comparison the demo saved.
func TestDemoPrintedCommandsReproduce(t *testing.T) {
	t.Parallel() // mostly waits on the real-time replays; the commands run in child processes in dir
	gen := buildSampleLogsGen(t)
	dir := t.TempDir()
	text, _ := runMainChild(t, dir, "demo", "--duration", "6s", "--speed", "3")
	if i4, i5 := strings.Index(text, "[4/6"), strings.Index(text, "[5/6"); i4 < 0 || i5 < 0 || i5 < i4 {
		t.Errorf("steps out of order:\n%s", text)
	}
	checkDemoReports(t, dir, text)

	var cmds []string
	for _, line := range strings.Split(text, "\n") {
		if c, ok := strings.CutPrefix(line, "  $ "); ok {
			cmds = append(cmds, c)
		}
	}
	if len(cmds) != 8 {
		t.Fatalf("the demo printed %d commands, want 8 (logs, capture, synth fit and gen, 2 replays, analyze and compare):\n%s", len(cmds), text)
	}
	if err := os.Rename(filepath.Join(dir, DefaultDemoOut), filepath.Join(dir, "ref")); err != nil {
		t.Fatal(err)
	}
	for _, c := range cmds {
		words := shellSplit(t, c)
		switch {
		case strings.HasPrefix(c, "go run ./testdata/samplelogs/gen "):
			cmd := exec.Command(gen, words[3:]...)
			cmd.Dir = dir
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", c, err, out)
			}
		case words[0] == "tokentrace":
			code, so, se := runCLIChild(t, dir, nil, words[1:]...)
			// A replay that could not keep its timing on a loaded host
			// exits 3 and says so; anything else must succeed.
			if code != 0 && !(code == exitNotReproduced && strings.Contains(se, "lateness p99")) {
				t.Fatalf("%s: exit %d\nstdout %s\nstderr %s", c, code, so, se)
			}
		default:
			t.Fatalf("the demo printed %q, which is neither tokentrace nor the sample-log generator", c)
		}
	}
	ref := func(name string) string { return filepath.Join(dir, "ref", name) }
	now := func(name string) string { return filepath.Join(dir, DefaultDemoOut, name) }
	if a, b := readFile(t, ref("gateway-logs.jsonl.gz")), readFile(t, now("gateway-logs.jsonl.gz")); !bytes.Equal(a, b) {
		t.Errorf("the logs command writes other logs (%d bytes, the demo's %d)", len(b), len(a))
	}
	for _, f := range []string{"trace.parquet", "synth.parquet"} {
		a, am := testtraces.ReadAll(t, ref(f))
		b, bm := testtraces.ReadAll(t, now(f))
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s: the printed commands write other records than the demo (%d, the demo %d)", f, len(b), len(a))
		}
		am.Command, bm.Command = "", ""
		if !reflect.DeepEqual(am, bm) {
			t.Errorf("%s: metadata differs:\n%+v\n%+v", f, am, bm)
		}
	}
	for _, f := range []string{"real.results.parquet", "synth.results.parquet"} {
		a, am := testtraces.ReadAll(t, ref(f))
		b, bm := testtraces.ReadAll(t, now(f))
		if len(a) != len(b) || len(b) == 0 {
			t.Errorf("%s: %d results, the demo %d", f, len(b), len(a))
		}
		if am.Get(replay.MetaSim) != demoTarget {
			t.Errorf("%s: the demo recorded %s = %q, want %q", f, replay.MetaSim, am.Get(replay.MetaSim), demoTarget)
		}
		for _, k := range []string{replay.MetaSim, replay.MetaOptions, replay.MetaRun, replay.MetaSpeed, replay.MetaModel, replay.MetaShard, replay.MetaServerModels} {
			if am.Get(k) != bm.Get(k) {
				t.Errorf("%s: %s is %q, the demo's %q", f, k, bm.Get(k), am.Get(k))
			}
		}
		if _, err := os.Stat(traces.SamplesPathFor(now(f))); err != nil {
			t.Errorf("%s: no metrics series beside it: %v", f, err)
		}
	}
	for _, f := range []string{"report.html", "compare.html"} {
		if st, err := os.Stat(now(f)); err != nil || st.Size() == 0 {
			t.Errorf("the analyze commands did not write %s: %v", f, err)
		}
	}
}

// checkDemoReports runs the commands the demo prints beside its two report
// blocks, in the demo's folder dir, and checks that they print what the
// demo showed.
func checkDemoReports(t *testing.T, dir, text string) {
	t.Helper()
	block := func(marker string) (cmd, body string) {
		i := strings.Index(text, marker)
		if i < 0 {
			t.Fatalf("demo output lacks %q:\n%s", marker, text)
		}
		rest := text[i+len(marker):]
		cmd, rest, _ = strings.Cut(rest, "\n")
		cmd, _, _ = strings.Cut(strings.TrimSuffix(cmd, ")"), "; full table")
		body, _, _ = strings.Cut(rest, "\n== ")
		return cmd, body
	}
	cmd, body := block("== the real trace's replay (")
	so, _ := runMainChild(t, dir, strings.Fields(cmd)[1:]...)
	if strings.TrimSpace(so) != strings.TrimSpace(body) {
		t.Errorf("%s prints a different report than the demo showed:\n--- demo\n%s\n--- command\n%s", cmd, body, so)
	}
	cmd, _ = block("== synthetic vs real (")
	so, _ = runMainChild(t, dir, strings.Fields(cmd)[1:]...)
	saved := readFile(t, filepath.Join(dir, DefaultDemoOut, "compare.txt"))
	if so != string(saved) {
		t.Errorf("%s prints a different comparison than the demo saved:\n--- demo\n%s\n--- command\n%s", cmd, saved, so)
	}
}

// buildSampleLogsGen builds the sample-log generator the demo's first
// printed command runs with go run, so the test runs the same program with
// the same arguments from its own directory.
func buildSampleLogsGen(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "gen")
	cmd := exec.Command("go", "build", "-o", bin, "./testdata/samplelogs/gen")
	cmd.Dir = filepath.Join("..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./testdata/samplelogs/gen: %v\n%s", err, out)
	}
	return bin
}

// shellSplit splits a command line the demo printed into its words: words
// apart at spaces, single quotes and backslashes as shellWord writes them.
func shellSplit(t *testing.T, s string) []string {
	t.Helper()
	var words []string
	var w strings.Builder
	inWord, quoted, escaped := false, false, false
	for _, r := range s {
		switch {
		case escaped:
			w.WriteRune(r)
			escaped = false
		case r == '\\' && !quoted:
			escaped, inWord = true, true
		case r == '\'':
			quoted, inWord = !quoted, true
		case r == ' ' && !quoted:
			if inWord {
				words = append(words, w.String())
				w.Reset()
			}
			inWord = false
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	if quoted {
		t.Fatalf("unbalanced quotes in %q", s)
	}
	if inWord {
		words = append(words, w.String())
	}
	return words
}

func TestShellWord(t *testing.T) {
	for _, s := range []string{"tokentrace-demo/trace.parquet", "my demo/it's.parquet", "a'b", "/tmp/x y/'z'"} {
		if got := shellSplit(t, "cmd "+shellWord(s)+" end"); len(got) != 3 || got[1] != s {
			t.Errorf("shellWord(%q) = %s splits to %q", s, shellWord(s), got)
		}
	}
	if shellWord("tokentrace-demo/trace.parquet") != "tokentrace-demo/trace.parquet" {
		t.Error("a plain path is quoted")
	}
}
