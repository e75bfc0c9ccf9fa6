package sim

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// testPool is a pool of n replicas under policy with the queues in
// waiting (nil: all empty) and room for 1000 blocks in each replica's
// share of the prefix index.
func testPool(policy string, n int, waiting []int) *pool {
	reps := make([]int, n)
	for i := range reps {
		reps[i] = i
	}
	return newPool(policy, reps, func(int) int { return 1000 },
		func(rep int) int {
			if waiting == nil {
				return 0
			}
			return waiting[rep]
		})
}

// pickEvent is one request to route (hashes, session, time) or, with
// done set, the end of the request routed at that earlier pick's index.
type pickEvent struct {
	hashes  []uint64
	session int64
	at      int64
	done    int // 1 + the index of the pick that ends (0: a pick)
}

// replay routes events through p and says where each pick went and why
// ("1:session"); the end of a request is "-".
func replay(p *pool, events []pickEvent) string {
	var got []string
	var picked []*member
	for _, e := range events {
		if e.done > 0 {
			picked[e.done-1].outstanding--
			got = append(got, "-")
			picked = append(picked, nil)
			continue
		}
		m, why := p.pick(e.hashes, e.session, e.at)
		picked = append(picked, m)
		got = append(got, fmt.Sprintf("%d:%s", m.rep, p.policy.reasons[why]))
	}
	return strings.Join(got, " ")
}

func picks(n int) []pickEvent { return make([]pickEvent, n) }

// TestRouterPolicies: each policy's choices and reasons for a sequence of
// requests, each case one rule.
func TestRouterPolicies(t *testing.T) {
	blocks := func(from, n int) []uint64 {
		h := make([]uint64, n)
		for i := range h {
			h[i] = uint64(from + i)
		}
		return h
	}
	idle := int64(sessionIdle)
	for _, tc := range []struct {
		why     string
		policy  string
		n       int
		waiting []int
		events  []pickEvent
		want    string
		// held are the block hashes each replica's share of the prefix
		// index holds before the events.
		held [][]uint64
	}{
		{"Round-robin goes through the replicas in order and starts over, whatever their load.",
			RouterRoundRobin, 3, []int{9, 0, 0}, picks(7),
			"0:round-robin 1:round-robin 2:round-robin 0:round-robin 1:round-robin 2:round-robin 0:round-robin", nil},
		{"Least-outstanding breaks a tie by going round from the replica after its last choice.",
			RouterLeastOutstanding, 3, nil, picks(4),
			"0:least-outstanding 1:least-outstanding 2:least-outstanding 0:least-outstanding", nil},
		{"Least-outstanding sends the next request where one finished; among equals it starts from the pick count, round the replicas.",
			RouterLeastOutstanding, 3, nil, append(picks(3), pickEvent{done: 2}, pickEvent{}, pickEvent{}, pickEvent{}),
			"0:least-outstanding 1:least-outstanding 2:least-outstanding - 1:least-outstanding 1:least-outstanding 2:least-outstanding", nil},
		{"Session affinity keeps a session where its first request went, even on the busiest replica.",
			RouterSessionAffinity, 2, nil, []pickEvent{{session: 7}, {session: 7}, {session: 7}, {session: 8}},
			"0:session-new 0:session 0:session 1:session-new", nil},
		{"A request without a session goes by least outstanding.",
			RouterSessionAffinity, 2, nil, []pickEvent{{session: 7}, {}, {}},
			"0:session-new 1:no-session 0:no-session", nil},
		{"A session idle for longer than sessionIdle is placed again, by load.",
			RouterSessionAffinity, 2, nil, []pickEvent{{session: 7}, {session: 8}, {done: 1}, {session: 8, at: 1}, {session: 7, at: idle + 1}},
			"0:session-new 1:session-new - 1:session 0:session-new", nil},
		{"A session within sessionIdle of its last request keeps its replica, however long it has lived.",
			RouterSessionAffinity, 2, nil, []pickEvent{{session: 7}, {session: 7, at: idle}, {session: 7, at: 2 * idle}},
			"0:session-new 0:session 0:session", nil},
		{"Prefix-aware with nothing cached and equal queues decides by load, the fewest in flight, in turn.",
			RouterPrefixAware, 3, nil, []pickEvent{{hashes: blocks(100, 4)}, {hashes: blocks(200, 4)}, {hashes: blocks(300, 4)}},
			"0:load 1:load 2:load", nil},
		{"Prefix-aware sends a prompt to the replica that was sent its prefix.",
			RouterPrefixAware, 3, nil, []pickEvent{{hashes: blocks(100, 4)}, {hashes: blocks(200, 4)}, {hashes: blocks(200, 6)}, {hashes: blocks(100, 2)}},
			"0:load 1:load 1:prefix 0:prefix", nil},
		{"Prefix-aware: a full match (2 points) outweighs the longest queue (0 of 1 point).",
			RouterPrefixAware, 2, []int{0, 50}, []pickEvent{{hashes: blocks(200, 4)}},
			"1:prefix", [][]uint64{1: blocks(200, 4)}},
		{"Prefix-aware: a quarter match (0.5 points) loses to an empty queue (1 point): load decides.",
			RouterPrefixAware, 2, []int{0, 50}, []pickEvent{{hashes: append(blocks(200, 1), blocks(900, 3)...)}},
			"0:load", [][]uint64{1: blocks(200, 1)}},
		{"Prefix-aware: among replicas with the same match, the shorter queue wins (queue scores 0, 0.8 and 1).",
			RouterPrefixAware, 3, []int{5, 1, 0}, []pickEvent{{hashes: blocks(100, 4)}},
			"1:prefix", [][]uint64{blocks(100, 4), blocks(100, 4)}},
		{"Prefix-aware counts leading blocks only: a replica holding a later block but not the first matches nothing.",
			RouterPrefixAware, 2, nil, []pickEvent{{hashes: blocks(100, 4)}},
			"0:load", [][]uint64{1: blocks(101, 3)}},
		{"Prefix-aware scores a prompt without full blocks by load alone.",
			RouterPrefixAware, 2, []int{3, 0}, []pickEvent{{}, {}},
			"1:load 1:load", nil},
	} {
		t.Run(tc.why, func(t *testing.T) {
			p := testPool(tc.policy, tc.n, tc.waiting)
			for m, hs := range tc.held {
				for _, h := range hs {
					p.index.add(int32(m), h)
				}
			}
			if got := replay(p, tc.events); got != tc.want {
				t.Errorf("picks %s\n      want %s", got, tc.want)
			}
		})
	}
}

