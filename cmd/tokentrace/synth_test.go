package main

import (
	"bytes"
	"encoding/json"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/traces"
)

// synthTrace writes a small Poisson trace with two categories.
func synthTrace(t *testing.T, path string, n int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	var recs []traces.Record
	at := int64(0)
	for i := 0; i < n; i++ {
		at += int64(rng.ExpFloat64() / 4 * 1e9)
		r := traces.NewRecord()
		r.Seq, r.ArrivalNs = int64(i), at
		r.InputTokens = int32(100 + rng.IntN(2000))
		r.OutputTokens = int32(1 + rng.IntN(300))
		if i%3 == 0 {
			r.Category, r.PrefixTokens = "sys", 64
		}
		recs = append(recs, r)
	}
	writeTrace(t, path, traces.NewMeta("test"), recs)
}

func TestSynthCLI(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(dir, "trace.jsonl")
	synthTrace(t, trace, 4000)
	model := filepath.Join(dir, "model.json")
	p := func(name string) string { return filepath.Join(dir, name) }
	// The same trace with its rows in reverse order.
	recs, _, err := traces.ReadAll(trace)
	if err != nil {
		t.Fatal(err)
	}
	slices.Reverse(recs)
	writeTrace(t, p("reversed.jsonl"), traces.NewMeta("test"), recs)

	for _, tc := range []struct {
		name    string
		args    []string
		stdin   string // file fed to stdin, if any
		code    int
		wantOut string // substring of stdout
		wantErr string // substring of stderr
	}{
		{name: "fit writes a model", args: []string{"synth", "fit", "--out", model, trace}, wantErr: "synth fit: 4000 records"},
		{name: "fit reads the trace from stdin when given -", args: []string{"synth", "fit", "--out", p("stdin-model.json"), "-"}, stdin: trace, wantErr: "synth fit: 4000 records"},
		{name: "fit puts a reversed trace back in order within the window", args: []string{"synth", "fit", "--out", p("reversed-model.json"), p("reversed.jsonl")}, wantErr: "synth fit: 4000 records"},
		{name: "fit refuses a trace further out of order than --reorder-window", args: []string{"synth", "fit", "--reorder-window", "100", "--out", p("x.json"), p("reversed.jsonl")}, code: 1, wantErr: "out of arrival order"},
		{name: "gen writes a trace", args: []string{"synth", "gen", "--seed", "3", "--out", p("a.jsonl"), model}, wantErr: "records ->"},
		{name: "gen again with the same seed", args: []string{"synth", "gen", "--seed", "3", "--out", p("b.jsonl"), model}},
		{name: "gen with scaling and a mix", args: []string{"synth", "gen", "--seed", "3", "--rate-scale", "2", "--length-scale", "0.5", "--mix", "sys=0.5", "--out", p("c.jsonl"), model}},
		{name: "check of a faithful trace passes", args: []string{"synth", "check", trace, p("a.jsonl")}, wantOut: "PASS"},
		{name: "check --json has the stable keys", args: []string{"synth", "check", "--json", trace, p("a.jsonl")}, wantOut: `"input_tokens"`},
		{name: "check of a rate-scaled trace fails with exit 1", args: []string{"synth", "check", trace, p("c.jsonl")}, code: 1, wantOut: "FAIL", wantErr: "does not match"},
		{name: "matrix writes the default rows", args: []string{"synth", "matrix", "--out", p("m.jsonl")}, wantErr: "synth matrix:"},
		{name: "matrix to stdout", args: []string{"synth", "matrix", "--rows", "256/128@2rps", "--row-duration", "5s"}, wantOut: `"class":"256/128@2rps"`},
		{name: "a bad row is a usage error naming --rows", args: []string{"synth", "matrix", "--rows", "256@1rps"}, code: 2, wantErr: "--rows"},
		{name: "an unknown mix category is a usage error", args: []string{"synth", "gen", "--mix", "nope=0.5", "--out", p("d.jsonl"), model}, code: 1, wantErr: "nope"},
		{name: "a bad mix is a usage error", args: []string{"synth", "gen", "--mix", "nope", model}, code: 2, wantErr: "--mix"},
		{name: "a negative rate scale is a usage error", args: []string{"synth", "gen", "--rate-scale", "-1", model}, code: 2, wantErr: "--rate-scale"},
		{name: "a zero length scale typed on the command line is a usage error, not the library's default of 1", args: []string{"synth", "gen", "--length-scale", "0", model}, code: 2, wantErr: "--length-scale: must be > 0, got 0"},
		{name: "a negative reorder window is a usage error (0 holds none)", args: []string{"synth", "fit", "--reorder-window", "-1", trace}, code: 2, wantErr: "--reorder-window: must be >= 0 (0 holds none), got -1"},
		{name: "a reorder window of 0 refuses a trace out of order at its first late record", args: []string{"synth", "fit", "--reorder-window", "0", "--out", p("x.json"), p("reversed.jsonl")}, code: 1, wantErr: "out of arrival order"},
		{name: "flags after the argument are refused", args: []string{"synth", "gen", model, "--seed", "2"}, code: 2, wantErr: "put flags before arguments"},
		{name: "a missing model file fails", args: []string{"synth", "gen", p("nope.json")}, code: 1, wantErr: "nope.json"},
		{name: "check wants two arguments", args: []string{"synth", "check", trace}, code: 2, wantErr: "REAL SYNTH"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var in io.Reader
			if tc.stdin != "" {
				f, err := os.Open(tc.stdin)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				in = f
			}
			code, out, errs := runCLI(in, tc.args...)
			if code != tc.code {
				t.Fatalf("%v: exit %d, want %d; stderr %s\n%s", tc.args, code, tc.code, errs, out)
			}
			if !strings.Contains(out, tc.wantOut) {
				t.Errorf("%v: stdout lacks %q:\n%.2000s", tc.args, tc.wantOut, out)
			}
			if !strings.Contains(errs, tc.wantErr) {
				t.Errorf("%v: stderr lacks %q:\n%s", tc.args, tc.wantErr, errs)
			}
		})
	}
	// Put back in order, the reversed trace fits to the same model.
	var fwd, rev map[string]any
	for path, m := range map[string]*map[string]any{model: &fwd, p("reversed-model.json"): &rev} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, m); err != nil {
			t.Fatal(err)
		}
		delete((*m)["fitted_on"].(map[string]any), "file")
	}
	if !reflect.DeepEqual(fwd, rev) {
		t.Error("synth fit of the reversed trace differs from the fit of the trace")
	}
	a, _ := os.ReadFile(p("a.jsonl"))
	b, _ := os.ReadFile(p("b.jsonl"))
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Error("synth gen with the same seed and flags wrote different bytes")
	}
	_, out, _ := runCLI(nil, "synth", "check", "--json", trace, p("a.jsonl"))
	var rep map[string]any
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("check --json is not JSON: %v", err)
	}
	for _, k := range []string{"ks", "wasserstein", "rate_error", "dispersion", "cv", "category_share_max_diff", "prefix_reuse", "sessions", "turns", "pass"} {
		if _, ok := rep[k]; !ok {
			t.Errorf("check --json lacks key %s", k)
		}
	}
	if d, ok := rep["dispersion"].(map[string]any); !ok || d["1s"] == nil || d["10s"] == nil || d["60s"] == nil {
		t.Errorf("check --json dispersion = %v, want 1s, 10s, 60s", rep["dispersion"])
	}
	// A truncated model file is a clear error.
	m, _ := os.ReadFile(model)
	os.WriteFile(p("trunc.json"), m[:len(m)/3], 0o644)
	if code, _, errs := runCLI(nil, "synth", "gen", p("trunc.json")); code != 1 || !strings.Contains(errs, "truncated") {
		t.Errorf("gen of a truncated model: exit %d, stderr %s; want 1 and 'truncated'", code, errs)
	}
	os.WriteFile(p("v9.json"), bytes.Replace(m, []byte(`"version": 1`), []byte(`"version": 9`), 1), 0o644)
	if code, _, errs := runCLI(nil, "synth", "gen", p("v9.json")); code != 1 || !strings.Contains(errs, "version 9") {
		t.Errorf("gen of a version-9 model: exit %d, stderr %s", code, errs)
	}
	// The generated trace says how it was made.
	recs, meta, err := traces.ReadAll(p("a.jsonl"))
	if err != nil || len(recs) == 0 {
		t.Fatalf("read generated trace: %v", err)
	}
	if meta.Source != "synth:gen" || meta.Get("synth.seed") != "3" || !strings.Contains(meta.Command, "synth gen") {
		t.Errorf("generated meta = %+v", meta)
	}
}

