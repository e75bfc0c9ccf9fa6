package main

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/synth"
	"github.com/tokentrace/tokentrace/traces"
)

// validateTraces writes a real trace whose prompts share four system
// prompts and a matrix-like synthetic one with the same lengths and no
// sharing.
func validateTraces(t *testing.T, dir string) (real, syn string) {
	t.Helper()
	for k, shared := range []bool{true, false} {
		rng := rand.New(rand.NewPCG(uint64(k+1), 7))
		var recs []traces.Record
		at := 0.0
		for i := range 400 {
			at += rng.ExpFloat64() / 8
			r := traces.NewRecord()
			r.Seq, r.ArrivalNs = int64(i), int64(at*1e9)
			r.InputTokens, r.OutputTokens = int32(1636+rng.IntN(300)), int32(64+rng.IntN(128))
			if shared {
				r.Category, r.PrefixTokens = []string{"support", "search", "code", "mail"}[rng.IntN(4)], 1536
			}
			recs = append(recs, r)
		}
		name := writeTrace(t, filepath.Join(dir, []string{"real.parquet", "synth.parquet"}[k]), traces.Meta{}, recs)
		if shared {
			real = name
		} else {
			syn = name
		}
	}
	return real, syn
}

func TestValidateCommand(t *testing.T) {
	t.Parallel() // the commands run in child processes
	heavyCPU(t)
	dir := t.TempDir()
	real, syn := validateTraces(t, dir)
	change := []string{"validate", "--target", "a=sim", "--target", "b=sim:prefix-caching=false,prefill-per-token=30us"}

	html, out := filepath.Join(dir, "v.html"), filepath.Join(dir, "runs")
	code, stdout, stderr := runCLIChild(t, "", nil, append(change, "--html", html, "--out-dir", out, real, syn)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"Conclusion: The decision does not carry over to real traffic", "reversed",
		"Proven reason (ablation): prefix reuse", "Why, by ablation", "extra runs", "Next steps", "tokentrace synth fit --out " + filepath.Join(dir, "real-model.json") + " " + real} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if b, err := os.ReadFile(html); err != nil || !strings.Contains(string(b), "<svg") || !strings.Contains(string(b), "reversed") ||
		!strings.Contains(string(b), "Why, by ablation") || !strings.Contains(string(b), "Next steps") {
		t.Errorf("HTML report: %v (want charts, verdicts, the ablation and the next steps)", err)
	}
	if runs, _ := filepath.Glob(filepath.Join(out, "*.parquet")); len(runs) != 4 {
		t.Errorf("out-dir holds %v, want 4 results files", runs)
	}

	if code, _, stderr := runCLIChild(t, "", nil, append(change, "-q", "--fail-if-broken", real, syn)...); code != 1 || !strings.Contains(stderr, "does not hold") {
		t.Errorf("--fail-if-broken: exit %d, %s; want 1", code, stderr)
	}

	// --explain none runs no ablation: the reason is the prior, said so.
	code, stdout, stderr = runCLIChild(t, "", nil, append(change, "-q", "--explain", "none", real, syn)...)
	if code != 0 || strings.Contains(stdout, "Why, by ablation") || !strings.Contains(stdout, "Likely reason (a prior, not proven: the change of prefix-caching acts through it): prefix reuse") {
		t.Errorf("--explain none: exit %d, %s\n%s", code, stderr, stdout)
	}

	// A fitted model as the synthetic workload is generated over the real
	// trace's span.
	recs, _, err := traces.ReadAll(real)
	if err != nil {
		t.Fatal(err)
	}
	m, err := synth.Fit(t.Context(), recs, synth.DefaultFitOptions())
	if err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(dir, "model.json")
	if err := synth.WriteModelFile(model, m); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = runCLIChild(t, "", nil, "validate", "-q", "--json", "--target", "a=sim", "--target", "b=sim:step-fixed=3ms", real, model)
	if code != 0 || !strings.Contains(stdout, `"verdict"`) {
		t.Errorf("model as SYNTHETIC: exit %d, %s", code, stderr)
	}
}

