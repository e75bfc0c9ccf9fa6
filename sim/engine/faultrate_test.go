package engine

import (
	"math"
	"net/http/httptest"
	"strconv"
	"testing"
)

// TestFaultRates: injected faults are drawn per request id from the seed,
// each rate within binomial bounds (4.5 standard deviations, deterministic
// for the seeds here) of its share: a request fails at FailRate; one that
// did not fail is cut at DisconnectRate, else errs mid-stream at
// StreamErrorRate, else stalls at StallRate.
func TestFaultRates(t *testing.T) {
	const n = 20000
	for _, tc := range []struct {
		why                                string
		seed                               int64
		fail, disconnect, streamErr, stall float64
	}{
		{"Every kind at once, seed 1: each later kind draws only among the requests the earlier ones spared.", 1, 0.1, 0.05, 0.02, 0.2},
		{"Another seed draws other requests at the same rates.", 7, 0.1, 0.05, 0.02, 0.2},
		{"A rare fault alone keeps its rate.", 3, 0.003, 0, 0, 0},
		{"Half the streams stall, none fail.", 5, 0, 0, 0, 0.5},
	} {
		t.Run(tc.why, func(t *testing.T) {
			o := DefaultOptions()
			o.Seed, o.FailRate, o.DisconnectRate, o.StreamErrorRate, o.StallRate, o.FailStatus = tc.seed, tc.fail, tc.disconnect, tc.streamErr, tc.stall, 429
			s, err := newServer(o)
			if err != nil {
				t.Fatal(err)
			}
			got := map[fault]int{}
			hr := httptest.NewRequest("POST", "/v1/completions", nil)
			for i := range n {
				f, st := s.pickFault(hr, "req-"+strconv.Itoa(i))
				if f == faultFail && st != 429 {
					t.Fatalf("a failure with status %d, want FailStatus 429", st)
				}
				if again, _ := s.pickFault(hr, "req-"+strconv.Itoa(i)); again != f {
					t.Fatalf("req-%d drew %d, then %d: want one draw per id", i, f, again)
				}
				got[f]++
			}
			spared := 1 - tc.fail
			for _, w := range []struct {
				name string
				f    fault
				p    float64
			}{
				{"fail", faultFail, tc.fail},
				{"disconnect", faultDisconnect, spared * tc.disconnect},
				{"stream error", faultStreamError, spared * (1 - tc.disconnect) * tc.streamErr},
				{"stall", faultStall, spared * (1 - tc.disconnect) * (1 - tc.streamErr) * tc.stall},
			} {
				mean, sd := n*w.p, math.Sqrt(n*w.p*(1-w.p))
				if k := float64(got[w.f]); math.Abs(k-mean) > 4.5*sd {
					t.Errorf("%s: %v of %d, want %.0f ± %.0f", w.name, k, n, mean, 4.5*sd)
				}
			}
		})
	}
}

// TestFaultSeedsDiffer: two seeds pick different requests for the same
// rate, so a rerun with another seed is not the same experiment.
func TestFaultSeedsDiffer(t *testing.T) {
	picked := func(seed int64) map[string]bool {
		o := DefaultOptions()
		o.Seed, o.FailRate = seed, 0.2
		s, err := newServer(o)
		if err != nil {
			t.Fatal(err)
		}
		hr := httptest.NewRequest("POST", "/v1/completions", nil)
		m := map[string]bool{}
		for i := range 1000 {
			id := "req-" + strconv.Itoa(i)
			if f, _ := s.pickFault(hr, id); f == faultFail {
				m[id] = true
			}
		}
		return m
	}
	a, b := picked(1), picked(2)
	both := 0
	for id := range a {
		if b[id] {
			both++
		}
	}
	// Independent draws share about 0.2 × 0.2 of the ids (40 of 1000).
	if both > 80 {
		t.Errorf("seeds 1 and 2 both failed %d of %d and %d requests: want independent draws", both, len(a), len(b))
	}
}

// TestFaultHeader: the fault header forces a fault whatever the rates,
// and an unknown value falls back to the rates.
func TestFaultHeader(t *testing.T) {
	o := DefaultOptions()
	o.FailRate, o.FailStatus = 1, 503
	s, err := newServer(o)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		why, header string
		want        fault
		status      int
	}{
		{"A status forces a failure with that status, not FailStatus.", "429", faultFail, 429},
		{"500 too.", "500", faultFail, 500},
		{"disconnect cuts the stream instead of the configured failure.", "disconnect", faultDisconnect, 0},
		{"stream-error ends the stream with an error event.", "stream-error", faultStreamError, 0},
		{"stall pauses the stream.", "stall", faultStall, 0},
		{"An unknown value leaves the rates to decide (FailRate 1).", "explode", faultFail, 503},
	} {
		hr := httptest.NewRequest("POST", "/v1/completions", nil)
		hr.Header.Set(FaultHeader, tc.header)
		if f, st := s.pickFault(hr, "x"); f != tc.want || st != tc.status {
			t.Errorf("%s %s: %d %d, want %d %d", tc.why, tc.header, f, st, tc.want, tc.status)
		}
	}
}
