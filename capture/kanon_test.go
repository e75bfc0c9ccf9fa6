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
			ka := newKAnon(tc.k, 1<<20)
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
	ka := newKAnon(2, 1<<20)
	ka.add(&redacted{blocks: []uint64{1, 2}})
	ka.add(&redacted{blocks: []uint64{1, 3}})
	if !ka.block(1) || ka.block(2) || ka.block(9) {
		t.Errorf("blocks: 1 is shared by 2 requests, 2 by one, 9 by none")
	}
}

// TestKAnonCap: at MaxKAnonEntries the counts seen once are forgotten, the
// shared ones stay, and a forgotten block seen again counts anew: the cap
// can drop a block that would have reached k, never keep one that did not.
func TestKAnonCap(t *testing.T) {
	req := func(bs ...uint64) *redacted { return &redacted{blocks: bs} }
	tests := []struct {
		name      string
		k, max    int
		reqs      []*redacted
		kept      []uint64
		dropped   []uint64
		forgotten int64
	}{
		{"blocks seen once are forgotten when the cap is reached, shared ones stay", 2, 3,
			[]*redacted{req(1), req(1), req(2), req(3), req(4)}, []uint64{1}, []uint64{2, 3, 4}, 2},
		{"a forgotten block seen again starts anew, so it is dropped", 2, 2,
			[]*redacted{req(5), req(6), req(7), req(5)}, nil, []uint64{5, 6, 7}, 2},
		{"under the cap nothing is forgotten", 2, 10,
			[]*redacted{req(5), req(6), req(7), req(5)}, []uint64{5}, []uint64{6, 7}, 0},
		{"with k = 1 every block is kept and none is counted", 1, 2,
			[]*redacted{req(5), req(6), req(7), req(8)}, []uint64{5, 6, 7, 8}, nil, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ka := newKAnon(tc.k, tc.max)
			for _, r := range tc.reqs {
				ka.add(r)
			}
			for _, b := range tc.kept {
				if !ka.block(b) {
					t.Errorf("block %d dropped, want kept", b)
				}
			}
			for _, b := range tc.dropped {
				if ka.block(b) {
					t.Errorf("block %d kept, want dropped", b)
				}
			}
			if ka.forgotten != tc.forgotten || len(ka.blocks) > tc.max {
				t.Errorf("forgotten %d (want %d), %d counts held (cap %d)", ka.forgotten, tc.forgotten, len(ka.blocks), tc.max)
			}
		})
	}
}
