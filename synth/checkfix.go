package synth

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

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
	if err := th.Validate(); err != nil {
		return opts, nil, Report{}, err
	}
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
	f := Fix{Check: name}
	var real, syn float64
	var field *float64
	var option string
	switch name {
	case "ks.input_tokens":
		real, syn, field, option = r.Real.MeanInput, r.Synth.MeanInput, &opts.InputLengthScale, "GenOptions.InputLengthScale"
	case "ks.output_tokens":
		real, syn, field, option = r.Real.MeanOutput, r.Synth.MeanOutput, &opts.OutputLengthScale, "GenOptions.OutputLengthScale"
	case "rate_error":
		real, syn, field, option = r.Real.RatePerS, r.Synth.RatePerS, &opts.RateScale, "GenOptions.RateScale"
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
		return opts, f, true
	default:
		return opts, f, false
	}
	if real <= 0 || syn <= 0 || math.Abs(real/syn-1) < 0.02 {
		return opts, f, false
	}
	// The value said is the one tried: round the option as printed.
	f.Option, f.Value = option, strconv.FormatFloat(*field*(real/syn), 'g', 3, 64)
	*field, _ = strconv.ParseFloat(f.Value, 64)
	return opts, f, true
}

// FixReport is what FindFixes found for a failed check (Report.Fixes,
// set by its caller).
type FixReport struct {
	// Fixes are the option changes kept, in the order tried.
	Fixes []Fix `json:"fixes"`
	// Pass says the workload generated with every fix applied passes
	// every check; Failing names the checks it still fails.
	Pass    bool     `json:"pass"`
	Failing []string `json:"failing,omitempty"`
	// Commands make and check that workload (set by the caller, which
	// knows the files and how its users run tokentrace).
	Commands []string `json:"commands,omitempty"`
	// Note says why no fixes were tried or none helped.
	Note string `json:"note,omitempty"`
	// Terms say the fixes' options in the text report as the caller's
	// users set them (nil: the libraries' names, as Fix.Option has them).
	Terms traces.Terms `json:"-"`
}

// NewFixReport is the FixReport of FindFixes' fixes and final report.
func NewFixReport(fixes []Fix, final Report) *FixReport {
	fr := &FixReport{Fixes: fixes, Pass: final.Pass}
	for _, c := range final.Checks {
		if !c.Pass {
			fr.Failing = append(fr.Failing, c.Name)
		}
	}
	if len(fixes) == 0 {
		fr.Note = "no option change (prompt scale, output scale, the real shares of requests, rate) brought a failed check within its limit without making a passing one fail"
	}
	return fr
}

// GenOptionsOf reads the options synth gen recorded in a trace's metadata
// (Model.GenMeta). ok is false for a trace it did not make (another
// source, or no seed recorded).
func GenOptionsOf(meta traces.Meta) (opts GenOptions, ok bool, err error) {
	if meta.Source != SourceGen || meta.Get("synth.seed") == "" {
		return opts, false, nil
	}
	// What the metadata leaves out is the default (GenMeta records a
	// scale only when it is not 1, the context cap only when set).
	opts = DefaultGenOptions()
	num := func(key string, set func(string) error) {
		if v := meta.Get(key); v != "" && err == nil {
			if e := set(v); e != nil {
				err = fmt.Errorf("metadata %s=%q: %w", key, v, e)
			}
		}
	}
	float := func(dst *float64) func(string) error {
		return func(v string) (e error) { *dst, e = strconv.ParseFloat(v, 64); return e }
	}
	num("synth.seed", func(v string) (e error) { opts.Seed, e = strconv.ParseUint(v, 10, 64); return e })
	num("synth.duration_ns", func(v string) error {
		n, e := strconv.ParseInt(v, 10, 64)
		opts.Duration = time.Duration(n)
		return e
	})
	num("synth.rate_scale", float(&opts.RateScale))
	num("synth.length_scale", float(&opts.LengthScale))
	num("synth.input_length_scale", float(&opts.InputLengthScale))
	num("synth.output_length_scale", float(&opts.OutputLengthScale))
	num("synth.max_context_tokens", func(v string) (e error) { opts.MaxContextTokens, e = strconv.Atoi(v); return e })
	num("synth.mix", func(v string) (e error) { opts.Mix, e = ParseMix(v); return e })
	if g := meta.Get("synth.gaps"); g != "" {
		opts.Gaps = g
	}
	if err == nil {
		err = opts.Validate()
	}
	return opts, err == nil, err
}

// Regenerates says whether m generates recs with opts: the same rows
// (arrival, session, turn, category, lengths, prefix blocks), so the
// fixes FindFixes tries from opts are fixes of recs.
func (m *Model) Regenerates(ctx context.Context, opts GenOptions, recs []traces.Record) (bool, error) {
	var w memSink
	if _, err := m.Generate(ctx, opts, &w); err != nil {
		return false, err
	}
	if len(w.recs) != len(recs) {
		return false, nil
	}
	for i := range recs {
		a, b := &w.recs[i], &recs[i]
		if a.ArrivalNs != b.ArrivalNs || a.Session != b.Session || a.Turn != b.Turn || a.Category != b.Category ||
			a.InputTokens != b.InputTokens || a.OutputTokens != b.OutputTokens || !slices.Equal(a.PrefixBlocks, b.PrefixBlocks) {
			return false, nil
		}
	}
	return true, nil
}

// writeFixes adds the fixes FindFixes kept to a text report.
func (r *Report) writeFixes(b *strings.Builder) {
	fr := r.Fixes
	if fr == nil {
		return
	}
	if len(fr.Fixes) == 0 {
		fmt.Fprintf(b, "\nFixes tried by generating and checking: none helped (%s).\n", fr.Note)
		return
	}
	fmt.Fprintf(b, "\nFixes tried by generating and checking, each kept because it brought its check within its limit and made no passing check fail:\n")
	terms := fr.Terms
	if terms == nil {
		terms = traces.LibraryTerms
	}
	for _, f := range fr.Fixes {
		fmt.Fprintf(b, "  %s: set %s to %s\n", f.Check, terms.Option(traces.OptionRef(f.Option)), f.Value)
	}
	switch {
	case fr.Pass:
		fmt.Fprintf(b, "Applied together they pass every check:\n")
	default:
		fmt.Fprintf(b, "Applied together they still fail %s (no option change fixes that; see above):\n", strings.Join(fr.Failing, ", "))
	}
	for _, c := range fr.Commands {
		fmt.Fprintf(b, "  $ %s\n", c)
	}
}
