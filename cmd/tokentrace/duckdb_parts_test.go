package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// TestDuckDBReadsCaptureParts captures sample logs as three parts (what the
// capture Job's pods write) and checks that a real DuckDB reading the parts
// as they are (read_parquet over dir/*.parquet) agrees exactly on the row
// count and the sum of input tokens with tokentrace's own reading of the
// same parts, and with the trace compose makes of them.
func TestDuckDBReadsCaptureParts(t *testing.T) {
	duckQuery := duckDB(t)
	dir := t.TempDir()
	const n = 3
	logs, lines := sampleLogParts(t, dir, 5, 15*time.Second, 3, n)
	key := filepath.Join(dir, "capture.key")
	parts := filepath.Join(dir, "parts")
	if err := os.Mkdir(parts, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, log := range logs {
		args := []string{"tokentrace", "capture", "--key-file", key, "--part", strconv.Itoa(i), "--out", filepath.Join(parts, "trace-part-"+strconv.Itoa(i)+".parquet"), log}
		if i == 0 {
			args[2] = "--new-key-file"
		}
		var so, se bytes.Buffer
		if code := Main(context.Background(), args, nil, &so, &se); code != 0 {
			t.Fatalf("capture part %d: exit %d\n%s", i, code, se.String())
		}
	}
	// tokentrace's reading of the parts, and of the composed trace.
	sums := func(name string, o traces.OpenOptions) (rows, in int64) {
		t.Helper()
		r, err := traces.OpenWith(name, o)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		for rec, err := range traces.All(r) {
			if err != nil {
				t.Fatal(err)
			}
			rows++
			in += int64(rec.InputTokens)
		}
		return rows, in
	}
	deferred := traces.DefaultOpenOptions()
	deferred.AllowDeferred = true
	rows, in := sums(parts, deferred)
	composed := filepath.Join(dir, "trace.parquet")
	var so2, se bytes.Buffer
	if code := Main(context.Background(), []string{"tokentrace", "compose", "--out", composed, parts}, nil, &so2, &se); code != 0 {
		t.Fatalf("compose: exit %d\n%s", code, se.String())
	}
	crows, cin := sums(composed, traces.DefaultOpenOptions())

	var duck struct {
		Requests    int64 `json:"requests"`
		InputTokens int64 `json:"input_tokens"`
	}
	duckQuery(filepath.Join(parts, "*.parquet"), &duck)
	if rows != int64(lines) || duck.Requests != rows || duck.InputTokens != in || crows != rows || cin != in {
		t.Errorf("DuckDB on the parts: %d rows, %d input tokens; tokentrace on the parts %d, %d; composed trace %d, %d; %d log lines",
			duck.Requests, duck.InputTokens, rows, in, crows, cin, lines)
	}
	t.Logf("%d rows, %d input tokens in %d parts", rows, in, n)
}
