package formats_test

import (
	"github.com/tokentrace/tokentrace/traces"
	"github.com/tokentrace/tokentrace/traces/formats"
)

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

// noteStrings are r's import notes said by the library's names.
func noteStrings(r traces.Reader) []string {
	var out []string
	for _, n := range formats.ImportNotes(r) {
		out = append(out, n.String())
	}
	return out
}
