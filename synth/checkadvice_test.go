package synth

import (
	"bytes"
	"cmp"
	"context"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// upTo keeps the records that arrive before end.
func upTo(recs []traces.Record, end time.Duration) []traces.Record {
	var out []traces.Record
	for _, r := range recs {
		if r.ArrivalNs < int64(end) {
			out = append(out, r)
		}
	}
	return out
}

// On a 60 s trace a per-minute rate or a 60 s index of dispersion has one
// window or none: those checks are skipped with the reason instead of
// printed as numbers (1.0000, 0.0000) that mean nothing, and do not fail
// the check; every failed check says what it affects and what to change.
func TestCheckShortTraceSkipsWindowsAndAdvises(t *testing.T) {
	real := upTo(synthetic(3000, 11), time.Minute)
	syn := upTo(synthetic(3000, 12), time.Minute)
	for i := range syn { // prompts twice as long: a miss to advise on
		syn[i].InputTokens *= 2
	}
	rep := Check(real, syn, DefaultThresholds())
	rep.Advise(SourceGen, "real.parquet", nil)
	checks := map[string]CheckResult{}
	for _, c := range rep.Checks {
		checks[c.Name] = c
	}
	for _, name := range []string{"dispersion.10s", "dispersion.60s"} {
		if c := checks[name]; c.Skipped == "" || !c.Pass || !strings.Contains(c.Skipped, "needs 10 full") {
			t.Errorf("%s: %+v, want skipped (needs 10 full windows) and not failing", name, c)
		}
	}
	if c := checks["dispersion.1s"]; c.Skipped != "" {
		t.Errorf("dispersion.1s: %+v; a minute has 59 full 1 s windows: it is checked", c)
	}
	if rep.Unmeasured["ks.rate_per_minute"] == "" {
		t.Errorf("ks.rate_per_minute on a 60 s trace should be unmeasured, got %v", rep.Unmeasured)
	}
	c := checks["ks.input_tokens"]
	if c.Pass || !strings.Contains(c.Affects, "prefill") || !strings.Contains(c.Fix, "GenOptions.InputLengthScale by 0.5") {
		t.Errorf("ks.input_tokens: %+v, want a failure that says it affects prefill and to scale lengths by 0.5", c)
	}
	for _, c := range rep.Checks {
		if !c.Pass && (c.Affects == "" || c.Fix == "") {
			t.Errorf("failed check %s says neither what it affects nor what to change: %+v", c.Name, c)
		}
	}
	var buf bytes.Buffer
	if err := rep.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "ks.rate_per_minute") && strings.Contains(line, "1.0000") {
			t.Errorf("the per-minute KS of a 60 s trace is printed as a number: %q", line)
		}
	}
	for _, want := range []string{"skipped: needs 10 full 1m0s windows", "not measured: needs 10 full 1m0s windows", "What the misses mean and what to change", "ks.input_tokens: affects prefill"} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
	// A long trace checks every window.
	long := Check(synthetic(3000, 11), synthetic(3000, 12), DefaultThresholds())
	for _, c := range long.Checks {
		if c.Skipped != "" && c.Name != "dispersion.60s" {
			t.Errorf("%s skipped on a %v trace: %s", c.Name, time.Duration(long.Real.DurationS*1e9).Round(time.Second), c.Skipped)
		}
	}
}

// The advice follows how the synthetic trace was made: a matrix is told
// to fit a model (fixed lengths cannot spread) and to change its rows'
// rates, a generated trace to change synth gen's options.
func TestCheckAdviceBySource(t *testing.T) {
	real := synthetic(2000, 11)
	syn := synthetic(1000, 12)
	for i := range syn {
		syn[i].InputTokens, syn[i].ArrivalNs = 1000, syn[i].ArrivalNs*2
	}
	fix := func(source, name string) string {
		rep := Check(real, syn, DefaultThresholds())
		rep.Advise(source, "prod trace.parquet", nil)
		for _, c := range rep.Checks {
			if c.Name == name {
				return c.Fix
			}
		}
		t.Fatalf("no %s check", name)
		return ""
	}
	if f := fix(SourceMatrix, "ks.input_tokens"); !strings.Contains(f, "fixed-length matrix") || !strings.Contains(f, "synth fit Command.Out=model.json prod trace.parquet") {
		t.Errorf("matrix, lengths: %q", f)
	}
	if f := fix(SourceMatrix, "rate_error"); !strings.Contains(f, "RATErps") {
		t.Errorf("matrix, rate: %q", f)
	}
	if f := fix(SourceGen, "rate_error"); !strings.Contains(f, "GenOptions.RateScale") {
		t.Errorf("generated, rate: %q", f)
	}
}

