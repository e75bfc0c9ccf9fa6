package validate

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/synth"
	"github.com/tokentrace/tokentrace/traces"
)

// stepsResult is a result whose fidelity report has the real and the
// synthetic workloads differ in every property: the synthetic rate and
// lengths off by more than 10 %, burstier, more prefix reuse, other
// category shares.
func stepsResult(t *testing.T, o Options) *Result {
	t.Helper()
	o.Terms = flagTerms{}
	if len(o.Targets) == 0 {
		o.Targets = targets(t, "rr=sim:replicas=4,router=round-robin", "pa=sim:replicas=4,router=prefix-aware")
	}
	f := &synth.Report{CategoryShareMaxDiff: 0.04, CategoryShareMaxDiffName: "c2"}
	f.Real = synth.Summary{RatePerS: 8, CV: 1.2, MeanInput: 1600, MeanOutput: 170, PrefixReuse: 0.51, TurnsPerSess: 3,
		Categories: 2, CategoryShares: map[string]float64{"c1": 0.6, "c2": 0.4}}
	f.Synth = synth.Summary{RatePerS: 4, CV: 2.0, MeanInput: 2000, MeanOutput: 220, PrefixReuse: 0.74, TurnsPerSess: 2.9,
		Categories: 2, CategoryShares: map[string]float64{"c1": 0.64, "c2": 0.36}}
	return &Result{Workloads: [2]string{"real", "synthetic"}, Fidelity: f, opts: o}
}

// synthetics are the synthetic workloads next steps know how to change,
// by how they were made.
func synthetics() map[string]Workload {
	gen := traces.NewMeta(sourceGen)
	gen.Set("synth.seed", "7")
	gen.Set("synth.duration_ns", "60000000000")
	gen.Set("synth.rate_scale", "1")
	gen.Set("synth.length_scale", "1")
	gen.Set("synth.gaps", synth.GapsEmpirical)
	matrix := traces.NewMeta(sourceMatrix)
	matrix.Set("synth.rows", "1024/128@4rps,2048/256+512w@2rps")
	matrix.Set("synth.row_duration_ns", "30000000000")
	matrix.Set("synth.row_gap_ns", "10000000000")
	matrix.Set("synth.sat_requests", "256")
	matrix.Set("synth.arrival", "poisson")
	matrix.Set("synth.seed", "1")
	return map[string]Workload{
		"gen trace":  {Name: "synthetic", File: "demo/synth.parquet", Meta: gen},
		"gen model":  {Name: "synthetic", File: "demo/model.json", Meta: gen},
		"matrix":     {Name: "synthetic", File: "demo/matrix.parquet", Meta: matrix},
		"other tool": {Name: "synthetic", File: "demo/bench.jsonl", Meta: traces.NewMeta("aiperf")},
	}
}

// outOf is the file a command writes (its --out), "" for none.
func outOf(cmd string) string {
	f := strings.Fields(cmd)
	if i := slices.Index(f, "--out"); i >= 0 && i+1 < len(f) {
		return f[i+1]
	}
	return ""
}

// Every next step, for every way the synthetic workload was made and
// every property: a change said in words; commands that write new files
// beside the synthetic workload, never an input or an earlier command's
// output; a generation from the model given (else from one a command
// before fits on the real trace, with the synthetic workload's own seed
// and span); and a last command that validates the new workload against
// the same targets. No advice sends the reader to a longer window of the
// real trace.
func TestNextStepsRunAsPrinted(t *testing.T) {
	real := Workload{Name: "real", File: "demo/trace.parquet"}
	for how, syn := range synthetics() {
		for _, prop := range Properties {
			t.Run(how+"/"+prop, func(t *testing.T) {
				r := stepsResult(t, DefaultOptions())
				st := r.stepFor(prop, newCommander(r, real, syn))
				if st.Change == "" {
					t.Fatal("no change said")
				}
				if strings.Contains(st.Change, "longer window") || strings.Contains(st.Change, "--") {
					t.Errorf("change %q: a longer window, or a flag in the library's words", st.Change)
				}
				checkCommands(t, st, real, syn)
			})
		}
	}
}

