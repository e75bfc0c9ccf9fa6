package formats_test

import "github.com/tokentrace/tokentrace/traces"

// openStrict is traces.DefaultOpenOptions with Strict as given: tests
// build options from their constructor.
func openStrict(strict bool) traces.OpenOptions {
	o := traces.DefaultOpenOptions()
	o.Strict = strict
	return o
}

// with is o changed by set.
func with[T any](o T, set func(*T)) T {
	set(&o)
	return o
}
