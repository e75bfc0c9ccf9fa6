package analyze

import "testing"

// TestPDTailNote: a note of the tail's P/D estimates names the first basis
// that half of them or more rest on, nothing when none was estimated, and
// the fallback otherwise.
func TestPDTailNote(t *testing.T) {
	fallback := func() string { return "fallback" }
	for _, c := range []struct {
		why  string
		tail pdTail
		want string
	}{
		{"no estimate in the tail: no note", pdTail{}, ""},
		{"half on the first basis: its note", pdTail{n: 4, series: 2, nixl: 4}, "series"},
		{"the first basis under half: the next one that holds half", pdTail{n: 4, series: 1, nixl: 3}, "nixl"},
		{"no basis holds half: the fallback", pdTail{n: 5, series: 2, nixl: 2}, "fallback"},
	} {
		b := c.tail
		if got := b.note(fallback, pdBasis{b.series, "series"}, pdBasis{b.nixl, "nixl"}); got != c.want {
			t.Errorf("%s: note %q, want %q", c.why, got, c.want)
		}
	}
}
