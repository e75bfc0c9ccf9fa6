package episode

import (
	"strings"
	"testing"
	"time"
)

// TestFindSawtooth: a stall every 40 ms, 3 sends long, at 10k req/s is
// found as one episode per stall, 40 ms apart; sends late by no more than
// the threshold are not late.
func TestFindSawtooth(t *testing.T) {
	var sends []Send
	for i := range 10000 { // 1 s at 10k req/s
		at := time.Duration(i) * 100 * time.Microsecond
		late := 20 * time.Microsecond
		if i%400 < 3 {
			late = time.Millisecond
		}
		if i == 5 {
			late = 500 * time.Microsecond // at the threshold: not late
		}
		sends = append(sends, Send{Scheduled: at, Late: late})
	}
	// Out of order, as a results file may hold them.
	sends[0], sends[9999] = sends[9999], sends[0]
	s := Find(sends, 500*time.Microsecond, 5*time.Millisecond)
	if s.N != 10000 || s.Late != 75 || s.Episodes != 25 {
		t.Fatalf("%d sends %d late in %d episodes, want 10000, 75, 25", s.N, s.Late, s.Episodes)
	}
	if s.Apart != [3]time.Duration{40 * time.Millisecond, 40 * time.Millisecond, 40 * time.Millisecond} {
		t.Errorf("apart %v, want 40ms throughout", s.Apart)
	}
	if s.Worst != time.Millisecond {
		t.Errorf("worst %v, want 1ms", s.Worst)
	}
	if got := s.String(); !strings.HasPrefix(got, "episodes late>500µs 75 of 10000 (0.750%) in 25 episodes, apart p10 40ms") {
		t.Errorf("line %q", got)
	}
}

// TestFindNoneLate: no late send, no episode, nothing apart.
func TestFindNoneLate(t *testing.T) {
	s := Find([]Send{{0, 0}, {time.Millisecond, 100 * time.Microsecond}}, 500*time.Microsecond, 5*time.Millisecond)
	if s.Late != 0 || s.Episodes != 0 || s.Apart != [3]time.Duration{} {
		t.Errorf("%+v", s)
	}
	if got, want := s.String(), "episodes late>500µs 0 of 2 (0.000%) in 0 episodes, worst 100µs"; got != want {
		t.Errorf("line %q, want %q", got, want)
	}
}
