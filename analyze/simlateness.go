package analyze

import (
	"fmt"

	"github.com/tokentrace/tokentrace/traces"
)

// A replay against the simulator records how far the simulator's engine
// steps ran behind wall-clock time (traces.MetaSimLateness). One that fell
// behind served slower than its model, so its latencies are the
// machine's as much as the model's: the report says so before anything
// else, as it names a late client in the attribution.

// simLateness is the slowest simulator lateness the sources recorded (nil
// when none did).
func simLateness(sources []Source) *traces.SimLateness {
	var worst *traces.SimLateness
	for _, s := range sources {
		if l, ok := traces.SimLatenessOf(s.Meta); ok && (worst == nil || l.Slowdown() > worst.Slowdown()) {
			worst = &l
		}
	}
	return worst
}

// simLatenessSentence is the diagnosis' warning for a simulator that fell
// behind ("" when it kept up, or the run did not record it).
func (rep *Report) simLatenessSentence() string {
	l := rep.SimLateness
	if l == nil || !l.FellBehind() {
		return ""
	}
	return fmt.Sprintf("The simulator this run went against fell behind: it %s, over the %.2f× it may, so these latencies are the machine's as much as the simulator's model; rerun it on a less loaded machine or at a lower replay speed before trusting them.",
		l, traces.MaxSimSlowdown)
}
