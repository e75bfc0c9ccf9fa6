package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSQLRecipesOnLocalRun runs deploy/local-run.sh (two replay shards, 8 s
// of logs) and docs/sql.md's DuckDB recipes, as written, in the folder it
// writes: the recipes' glob reads the shards' results files and nothing
// else there (the trace, the capture parts, the single-process run's
// results), so their request count is the pooled analysis's the script
// made of the same shards.
func TestSQLRecipesOnLocalRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs deploy/local-run.sh: two simulators and three replays")
	}
	t.Parallel() // mostly waiting on real-time replays: overlap it with the rest
	query := duckSQL(t)
	recipes := sqlRecipes(t)
	for _, tool := range []string{"bash", "python3", "curl", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed: deploy/local-run.sh needs it", tool)
		}
	}
	dir := t.TempDir()
	cmd := exec.Command("bash", "../../deploy/local-run.sh", "2", dir)
	cmd.Env = append(os.Environ(), "LOCAL_RUN_LOGS_FOR=8s", "LOCAL_RUN_MAX_LATENESS=1m")
	out, runErr := cmd.CombinedOutput()
	b, err := os.ReadFile(filepath.Join(dir, "pooled.json"))
	if err != nil {
		t.Fatalf("deploy/local-run.sh wrote no pooled analysis (%v): %v\n%s", runErr, err, out)
	}
	if runErr != nil {
		// The script's last step compares the pooled shards with the
		// single replay, which a loaded machine can upset; the files are
		// written by then, and they are what this test reads.
		t.Logf("deploy/local-run.sh's own comparison failed (%v), not what this test checks:\n%s", runErr, out[max(0, len(out)-600):])
	}
	var pooled analyzeFigures
	if err := json.Unmarshal(b, &pooled); err != nil {
		t.Fatal(err)
	}
	if pooled.Requests == 0 {
		t.Fatal("the pooled analysis has no requests")
	}
	for _, name := range []string{"latency", "goodput", "tail"} {
		s := strings.ReplaceAll(recipes[name], "'results-*[0-9].parquet'", "'"+filepath.Join(dir, "results-*[0-9].parquet")+"'")
		rows := query(s)
		var all map[string]any
		for _, r := range rows {
			if r["dim"] == "all" {
				all = r
			}
		}
		if all == nil {
			t.Fatalf("recipe %s: no row for the whole run: %v", name, rows)
		}
		switch name {
		case "latency", "goodput":
			if got := num(t, all["requests"]); got != float64(pooled.Requests) {
				t.Errorf("recipe %s: %v requests, the pooled analysis %d", name, got, pooled.Requests)
			}
		case "tail":
			if num(t, all["tail_requests"]) < 1 {
				t.Errorf("recipe tail: no tail requests: %v", all)
			}
		}
	}
}