func checkCommands(t *testing.T, st NextStep, real, syn Workload) {
	t.Helper()
	written := map[string]bool{}
	var models []string
	for i, c := range st.Commands {
		words := strings.Fields(c)
		if words[0] != "tokentrace" {
			t.Errorf("%q is not a tokentrace command", c)
		}
		if out := outOf(c); out != "" {
			if out == real.File || out == syn.File || written[out] {
				t.Errorf("%q writes over %s", c, out)
			}
			if filepath.Dir(out) != filepath.Dir(syn.File) {
				t.Errorf("%q writes outside the synthetic workload's folder", c)
			}
			written[out] = true
			if words[1] == "synth" && words[2] == "fit" {
				models = append(models, out)
			}
		}
		if words[1] == "synth" && words[2] == "gen" {
			model := words[len(words)-1]
			if model != syn.File && !slices.Contains(models, model) {
				t.Errorf("%q generates from %s, neither the model given nor one a command before fits", c, model)
			}
			if syn.Meta.Source == sourceGen && !strings.Contains(c, "--seed 7 --duration 1m0s") {
				t.Errorf("%q does not generate as the synthetic workload was (seed 7, 1m0s)", c)
			}
		}
		if words[1] == "validate" {
			if i != len(st.Commands)-1 && !strings.HasPrefix(st.Commands[i+1], "tokentrace synth") {
				t.Errorf("validate %q is not the last command of its change", c)
			}
			got := words[len(words)-2:]
			if got[0] != real.File || !written[got[1]] {
				t.Errorf("%q does not validate the new workload against %s", c, real.File)
			}
			if !strings.Contains(c, "--target rr=sim:replicas=4,router=round-robin --target pa=sim:replicas=4,router=prefix-aware ") {
				t.Errorf("%q does not run the same targets", c)
			}
		}
	}
	if len(st.Commands) > 0 && !strings.HasPrefix(st.Commands[len(st.Commands)-1], "tokentrace validate") {
		t.Errorf("commands %q do not end by validating the new workload", st.Commands)
	}
}

// What each way of making the synthetic workload is told, where a command
// can make the change and where none can.
func TestNextStepsBySource(t *testing.T) {
	real := Workload{Name: "real", File: "demo/trace.parquet"}
	syns := synthetics()
	for _, tc := range []struct {
		how, prop string
		want      []string // in the commands, in order
		change    string
	}{
		{"gen trace", PropArrivals, []string{"tokentrace synth fit --out demo/trace-model.json demo/trace.parquet",
			"tokentrace synth gen --seed 7 --duration 1m0s --rate-scale 2 --out demo/synth-rate.parquet demo/trace-model.json"}, "the synthetic rate is 4.00 req/s against the real 8.00"},
		{"gen model", PropArrivals, []string{"tokentrace synth gen --seed 7 --duration 1m0s --rate-scale 2 --out demo/model-rate.parquet demo/model.json"}, "scaled by 2"},
		{"gen model", PropPromptLengths, []string{"tokentrace synth gen --seed 7 --duration 1m0s --input-length-scale 0.8 --out demo/model-inputs.parquet demo/model.json"}, "scaled by 0.8 (prompts and their prefixes alone)"},
		{"gen trace", PropOutputLengths, []string{"tokentrace synth fit --out demo/trace-model.json demo/trace.parquet",
			"tokentrace synth gen --seed 7 --duration 1m0s --output-length-scale 0.773 --out demo/synth-outputs.parquet demo/trace-model.json"}, "0.773 (outputs alone)"},
		{"gen model", PropPrefixReuse, []string{"tokentrace synth gen --seed 7 --duration 1m0s --mix c1=0.6,c2=0.4 --out demo/model-mix.parquet demo/model.json"}, "generate with the real shares"},
		{"gen trace", PropSessions, nil, "no synth fit or gen option sets how many turns"},
		{"matrix", PropPrefixReuse, []string{"tokentrace synth matrix --rows 1024/128+522w@4rps,2048/256+1044w@2rps --row-duration 30s --out demo/matrix-prefix.parquet",
			"tokentrace synth fit --out demo/trace-model.json demo/trace.parquet", "tokentrace synth gen --seed 1 --out demo/matrix-fit.parquet demo/trace-model.json"}, "warm shared prefixes of the real share of prompt tokens (51%)"},
		{"matrix", PropArrivals, []string{"tokentrace synth fit", "tokentrace synth matrix --rows 1024/128@8rps,2048/256+512w@4rps --row-duration 30s --out demo/matrix-rate.parquet"}, "at the real mean rate (×2.00)"},
		{"matrix", PropSessions, []string{"tokentrace synth fit --out demo/trace-model.json demo/trace.parquet"}, "3.0 turns per session"},
		{"other tool", PropOutputLengths, []string{"tokentrace synth fit --out demo/trace-model.json demo/trace.parquet", "tokentrace synth gen --seed 1 --out demo/bench-fit.parquet demo/trace-model.json"}, "mean 170 tokens"},
	} {
		t.Run(tc.how+"/"+tc.prop, func(t *testing.T) {
			r := stepsResult(t, DefaultOptions())
			st := r.stepFor(tc.prop, newCommander(r, real, syns[tc.how]))
			if !strings.Contains(st.Change, tc.change) {
				t.Errorf("change %q lacks %q", st.Change, tc.change)
			}
			if tc.want == nil && len(st.Commands) > 0 {
				t.Errorf("commands %q where none can make the change", st.Commands)
			}
			i := 0
			for _, c := range st.Commands {
				if i < len(tc.want) && strings.HasPrefix(c, tc.want[i]) {
					i++
				}
			}
			if i < len(tc.want) {
				t.Errorf("commands %q lack, in order, %q", st.Commands, tc.want[i:])
			}
		})
	}
}

