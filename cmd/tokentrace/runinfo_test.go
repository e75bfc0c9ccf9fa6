package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/internal/testtraces"
	"github.com/tokentrace/tokentrace/replay"
	"github.com/tokentrace/tokentrace/sim"
	"github.com/tokentrace/tokentrace/traces"
)

func TestRunRecordRoundTripAndModelMap(t *testing.T) {
	dir := t.TempDir()
	recs := testtraces.Constant(6, 50, 16, 4)
	for i := range recs {
		if i%2 == 0 {
			recs[i].Model = "prod-llama-lora" // mapped
		} else {
			recs[i].Model = "something-else" // unmapped: uses --model
		}
	}
	trace := writeTrace(t, filepath.Join(dir, "trace.jsonl"), traces.NewMeta("test"), recs)
	resA, resB := filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "b.jsonl")
	for _, r := range []struct{ out, label string }{{resA, "baseline"}, {resB, "candidate"}} {
		runMain(t, "replay", "--quiet", "--max-lateness", "1m", "--label", r.label, "--metadata", "gpu=h100",
			"--metadata", "note=a, b", "--model-map", "prod-llama-lora="+sim.DefaultModel, "--model", sim.DefaultModel,
			"--out", r.out, trace)
	}
	got, meta, err := traces.ReadAll(resA)
	if err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if !got[i].OK() {
			t.Errorf("request %d (model %q) failed: %s %s", got[i].Seq, got[i].Model, got[i].Status, got[i].Error)
		}
	}
	for k, want := range map[string]string{
		replay.MetaLabel:               "baseline",
		replay.MetaUserPrefix + "gpu":  "h100",
		replay.MetaUserPrefix + "note": "a, b",
		replay.MetaServerVersion:       "sim",
	} {
		if v := meta.Get(k); v != want {
			t.Errorf("metadata %s = %q, want %q", k, v, want)
		}
	}
	if v := meta.Get(replay.MetaServerModels); !strings.Contains(v, `"id":"`+sim.DefaultModel+`"`) {
		t.Errorf("server models %q", v)
	}
	out, _ := runMain(t, "inspect", resA)
	if !strings.Contains(out, "label baseline, gpu=h100, note=a, b") || !strings.Contains(out, "version sim") {
		t.Errorf("inspect does not show the run record:\n%s", out)
	}
	out, _ = runMain(t, "analyze", "compare", resA, resB)
	// The metadata that differs follows the tables; what was asked (the
	// label) leads it, the per-run bookkeeping (command, start time) after.
	md := strings.Index(out, "\nMetadata that differs")
	if md < 0 || md < strings.Index(out, "\nmetric ") || !strings.Contains(out[md:], "  run.label  baseline | candidate") {
		t.Errorf("compare does not list the differing label after the table:\n%s", out)
	}
	if i, j := strings.Index(out, "run.label"), strings.Index(out, "per-run bookkeeping also differs: command"); j < 0 || i > j {
		t.Errorf("the label should lead the metadata differences, the command among the bookkeeping:\n%s", out)
	}
}

func TestModelMapWithoutMappingFails(t *testing.T) {
	// Control for the test above: the same unknown names, not mapped and
	// without --model, are refused by the server (vLLM's 404).
	o := replay.DefaultOptions()
	o.ModelMap = map[string]string{"prod": "served"}
	for _, c := range []struct {
		why, model, flag, want string
	}{
		{"a mapped name is replaced", "prod", "", "served"},
		{"a mapped name wins over --model", "prod", "m", "served"},
		{"an unmapped name uses --model", "other", "m", "m"},
		{"an unmapped name without --model stays", "other", "", "other"},
		{"no name and no --model takes the server's first model", "", "", "first"},
	} {
		o.Model = c.flag
		r := traces.NewRecord()
		r.Model = c.model
		if got := o.MapModel(&r, "first"); got != c.want {
			t.Errorf("%s: got %q, want %q", c.why, got, c.want)
		}
	}
}

func TestBackgroundUsesMappedModel(t *testing.T) {
	dir := t.TempDir()
	recs := testtraces.Constant(10, 20, 16, 4)
	for i := range recs {
		recs[i].Model = "prod-llama-lora"
	}
	trace := writeTrace(t, filepath.Join(dir, "trace.jsonl"), traces.NewMeta("test"), recs)
	res := filepath.Join(dir, "r.jsonl")
	runMain(t, "replay", "--quiet", "--max-lateness", "1m", "--model-map", "prod-llama-lora="+sim.DefaultModel,
		"--background", "class=batch,concurrency=2,input=32,output=4", "--out", res, trace)
	got, meta, err := traces.ReadAll(res)
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for i := range got {
		if !got[i].OK() {
			t.Fatalf("%s (class %s) failed: %s %s", got[i].RequestID, got[i].Class, got[i].Status, got[i].Error)
		}
		n[got[i].Class]++
	}
	if n[replay.DefaultTraceClass] != len(recs) || n["batch"] == 0 {
		t.Errorf("rows by class %v", n)
	}
	if meta.Get(replay.MetaBackground) != "class=batch,concurrency=2,input=32,output=4" {
		t.Errorf("background metadata %q", meta.Get(replay.MetaBackground))
	}
}
