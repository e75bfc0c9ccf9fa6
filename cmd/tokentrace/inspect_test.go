package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/internal/testtraces"
	"github.com/tokentrace/tokentrace/traces"
	"github.com/tokentrace/tokentrace/traces/formats"
)

// inspectTrace writes a small results file: 4 rows at 0, 1, 2, 4 s, two of
// them replayed.
func inspectTrace(t *testing.T, name string) {
	t.Helper()
	var recs []traces.Record
	for i, at := range []int64{0, 1e9, 2e9, 4e9} {
		r := traces.NewRecord()
		r.Seq, r.ArrivalNs, r.InputTokens, r.OutputTokens, r.Model = int64(i), at, int32(100*(i+1)), int32(10*(i+1)), "llama"
		if i%2 == 0 {
			r.Category, r.Session = "sys", 3
		}
		recs = append(recs, r)
	}
	recs[0].Status, recs[0].ScheduledNs, recs[0].SentNs, recs[0].FirstTokenNs, recs[0].LastTokenNs = traces.StatusOK, 0, 5e6, 55e6, 205e6
	recs[1].Status, recs[1].ScheduledNs, recs[1].SentNs = traces.StatusTimeout, 1e9, 1e9
	m := traces.NewMeta("test")
	m.BlockSize = 512
	writeTrace(t, name, m, recs)
}

