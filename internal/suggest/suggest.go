// Package suggest finds the known word a mistyped one was meant to be, for
// the "did you mean" of an error message (a flag, a command, a
// configuration key).
package suggest

// Nearest returns the candidate closest to s by edit distance when it is
// close enough to be a plausible typo (at most a third of s's length, and
// at least 2, edits away), the first such candidate on a tie; "" when none
// is, or when s is one of the candidates itself.
func Nearest(s string, candidates []string) string {
	best, bestD := "", max(2, len(s)/3)+1
	for _, c := range candidates {
		d := distance(s, c)
		if d == 0 {
			return ""
		}
		if d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// distance is the Levenshtein distance between a and b (bytes).
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
