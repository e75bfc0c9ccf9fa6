package sim

import (
	"testing"
	"time"
)

// TestLinkSharesBandwidth: a pull waits its latency, then moves at its own
// rate; pulls moving together share the bandwidth cap equally, and one
// that ends gives its share back.
func TestLinkSharesBandwidth(t *testing.T) {
	const ms = int64(time.Millisecond)
	// 1 µs a token alone; the cap, 1e9 B/s of 1000-byte tokens, is also
	// 1 token a µs for all pulls together.
	run := func(starts ...int64) map[string]int64 {
		l := newLink(time.Millisecond, time.Microsecond, 1e9, 1000)
		done := map[string]int64{}
		i := 0
		for {
			next := l.next()
			if i < len(starts) && (next < 0 || starts[i] <= next) {
				l.start(starts[i], 1000, string(rune('A'+i)))
				i++
				continue
			}
			if next < 0 {
				return done
			}
			for _, tag := range l.advance(next) {
				done[tag.(string)] = next
			}
		}
	}
	for _, tc := range []struct {
		why    string
		starts []int64
		want   map[string]int64
	}{
		{"alone: latency + 1000 tokens at 1 µs", []int64{0}, map[string]int64{"A": 2 * ms}},
		{"together: each gets half the cap", []int64{0, 0}, map[string]int64{"A": 3 * ms, "B": 3 * ms}},
		{"overlapping: A alone, then halves, then B alone", []int64{0, ms / 2}, map[string]int64{"A": 5 * ms / 2, "B": 3 * ms}},
		{"apart: no sharing", []int64{0, 3 * ms}, map[string]int64{"A": 2 * ms, "B": 5 * ms}},
	} {
		got := run(tc.starts...)
		for k, v := range tc.want {
			if got[k] != v {
				t.Errorf("%s: %s arrived at %v, want %v", tc.why, k, time.Duration(got[k]), time.Duration(v))
			}
		}
	}
	// No cap and no per-token cost: a pull costs its latency only.
	l := newLink(2*time.Millisecond, 0, 0, 1000)
	l.start(5, 100000, "x")
	if n := l.next(); n != 5+2*ms {
		t.Errorf("next %d, want %d", n, 5+2*ms)
	}
	if got := l.advance(5 + 2*ms); len(got) != 1 || l.inflight != 0 {
		t.Errorf("advance: %v, %d in flight", got, l.inflight)
	}
}
