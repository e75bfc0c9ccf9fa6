package sim

import (
	"strings"
	"testing"
)

// Pairs separated by spaces instead of commas (a shell user's habit) are
// answered with the configuration written right, not with the error of a
// value that swallowed the next pair.
func TestApplyConfigSpaces(t *testing.T) {
	for _, c := range []struct {
		why, spec, want string
	}{
		{"a space between two pairs says where the comma goes", "replicas=4 router=prefix-aware",
			`has a space where a comma goes: keys are separated by commas, no spaces (write "replicas=4,router=prefix-aware")`},
		{"several spaced pairs are all rewritten", "replicas=4 router=prefix-aware, max-num-seqs=8",
			`(write "replicas=4,router=prefix-aware,max-num-seqs=8")`},
		{"a value with a space and no pair after it is named too", "router=prefix aware",
			`"router=prefix aware" has a space`},
	} {
		o := DefaultOptions()
		err := ApplyConfig(&o, c.spec)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "pool of size 0") {
			t.Errorf("%s: %q: %v; want an error containing %q", c.why, c.spec, err, c.want)
		}
	}
	o := DefaultOptions()
	if err := ApplyConfig(&o, "replicas=4, router=prefix-aware"); err != nil {
		t.Errorf("a space after a comma is fine: %v", err)
	}
}
