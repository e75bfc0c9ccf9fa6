package capture

import (
	"reflect"
	"testing"
)

// chatReq is a redacted chat request whose message prefix hashes are the
// given values (the last is the whole conversation so far).
func chatReq(nSys int, prefixes ...uint64) redacted {
	return redacted{prefixes: prefixes, nSys: nSys, inTok: 1}
}

func TestSessions(t *testing.T) {
	tests := []struct {
		name string
		mode string
		reqs []redacted
		// want is each request's session as the index of the request that
		// started it (-1 none), and kept whether that session has ≥2.
		want []int
		kept []bool
	}{
		{"a request that extends an earlier conversation joins it", SessionsAuto,
			[]redacted{chatReq(0, 1), chatReq(0, 1, 2, 3)},
			[]int{0, 0}, []bool{true, true}},
		{"a conversation continues from its latest turn", SessionsAuto,
			[]redacted{chatReq(0, 1), chatReq(0, 1, 2, 3), chatReq(0, 1, 2, 3, 4, 5)},
			[]int{0, 0, 0}, []bool{true, true, true}},
		{"sharing only the system messages is no conversation", SessionsAuto,
			[]redacted{chatReq(1, 7), chatReq(1, 7, 8)},
			[]int{0, 1}, []bool{false, false}},
		{"a single request is no session", SessionsAuto,
			[]redacted{chatReq(0, 1), chatReq(0, 5)},
			[]int{0, 1}, []bool{false, false}},
		{"a session field wins over chat structure", SessionsAuto,
			[]redacted{{sessKey: 9, prefixes: []uint64{1}}, {sessKey: 9, prefixes: []uint64{4}}},
			[]int{0, 0}, []bool{true, true}},
		{"mode none finds no sessions", SessionsNone,
			[]redacted{{sessKey: 9}, {sessKey: 9}},
			[]int{-1, -1}, []bool{false, false}},
		{"requests without field or messages have no session", SessionsAuto,
			[]redacted{{}, {}},
			[]int{-1, -1}, []bool{false, false}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSessions(tc.mode)
			ids := make([]sessionID, len(tc.reqs))
			for i := range tc.reqs {
				ids[i] = s.add(&tc.reqs[i], i)
				if tc.reqs[i].prefixes != nil {
					t.Errorf("request %d keeps its prefixes", i)
				}
			}
			for i, w := range tc.want {
				switch {
				case w < 0 && ids[i] != 0:
					t.Errorf("request %d: session %d, want none", i, ids[i])
				case w >= 0 && ids[i] != ids[w]:
					t.Errorf("request %d: session %d, want request %d's %d", i, ids[i], w, ids[w])
				}
				if s.kept(ids[i]) != tc.kept[i] {
					t.Errorf("request %d: kept %v, want %v", i, s.kept(ids[i]), tc.kept[i])
				}
			}
		})
	}
}

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

func TestRecordsNumbering(t *testing.T) {
	type got struct {
		session int64
		turn    int32
		cat     string
		blocks  []int64
	}
	tests := []struct {
		name       string
		keepHashes bool
		reqs       []redacted
		sids       []sessionID
		want       []got
	}{
		{"sessions are numbered by their first request, turns count within", false,
			[]redacted{{t: 1}, {t: 2}, {t: 3}, {t: 4}},
			[]sessionID{8, 3, 3, 8},
			[]got{{1, 1, "", nil}, {2, 1, "", nil}, {2, 2, "", nil}, {1, 2, "", nil}}},
		{"single-request sessions get no number", false,
			[]redacted{{t: 1}, {t: 2}, {t: 3}},
			[]sessionID{5, 7, 7},
			[]got{{0, 0, "", nil}, {1, 1, "", nil}, {1, 2, "", nil}}},
		{"kept categories are labelled c1, c2 by first appearance", false,
			[]redacted{{cat: [32]byte{2}, hasCat: true}, {cat: [32]byte{1}, hasCat: true}, {cat: [32]byte{2}, hasCat: true}, {cat: [32]byte{1}, hasCat: true}, {cat: [32]byte{3}, hasCat: true}},
			make([]sessionID, 5),
			[]got{{0, 0, "c1", nil}, {0, 0, "c2", nil}, {0, 0, "c1", nil}, {0, 0, "c2", nil}, {0, 0, "", nil}}},
		{"kept blocks share ids, other blocks get ids of their own", false,
			[]redacted{{blocks: []uint64{10, 11}, inTok: -1}, {blocks: []uint64{10, 12}, inTok: -1}},
			make([]sessionID, 2),
			[]got{{0, 0, "", []int64{1, 2}}, {0, 0, "", []int64{1, 3}}}},
		{"block lists follow the input token count", false,
			[]redacted{{blocks: []uint64{10}, inTok: 3}, {blocks: []uint64{10, 11, 12}, inTok: 2}},
			make([]sessionID, 2),
			[]got{{0, 0, "", []int64{1, 2}}, {0, 0, "", []int64{1}}}},
		{"with KeepHashes blocks are digest bits and unshared ones negative", true,
			[]redacted{{blocks: []uint64{10, 11}, inTok: -1}, {blocks: []uint64{10, 12}, inTok: -1}},
			make([]sessionID, 2),
			[]got{{0, 0, "", []int64{5, -1}}, {0, 0, "", []int64{5, -2}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions()
			o.MinCategorySize, o.BlockSize, o.KeepHashes = 2, 2, tc.keepHashes
			sess := newSessions(SessionsAuto)
			for _, id := range tc.sids {
				if id != 0 {
					sess.count[id]++
				}
			}
			ka := newKAnon(2)
			for i := range tc.reqs {
				ka.add(&tc.reqs[i])
			}
			rs := newRecords(o, sess, ka)
			for i := range tc.reqs {
				r := rs.next(&tc.reqs[i], tc.sids[i])
				g := got{r.Session, r.Turn, r.Category, r.PrefixBlocks}
				if r.Seq != int64(i) || !reflect.DeepEqual(g, tc.want[i]) {
					t.Errorf("record %d (seq %d): got %+v, want %+v", i, r.Seq, g, tc.want[i])
				}
			}
		})
	}
}
