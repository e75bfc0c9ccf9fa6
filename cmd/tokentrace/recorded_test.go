package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

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
