package main

import (
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestDuckDBReadsDatasets replays a trace as two shards, so the results are
// a dataset of two Parquet part files, and checks that a real DuckDB
// (read_parquet over the glob) agrees with `tokentrace analyze` of the same
// parts: counts and token sums exactly, p99 TTFT to float rounding (both
// interpolate linearly between order statistics: DuckDB's quantile_cont,
// numpy's default).
func TestDuckDBReadsDatasets(t *testing.T) {
	duckQuery := duckDB(t)
	trace := writeReplayTrace(t, 40)
	out := t.TempDir()
	var parts []string
	for _, shard := range []string{"0/2", "1/2"} {
		part := filepath.Join(out, "results-"+shard[:1]+".parquet")
		runMain(t, "replay", "--quiet", "--speed", "4", "--max-lateness", "10s", "--shard", shard, "--out", part, trace)
		parts = append(parts, part)
	}
	so, _ := runMain(t, append([]string{"analyze", "--json"}, parts...)...)
	var ours struct {
		Requests     int64 `json:"requests"`
		Completed    int64 `json:"completed"`
		InputTokens  int64 `json:"input_tokens"`
		OutputTokens int64 `json:"output_tokens"`
		TTFT         struct {
			P99 float64 `json:"p99"`
		} `json:"ttft_ms"`
	}
	if err := json.Unmarshal([]byte(so), &ours); err != nil {
		t.Fatalf("analyze JSON: %v", err)
	}
	var duck struct {
		Requests     int64   `json:"requests"`
		InputTokens  int64   `json:"input_tokens"`
		OutputTokens int64   `json:"output_tokens"`
		OK           int64   `json:"ok"`
		TTFTP99      float64 `json:"ttft_p99_ms"`
	}
	duckQuery(filepath.Join(out, "results-?.parquet") /* not the .metrics.parquet beside them */, &duck)
	if duck.Requests != 40 || duck.Requests != ours.Requests || duck.OK != ours.Completed ||
		duck.InputTokens != ours.InputTokens || duck.OutputTokens != ours.OutputTokens {
		t.Errorf("DuckDB %+v, analyze %+v", duck, ours)
	}
	if math.Abs(duck.TTFTP99-ours.TTFT.P99) > 1e-6 {
		t.Errorf("p99 TTFT: DuckDB %.9f ms, analyze %.9f ms", duck.TTFTP99, ours.TTFT.P99)
	}
}

// duckNode returns node's path and deploy/duckdb's (its scripts and
// @duckdb/node-api); it skips the test where either is not installed.
func duckNode(t *testing.T) (node, dir string) {
	t.Helper()
	var err error
	if node, err = exec.LookPath("node"); err != nil {
		t.Skip("node is not installed: DuckDB check skipped (CI installs it)")
	}
	if dir, err = filepath.Abs("../../deploy/duckdb"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@duckdb", "node-api")); err != nil {
		t.Skip("@duckdb/node-api is not installed: run `npm install --prefix deploy/duckdb` (CI does)")
	}
	return node, dir
}

// duckDB returns a query by a real DuckDB: deploy/duckdb/query.mjs over
// the Parquet files that glob matches, its JSON decoded into v. It skips
// the test where node or @duckdb/node-api is not installed.
func duckDB(t *testing.T) func(glob string, v any) {
	t.Helper()
	node, dir := duckNode(t)
	return func(glob string, v any) {
		t.Helper()
		cmd := exec.Command(node, "query.mjs", glob)
		cmd.Dir = dir
		b, err := cmd.Output()
		if err != nil {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			t.Fatalf("duckdb query: %v (%s)", err, stderr)
		}
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("duckdb output %q: %v", b, err)
		}
	}
}
