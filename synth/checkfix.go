package synth

import (
	"context"
	"math"
	"strconv"

	"github.com/tokentrace/tokentrace/traces"
)

// Fixes that compose. A failed check's advice names what to change; for a
// trace generated from a model, FindFixes tries the changes before they
// are said: each changes the one dimension that failed (prompts alone,
// outputs alone, the category shares, the rate), is kept only if the
// trace generated with it and the changes kept before it passes the check
// it targets and fails no check that passed, and the changes kept are the
// ones applied together.

// Fix is a generation option change FindFixes kept.
type Fix struct {
	// Option names the option (GenOptions.OutputLengthScale) and Value
	// the value to set it to.
	Option string `json:"option"`
	Value  string `json:"value"`
	// Check is the check the change brings within its limit.
	Check string `json:"check"`
}

// memSink collects generated records.
type memSink struct{ recs []traces.Record }

func (w *memSink) Write(r []traces.Record) (int, error) {
	w.recs = append(w.recs, r...)
	return len(r), nil
}
func (w *memSink) Close() error { return nil }

// checkGen generates from m with opts and checks the result against real.
func (m *Model) checkGen(ctx context.Context, real []traces.Record, opts GenOptions, th Thresholds) (Report, error) {
	var w memSink
	if _, err := m.Generate(ctx, opts, &w); err != nil {
		return Report{}, err
	}
	return Check(real, w.recs, th), nil
}

// FindFixes generates from m with opts, checks the result against real,
// and tries a change of options for each failed check it knows one for
// (ks.input_tokens: GenOptions.InputLengthScale; ks.output_tokens:
// OutputLengthScale; category_share_max_diff: Mix, the real shares of
// requests; rate_error: RateScale), one at a time on top of those kept.
// It returns the options with the kept changes, the changes, and the
// report of the trace they generate.
func (m *Model) FindFixes(ctx context.Context, real []traces.Record, opts GenOptions, th Thresholds) (GenOptions, []Fix, Report, error) {
	if err := opts.Validate(); err != nil {
		return opts, nil, Report{}, err
	}
	opts = opts.withDefaults(m)
	rep, err := m.checkGen(ctx, real, opts, th)
	if err != nil {
		return opts, nil, rep, err
	}
	var fixes []Fix
	for _, name := range []string{"ks.output_tokens", "ks.input_tokens", "category_share_max_diff", "rate_error"} {
		c := rep.check(name)
		if c == nil || c.Pass {
			continue
		}
		try, fix, ok := rep.candidate(name, opts)
		if !ok {
			continue
		}
		next, err := m.checkGen(ctx, real, try, th)
		if err != nil {
			return opts, fixes, rep, err
		}
		if nc := next.check(name); nc == nil || !nc.Pass || broke(&rep, &next) {
			continue
		}
		opts, rep = try, next
		fixes = append(fixes, fix)
	}
	return opts, fixes, rep, nil
}

// check is the named check's result (nil: not made).
func (r *Report) check(name string) *CheckResult {
	for i := range r.Checks {
		if r.Checks[i].Name == name {
			return &r.Checks[i]
		}
	}
	return nil
}

// broke says whether a check that passed in before fails in after.
func broke(before, after *Report) bool {
	for _, c := range after.Checks {
		if b := before.check(c.Name); !c.Pass && (b == nil || b.Pass) {
			return true
		}
	}
	return false
}

// candidate is the change of opts that targets the failed check name.
func (r *Report) candidate(name string, opts GenOptions) (GenOptions, Fix, bool) {
	scale := func(real, syn float64) (float64, bool) {
		if real <= 0 || syn <= 0 || math.Abs(real/syn-1) < 0.02 {
			return 0, false
		}
		return real / syn, true
	}
	f := Fix{Check: name}
	switch name {
	case "ks.input_tokens":
		s, ok := scale(r.Real.MeanInput, r.Synth.MeanInput)
		if !ok {
			return opts, f, false
		}
		opts.InputLengthScale *= s
		f.Option, f.Value = "GenOptions.InputLengthScale", strconv.FormatFloat(opts.InputLengthScale, 'g', 3, 64)
	case "ks.output_tokens":
		s, ok := scale(r.Real.MeanOutput, r.Synth.MeanOutput)
		if !ok {
			return opts, f, false
		}
		opts.OutputLengthScale *= s
		f.Option, f.Value = "GenOptions.OutputLengthScale", strconv.FormatFloat(opts.OutputLengthScale, 'g', 3, 64)
	case "rate_error":
		s, ok := scale(r.Real.RatePerS, r.Synth.RatePerS)
		if !ok {
			return opts, f, false
		}
		opts.RateScale *= s
		f.Option, f.Value = "GenOptions.RateScale", strconv.FormatFloat(opts.RateScale, 'g', 3, 64)
	case "category_share_max_diff":
		mix, ok := r.RealMix()
		if !ok {
			return opts, f, false
		}
		parsed, err := ParseMix(mix)
		if err != nil {
			return opts, f, false
		}
		opts.Mix = parsed
		f.Option, f.Value = "GenOptions.Mix", mix
	default:
		return opts, f, false
	}
	// The value said is the one tried: round the option as printed.
	v, _ := strconv.ParseFloat(f.Value, 64)
	switch f.Option {
	case "GenOptions.InputLengthScale":
		opts.InputLengthScale = v
	case "GenOptions.OutputLengthScale":
		opts.OutputLengthScale = v
	case "GenOptions.RateScale":
		opts.RateScale = v
	}
	return opts, f, true
}