// Bursts in a trace from synth gen: a fit with shorter rate bins.
func TestNextStepForBursts(t *testing.T) {
	r := stepsResult(t, DefaultOptions())
	r.Fidelity.Synth.RatePerS = 8.2
	st := r.stepFor(PropArrivals, newCommander(r, Workload{Name: "real", File: "t.parquet"}, synthetics()["gen trace"]))
	if len(st.Commands) != 3 || st.Commands[0] != "tokentrace synth fit --bin 1s --out demo/t-model-bin1s.json t.parquet" ||
		!strings.HasSuffix(st.Commands[1], "--out demo/synth-bin.parquet demo/t-model-bin1s.json") {
		t.Errorf("commands %q", st.Commands)
	}
	if !strings.Contains(st.Change, "more bursty than the real ones (inter-arrival CV 2.00 against 1.20)") {
		t.Errorf("change %q", st.Change)
	}
}

// A model fitted once serves every step: its fit is printed once, and a
// step the same workload carries says so instead of printing it again.
func TestNextStepsShareTheirFit(t *testing.T) {
	r := stepsResult(t, DefaultOptions())
	r.Reasons = []Reason{
		{Property: PropPromptLengths + " and " + PropArrivals, Properties: []string{PropPromptLengths, PropArrivals}, Evidence: EvidenceAblation, Proven: true},
	}
	steps := r.nextSteps(Workload{Name: "real", File: "trace.parquet"}, synthetics()["other tool"])
	if len(steps) != 2 {
		t.Fatalf("steps %+v, want one per property of the pair", steps)
	}
	fits := 0
	for _, st := range steps {
		for _, c := range st.Commands {
			if strings.HasPrefix(c, "tokentrace synth fit") {
				fits++
			}
		}
	}
	if fits != 1 || len(steps[1].Commands) != 0 || !strings.Contains(steps[1].Change, "the workload the step above generates (demo/bench-fit.parquet) carries it") {
		t.Errorf("%d fits; second step %+v", fits, steps[1])
	}
}

// New files never land on an input: a synthetic workload that an earlier
// next step wrote gets the next name.
func TestNextStepFilesAreNew(t *testing.T) {
	r := stepsResult(t, DefaultOptions())
	syn := synthetics()["gen trace"]
	syn.File = "demo/synth-rate.parquet"
	real := Workload{Name: "real", File: "demo/trace-model.json"} // a real trace named like a model
	st := r.stepFor(PropArrivals, newCommander(r, real, syn))
	for _, c := range st.Commands {
		if out := outOf(c); out == syn.File || out == real.File {
			t.Errorf("%q writes its input", c)
		}
	}
	if !strings.HasPrefix(st.Commands[0], "tokentrace synth fit --out demo/trace-model-model.json ") ||
		!strings.Contains(st.Commands[1], "--out demo/synth-rate-rate.parquet") {
		t.Errorf("commands %q", st.Commands)
	}
	cb := newCommander(r, Workload{File: "a/x.parquet"}, Workload{File: "a/y.parquet"})
	if f1, f2 := cb.file("y", ".parquet"), cb.file("y", ".parquet"); f1 != "a/y-2.parquet" || f2 != "a/y-3.parquet" {
		t.Errorf("files %s, %s; want a/y-2.parquet and a/y-3.parquet (a/y.parquet is the input)", f1, f2)
	}
}

