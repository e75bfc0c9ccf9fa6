package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/traces"
	"github.com/tokentrace/tokentrace/traces/formats"
)

const importFixtures = "../../traces/formats/testdata/import/"

// import and export through the CLI: files, stdin/stdout, strictness,
// messages and exit codes.
func TestImportExportCLI(t *testing.T) {
	dir := t.TempDir()
	badCSV := filepath.Join(dir, "bad.csv")
	os.WriteFile(badCSV, []byte("TIMESTAMP,ContextTokens,GeneratedTokens\r\n2023-11-16 18:17:03.9799600,10,2\r\n2023-11-16 18:17:04.0000000,11\r\n2023-11-16 18:17:05.0000000,-12,3\r\n2023-11-16 18:17:06.0000000,13,3"), 0o644)
	mooncake, err := os.ReadFile(importFixtures + "mooncake.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		stdin      string
		args       []string
		code       int
		wantOut    string // substring of stdout
		wantErr    string // substring of stderr
		notInErr   string
		wantRows   int    // rows of the file named by check, if any
		check      string // a trace file to read back
		checkValue func(t *testing.T, recs []traces.Record)
	}{
		{
			name:    "an Azure file imports to Parquet",
			args:    []string{"import", "--format", "azure", "--out", filepath.Join(dir, "a.parquet"), importFixtures + "azure2023_crlf.csv"},
			wantErr: "imported 6 rows\n", check: filepath.Join(dir, "a.parquet"), wantRows: 6,
		},
		{
			name:    "malformed rows are skipped and counted by default",
			args:    []string{"import", "--format", "azure", "--out", filepath.Join(dir, "b.jsonl"), badCSV},
			wantErr: "skipped 2 bad rows: 1 unreadable (first " + badCSV + ":3: unreadable: 2 columns, header has 3), 1 negative (first " + badCSV + ":4: negative: ContextTokens)", check: filepath.Join(dir, "b.jsonl"), wantRows: 2,
		},
		{
			name: "--strict stops at the first malformed row, naming file and line",
			args: []string{"import", "--format", "azure", "--strict", "--out", filepath.Join(dir, "c.jsonl"), badCSV},
			code: 1, wantErr: badCSV + ":3:", notInErr: "18:17:04",
		},
		{
			name:    "stdin to stdout",
			stdin:   string(mooncake),
			args:    []string{"import", "--format", "mooncake", "-"},
			wantOut: `"prefix-2"`, wantErr: "imported 6 rows",
		},
		{
			name:    "BurstGPT v3 keeps failed rows",
			args:    []string{"import", "--format", "burstgpt", "--out", filepath.Join(dir, "g.csv"), importFixtures + "burstgpt_v3.csv"},
			wantErr: "imported 7 rows", check: filepath.Join(dir, "g.csv"), wantRows: 7,
			checkValue: func(t *testing.T, recs []traces.Record) {
				failed := 0
				for _, r := range recs {
					if r.Status == traces.StatusHTTPError && r.OutputTokens == 0 {
						failed++
					}
				}
				if failed != 2 {
					t.Errorf("%d failed rows, want 2", failed)
				}
			},
		},
		{
			name: "an unknown format is a usage error",
			args: []string{"import", "--format", "sharegpt", importFixtures + "mooncake.jsonl"},
			code: 2, wantErr: "want one of " + strings.Join(formats.ImportFormats, ", "),
		},
		{
			name: "--format is required",
			args: []string{"import", importFixtures + "mooncake.jsonl"},
			code: 2, wantErr: "--format is required",
		},
		{
			name: "a flag after the file is refused",
			args: []string{"import", "--format", "mooncake", importFixtures + "mooncake.jsonl", "--strict"},
			code: 2, wantErr: "put flags before arguments",
		},
		{
			name: "an output without a known extension is a usage error",
			args: []string{"import", "--format", "mooncake", "--out", filepath.Join(dir, "x.txt"), importFixtures + "mooncake.jsonl"},
			code: 2, wantErr: "--out",
		},
		{
			name: "a missing input file fails with exit 1",
			args: []string{"import", "--format", "azure", filepath.Join(dir, "missing.csv")},
			code: 1, wantErr: "missing.csv",
		},
		{
			name: "a header without a required column fails even without --strict",
			args: []string{"import", "--format", "burstgpt", importFixtures + "azure2024.csv"},
			code: 1, wantErr: "azure2024.csv:1:",
		},
		{
			name: "export without --format is a usage error naming the formats",
			args: []string{"export", filepath.Join(dir, "a.parquet")},
			code: 2, wantErr: "export: --format is required (one of " + strings.Join(formats.ExportFormats, ", ") + ")",
		},
		{
			name: "export to an unknown format is a usage error",
			args: []string{"export", "--format", "sharegpt", filepath.Join(dir, "a.parquet")},
			code: 2, wantErr: `export: --format "sharegpt": want one of ` + strings.Join(formats.ExportFormats, ", "),
		},
		{
			name:    "export mooncake of an imported Mooncake trace is the original file",
			args:    []string{"export", "--format", "mooncake", filepath.Join(dir, "m.parquet")},
			wantOut: string(mooncake), wantErr: "exported 6 rows",
		},
		{
			name:    "export csv to a file",
			args:    []string{"export", "--format", "csv", "--out", filepath.Join(dir, "e.csv"), filepath.Join(dir, "a.parquet")},
			wantErr: "exported 6 rows", check: filepath.Join(dir, "e.csv"), wantRows: 6,
		},
		{
			name:    "export jsonl from stdin to stdout",
			stdin:   `{"seq":0,"arrival_ns":5,"input_tokens":3,"output_tokens":2}` + "\n",
			args:    []string{"export", "--format", "jsonl", "-"},
			wantOut: `"tokentrace_meta"`, wantErr: "exported 1 rows",
		},
		{
			name:    "--ok-only drops failed rows",
			args:    []string{"export", "--format", "mooncake", "--ok-only", filepath.Join(dir, "g.csv")},
			wantErr: "exported 5 rows",
		},
		{
			name: "an output named like another codec is a usage error",
			args: []string{"export", "--format", "mooncake", "--out", filepath.Join(dir, "x.parquet"), filepath.Join(dir, "a.parquet")},
			code: 2, wantErr: "--out",
		},
		{
			name: "a negative block size is a usage error",
			args: []string{"export", "--format", "mooncake", "--block-size", "-5", filepath.Join(dir, "a.parquet")},
			code: 2, wantErr: "--block-size",
		},
		{
			name: "an unknown export format is a usage error",
			args: []string{"export", "--format", "parquet", filepath.Join(dir, "a.parquet")},
			code: 2, wantErr: "want one of " + strings.Join(formats.ExportFormats, ", "),
		},
		{
			name: "a missing trace fails with exit 1",
			args: []string{"export", "--format", "jsonl", filepath.Join(dir, "nope.parquet")},
			code: 1, wantErr: "nope.parquet",
		},
	} {
		if tc.name == "export mooncake of an imported Mooncake trace is the original file" {
			if code, _, stderr := runCLI(nil, "import", "--format", "mooncake", "--out", filepath.Join(dir, "m.parquet"), importFixtures+"mooncake.jsonl"); code != 0 {
				t.Fatalf("import mooncake: exit %d: %s", code, stderr)
			}
		}
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(strings.NewReader(tc.stdin), tc.args...)
			if code != tc.code {
				t.Fatalf("exit code %d, want %d; stderr: %s", code, tc.code, stderr)
			}
			if !strings.Contains(stdout, tc.wantOut) {
				t.Errorf("stdout %q does not contain %q", stdout, tc.wantOut)
			}
			if !strings.Contains(stderr, tc.wantErr) {
				t.Errorf("stderr %q does not contain %q", stderr, tc.wantErr)
			}
			if tc.notInErr != "" && strings.Contains(stderr, tc.notInErr) {
				t.Errorf("stderr %q quotes row content %q", stderr, tc.notInErr)
			}
			if tc.check != "" {
				recs, _, err := traces.ReadAll(tc.check)
				if err != nil || len(recs) != tc.wantRows {
					t.Fatalf("ReadAll(%s) = %d rows, %v; want %d", tc.check, len(recs), err, tc.wantRows)
				}
				if tc.checkValue != nil {
					tc.checkValue(t, recs)
				}
			}
		})
	}
	// A strict failure leaves no partial output behind.
	if _, err := os.Stat(filepath.Join(dir, "c.jsonl")); !os.IsNotExist(err) {
		t.Errorf("failed strict import left c.jsonl behind (%v)", err)
	}
}

