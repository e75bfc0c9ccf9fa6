package capture

import "testing"

// chatReq is a redacted chat request whose message prefix hashes are the
// given values (the last is the whole conversation so far).
func chatReq(nSys int, prefixes ...uint64) redacted {
	return redacted{prefixes: prefixes, nSys: nSys, inTok: 1}
}

// TestSessions is a table of request sequences and the sessions found.
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
