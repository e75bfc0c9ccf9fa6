package main

// The mistakes a newcomer makes in the first hour, each with what the CLI
// says back: a next step, never a dead end.

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/traces"
)

// writeModelTrace writes n small records that name model, as a capture of
// production logs does.
func writeModelTrace(t *testing.T, n int, model string) string {
	t.Helper()
	recs := make([]traces.Record, n)
	for i := range recs {
		r := traces.NewRecord()
		r.Seq, r.ArrivalNs = int64(i), int64(i)*2e6
		r.InputTokens, r.OutputTokens = 16, 2
		r.Model = model
		recs[i] = r
	}
	return writeTrace(t, filepath.Join(t.TempDir(), "trace.jsonl"), traces.NewMeta("test"), recs)
}

// A replay against a server that does not serve the trace's model names
// what it does serve and the flags that send it (it said "HTTP 404 ...;
// every request would" and stopped there).
func TestPreflightNamesServedModels(t *testing.T) {
	url := startSimCommand(t, "--model", "served-8b")
	trace := writeModelTrace(t, 3, "demo-8b")
	out := filepath.Join(t.TempDir(), "res.jsonl")
	code, _, se := runCLI(nil, "replay", "--url", url, "--quiet", "--out", out, trace)
	if code != exitFailure {
		t.Fatalf("exit %d, want 1; stderr %q", code, se)
	}
	for _, want := range []string{`"served-8b"`, "--model", "--model-map demo-8b=served-8b", "every request of the run would fail the same way", "--no-preflight"} {
		if !strings.Contains(se, want) {
			t.Errorf("stderr %q does not say %q", se, want)
		}
	}
	if strings.Contains(se, "every request would (") {
		t.Errorf("stderr %q ends its sentence mid-way", se)
	}
	// What it suggests works.
	if code, _, se := runCLI(nil, "replay", "--url", url, "--quiet", "--model-map", "demo-8b=served-8b", "--out", out, trace); code != 0 {
		t.Errorf("with the suggested --model-map: exit %d, stderr %q", code, se)
	}
}

// An SLO bound without a unit is refused (exit 2, naming the fix) instead
// of being read as milliseconds: `--slo ttft=500` was accepted silently.
func TestSLOWithoutUnitRefused(t *testing.T) {
	for _, args := range [][]string{
		{"analyze", "--slo", "ttft=500", "results.parquet"},
		{"sweep", "--slo", "ttft=500", "trace.parquet"},
	} {
		code, _, se := runCLI(nil, args...)
		if code != exitUsage || !strings.Contains(se, "no unit") || !strings.Contains(se, "ttft=500ms") {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 saying the bound has no unit and suggesting ttft=500ms", args, code, se)
		}
	}
}