// synth check --model tries the fixes of a deliberately mis-scaled
// workload (prompts 1.6×, outputs 0.5×) by generating and checking, and
// prints those that helped as commands; run as printed, they write a new
// file and its check passes.
func TestSynthCheckPrintsVerifiedFixes(t *testing.T) {
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	synthTrace(t, p("real.jsonl"), 3000)
	runMain(t, "synth", "fit", "--out", p("model.json"), p("real.jsonl"))
	runMain(t, "synth", "gen", "--seed", "4", "--input-length-scale", "1.6", "--output-length-scale", "0.5", "--out", p("bad.jsonl"), p("model.json"))

	code, out, errs := runCLI(nil, "synth", "check", "--model", p("model.json"), p("real.jsonl"), p("bad.jsonl"))
	if code != 1 {
		t.Fatalf("check of the mis-scaled workload: exit %d, want 1; stderr %s", code, errs)
	}
	if !strings.Contains(out, "Applied together they pass every check:") {
		t.Fatalf("no verified fixes that pass together:\n%s", out)
	}
	var cmds [][]string
	for _, line := range strings.Split(out, "\n") {
		if c, ok := strings.CutPrefix(line, "  $ tokentrace "); ok {
			cmds = append(cmds, shellSplit(t, c))
		}
	}
	if len(cmds) != 2 || cmds[0][1] != "gen" || cmds[1][1] != "check" {
		t.Fatalf("want a synth gen and a synth check command, got %q", cmds)
	}
	// Each fix is said as the flag a user sets, not the library's option.
	for _, flag := range []string{"--input-length-scale", "--output-length-scale"} {
		if !strings.Contains(out, ": set "+flag+" to ") {
			t.Errorf("the fixes do not set %s:\n%s", flag, out)
		}
	}
	if strings.Contains(out, "GenOptions.") {
		t.Errorf("the report names a library option where a flag is meant:\n%s", out)
	}
	gen := strings.Join(cmds[0], " ")
	if strings.Contains(gen, "--length-scale") || strings.Contains(gen, "--rate-scale") || strings.Contains(gen, "--mix") {
		t.Errorf("a fix changed more than the failed dimension: %s", gen)
	}
	outFile := cmds[0][slices.Index(cmds[0], "--out")+1]
	for _, in := range []string{"real.jsonl", "bad.jsonl", "model.json"} {
		if outFile == p(in) {
			t.Fatalf("the printed synth gen writes over the input %s", in)
		}
	}
	if _, err := os.Stat(outFile); err == nil {
		t.Fatalf("%s exists before the printed command ran", outFile)
	}
	runMain(t, cmds[0]...)
	code, out, errs = runCLI(nil, cmds[1]...)
	if code != 0 || !strings.Contains(out, "\nPASS\n") {
		t.Errorf("the printed synth check: exit %d; stderr %s\n%s", code, errs, out)
	}

	// Without --model, check says how to get fixes; with a model that did
	// not make SYNTH, it tries none and says why.
	if _, _, errs := runCLI(nil, "synth", "check", p("real.jsonl"), p("bad.jsonl")); !strings.Contains(errs, "--model MODEL") {
		t.Errorf("check without --model does not mention it: %s", errs)
	}
	synthTrace(t, p("other.jsonl"), 500)
	runMain(t, "synth", "fit", "--out", p("other.json"), p("other.jsonl"))
	if _, out, _ := runCLI(nil, "synth", "check", "--model", p("other.json"), p("real.jsonl"), p("bad.jsonl")); !strings.Contains(out, "does not generate") || strings.Contains(out, "$ tokentrace") {
		t.Errorf("a model that did not make SYNTH: want no fixes and why:\n%s", out)
	}
}