// The validate command a step ends with judges as this validation did:
// the options that are not their defaults, said as the flags that set
// them; with a URL target (whose replay options the result does not hold)
// there is none.
func TestRevalidateCarriesOptions(t *testing.T) {
	slo, _ := traces.ParseSLO("ttft=500ms")
	o := with(DefaultOptions(), func(o *Options) {
		o.Metrics = mustMetrics("ttft_p99,goodput")
		o.SLO = slo
		o.Speed = 2
		o.MinEffect = 0.05
		o.MagnitudeTolerance = 0.3
		o.Confidence = 0.9
		o.Resamples = 500
		o.Seed = 3
		o.Explain = ExplainAblation
		o.CombinationBudget = 0
		o.Realtime = true
		o.Repeat = 2
	})
	r := stepsResult(t, o)
	cmd := newCommander(r, Workload{File: "t.parquet"}, Workload{File: "s.parquet"}).validate("s2.parquet")
	want := "tokentrace validate --target rr=sim:replicas=4,router=round-robin --target pa=sim:replicas=4,router=prefix-aware " +
		"--metrics ttft_p99,goodput --slo ttft=500ms --speed 2 --repeat 2 --realtime --resamples 500 --confidence 0.9 --seed 3 " +
		"--min-effect-pct 5 --magnitude-tolerance 0.3 --explain ablation --combination-budget 0 t.parquet s2.parquet"
	if len(cmd) != 1 || cmd[0] != want {
		t.Errorf("got  %q\nwant %q", cmd, want)
	}
	r = stepsResult(t, DefaultOptions())
	if cmd := newCommander(r, Workload{File: "t.parquet"}, Workload{File: "s.parquet"}).validate("s2.parquet"); len(cmd) != 1 || strings.Contains(cmd[0], "--metrics") || strings.Contains(cmd[0], "--seed") {
		t.Errorf("defaults: %q, want no option flags", cmd)
	}
	r = stepsResult(t, targeted(t, "a=sim", "b=http://127.0.0.1:1"))
	if cmd := newCommander(r, Workload{File: "t.parquet"}, Workload{File: "s.parquet"}).validate("s2.parquet"); cmd != nil {
		t.Errorf("a URL target: %q, want no validate command", cmd)
	}
}

// A file named with a space or a quote is one shell word.
func TestQuoteArg(t *testing.T) {
	for in, want := range map[string]string{
		"demo/trace.parquet": "demo/trace.parquet",
		"my demo/t.parquet":  "'my demo/t.parquet'",
		"it's.parquet":       `'it'\''s.parquet'`,
		"":                   "''",
		"c1=0.5,c2=0.5":      "c1=0.5,c2=0.5",
	} {
		if got := flagTerms.Command(flagTerms{}, traces.NewCommand("x").WithArgs(in)); got != "tokentrace x "+want {
			t.Errorf("%q said as %s, want %s", in, got, want)
		}
	}
	r := stepsResult(t, DefaultOptions())
	st := r.stepFor(PropArrivals, newCommander(r, Workload{Name: "real", File: "my data/trace.parquet"}, synthetics()["other tool"]))
	if !strings.HasSuffix(st.Commands[0], "'my data/trace.parquet'") {
		t.Errorf("%q does not quote the file", st.Commands[0])
	}
}

// The matrix is rebuilt from its metadata: rows (a warm prefix kept where
// the rows keep their prefixes), options that are not their defaults.
func TestMatrixRebuilt(t *testing.T) {
	r := stepsResult(t, DefaultOptions())
	cb := newCommander(r, Workload{File: "t.parquet"}, synthetics()["matrix"])
	cmd, out, ok := cb.matrix(-1, 1.5, "rate")
	if !ok || cmd != "tokentrace synth matrix --rows 1024/128@6rps,2048/256+512w@3rps --row-duration 30s --out demo/matrix-rate.parquet" || out != "demo/matrix-rate.parquet" {
		t.Errorf("%q, %q, %v", cmd, out, ok)
	}
	bad := Workload{File: "m.parquet", Meta: traces.NewMeta(sourceMatrix)}
	if _, _, ok := newCommander(r, Workload{File: "t.parquet"}, bad).matrix(0.5, 1, "prefix"); ok {
		t.Error("a matrix without its rows in the metadata was rebuilt")
	}
}

