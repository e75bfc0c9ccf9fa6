package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/capture"
	"github.com/tokentrace/tokentrace/traces"
)

// sampleLogParts writes seeded sample gateway logs (capture.WriteSampleLogs
// over dur at rate) as n files dir/logs-I.jsonl of consecutive lines, and
// returns their paths and how many lines they hold.
func sampleLogParts(t *testing.T, dir string, seed int64, dur time.Duration, rate float64, n int) (paths []string, lines int) {
	t.Helper()
	so := capture.DefaultSampleOptions()
	so.Duration, so.Rate = dur, rate
	var logs bytes.Buffer
	if err := capture.WriteSampleLogs(context.Background(), &logs, seed, so); err != nil {
		t.Fatal(err)
	}
	ls := strings.SplitAfter(strings.TrimSuffix(logs.String(), "\n"), "\n")
	for i := range n {
		p := filepath.Join(dir, "logs-"+strconv.Itoa(i)+".jsonl")
		if err := os.WriteFile(p, []byte(strings.Join(ls[i*len(ls)/n:(i+1)*len(ls)/n], "")), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths, len(ls)
}

// TestCapturePartsCompose runs what the capture and compose Jobs run: two
// capture processes writing parts (--part), which inspect and replay
// refuse as unfinished, then compose, whose trace they read, with as many
// rows as a single capture of both logs.
func TestCapturePartsCompose(t *testing.T) {
	dir := t.TempDir()
	sampleLogParts(t, dir, 3, 10*time.Second, 2, 2)
	run := func(args ...string) (int, string) {
		var so, se bytes.Buffer
		code := Main(context.Background(), append([]string{"tokentrace"}, args...), nil, &so, &se)
		return code, se.String()
	}
	key := filepath.Join(dir, "capture.key")
	if err := os.Mkdir(filepath.Join(dir, "parts"), 0o755); err != nil {
		t.Fatal(err)
	}
	if code, se := run("capture", "--part", "0", "--out", filepath.Join(dir, "x.parquet"), filepath.Join(dir, "logs-0.jsonl")); code != exitUsage || !strings.Contains(se, "--part needs --key-file") {
		t.Fatalf("a part without a key: exit %d, %s", code, se)
	}
	if code, se := run("capture", "--new-key-file", key, "--out", filepath.Join(dir, "single.parquet"), filepath.Join(dir, "logs-*.jsonl")); code != 0 {
		t.Fatalf("single capture: exit %d: %s", code, se)
	}
	for _, i := range []string{"0", "1"} {
		if code, se := run("capture", "--key-file", key, "--part", i, "--out", filepath.Join(dir, "parts", "trace-part-"+i+".parquet"), filepath.Join(dir, "logs-"+i+".jsonl")); code != 0 {
			t.Fatalf("capture part %s: exit %d: %s", i, code, se)
		}
	}
	parts := filepath.Join(dir, "parts")
	if code, se := run("inspect", parts); code == 0 || !strings.Contains(se, "compose all the parts first") {
		t.Fatalf("inspect of the parts: exit %d, %s; want a refusal naming compose", code, se)
	}
	if code, se := run("replay", "--out", filepath.Join(dir, "r.parquet"), filepath.Join(parts, "trace-part-0.parquet")); code == 0 || !strings.Contains(se, "k-anonymity deferred") {
		t.Fatalf("replay of a part: exit %d, %s; want a refusal", code, se)
	}
	out := filepath.Join(dir, "trace.parquet")
	if code, se := run("compose", "--out", out, parts); code != 0 || !strings.Contains(se, "from 2 parts") {
		t.Fatalf("compose: exit %d: %s", code, se)
	}
	got, m, err := traces.ReadAll(out)
	if err != nil {
		t.Fatal(err)
	}
	want, _, err := traces.ReadAll(filepath.Join(dir, "single.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) || m.KAnonDeferred() || m.KThreshold != capture.DefaultMinCategorySize {
		t.Fatalf("composed %d rows (deferred %v, k %d), single capture %d", len(got), m.KAnonDeferred(), m.KThreshold, len(want))
	}
}
