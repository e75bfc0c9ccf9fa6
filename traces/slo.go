package traces

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// SLO metric names, as ParseSLO takes them and as reports name them.
const (
	MetricTTFT = "ttft"
	MetricTPOT = "tpot"
	MetricE2E  = "e2e"
)

// SLO is a set of per-request service-level objectives; a zero field is not
// checked. A request is good when it succeeded and meets every given bound
// (see Met). analyze's goodput, replay/sweep's verdicts and replay's summary
// all judge with this one type.
type SLO struct {
	// TTFT bounds time to first token. Defaults to 0 (unchecked).
	TTFT time.Duration
	// TPOT bounds time per output token; single-token requests count as
	// TPOT 0, as in vLLM. Defaults to 0 (unchecked).
	TPOT time.Duration
	// E2E bounds end-to-end latency. Defaults to 0 (unchecked).
	E2E time.Duration
}

// IsZero reports whether no bound is set.
func (s SLO) IsZero() bool { return s.TTFT == 0 && s.TPOT == 0 && s.E2E == 0 }

// SLOBound is one bound of an SLO.
type SLOBound struct {
	// Metric is MetricTTFT, MetricTPOT or MetricE2E.
	Metric string
	Bound  time.Duration
}

// Bounds lists the set bounds in a fixed order: TTFT, TPOT, E2E.
func (s SLO) Bounds() []SLOBound {
	var b []SLOBound
	for _, m := range []SLOBound{{MetricTTFT, s.TTFT}, {MetricTPOT, s.TPOT}, {MetricE2E, s.E2E}} {
		if m.Bound > 0 {
			b = append(b, m)
		}
	}
	return b
}

// String renders the SLO in ParseSLO's syntax.
func (s SLO) String() string {
	var p []string
	for _, b := range s.Bounds() {
		p = append(p, b.Metric+"="+b.Bound.String())
	}
	return strings.Join(p, ",")
}

// Met reports whether l meets every set bound. A request without a TTFT or
// E2E fails those bounds; one without a TPOT (a single output token) passes
// the TPOT bound, as in vLLM. It does not look at the request's status:
// callers count only successful requests as good.
func (s SLO) Met(l Latencies) bool {
	if s.TTFT > 0 && (!l.HasTTFT || l.TTFT > float64(s.TTFT)) {
		return false
	}
	if s.E2E > 0 && (!l.HasE2E || l.E2E > float64(s.E2E)) {
		return false
	}
	if s.TPOT > 0 && l.HasTPOT && l.TPOT > float64(s.TPOT) {
		return false
	}
	return true
}

// sloJSON is the wire form: milliseconds under _ms names (0 = unchecked).
type sloJSON struct {
	TTFTMs float64 `json:"ttft_ms"`
	TPOTMs float64 `json:"tpot_ms"`
	E2EMs  float64 `json:"e2e_ms"`
}

// MarshalJSON writes the bounds in milliseconds, as their names say.
func (s SLO) MarshalJSON() ([]byte, error) {
	return json.Marshal(sloJSON{msOf(s.TTFT), msOf(s.TPOT), msOf(s.E2E)})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (s *SLO) UnmarshalJSON(b []byte) error {
	var j sloJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*s = SLO{durOfMs(j.TTFTMs), durOfMs(j.TPOTMs), durOfMs(j.E2EMs)}
	return nil
}

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func durOfMs(ms float64) time.Duration {
	return time.Duration(math.Round(ms * float64(time.Millisecond)))
}

// ParseSLO parses "ttft=500ms,tpot=50ms,e2e=10s" (any subset, Go
// durations). A bound written with "=" needs its unit: "ttft=500" is
// refused rather than guessed. vLLM's --goodput syntax "ttft:500" is read
// as vLLM reads it, in milliseconds.
func ParseSLO(s string) (SLO, error) {
	var slo SLO
	if strings.TrimSpace(s) == "" {
		return slo, nil
	}
	for _, part := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' }) {
		k, v, ok := strings.Cut(part, "=")
		vllm := false
		if !ok {
			k, v, ok = strings.Cut(part, ":")
			vllm = ok
		}
		if !ok {
			return SLO{}, fmt.Errorf("slo %q: want name=duration, e.g. ttft=500ms", part)
		}
		if _, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && !vllm {
			return SLO{}, fmt.Errorf("slo %q: %s has no unit: write it with one, e.g. %s=%sms or %s=%ss (vLLM's %s:%s is read in milliseconds)",
				part, strings.TrimSpace(v), strings.TrimSpace(k), strings.TrimSpace(v), strings.TrimSpace(k), strings.TrimSpace(v), strings.TrimSpace(k), strings.TrimSpace(v))
		}
		d, err := parseDurationMs(v)
		if err != nil || d <= 0 {
			return SLO{}, fmt.Errorf("slo %q: want a positive duration such as 500ms", part)
		}
		switch strings.ToLower(strings.TrimSpace(k)) {
		case MetricTTFT:
			slo.TTFT = d
		case MetricTPOT:
			slo.TPOT = d
		case MetricE2E, "e2el":
			slo.E2E = d
		default:
			return SLO{}, fmt.Errorf("slo %q: unknown metric %q (want ttft, tpot or e2e)", part, k)
		}
	}
	return slo, nil
}

func parseDurationMs(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		if math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) > float64(math.MaxInt64)/1e6 {
			return 0, fmt.Errorf("duration %q out of range", v)
		}
		return time.Duration(f * float64(time.Millisecond)), nil
	}
	return time.ParseDuration(v)
}

// Latencies are one request's latencies in nanoseconds (as float64, the unit
// analyze computes in), with whether each is defined. See Record.Latencies.
type Latencies struct {
	TTFT, TPOT, E2E          float64
	HasTTFT, HasTPOT, HasE2E bool
}

// Latencies returns the request's TTFT, TPOT and E2E (see their methods).
func (r *Record) Latencies() Latencies {
	var l Latencies
	if d, ok := r.TTFT(); ok {
		l.TTFT, l.HasTTFT = float64(d), true
	}
	if d, ok := r.TPOT(); ok {
		l.TPOT, l.HasTPOT = float64(d), true
	}
	if d, ok := r.E2E(); ok {
		l.E2E, l.HasE2E = float64(d), true
	}
	return l
}

// Get returns the named metric (MetricTTFT, MetricTPOT or MetricE2E).
func (l Latencies) Get(metric string) (float64, bool) {
	switch metric {
	case MetricTTFT:
		return l.TTFT, l.HasTTFT
	case MetricTPOT:
		return l.TPOT, l.HasTPOT
	case MetricE2E:
		return l.E2E, l.HasE2E
	}
	return 0, false
}
