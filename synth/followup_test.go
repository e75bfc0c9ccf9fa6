package synth

import (
	"context"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// threeTurns is n sessions of category "c": turn 1 has 100 input and 20
// output tokens, turn 2 resends them with 30 new tokens (150 in, 40 out),
// turn 3 is a fresh 50-token prompt. Each turn finishes 1 s after it
// arrives and the next arrives 2 s after that; set says which columns the
// trace carries.
func threeTurns(n int, finish, think bool) []traces.Record {
	var recs []traces.Record
	for s := range n {
		t := int64(s) * int64(time.Minute)
		for turn, lens := range [][2]int32{{100, 20}, {150, 40}, {50, 10}} {
			r := traces.NewRecord()
			r.ArrivalNs, r.Session, r.Turn, r.Category = t, int64(s+1), int32(turn+1), "c"
			r.InputTokens, r.OutputTokens, r.Model, r.API = lens[0], lens[1], "m", traces.APIChat
			if finish {
				r.FinishNs = t + int64(time.Second)
			}
			if think && turn > 0 {
				r.ThinkNs = int64(500 * time.Millisecond)
			}
			recs = append(recs, r)
			t += 3 * int64(time.Second)
		}
	}
	for i := range recs {
		recs[i].Seq = int64(i)
	}
	return recs
}

func TestFitFollowUps(t *testing.T) {
	cases := []struct {
		why           string
		finish, think bool
		from          string
		thinkS        float64 // every think time
		response      bool    // ResponseS is fitted
	}{
		{"without finish_ns the think time is the arrival gap, and the model says so", false, false, ThinkFromArrivalGap, 3, false},
		{"with finish_ns the think time is next arrival − previous finish", true, false, ThinkFromFinish, 2, true},
		{"an explicit think_ns wins over finish_ns", true, true, ThinkFromRecorded, 0.5, true},
	}
	for _, c := range cases {
		m, err := Fit(context.Background(), threeTurns(10, c.finish, c.think), FitOptions{Meta: traces.NewMeta("test")})
		if err != nil {
			t.Fatal(err)
		}
		if m.Version != 2 {
			t.Errorf("%s: version %d, want 2 (follow-up turns)", c.why, m.Version)
		}
		s := m.Classes[0].Sessions
		if s.FollowUps != 20 || s.ThinkFrom != c.from {
			t.Errorf("%s: %d follow-ups, think from %q; want 20 from %q", c.why, s.FollowUps, s.ThinkFrom, c.from)
		}
		if (s.ResponseS != nil) != c.response || (c.response && s.ResponseS.Mean() != 1) {
			t.Errorf("%s: response_s %+v, want fitted=%v with mean 1 s", c.why, s.ResponseS, c.response)
		}
		if n := len(s.Turns.Bins); n == 0 || s.Turns.Bins[0].Lo != 3 || s.Turns.Bins[n-1].Hi != 3 {
			t.Errorf("%s: turns per session %+v, want all 3", c.why, s.Turns.Bins)
		}
		fu := m.Classes[0].Groups[0].FollowUp
		if fu == nil {
			t.Fatalf("%s: no follow-up model for category c", c.why)
		}
		one := func(what string, h Hist, v, n float64) {
			t.Helper()
			if len(h.Bins) != 1 || h.Bins[0].Lo != v || h.Bins[0].Hi != v || h.Bins[0].Count != n {
				t.Errorf("%s: %s %+v, want %g values of %g", c.why, what, h.Bins, n, v)
			}
		}
		if fu.Turns != 20 || fu.FreshPrompts != 10 {
			t.Errorf("%s: %d follow-ups with %d fresh prompts, want 20 with 10", c.why, fu.Turns, fu.FreshPrompts)
		}
		one("new input tokens", fu.NewInputTokens, 30, 10)
		one("first-turn input", fu.FirstInputTokens, 100, 10)
		one("think time", fu.ThinkS, c.thinkS, 20)
		if fu.OutputTokens.Total() != 20 || fu.OutputTokens.Bins[0].Lo != 10 {
			t.Errorf("%s: follow-up outputs %+v, want the 20 outputs of turns 2 and 3", c.why, fu.OutputTokens.Bins)
		}
	}
}
