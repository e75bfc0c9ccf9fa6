package capture

import "testing"

// TestKAnon is a table of category counts against k; blocks follow.
func TestKAnon(t *testing.T) {
	cat := func(b byte, prefix int32) redacted {
		return redacted{cat: [32]byte{b}, hasCat: true, prefixTokens: prefix}
	}
	tests := []struct {
		name    string
		k       int
		reqs    []redacted
		keep    []bool // per request: category kept
		prefix  int32  // of request 0's category
		dropped int
	}{
		{"a category shared by k requests is kept", 2,
			[]redacted{cat(1, 10), cat(1, 10)}, []bool{true, true}, 10, 0},
		{"a category shared by fewer than k is dropped", 3,
			[]redacted{cat(1, 10), cat(1, 10), cat(2, 5)}, []bool{false, false, false}, 10, 2},
		{"the prefix length is the first request's", 1,
			[]redacted{cat(1, 10), cat(1, 12)}, []bool{true, true}, 10, 0},
		{"a request without a category has none", 1,
			[]redacted{{}}, []bool{false}, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ka := newKAnon(tc.k)
			for i := range tc.reqs {
				ka.add(&tc.reqs[i])
			}
			for i := range tc.reqs {
				c, ok := ka.category(&tc.reqs[i])
				if ok != tc.keep[i] {
					t.Errorf("request %d: kept %v, want %v", i, ok, tc.keep[i])
				}
				if i == 0 && c != nil && c.prefixTokens != tc.prefix {
					t.Errorf("prefix %d, want %d", c.prefixTokens, tc.prefix)
				}
			}
			if ka.dropped() != tc.dropped {
				t.Errorf("dropped %d, want %d", ka.dropped(), tc.dropped)
			}
		})
	}
	ka := newKAnon(2)
	ka.add(&redacted{blocks: []uint64{1, 2}})
	ka.add(&redacted{blocks: []uint64{1, 3}})
	if !ka.block(1) || ka.block(2) || ka.block(9) {
		t.Errorf("blocks: 1 is shared by 2 requests, 2 by one, 9 by none")
	}
}
