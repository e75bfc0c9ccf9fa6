package suggest

import "testing"

func TestNearest(t *testing.T) {
	keys := []string{"max-num-seqs", "max-num-batched-tokens", "max-model-len", "replicas", "router"}
	for _, tc := range []struct {
		name, in, want string
	}{
		{"a dropped letter finds the key", "max-num-seq", "max-num-seqs"},
		{"two swapped letters find the key", "rotuer", "router"},
		{"a word far from every key finds none", "colour", ""},
		{"a key that is known is not a typo", "replicas", ""},
		{"the empty word finds none", "", ""},
		{"a word half rewritten is too far to guess", "max-seqs", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Nearest(tc.in, keys); got != tc.want {
				t.Errorf("Nearest(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{{"", "", 0}, {"abc", "", 3}, {"kitten", "sitting", 3}, {"flaw", "lawn", 2}} {
		if got := distance(tc.a, tc.b); got != tc.want || distance(tc.b, tc.a) != tc.want {
			t.Errorf("distance(%q, %q) = %d, want %d both ways", tc.a, tc.b, got, tc.want)
		}
	}
}
