package synth

import (
	"testing"

	"github.com/tokentrace/tokentrace/traces"
)

// Tests build options the way callers do: from the constructor, changing
// what they mean.

// with is o changed by set.
func with[T any](o T, set func(*T)) T {
	set(&o)
	return o
}

// genSeed is DefaultGenOptions with the seed.
func genSeed(seed uint64) GenOptions {
	o := DefaultGenOptions()
	o.Seed = seed
	return o
}

// fitMeta is DefaultFitOptions fitting a trace with the metadata meta.
func fitMeta(meta traces.Meta) FitOptions {
	o := DefaultFitOptions()
	o.Meta = meta
	return o
}

// TestOptionsZeroIsAValue: the constructors hold every default, and a
// zero a caller sets stays a zero: refused where the library cannot use
// it, never silently the default.
func TestOptionsZeroIsAValue(t *testing.T) {
	for _, c := range []struct {
		name, option string
		err          error
	}{
		{"GenOptions.RateScale", "Options.RateScale", with(DefaultGenOptions(), func(o *GenOptions) { o.RateScale = 0 }).Validate()},
		{"GenOptions.LengthScale", "Options.LengthScale", with(DefaultGenOptions(), func(o *GenOptions) { o.LengthScale = 0 }).Validate()},
		{"GenOptions.Gaps", "Options.Gaps", with(DefaultGenOptions(), func(o *GenOptions) { o.Gaps = "" }).Validate()},
		{"FitOptions.Bin", "Options.Bin", with(DefaultFitOptions(), func(o *FitOptions) { o.Bin = 0 }).Validate()},
		{"FitOptions.MinBinCount", "Options.MinBinCount", with(DefaultFitOptions(), func(o *FitOptions) { o.MinBinCount = 0 }).Validate()},
		{"MatrixOptions.SatRequests", "Options.SatRequests", with(DefaultMatrixOptions(), func(o *MatrixOptions) { o.SatRequests = 0 }).Validate()},
		{"MatrixOptions.Rows", "Options.Rows", with(DefaultMatrixOptions(), func(o *MatrixOptions) { o.Rows = "" }).Validate()},
		{"Thresholds.Confidence", "Thresholds.Confidence", with(DefaultThresholds(), func(o *Thresholds) { o.Confidence = 0 }).Validate()},
	} {
		oe, ok := c.err.(*traces.OptionError)
		if !ok || oe.Option != c.option {
			t.Errorf("%s = 0: error %v, want a *traces.OptionError naming %s", c.name, c.err, c.option)
		}
	}
	for name, err := range map[string]error{
		"DefaultGenOptions":    DefaultGenOptions().Validate(),
		"DefaultFitOptions":    DefaultFitOptions().Validate(),
		"DefaultMatrixOptions": DefaultMatrixOptions().Validate(),
		"DefaultThresholds":    DefaultThresholds().Validate(),
		// Zeros with a meaning of their own are values.
		"FitOptions.ReorderWindow = 0": with(DefaultFitOptions(), func(o *FitOptions) { o.ReorderWindow = 0 }).Validate(),
		"FitOptions.ClusterGap = 0":    with(DefaultFitOptions(), func(o *FitOptions) { o.ClusterGap = 0 }).Validate(),
		"Thresholds.KSLengths = 0":     with(DefaultThresholds(), func(o *Thresholds) { o.KSLengths = 0 }).Validate(),
		"MatrixOptions.Seed = 0":       with(DefaultMatrixOptions(), func(o *MatrixOptions) { o.Seed = 0 }).Validate(),
	} {
		if err != nil {
			t.Errorf("%s: %v, want valid", name, err)
		}
	}
}
