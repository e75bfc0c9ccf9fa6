package validate

import "testing"

// Tests build options the way callers do: from DefaultOptions, changing
// what they mean.

// with is o changed by set.
func with[T any](o T, set func(*T)) T {
	set(&o)
	return o
}

// targeted is DefaultOptions with the targets specs name.
func targeted(t *testing.T, specs ...string) Options {
	t.Helper()
	o := DefaultOptions()
	o.Targets = targets(t, specs...)
	return o
}