// Next steps follow the reasons: proven, necessary or prior ones, best
// first, a pair's two properties each, at most maxNextSteps, and none
// from a mere difference.
func TestNextStepsFromReasons(t *testing.T) {
	real := Workload{Name: "real", File: "t.parquet"}
	syn := synthetics()["matrix"]
	for _, tc := range []struct {
		name    string
		reasons []Reason
		want    []string
	}{
		{"proven first", []Reason{{Property: PropPrefixReuse, Evidence: EvidenceAblation, Proven: true}, {Property: PropArrivals, Evidence: EvidenceAblation}}, []string{PropPrefixReuse, PropArrivals}},
		{"a pair is two steps", []Reason{{Property: "a and b", Properties: []string{PropSessions, PropArrivals}, Evidence: EvidenceAblation, Proven: true}, {Property: PropPrefixReuse, Evidence: EvidenceNecessary}}, []string{PropSessions, PropArrivals}},
		{"a property once", []Reason{{Property: PropArrivals, Evidence: EvidenceNecessary}, {Property: "a and b", Properties: []string{PropArrivals, PropPromptLengths}, Evidence: EvidenceAblation}}, []string{PropArrivals, PropPromptLengths}},
		{"a prior", []Reason{{Property: PropOutputLengths, Evidence: EvidencePrior}}, []string{PropOutputLengths}},
		{"no step from a difference", []Reason{{Property: PropPrefixReuse, Evidence: EvidenceDifference}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := stepsResult(t, DefaultOptions())
			r.Reasons = tc.reasons
			var got []string
			for _, st := range r.nextSteps(real, syn) {
				got = append(got, st.Property)
				if st.Evidence == "" {
					t.Errorf("step %s carries no evidence", st.Property)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("steps %q, want %q", got, tc.want)
			}
		})
	}
	r := stepsResult(t, DefaultOptions())
	r.Fidelity = nil
	r.Reasons = []Reason{{Property: PropArrivals, Evidence: EvidenceAblation, Proven: true}}
	if st := r.nextSteps(real, syn); st != nil {
		t.Errorf("without a fidelity report: %+v", st)
	}
}

// The reasons an ablation gives, in order: singles that restore decisions,
// then pairs, then what a complement shows necessary, then singles that
// restore only sizes or close part of a gap.
func TestReasonsByAblationOrder(t *testing.T) {
	r := fleetLike()
	r.Ablation = &Ablation{Status: AblationRan}
	r.Ablation.Properties = []Transplant{
		single(r, PropSessions, restoring(r, "ttft_p99 of pa")),
		single(r, PropPrefixReuse, restoring(r, "e2e_p99 of pa")),
		single(r, PropPromptLengths, restoring(r)),
	}
	r.Ablation.Combination = &Combination{Conclusions: []string{"ttft_p50 of lo", "ttft_p99 of lo"}, Budget: 24, Tried: []Counterfactual{
		{Kind: CounterfactualComplement, Properties: []string{PropArrivals}, Reaches: 1, Effects: []AblatedEffect{{Metric: "ttft_p50", Target: "lo", Necessary: true}}},
		{Kind: CounterfactualComplement, Properties: []string{PropOutputLengths}, NotBuilt: "already"},
		{Kind: CounterfactualPair, Properties: []string{PropArrivals, PropPrefixReuse}, Reaches: 1, Effects: []AblatedEffect{{Metric: "ttft_p99", Target: "lo", Restores: true}}},
		{Kind: CounterfactualPair, Properties: []string{PropPromptLengths, PropPrefixReuse}},
	}}
	var got []string
	for _, rs := range r.reasonsByAblation() {
		got = append(got, rs.Property+"/"+rs.Evidence)
	}
	want := []string{"prefix reuse/ablation", "arrivals and prefix reuse/ablation", "arrivals/necessary", "sessions/ablation"}
	if !slices.Equal(got, want) {
		t.Errorf("reasons %q, want %q", got, want)
	}
}
