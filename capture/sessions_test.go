package capture

import (
	"testing"
	"time"
)

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
		{"a turn within SessionIdle of the conversation's last request joins it", SessionsAuto,
			[]redacted{at(0, chatReq(0, 1)), at(50*time.Minute, chatReq(0, 1, 2, 3)), at(109*time.Minute, chatReq(0, 1, 2, 3, 4, 5))},
			[]int{0, 0, 0}, []bool{true, true, true}},
		{"a conversation idle for longer than SessionIdle starts a new session", SessionsAuto,
			[]redacted{at(0, chatReq(0, 1)), at(61*time.Minute, chatReq(0, 1, 2, 3)), at(62*time.Minute, chatReq(0, 1, 2, 3, 4, 5))},
			[]int{0, 1, 1}, []bool{false, true, true}},
		{"a session field idle for longer than SessionIdle starts a new session", SessionsAuto,
			[]redacted{at(0, redacted{sessKey: 9}), at(59*time.Minute, redacted{sessKey: 9}), at(24*time.Hour, redacted{sessKey: 9})},
			[]int{0, 0, 2}, []bool{true, true, false}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions()
			o.Sessions = tc.mode
			s := newSessions(o)
			ids := make([]sessionID, len(tc.reqs))
			for i := range tc.reqs {
				ids[i] = s.find(&tc.reqs[i], i)
				if ids[i] != 0 {
					s.count[ids[i]]++
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

// at sets r's arrival to d after an hour's start.
func at(d time.Duration, r redacted) redacted {
	r.t = int64(time.Hour + d)
	return r
}

// The session counter ends a session once it has been idle for SessionIdle
// and hands the counts of those with two or more requests back in order of
// first request, from memory or from spilled runs.
func TestSessionCounts(t *testing.T) {
	for _, perRun := range []int{1 << 20, 2} {
		o := DefaultOptions()
		dir := t.TempDir()
		es := &endsStore{dir: func() (string, error) { return dir, nil }, max: perRun}
		c := newSessionCounter(o, es)
		min := int64(time.Minute)
		// id: the session; at: its requests' minutes.
		reqs := []struct {
			id sessionID
			at int64
		}{
			{2, 0}, {4, 1}, {2, 2}, {6, 3}, {8, 4}, {8, 5}, {8, 6},
			{4, 90}, // 89 minutes idle: session 4 ended with one request
			{10, 91}, {10, 120},
		}
		for _, r := range reqs {
			if err := c.add(r.id, r.at*min); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.finish(); err != nil {
			t.Fatal(err)
		}
		if perRun == 2 && len(es.runs) == 0 {
			t.Fatal("no run spilled: the test does not test the merge")
		}
		want := map[sessionID]int32{2: 2, 8: 3, 10: 2}
		for id := sessionID(2); id <= 12; id += 2 {
			n, ok, err := es.take(id)
			if err != nil {
				t.Fatal(err)
			}
			if w, kept := want[id]; ok != kept || n != w {
				t.Errorf("%d per run: session %d: count %d (stored %v), want %d (stored %v)", perRun, id, n, ok, w, kept)
			}
		}
		es.close()
	}
}
