package engine

import (
	"slices"

	"github.com/tokentrace/tokentrace/traces"
)

// The engine's own lateness in real time (Server.loop): a step waits on
// a timer for its modelled end, and on a busy machine ends later; it may
// also begin late (the engine goroutine woken late for new requests, or
// its own work between steps). Every request in the batch is delayed by
// it, so a simulator that falls behind serves slower than its model; it
// says so in /metrics (tokentrace_sim_step_lateness_seconds and
// tokentrace_sim_step_model_seconds_total), in Server.Lateness and in its
// truth's metadata.

// The simulator's own families in /metrics (not vLLM's): a histogram of
// each step's lateness, and the counter of the steps' modelled seconds.
const (
	StepLatenessFamily = "tokentrace_sim_step_lateness_seconds"
	StepModelFamily    = "tokentrace_sim_step_model_seconds_total"
)

// stepLateBuckets are the bounds of tokentrace_sim_step_lateness_seconds.
var stepLateBuckets = []float64{1e-05, 2e-05, 5e-05, 0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01,
	0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0}

// Lateness is an engine's (or a fleet's, Add) step lateness so far.
type Lateness struct {
	// Steps counts the steps run in real time; ModelNs is their
	// modelled time, LateNs the time they ran past it, MaxNs the most
	// one step did.
	Steps                  int64
	ModelNs, LateNs, MaxNs int64
	// counts are the steps per stepLateBuckets bucket (the last: +Inf).
	counts []uint64
}

// Add is l and o together (a fleet's replicas).
func (l Lateness) Add(o Lateness) Lateness {
	s := Lateness{Steps: l.Steps + o.Steps, ModelNs: l.ModelNs + o.ModelNs, LateNs: l.LateNs + o.LateNs, MaxNs: max(l.MaxNs, o.MaxNs)}
	s.counts = make([]uint64, len(stepLateBuckets)+1)
	for i := range s.counts {
		if i < len(l.counts) {
			s.counts[i] += l.counts[i]
		}
		if i < len(o.counts) {
			s.counts[i] += o.counts[i]
		}
	}
	return s
}

// quantileNs is the q-quantile of one step's lateness, interpolated in
// its bucket as Prometheus' histogram_quantile does (the last finite
// bound past it; never above MaxNs).
func (l Lateness) quantileNs(q float64) int64 {
	if l.Steps == 0 || len(l.counts) == 0 {
		return 0
	}
	rank := q * float64(l.Steps)
	var cum float64
	for i, c := range l.counts {
		if c == 0 {
			continue
		}
		if cum+float64(c) >= rank {
			if i == len(stepLateBuckets) {
				return l.MaxNs
			}
			lo := 0.0
			if i > 0 {
				lo = stepLateBuckets[i-1]
			}
			v := lo + (stepLateBuckets[i]-lo)*(rank-cum)/float64(c)
			return min(int64(v*1e9), l.MaxNs)
		}
		cum += float64(c)
	}
	return l.MaxNs
}

// Summary is l as results and truths record it.
func (l Lateness) Summary() traces.SimLateness {
	return traces.SimLateness{Steps: l.Steps, ModelS: float64(l.ModelNs) / 1e9, LateS: float64(l.LateNs) / 1e9,
		StepP99Ms: float64(l.quantileNs(0.99)) / 1e6, StepMaxMs: float64(l.MaxNs) / 1e6}
}

// stepLate records one real-time step of modelled length model that ran
// late past it.
func (s *stats) stepLate(model, late int64) {
	s.mu.Lock()
	s.stepLateness.observe(float64(late) / 1e9)
	s.stepModelNs += model
	s.stepLateNs += late
	s.stepLateMaxNs = max(s.stepLateMaxNs, late)
	s.mu.Unlock()
}

// lateness is the engine's Lateness (mu held).
func (s *stats) lateness() Lateness {
	h := s.stepLateness
	return Lateness{Steps: int64(h.count), ModelNs: s.stepModelNs, LateNs: s.stepLateNs, MaxNs: s.stepLateMaxNs,
		counts: slices.Clone(h.counts)}
}

// Lateness is how far the engine's steps have run behind wall-clock time
// so far (nothing in Virtual mode, whose clock waits for the steps).
func (m Meter) Lateness() Lateness {
	m.st.mu.Lock()
	defer m.st.mu.Unlock()
	return m.st.lateness()
}