// TestRouterCountsDecisions: every pick counts one decision by reason on
// its replica and one request in flight there.
func TestRouterCountsDecisions(t *testing.T) {
	p := testPool(RouterSessionAffinity, 2, nil)
	replay(p, []pickEvent{{session: 1}, {session: 1}, {}, {session: 2}, {session: 1}})
	got := fmt.Sprint(p.members[0].decisions, p.members[0].outstanding, p.members[1].decisions, p.members[1].outstanding)
	// session, session-new, no-session on each: replica 0 takes session 1
	// (new, then twice again); replica 1 the sessionless request and
	// session 2.
	if want := "[2 1 0] 3 [0 1 1] 2"; got != want {
		t.Errorf("decisions and in flight %s, want %s", got, want)
	}
}

// TestSessionsForgotten: the affinity table forgets sessions idle past
// sessionIdle once enough new ones came, so it holds the live sessions.
func TestSessionsForgotten(t *testing.T) {
	p := testPool(RouterSessionAffinity, 2, nil)
	for s := range int64(5000) {
		p.pick(nil, s+1, 0)
	}
	later := int64(sessionIdle) + int64(time.Second)
	for s := range int64(5000) {
		p.pick(nil, 10000+s, later)
	}
	if n := len(p.sessions); n >= 10000 || n < 5000 {
		t.Errorf("%d sessions kept, want the 5000 live ones and fewer than all 10000", n)
	}
	if _, ok := p.sessions[1]; ok {
		t.Error("an idle session is still held")
	}
}
