package traces

import (
	"encoding/json"
	"fmt"
)

// MetaSimLateness is the metadata key of a SimLateness (JSON): in a
// replay's results against the simulator (in process, or served and
// scraped) and in the simulator's truth.
const MetaSimLateness = "sim.lateness"

// MaxSimSlowdown is how much longer than their model a real-time
// simulator's steps may take, in all, before it counts as fallen behind:
// its latencies are then the machine's as much as the model's, as a
// replay's are when the client sends late.
const MaxSimSlowdown = 1.10

// SimLateness is how far a real-time simulator's engine steps ran behind
// wall-clock time over a run, over every replica. Each step waits on a
// timer for its modelled end; on a busy machine it ends later (timer
// slack, CPU taken by other processes, the engine's own work between
// steps), which delays every request in its batch and starts the next
// step late.
type SimLateness struct {
	// Steps counts the steps run.
	Steps int64 `json:"steps"`
	// ModelS is their modelled time; LateS the time they ran past it
	// (a step that began after the previous one's end or after its new
	// requests arrived, or ended after its modelled end), in seconds.
	ModelS float64 `json:"model_s"`
	LateS  float64 `json:"late_s"`
	// StepP99Ms and StepMaxMs are one step's lateness at the 99th
	// percentile (from a histogram: within its bucket) and at most.
	StepP99Ms float64 `json:"step_p99_ms"`
	StepMaxMs float64 `json:"step_max_ms"`
}

// Slowdown is the steps' real time against their model (1 = on time; 0
// without steps).
func (l SimLateness) Slowdown() float64 {
	if l.ModelS <= 0 {
		return 0
	}
	return (l.ModelS + l.LateS) / l.ModelS
}

// FellBehind says the steps took more than MaxSimSlowdown times their
// model.
func (l SimLateness) FellBehind() bool { return l.Steps > 0 && l.Slowdown() > MaxSimSlowdown }

// String says it in a sentence's words: "ran 1.84× slower than its model
// (its steps ran 0.81 s past their 0.96 s, 4.2 ms late at p99, 31 ms at
// most, over 2,345 steps)".
func (l SimLateness) String() string {
	return fmt.Sprintf("ran %.2f× slower than its model (its steps ran %.2f s past their modelled %.2f s; one step %.2f ms late at p99, %.2f ms at most, over %d steps)",
		l.Slowdown(), l.LateS, l.ModelS, l.StepP99Ms, l.StepMaxMs, l.Steps)
}

// Set records l in m under MetaSimLateness.
func (l SimLateness) Set(m *Meta) {
	b, _ := json.Marshal(l)
	m.Set(MetaSimLateness, string(b))
}

// SimLatenessOf reads m's MetaSimLateness; false when m has none (or
// an unreadable one).
func SimLatenessOf(m Meta) (SimLateness, bool) {
	raw := m.Get(MetaSimLateness)
	if raw == "" {
		return SimLateness{}, false
	}
	var l SimLateness
	if json.Unmarshal([]byte(raw), &l) != nil {
		return SimLateness{}, false
	}
	return l, true
}
