package analyze

import (
	"context"
	"fmt"
	"slices"
)

// CompareFiles analyzes the results files of run A (a, one run's shards)
// and run B (b) with options o and compares them with co. Without
// o.Class, when the runs hold more than one class between them (a run with
// background load does), each class is also compared alone
// (Comparison.ByClass), since the pooled numbers mix them: every file is
// then read once more per class. Rows without a class stay in the pooled
// comparison only.
func CompareFiles(ctx context.Context, a, b []string, o Options, co CompareOptions) (*Comparison, error) {
	if err := co.Validate(); err != nil {
		return nil, err
	}
	perClass := o.Class == "" && o.By == ""
	if perClass {
		o.By = ByClass
	}
	names := [2][]string{a, b}
	var reps [2]*Report
	for i, n := range names {
		r, err := AnalyzeFiles(ctx, n, o)
		if err != nil {
			return nil, err
		}
		reps[i] = r
	}
	c, err := Compare(reps[0], reps[1], co)
	if err != nil {
		return nil, err
	}
	if !perClass {
		return c, nil
	}
	var in [2]map[string]bool
	var classes []string
	for i, r := range reps {
		in[i] = map[string]bool{}
		for _, g := range r.Groups {
			if g.Value == "" {
				continue
			}
			in[i][g.Value] = true
			if !slices.Contains(classes, g.Value) {
				classes = append(classes, g.Value)
			}
		}
	}
	if len(classes) < 2 {
		return c, nil
	}
	slices.Sort(classes)
	labels := [2]string{co.LabelA, co.LabelB}
	for _, k := range classes {
		if !in[0][k] || !in[1][k] {
			only := labels[0]
			if in[1][k] {
				only = labels[1]
			}
			c.ByClass = append(c.ByClass, ClassComparison{Class: k, OnlyIn: only})
			continue
		}
		oc := o
		oc.By, oc.Class = "", k
		var side [2]*Report
		for i, n := range names {
			r, err := AnalyzeFiles(ctx, n, oc)
			if err != nil {
				return nil, fmt.Errorf("class %s: %w", k, err)
			}
			side[i] = r
		}
		cc, err := Compare(side[0], side[1], co)
		if err != nil {
			return nil, fmt.Errorf("class %s: %w", k, err)
		}
		c.ByClass = append(c.ByClass, ClassComparison{Class: k, Comparison: cc})
	}
	return c, nil
}
