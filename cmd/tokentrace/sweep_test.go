package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/internal/testtraces"
	"github.com/tokentrace/tokentrace/replay"
	"github.com/tokentrace/tokentrace/traces"
)

func TestSweepUsageErrors(t *testing.T) {
	dir := t.TempDir()
	trace := writeTrace(t, filepath.Join(dir, "t.jsonl"), traces.NewMeta("test"), testtraces.Constant(3, 10, 8, 2))
	for _, c := range []struct {
		why  string
		args []string
		flag string
	}{
		{"a zero speed is refused", []string{"sweep", "--slo", "ttft=1s", "--speeds", "0", trace}, "--speeds"},
		{"a negative speed is refused", []string{"sweep", "--slo", "ttft=1s", "--speeds", "1,-2", trace}, "--speeds"},
		{"an unparsable SLO is refused", []string{"sweep", "--slo", "ttft=abc", trace}, "--slo"},
		{"an SLO is required", []string{"sweep", trace}, "--slo"},
		{"the percentile must be in (0,100)", []string{"sweep", "--slo", "ttft=1s", "--slo-percentile", "100", trace}, "--slo-percentile"},
		{"the search range must be ordered", []string{"sweep", "--slo", "ttft=1s", "--search", "--search-range", "3,1", trace}, "--search-range"},
		{"the chart needs a known format", []string{"sweep", "--slo", "ttft=1s", "--chart", "x.gif", trace}, "--chart"},
		{"a background load needs positive concurrency", []string{"replay", "--background", "class=batch,concurrency=-1", trace}, "--background"},
		{"a background load needs known keys", []string{"replay", "--background", "klass=batch", trace}, "--background"},
		{"metadata wants key=value", []string{"replay", "--metadata", "novalue", trace}, "--metadata"},
		{"a model map wants prod=served", []string{"replay", "--model-map", "prod", trace}, "--model-map"},
		{"a sweep repeats every speed at least once", []string{"sweep", "--slo", "ttft=1s", "--repeat", "0", trace}, "--repeat"},
		{"sweep metadata wants key=value", []string{"sweep", "--slo", "ttft=1s", "--metadata", "novalue", trace}, "--metadata"},
		{"model bytes need a bandwidth", []string{"analyze", "--model-bytes", "16GB", trace}, "--bandwidth"},
		{"a bandwidth must parse", []string{"analyze", "--model-bytes", "16GB", "--bandwidth", "fast", trace}, "--bandwidth"},
		{"a cost must be positive", []string{"analyze", "--cost-per-hour", "-1", trace}, "--cost-per-hour"},
	} {
		code, _, errs := runCLI(nil, c.args...)
		if code != exitUsage || !strings.Contains(errs, c.flag) {
			t.Errorf("%s: exit %d, stderr %q; want exit 2 naming %s", c.why, code, errs, c.flag)
		}
	}
}

func TestSweepCLI(t *testing.T) {
	dir := t.TempDir()
	trace := writeTrace(t, filepath.Join(dir, "t.jsonl"), traces.NewMeta("test"), testtraces.Constant(20, 20, 32, 4))
	outDir := filepath.Join(dir, "sweep")
	out, errs := runMain(t, "sweep", "--quiet", "--slo", "ttft=5s,tpot=1s", "--speeds", "4,1", "--sim-preset", "tiny",
		"--label", "cli-test", "--metadata", "gpu=none", "--out-dir", outDir, "--ext", ".jsonl", "--chart", filepath.Join(outDir, "c.svg")+","+filepath.Join(outDir, "c.png"), trace)
	if !strings.Contains(out, "this trace meets every SLO") || !strings.Contains(out, "4×") || !strings.Contains(out, "← knee") {
		t.Errorf("output:\n%s\nstderr:\n%s", out, errs)
	}
	for _, f := range []string{"speed-1.jsonl", "speed-4.jsonl", "c.svg", "c.png"} {
		if _, err := os.Stat(filepath.Join(outDir, f)); err != nil {
			t.Errorf("missing %s", f)
		}
	}
	_, meta, err := traces.ReadAll(filepath.Join(outDir, "speed-4.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if meta.Get("sweep.speed") != "4" || meta.Get(replay.MetaLabel) != "cli-test" || meta.Get(replay.MetaUserPrefix+"gpu") != "none" || meta.Get(replay.MetaServerVersion) != "sim" {
		t.Errorf("step metadata %v", meta.Extra)
	}
}

// TestSweepRepeat replays one speed twice through the CLI: one results
// file per run, and the table says how many runs met the SLOs.
func TestSweepRepeat(t *testing.T) {
	dir := t.TempDir()
	trace := writeTrace(t, filepath.Join(dir, "t.jsonl"), traces.NewMeta("test"), testtraces.Constant(20, 20, 32, 4))
	outDir := filepath.Join(dir, "sweep")
	out, errs := runMain(t, "sweep", "--quiet", "--slo", "ttft=5s", "--speeds", "2", "--repeat", "2", "--sim-preset", "tiny",
		"--out-dir", outDir, "--ext", ".jsonl", "--chart", "none", trace)
	if !strings.Contains(out, "(2/2 runs ok, worst shown)") {
		t.Errorf("output:\n%s\nstderr:\n%s", out, errs)
	}
	for i, f := range []string{"speed-2-r1.jsonl", "speed-2-r2.jsonl"} {
		recs, meta, err := traces.ReadAll(filepath.Join(outDir, f))
		if err != nil || len(recs) != 20 || meta.Get("sweep.repeat") != strconv.Itoa(i+1) {
			t.Errorf("%s: %d records, repeat %q, %v", f, len(recs), meta.Get("sweep.repeat"), err)
		}
	}
}
