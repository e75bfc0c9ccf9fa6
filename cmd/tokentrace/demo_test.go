package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/traces"
)

// The demo runs the whole pipeline; a short, fast version of it must leave
// every artifact readable and every request answered.
func TestDemoEndToEnd(t *testing.T) {
	dir := t.TempDir()
	out, _ := runMain(t, "demo", "--out", dir, "--duration", "6s", "--speed", "3")
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

// TestDemoPrintedCommandsReproduce runs the commands the demo prints beside
// its two report blocks and checks that they print what the demo showed:
// the real run's report byte for byte, and the comparison the demo saved.
// Its steps print in order.
func TestDemoPrintedCommandsReproduce(t *testing.T) {
	dir := t.TempDir()
	text, _ := runMain(t, "demo", "--out", dir, "--duration", "6s", "--speed", "3")
	if i4, i5 := strings.Index(text, "[4/6"), strings.Index(text, "[5/6"); i4 < 0 || i5 < 0 || i5 < i4 {
		t.Errorf("steps out of order:\n%s", text)
	}
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
	so, _ := runMain(t, strings.Fields(cmd)[1:]...)
	if strings.TrimSpace(so) != strings.TrimSpace(body) {
		t.Errorf("%s prints a different report than the demo showed:\n--- demo\n%s\n--- command\n%s", cmd, body, so)
	}
	cmd, _ = block("== synthetic vs real (")
	so, _ = runMain(t, strings.Fields(cmd)[1:]...)
	saved, _ := os.ReadFile(filepath.Join(dir, "compare.txt"))
	if so != string(saved) {
		t.Errorf("%s prints a different comparison than the demo saved:\n--- demo\n%s\n--- command\n%s", cmd, saved, so)
	}
}