func TestValidateUsageErrors(t *testing.T) {
	dir := t.TempDir()
	real, syn := validateTraces(t, dir)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"one target", []string{"--target", "a=sim"}, "--target: give at least two"},
		{"an unknown simulator key", []string{"--target", "a=sim", "--target", "b=sim:max-seqs=4"}, `unknown key "max-seqs"`},
		{"two targets with one name", []string{"--target", "a=sim", "--target", "a=sim:max-num-seqs=4"}, `two targets are named "a"`},
		{"goodput without an SLO", []string{"--target", "a=sim", "--target", "b=sim", "--metrics", "goodput"}, "goodput needs --slo"},
		{"an unknown metric", []string{"--target", "a=sim", "--target", "b=sim", "--metrics", "itl_p99"}, "--metrics"},
		{"an unknown way to explain", []string{"--target", "a=sim", "--target", "b=sim", "--explain", "why"}, `--explain: want one of auto, none, ablation, got "why"`},
		{"a negative minimum effect", []string{"--target", "a=sim", "--target", "b=sim", "--min-effect-pct", "-1"}, "--min-effect-pct, --magnitude-tolerance: want >= 0"},
		{"a negative magnitude tolerance", []string{"--target", "a=sim", "--target", "b=sim", "--magnitude-tolerance", "-0.5"}, "--min-effect-pct, --magnitude-tolerance: want >= 0"},
		{"a negative combination budget", []string{"--target", "a=sim", "--target", "b=sim", "--combination-budget", "-1"}, "--combination-budget: want >= 0 (0: no search), got -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(nil, append(append([]string{"validate"}, tc.args...), real, syn)...)
			if code != 2 || !strings.Contains(stderr, tc.want) || stdout != "" {
				t.Errorf("exit %d, stderr %q, stdout %q; want 2 and %q", code, stderr, stdout, tc.want)
			}
		})
	}
}

// The next step validate prints for a matrix without prefix reuse is a
// command that runs as printed, and the matrix it builds reaches the real
// decision.
func TestValidateNextStepRuns(t *testing.T) {
	t.Parallel() // the commands run in child processes
	heavyCPU(t)
	dir := t.TempDir()
	real, _ := validateTraces(t, dir)
	matrix := filepath.Join(dir, "matrix.parquet")
	if code, _, stderr := runCLIChild(t, "", nil, "synth", "matrix", "--rows", "1786/128@4rps,1786/128@12rps", "--row-duration", "25s", "--row-gap", "1s", "--out", matrix); code != 0 {
		t.Fatal(stderr)
	}
	change := []string{"validate", "-q", "--target", "a=sim", "--target", "b=sim:prefix-caching=false"}
	code, stdout, stderr := runCLIChild(t, "", nil, append(change, real, matrix)...)
	if code != 0 || !strings.Contains(stdout, "does not carry over") {
		t.Fatalf("exit %d, %s\n%s", code, stderr, stdout)
	}
	var step []string
	for _, line := range strings.Split(stdout, "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[0] == "tokentrace" && f[1] == "synth" && f[2] == "matrix" {
			step = f
		}
	}
	if len(step) == 0 || !strings.Contains(strings.Join(step, " "), "+1526w@4rps") {
		t.Fatalf("no synth matrix next step with the real prefix share (85%% of 1786 tokens) in:\n%s", stdout)
	}
	if out := step[len(step)-1]; out == matrix || filepath.Dir(out) != dir {
		t.Fatalf("the rebuilt matrix writes %s, want a new file beside %s", out, matrix)
	}
	if code, _, stderr := runCLIChild(t, "", nil, step[1:]...); code != 0 {
		t.Fatalf("%s: exit %d, %s", strings.Join(step, " "), code, stderr)
	}
	code, stdout, stderr = runCLIChild(t, "", nil, append(change, real, step[len(step)-1])...)
	if code != 0 || !strings.HasPrefix(strings.Split(stdout, "\n")[1], "Conclusion: The decision carries over") {
		t.Errorf("after the next step: exit %d, %s\n%s", code, stderr, stdout)
	}
}
