package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// TestWrongInputIsAnError gives commands input that yields nothing useful:
// each exits 1 with a message naming the likely cause, and writes no
// output (an empty trace is never what was wanted).
func TestWrongInputIsAnError(t *testing.T) {
	dir := t.TempDir()
	logs := filepath.Join(dir, "gateway.jsonl")
	writeTestFile(t, logs, sampleLogs(t, 5*time.Second, 0))
	trace := writeReplayTrace(t, 20) // 40 ms of trace
	empty := writeTrace(t, filepath.Join(dir, "empty.jsonl"), traces.NewMeta("t"), nil)
	parquetTrace := toParquet(t, trace, filepath.Join(dir, "trace.parquet"))
	azure, _ := filepath.Abs("../../testdata/publictraces/azure2023_conv_head1000.csv")
	out := filepath.Join(dir, "out.parquet")
	for _, c := range []struct {
		why  string
		args []string
		want []string
	}{
		{"capture given a Parquet tokentrace trace instead of logs says so (its bytes are not counted as bad lines)",
			[]string{"capture", "--out", out, parquetTrace}, []string{"trace.parquet: a Parquet file, not serving logs; it is already a tokentrace trace: use it as it is"}},
		{"capture given a JSON lines tokentrace trace instead of logs says so",
			[]string{"capture", "--out", out, trace}, []string{"no requests captured", "already a tokentrace trace"}},
		{"capture of gateway logs with the wrong --format points at --format",
			[]string{"capture", "--format", "vllm-log", "--out", out, logs}, []string{"no requests captured", `format "vllm-log"`, "check --format"}},
		{"import of an Azure CSV as mooncake points at --format",
			[]string{"import", "--format", "mooncake", "--out", out, azure}, []string{"no rows imported", "--format mooncake", "check --format"}},
		{"replay of a window outside the trace says where the trace is",
			[]string{"replay", "--window", "100s,200s", "--out", out, trace}, []string{"no records to send", "--window", "arrive from 0s to 38ms"}},
		{"replay of an empty trace",
			[]string{"replay", "--out", out, empty}, []string{"no records to send", "the trace is empty"}},
	} {
		code, _, se := runCLI(nil, c.args...)
		if code != exitFailure {
			t.Errorf("%s: exit %d, want 1 (stderr %q)", c.why, code, se)
		}
		for _, w := range c.want {
			if !strings.Contains(se, w) {
				t.Errorf("%s: stderr %q lacks %q", c.why, se, w)
			}
		}
		if strings.Contains(se, "not_utf8") {
			t.Errorf("%s: stderr %q counts a binary file's bytes as bad lines", c.why, se)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("%s: wrote %s anyway (%v)", c.why, out, err)
			os.Remove(out)
		}
	}
}

// TestDamagedTraceSameEverywhere cuts 100 bytes off a Parquet trace and a
// Parquet results file: every command that reads them fails, naming the
// file and the complete rows before the damage, and with --salvage goes
// on with those rows and says so in the same words.
func TestDamagedTraceSameEverywhere(t *testing.T) {
	dir := t.TempDir()
	trace := toParquet(t, writeReplayTrace(t, 40), filepath.Join(dir, "trace.parquet"))
	results := filepath.Join(dir, "res.parquet")
	if code, _, se := runCLI(nil, "replay", "--quiet", "--max-lateness", "10s", "--out", results, trace); code != 0 {
		t.Fatal(se)
	}
	cut := func(name string) string {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		c := strings.TrimSuffix(name, ".parquet") + ".cut.parquet"
		os.WriteFile(c, b[:len(b)-100], 0o644)
		return c
	}
	ct, cr := cut(trace), cut(results)
	for _, c := range []struct {
		cmd  []string
		args []string
		name string
	}{
		{[]string{"replay"}, []string{"--quiet", "--max-lateness", "10s", "--out", filepath.Join(dir, "r2.parquet"), ct}, ct},
		{[]string{"synth", "fit"}, []string{"--out", filepath.Join(dir, "m.json"), ct}, ct},
		{[]string{"export"}, []string{"--format", "jsonl", "--out", filepath.Join(dir, "e.jsonl"), ct}, ct},
		{[]string{"synth", "check"}, []string{ct, trace}, ct},
		{[]string{"inspect"}, []string{ct}, ct},
		{[]string{"analyze"}, []string{cr}, cr},
	} {
		cmd := strings.Join(c.cmd, " ")
		code, so, se := runCLI(nil, append(c.cmd, c.args...)...)
		if want := c.name + " is damaged (truncated): 40 complete rows before the damage, which --salvage uses"; code != exitFailure || !strings.Contains(se, want) {
			t.Errorf("%s on a damaged file: exit %d, want 1 saying %q:\n%s", cmd, code, want, so+se)
		}
		// analyze puts the note among the report's warnings, on stdout
		code, so, se = runCLI(nil, append(append(c.cmd, "--salvage"), c.args...)...)
		if cmd != "synth check" && code != 0 {
			t.Errorf("%s --salvage on a damaged file: exit %d: %s", cmd, code, so+se)
		}
		if want := traces.SalvageNote(c.name, 40); !strings.Contains(so+se, want) {
			t.Errorf("%s --salvage on a damaged file: output %q lacks %q", cmd, so+se, want)
		}
	}
}

