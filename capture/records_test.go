package capture

import (
	"reflect"
	"testing"
)

// TestRecordsNumbering is a table of how the records stage numbers
// sessions, categories and blocks in order of first appearance.
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
			sess := newSessions(o)
			for _, id := range tc.sids {
				if id != 0 {
					sess.count[id]++
				}
			}
			ka := newKAnon(2, 1<<20)
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