func TestInspectText(t *testing.T) {
	name := filepath.Join(t.TempDir(), "r.parquet")
	inspectTrace(t, name)
	code, out, errs := runCLI(nil, "inspect", name)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{
		"rows           4", "duration       4.000 s", "rate           0.750 req/s",
		"input_tokens   p50 250", "sum 1000", "categories     2: (none) 50.0% (2), sys 50.0% (2)",
		"sessions       1", "models         1: llama 100.0% (4)", "block_size 512",
		"outcome        2 requests: ok 1, failed 1 (timeout 1)", "ttft_ms        n 1  p50 50.00",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestInspectJSON(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.parquet"), filepath.Join(dir, "b.csv")
	inspectTrace(t, a)
	inspectTrace(t, b)
	code, out, errs := runCLI(nil, "inspect", "--json", a, b)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	dec := json.NewDecoder(strings.NewReader(out))
	for _, file := range []string{a, b} {
		var got map[string]any
		if err := dec.Decode(&got); err != nil {
			t.Fatalf("decode: %v\n%s", err, out)
		}
		for _, k := range []string{"file", "rows", "duration_s", "rate_rps", "burstiness_cv", "input_tokens", "output_tokens", "categories", "sessions", "models", "meta", "outcome"} {
			if _, ok := got[k]; !ok {
				t.Errorf("%s: key %q missing", file, k)
			}
		}
		if got["file"] != file || got["rows"] != 4.0 {
			t.Errorf("file %v rows %v", got["file"], got["rows"])
		}
		in := got["input_tokens"].(map[string]any)
		for _, k := range []string{"p50", "p90", "p99", "max", "sum"} {
			if _, ok := in[k]; !ok {
				t.Errorf("input_tokens.%s missing", k)
			}
		}
		oc := got["outcome"].(map[string]any)
		if oc["ok"] != 1.0 || oc["failed"] != 1.0 {
			t.Errorf("outcome %v", oc)
		}
	}
}

func TestInspectStdin(t *testing.T) {
	name := filepath.Join(t.TempDir(), "r.jsonl")
	inspectTrace(t, name)
	data, _ := os.ReadFile(name)
	code, out, errs := runCLI(bytes.NewReader(data), "inspect", "-")
	if code != 0 || !strings.Contains(out, "stdin\n") || !strings.Contains(out, "rows           4") {
		t.Errorf("exit %d, out %q, err %q", code, out, errs)
	}
}

func TestInspectErrors(t *testing.T) {
	dir := t.TempDir()
	trunc := filepath.Join(dir, "t.parquet")
	inspectTrace(t, trunc)
	data, _ := os.ReadFile(trunc)
	os.WriteFile(trunc, data[:len(data)/2], 0o644)
	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, []byte("{\"seq\":0,\"arrival_ns\":0,\"input_tokens\":1,\"output_tokens\":1}\nnot json\n{\"seq\":1,\"arrival_ns\":5,\"input_tokens\":1,\"output_tokens\":1}\n"), 0o644)
	cases := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{
		// A truncated Parquet file fails with exit 1 and names the file.
		{"truncated parquet", []string{trunc}, 1, trunc},
		// --salvage reads it up to the damage and says so.
		{"salvaged parquet", []string{"--salvage", trunc}, 0, "is damaged (truncated): using the"},
		// A malformed JSONL line is skipped, counted and named by default.
		{"skip malformed", []string{bad}, 0, "skipped 1 bad row: 1 unreadable (first " + bad + ":2: unreadable: not a JSON object)"},
		// --strict fails on it, naming file and line.
		{"strict", []string{"--strict", bad}, 1, bad + ":2"},
		// A missing file is a failure, not a usage error.
		{"missing", []string{filepath.Join(dir, "nope.parquet")}, 1, "nope.parquet"},
		// Flags after arguments are refused.
		{"flag after arg", []string{bad, "--json"}, 2, "put flags before arguments"},
		// No argument is a usage error.
		{"no args", nil, 2, "argument"},
	}
	for _, tc := range cases {
		code, _, errs := runCLI(nil, append([]string{"inspect"}, tc.args...)...)
		if code != tc.wantCode || !strings.Contains(errs, tc.wantErr) {
			t.Errorf("%s: exit %d, stderr %q; want exit %d mentioning %q", tc.name, code, errs, tc.wantCode, tc.wantErr)
		}
	}
}

func TestInspectHelpHasExample(t *testing.T) {
	if _, out, _ := runCLI(nil, "inspect", "--help"); !strings.Contains(out, "tokentrace inspect --json results.parquet") {
		t.Errorf("--help lacks an example:\n%s", out)
	}
}

// TestInspectAzure: the shared Azure code trace imports to 8,819 rows.
func TestInspectAzure(t *testing.T) {
	src := testtraces.Path(t, "azure_llm_2023/AzureLLMInferenceTrace_code.csv")
	recs, m, _, err := formats.ImportAll(context.Background(), "azure", src, traces.DefaultOpenOptions())
	if err != nil {
		t.Skipf("azure importer not available: %v", err)
	}
	name := writeTrace(t, filepath.Join(t.TempDir(), "azure.parquet"), m, recs)
	code, out, errs := runCLI(nil, "inspect", "--json", name)
	var got traces.Summary
	if code != 0 || json.Unmarshal([]byte(out), &got) != nil {
		t.Fatalf("exit %d: %s %s", code, out, errs)
	}
	if got.Rows != 8819 || got.InputTokens.Sum == 0 || got.RateRPS <= 0 || got.BurstinessCV <= 0 {
		t.Errorf("summary %+v", got)
	}
	t.Logf("azure code: %d rows, %.0f s, %.2f req/s, CV %.2f", got.Rows, got.DurationS, got.RateRPS, got.BurstinessCV)
}

func TestInspectMetaLine(t *testing.T) {
	m := traces.Meta{SchemaVersion: "3", Source: "vllm", Tokenizer: "tok", BlockSize: 16, KeyFingerprint: "fp", KThreshold: 5, Command: "capture",
		Extra: map[string]string{"zeta": "z", "alpha": "a", "empty": ""}}
	want := "schema 3, source vllm, tokenizer tok, block_size 16, key_fingerprint fp, k 5, command capture, alpha a, zeta z"
	if got := metaLine(m); got != want {
		t.Errorf("metaLine = %q, want %q", got, want)
	}
	if got, want := metaLine(traces.Meta{}), "schema "; got != want {
		t.Errorf("metaLine(empty) = %q, want %q", got, want)
	}
}
