package traces_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

func TestParseSLO(t *testing.T) {
	tests := []struct {
		in      string
		want    traces.SLO
		wantErr bool
	}{
		// Go durations, any subset, any order.
		{"ttft=500ms,tpot=50ms,e2e=10s", traces.SLO{TTFT: 500e6, TPOT: 50e6, E2E: 10e9}, false},
		// vLLM's syntax: name:milliseconds, space separated, e2el.
		{"ttft:300 e2el:2000", traces.SLO{TTFT: 300e6, E2E: 2e9}, false},
		// ITL is not an SLO metric.
		{"itl=5ms", traces.SLO{}, true},
		// Bounds are positive.
		{"ttft=-5ms", traces.SLO{}, true},
		// A bare number that would overflow a duration is refused.
		{"ttft:1e300", traces.SLO{}, true},
		// A bound written with "=" needs its unit: 500 what? (It was
		// read as milliseconds, silently.)
		{"ttft=500", traces.SLO{}, true},
		{"tpot=50ms,e2e=10", traces.SLO{}, true},
		// vLLM's syntax takes a unit too.
		{"ttft:1s", traces.SLO{TTFT: 1e9}, false},
		// Nothing is no SLO.
		{"", traces.SLO{}, false},
	}
	for _, tt := range tests {
		got, err := traces.ParseSLO(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseSLO(%q) = %+v, %v; want %+v, err %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func FuzzParseSLO(f *testing.F) {
	for _, s := range []string{"ttft=500ms", "ttft:300 e2el:2000", "tpot=0.5", "tpot:0.5", "e2e=1h,ttft=1ns"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		slo, err := traces.ParseSLO(s)
		if err != nil {
			return
		}
		if slo.TTFT < 0 || slo.TPOT < 0 || slo.E2E < 0 {
			t.Fatalf("ParseSLO(%q) accepted a negative bound: %+v", s, slo)
		}
		if back, err := traces.ParseSLO(slo.String()); err != nil || back != slo {
			t.Fatalf("ParseSLO(%q).String() = %q does not round-trip: %+v, %v", s, slo.String(), back, err)
		}
	})
}

// The JSON form is in milliseconds, as the key names say (it printed
// nanoseconds under _ms names once).
func TestSLOJSONMilliseconds(t *testing.T) {
	slo := traces.SLO{TTFT: 500 * time.Millisecond, TPOT: 1500 * time.Microsecond}
	b, err := json.Marshal(slo)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"ttft_ms":500,"tpot_ms":1.5,"e2e_ms":0}`; string(b) != want {
		t.Errorf("json.Marshal(%v) = %s, want %s", slo, b, want)
	}
	var back traces.SLO
	if err := json.Unmarshal(b, &back); err != nil || back != slo {
		t.Errorf("round trip = %+v, %v; want %+v", back, err, slo)
	}
}

func TestSLOMet(t *testing.T) {
	slo := traces.SLO{TTFT: 100, TPOT: 10, E2E: 1000}
	tests := []struct {
		name string
		l    traces.Latencies
		want bool
	}{
		{"every bound met", traces.Latencies{TTFT: 100, TPOT: 10, E2E: 1000, HasTTFT: true, HasTPOT: true, HasE2E: true}, true},
		{"TTFT over", traces.Latencies{TTFT: 101, TPOT: 10, E2E: 1000, HasTTFT: true, HasTPOT: true, HasE2E: true}, false},
		{"no TTFT fails the TTFT bound", traces.Latencies{E2E: 10, HasE2E: true}, false},
		{"no TPOT (one output token) passes the TPOT bound", traces.Latencies{TTFT: 1, E2E: 10, HasTTFT: true, HasE2E: true}, true},
		{"TPOT over", traces.Latencies{TTFT: 1, TPOT: 11, E2E: 10, HasTTFT: true, HasTPOT: true, HasE2E: true}, false},
		{"E2E over", traces.Latencies{TTFT: 1, E2E: 1001, HasTTFT: true, HasE2E: true}, false},
	}
	for _, tt := range tests {
		if got := slo.Met(tt.l); got != tt.want {
			t.Errorf("%s: Met(%+v) = %v, want %v", tt.name, tt.l, got, tt.want)
		}
	}
	if !(traces.SLO{}).Met(traces.Latencies{}) {
		t.Error("the zero SLO must be met by anything")
	}
}