// CheckSeq, reading each trace once in arrival order, reports what Check
// does on the same traces held in memory in any order.
func TestCheckSeqIsCheck(t *testing.T) {
	real, syn := synthetic(2000, 11), synthetic(1500, 12)
	inOrder := func(recs []traces.Record) func(func(*traces.Record) bool) {
		sorted := slices.Clone(recs)
		slices.SortStableFunc(sorted, func(a, b traces.Record) int { return cmp.Compare(a.ArrivalNs, b.ArrivalNs) })
		return func(yield func(*traces.Record) bool) {
			for i := range sorted {
				if !yield(&sorted[i]) {
					return
				}
			}
		}
	}
	shuffled := slices.Clone(real)
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	var a, b bytes.Buffer
	want := Check(shuffled, syn, DefaultThresholds())
	got := CheckSeq(inOrder(real), inOrder(syn), DefaultThresholds())
	want.WriteJSON(&a)
	got.WriteJSON(&b)
	if a.String() != b.String() {
		t.Errorf("CheckSeq differs from Check:\n%s\nwant\n%s", b.String(), a.String())
	}
}

// The options synth gen records in its output's metadata read back as
// the options it was run with, and regenerate the same rows; a trace of
// other making has none.
func TestGenOptionsOfRoundTrip(t *testing.T) {
	real, meta := chats(120, 5, 0)
	m := fitModelMeta(t, real, meta)
	o := with(DefaultGenOptions(), func(o *GenOptions) {
		o.Seed, o.Duration, o.RateScale, o.InputLengthScale, o.OutputLengthScale = 9, 90*time.Second, 1.5, 0.8, 1.25
		o.Mix, o.Gaps, o.MaxContextTokens = map[string]float64{"support": 0.5}, GapsFitted, 4000
	})
	got, ok, err := GenOptionsOf(m.GenMeta(o))
	if err != nil || !ok {
		t.Fatalf("GenOptionsOf: ok %v, err %v", ok, err)
	}
	if !reflect.DeepEqual(got, o) {
		t.Errorf("read back %+v, want %+v", got, o)
	}
	syn := gen(t, m, o)
	if same, err := m.Regenerates(context.Background(), got, syn); err != nil || !same {
		t.Errorf("the options read back do not regenerate the trace: %v %v", same, err)
	}
	if same, _ := m.Regenerates(context.Background(), genSeed(10), syn); same {
		t.Error("another seed regenerates the same trace")
	}
	if _, ok, _ := GenOptionsOf(traces.NewMeta("capture:openai-jsonl")); ok {
		t.Error("a captured trace has generation options")
	}
}

// A generated trace whose prompts are scaled away from the real ones is
// told to bring them back, not to fit again (its user already did), for
// the checks prompt lengths carry; with the prompts right, the advice
// names what differs from the fit.
func TestCheckAdviceScaledPrompts(t *testing.T) {
	var r Report
	r.Real.MeanInput, r.Synth.MeanInput = 1000, 1600
	for _, name := range []string{"prefix_reuse", "prefix_reuse_by_turn", "prefix_reuse_by_category", "context_growth"} {
		fix := r.adviceFix(name, SourceGen)
		if !strings.Contains(fix, "GenOptions.InputLengthScale by 0.625") || strings.Contains(fix, "synth fit") {
			t.Errorf("%s, prompts 1.6×: %q", name, fix)
		}
		if fix := r.adviceFix(name, SourceMatrix); strings.Contains(fix, "InputLengthScale") {
			t.Errorf("%s, a matrix is told to scale a generation option: %q", name, fix)
		}
	}
	r.Synth.MeanInput = 1020
	if fix := r.adviceFix("context_growth", SourceGen); strings.Contains(fix, "InputLengthScale") || strings.Contains(fix, "synth fit") {
		t.Errorf("context_growth, prompts right: %q", fix)
	}
}

// adviceFix is the fix advice says for a failed check, by the libraries'
// names.
func (r *Report) adviceFix(name, source string) string {
	_, fix := r.advice(name, source, "")
	return fix.String()
}
