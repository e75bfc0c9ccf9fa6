package formats

import (
	"sort"

	"github.com/tokentrace/tokentrace/traces"
)

// inference-perf replays a span graph by waits: a call goes wait_ms after
// the last of its predecessors finishes, and a root at once; the span times
// serve only to infer that graph (otelGraph) and the waits. Its temporal
// rule (the latest-starting call that ended before a call started is a
// predecessor) draws false edges wherever agents ran side by side, so the
// export lays the spans out anew: every wait kept (start − the latest
// dependency's end, to the millisecond), roots at 0, and each call kept
// running until every call that must not see it ended has started. Span
// durations are what gives: inference-perf never replays them.

const otelLayoutStepNs = 1_000_000 // the builder's resolution

// otelLayout returns start and end times (ns from the session's start) for
// session g under which inference-perf infers the trace's dependencies
// (deps, transitively reduced) and the trace's waits, and the order the
// spans must be named in (ties in start time go by span id). ok is false
// when the greedy layout finds none; the caller then keeps the recorded
// times.
func otelLayout(g []traces.Record, deps [][]int) (start, end []int64, order []int, ok bool) {
	n := len(g)
	idx := seqIndex(g)
	wait := make([]int64, n)
	for i := range g {
		w := thinkOf(g, idx, i)
		if w < 0 {
			for _, d := range deps[i] {
				w = max(w, g[i].ArrivalNs-g[d].ArrivalNs)
			}
		}
		wait[i] = (max(w, 0) + otelLayoutStepNs/2) / otelLayoutStepNs * otelLayoutStepNs
	}
	start, end = make([]int64, n), make([]int64, n)
	pos := make([]int, n) // place in start order, -1 before starting
	closed := make([]bool, n)
	for i := range pos {
		pos[i] = -1
	}
	now := int64(0)
	begin := func(i int, t int64) {
		start[i], now = t, t
		pos[i] = len(order)
		order = append(order, i)
	}
	for i := range g {
		if len(deps[i]) == 0 {
			begin(i, 0)
		}
	}
	// latest is a call's dependency started last.
	latest := func(i int) int {
		l := deps[i][0]
		for _, d := range deps[i] {
			if pos[d] > pos[l] {
				l = d
			}
		}
		return l
	}
	for len(order) < n {
		pin, flex := -1, -1
		var pinAt int64
		for i := range g {
			if pos[i] >= 0 || !otelDepsStarted(deps[i], pos) {
				continue
			}
			if otelDepsClosed(deps[i], closed) {
				t := int64(0)
				for _, d := range deps[i] {
					t = max(t, end[d])
				}
				if t += wait[i]; pin < 0 || t < pinAt || (t == pinAt && g[i].ArrivalNs < g[pin].ArrivalNs) {
					pin, pinAt = i, t
				}
			} else if flex < 0 || pos[latest(i)] < pos[latest(flex)] || (pos[latest(i)] == pos[latest(flex)] && g[i].ArrivalNs < g[flex].ArrivalNs) {
				flex = i
			}
		}
		if pin < 0 && flex < 0 {
			return nil, nil, nil, false // a cycle
		}
		closeAt := now + otelLayoutStepNs
		if flex >= 0 && (pin < 0 || closeAt+wait[flex] < pinAt) && !otelBlocked(g, deps, flex, pos, closed, latest) {
			t := int64(0)
			for _, d := range deps[flex] {
				if !closed[d] {
					closed[d], end[d] = true, closeAt
				}
				t = max(t, end[d])
			}
			begin(flex, t+wait[flex])
			continue
		}
		if pin < 0 {
			return nil, nil, nil, false
		}
		begin(pin, pinAt)
	}
	for i := range g {
		if !closed[i] {
			end[i] = now + otelLayoutStepNs
		}
	}
	return start, end, order, true
}

func otelDepsStarted(deps []int, pos []int) bool {
	for _, d := range deps {
		if pos[d] < 0 {
			return false
		}
	}
	return true
}

func otelDepsClosed(deps []int, closed []bool) bool {
	for _, d := range deps {
		if !closed[d] {
			return false
		}
	}
	return true
}

// otelBlocked says whether ending flex's open dependencies now would let a
// waiting call (its dependencies started and ended) see one of them as the
// latest call to have ended before it: one that started after its own
// latest dependency.
func otelBlocked(g []traces.Record, deps [][]int, flex int, pos []int, closed []bool, latest func(int) int) bool {
	for i := range g {
		if i == flex || pos[i] >= 0 || !otelDepsStarted(deps[i], pos) || !otelDepsClosed(deps[i], closed) {
			continue
		}
		for _, q := range deps[flex] {
			if !closed[q] && pos[q] > pos[latest(i)] {
				return true
			}
		}
	}
	return false
}

// otelSpanOrder sorts call indexes as inference-perf does: by start, then
// span id (names must be in that order for ties).
func otelSpanOrder(start []int64, name func(int) string) []int {
	order := make([]int, len(start))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		if start[order[a]] != start[order[b]] {
			return start[order[a]] < start[order[b]]
		}
		return name(order[a]) < name(order[b])
	})
	return order
}
