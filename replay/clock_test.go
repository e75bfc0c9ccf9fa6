package replay

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// skewed serves h with a Date header from a clock skew ahead of ours.
func skewed(skew time.Duration, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Date", time.Now().Add(skew).UTC().Format(http.TimeFormat))
		h.ServeHTTP(w, r)
	})
}

// TestProbeClockBracketsSkew is a table of target clocks skewed by a known
// amount: the bracket from the Date headers must hold the skew, and the
// bisection must narrow it well below the header's 1 s resolution. (The
// width depends on how punctually the probes go out; the bound asserted is
// loose, the containment exact.)
func TestProbeClockBracketsSkew(t *testing.T) {
	tests := []struct {
		name string
		skew time.Duration
	}{
		{"a target 2.345 s ahead", 2345 * time.Millisecond},
		{"a target 0.7 s behind", -700 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(skewed(tc.skew, http.NotFoundHandler()))
			defer srv.Close()
			c, ok := probeClock(context.Background(), srv.Client(), srv.URL, 6, time.Now().Add(10*time.Second))
			if !ok || c.Probes != 6 {
				t.Fatalf("probe: ok %v, %d probes", ok, c.Probes)
			}
			if d := (c.Offset - tc.skew).Abs(); d > c.Error {
				t.Errorf("offset %v ± %v does not hold the skew %v", c.Offset, c.Error, tc.skew)
			}
			if c.Error > 250*time.Millisecond {
				t.Errorf("offset %v ± %v: six probes should narrow the 1 s Date resolution", c.Offset, c.Error)
			}
			t.Logf("skew %v: measured %v ± %v", tc.skew, c.Offset, c.Error)
		})
	}
}

// TestReplayRecordsClockAndStartError: a replay with StartAt against a
// target whose clock is 1.5 s ahead records the offset (bracketing the
// skew) and its start error in the results metadata; without StartAt it
// records neither.
func TestReplayRecordsClockAndStartError(t *testing.T) {
	const skew = 1500 * time.Millisecond
	f := &fake{}
	f.srv = httptest.NewServer(skewed(skew, f))
	defer f.Close()
	o := f.options()
	o.StartAt = time.Now().Add(2500 * time.Millisecond)
	res := mustRun(t, testTrace(2, 0, 4, 2), traces.NewMeta("t"), o)
	m := res.Meta
	off, err1 := strconv.ParseInt(m.Get(MetaClockOffset), 10, 64)
	bound, err2 := strconv.ParseInt(m.Get(MetaClockOffsetError), 10, 64)
	start, err3 := strconv.ParseInt(m.Get(MetaStartError), 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || m.Get(MetaClockMethod) != ClockMethodHTTPDate {
		t.Fatalf("metadata %v", m.Extra)
	}
	if d := (time.Duration(off) - skew).Abs(); d > time.Duration(bound) {
		t.Errorf("clock offset %v ± %v does not hold the skew %v", time.Duration(off), time.Duration(bound), skew)
	}
	if start < 0 || time.Duration(start) != res.Summary.StartError {
		t.Errorf("start error %v (summary %v): the first request cannot go before it is due", time.Duration(start), res.Summary.StartError)
	}
	o.StartAt = time.Time{}
	res = mustRun(t, testTrace(2, 0, 4, 2), traces.NewMeta("t"), o)
	if res.Meta.Get(MetaClockOffset) != "" || res.Meta.Get(MetaStartError) != "" {
		t.Errorf("without StartAt: metadata %v", res.Meta.Extra)
	}
}