// toParquet copies the trace src to the Parquet file dst.
func toParquet(t *testing.T, src, dst string) string {
	t.Helper()
	recs, m, err := traces.ReadAll(src)
	if err != nil {
		t.Fatal(err)
	}
	writeTrace(t, dst, m, recs)
	return dst
}

// TestKeyFileErrorsPointAtEachOther: a missing --key-file points at
// --new-key-file, and --new-key-file on an existing file points at
// --key-file (the key is never overwritten).
func TestKeyFileErrorsPointAtEachOther(t *testing.T) {
	dir := t.TempDir()
	logs := filepath.Join(dir, "gateway.jsonl")
	os.WriteFile(logs, []byte("{}\n"), 0o644)
	missing, existing := filepath.Join(dir, "none.key"), filepath.Join(dir, "old.key")
	os.WriteFile(existing, []byte("kept\n"), 0o600)
	out := filepath.Join(dir, "t.parquet")
	for _, c := range []struct {
		why  string
		args []string
		want string
	}{
		{"a missing --key-file", []string{"capture", "--key-file", missing, "--out", out, logs}, "--new-key-file " + missing},
		{"--new-key-file on an existing file", []string{"capture", "--new-key-file", existing, "--out", out, logs}, "--key-file " + existing},
	} {
		code, _, se := runCLI(nil, c.args...)
		if code != exitFailure || !strings.Contains(se, c.want) {
			t.Errorf("%s: exit %d, stderr %q; want exit 1 pointing at %q", c.why, code, se, c.want)
		}
	}
	if b, _ := os.ReadFile(existing); string(b) != "kept\n" {
		t.Errorf("the existing key file was changed: %q", b)
	}
}

// TestRecordedCommandsKeepBaseNames checks that the command lines stored in
// a trace's metadata keep only the base names of the paths given (a
// directory can name a customer or a person).
func TestRecordedCommandsKeepBaseNames(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "customer-acme")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	logs := filepath.Join(dir, "gateway.jsonl")
	writeTestFile(t, logs, sampleLogs(t, 5*time.Second, 3))
	trace := filepath.Join(dir, "trace.jsonl")
	synth := filepath.Join(dir, "synth.jsonl")
	model := filepath.Join(dir, "model.json")
	for _, args := range [][]string{
		{"capture", "--new-key-file", filepath.Join(dir, "k.key"), "--out", trace, logs},
		{"synth", "fit", "--out", model, trace},
		{"synth", "gen", "--out", synth, model},
	} {
		runMain(t, args...)
	}
	for _, f := range []string{trace, synth} {
		_, m, err := traces.ReadAll(f)
		if err != nil {
			t.Fatal(err)
		}
		if m.Command == "" || strings.Contains(m.Command, "customer-acme") || strings.Contains(m.Command, string(filepath.Separator)) {
			t.Errorf("%s records %q: want base names only", filepath.Base(f), m.Command)
		}
	}
}