// Every command's --help shows an example.
func TestImportExportHelp(t *testing.T) {
	for _, cmd := range []string{"import", "export"} {
		code, stdout, _ := runCLI(nil, cmd, "--help")
		if code != 0 || !strings.Contains(stdout, "EXAMPLES:") || !strings.Contains(stdout, "tokentrace "+cmd+" --format") {
			t.Errorf("%s --help: exit %d, output lacks an example:\n%s", cmd, code, stdout)
		}
	}
}

// Peer formats through the CLI: TraceLab's replay CSV imports under
// --format tracelab (it used to be refused as all rows malformed), an
// import says what it could not keep, and an export of an agentic trace
// says once, with counts, what the format cannot hold.
func TestImportExportPeersCLI(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(dir, "tl.parquet")
	_, stderr := runMain(t, "import", "--format", "tracelab", "--out", trace, "../../testdata/publictraces/tracelab_example_replay.csv")
	if !strings.Contains(stderr, "imported 19 rows\n") {
		t.Fatalf("tracelab replay CSV import: stderr %q", stderr)
	}
	_, stderr = runMain(t, "import", "--format", "aiperf-dag", "--out", filepath.Join(dir, "dag.jsonl"), "../../testdata/publictraces/aiperf_mixed_full.dag.jsonl")
	if !strings.Contains(stderr, "note: the format has no token counts: the input of all 6 calls was estimated") {
		t.Errorf("aiperf-dag import does not say its inputs are estimates: %q", stderr)
	}
	out := filepath.Join(dir, "out.jsonl")
	_, stderr = runMain(t, "export", "--format", "aiperf", "--out", out, trace)
	if !strings.Contains(stderr, "exported 19 rows") || strings.Count(stderr, "think times") > 1 {
		t.Errorf("export stderr %q: want the row count and each loss said once", stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil || strings.Count(string(b), `"session_id": "s1"`) != 10 || !strings.Contains(string(b), `"delay": 20151`) {
		t.Errorf("aiperf export %q (err %v): want session 1's 10 rows and its tool wait as delay", b, err)
	}
	code, _, stderr := runCLI(strings.NewReader(""), "export", "--format", "weka", "--out", filepath.Join(dir, "x.parquet"), trace)
	if code != 2 || !strings.Contains(stderr, "--out") {
		t.Errorf("weka export to a .parquet name: code %d, stderr %q; want a usage error", code, stderr)
	}
}
