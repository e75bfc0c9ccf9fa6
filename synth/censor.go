package synth

import (
	"cmp"
	"math"
	"slices"
	"sort"
)

// Turns per session, censored by the trace's end. A session whose last row
// came shortly before the fitted trace ended may have gone on after it:
// its turn count is a lower bound. Fitted as counted, the turns per
// session are short by the sessions the end cut, and Generate, which
// cuts its own sessions at the end of the trace it writes, cuts them
// twice (a minute of the demo's conversations: 3.0 turns per session
// real, 2.7 generated). So the turns are fitted as a survival
// distribution: a session ended at its last row with the probability that
// it stopped rather than had its next row fall after the end, from the
// inter-turn gaps (the product-limit estimator with censoring weights,
// iterated to a fixed point), and the counting histogram's bins are
// reweighted to that distribution (the bins, and so how many sessions
// each holds, are the counting ones).

// turnObs is one session for the turn distribution: its rows and the time
// from its last row to the end of the fitted trace.
type turnObs struct {
	turns int64
	toEnd int64 // ns
}

// gapSurvival is the share of inter-turn gaps longer than a duration, from
// the runs of the gaps in seconds.
type gapSurvival struct {
	at    []float64 // gap values, increasing
	above []float64 // share of gaps above each
}

func newGapSurvival(runs []run) gapSurvival {
	total := float64(countOf(runs))
	var s gapSurvival
	var below float64
	for _, r := range runs {
		below += float64(r.n)
		s.at = append(s.at, r.v)
		s.above = append(s.above, (total-below)/total)
	}
	return s
}

// of is the share of gaps longer than ns nanoseconds.
func (s gapSurvival) of(ns int64) float64 {
	x := float64(ns) / 1e9
	i := sort.SearchFloat64s(s.at, x) // first gap ≥ x
	if i < len(s.at) && s.at[i] == x {
		return s.above[i]
	}
	if i == 0 {
		return 1
	}
	return s.above[i-1]
}

// censoredTurns reweights h, the histogram of the sessions' turns as
// counted, to the distribution of turns corrected for the end of the
// trace (see above). h is returned as it is when no session could have
// gone on past the end.
func censoredTurns(h Hist, obs []turnObs, surv gapSurvival) Hist {
	if len(obs) == 0 || len(surv.at) == 0 {
		return h
	}
	obs = slices.Clone(obs)
	slices.SortFunc(obs, func(a, b turnObs) int {
		return cmp.Or(cmp.Compare(a.turns, b.turns), cmp.Compare(a.toEnd, b.toEnd))
	})
	cut := make([]float64, len(obs)) // the chance the next row fell after the end
	any := false
	for i, o := range obs {
		cut[i] = surv.of(o.toEnd)
		any = any || cut[i] > 0
	}
	if !any {
		return h
	}
	p := turnDistribution(obs, cut)
	n := float64(len(obs))
	out := Hist{Integer: h.Integer, Bins: make([]Bin, 0, len(h.Bins))}
	for _, b := range h.Bins {
		var mass float64
		for k, v := range p {
			if float64(k) >= b.Lo && float64(k) <= b.Hi {
				mass += v
			}
		}
		nb := Bin{Lo: b.Lo, Hi: b.Hi, Count: round9(n * mass)}
		if b.ModeCount > 0 {
			nb.Mode, nb.ModeCount = b.Mode, min(round9(n*p[int64(b.Mode)]), nb.Count)
		}
		out.Bins = append(out.Bins, nb)
	}
	return out
}

// turnDistribution is the product-limit distribution of turns per session
// (obs sorted by turns), where a session's end at its last row is an event
// with weight w = q / (q + (1 − q)·cut) (q: the hazard of stopping at its
// turn count; cut: the chance its next row fell after the trace's end),
// iterated until the hazards settle. The mass past the longest session
// stays on it.
func turnDistribution(obs []turnObs, cut []float64) map[int64]float64 {
	w := make([]float64, len(obs))
	for i := range w {
		w[i] = 1
	}
	q := map[int64]float64{}
	for range 100 {
		// Hazard at k: events at k over the sessions that reached k.
		clear(q)
		atRisk := len(obs)
		for i := 0; i < len(obs); {
			k, ev, j := obs[i].turns, 0.0, i
			for ; j < len(obs) && obs[j].turns == k; j++ {
				ev += w[j]
			}
			q[k] = ev / float64(atRisk)
			atRisk -= j - i
			i = j
		}
		moved := 0.0
		for i, o := range obs {
			h := q[o.turns]
			nw := 0.0
			if h > 0 {
				nw = h / (h + (1-h)*cut[i])
			}
			moved = max(moved, math.Abs(nw-w[i]))
			w[i] = nw
		}
		if moved < 1e-12 {
			break
		}
	}
	p := map[int64]float64{}
	left := 1.0
	var last int64
	for i := 0; i < len(obs); {
		k := obs[i].turns
		for i < len(obs) && obs[i].turns == k {
			i++
		}
		p[k] = left * q[k]
		left -= p[k]
		last = k
	}
	p[last] += left
	return p
}

// round9 rounds x to 9 decimals: a count reweighted from whole sessions
// reads as one, not as 52.999999999999936.
func round9(x float64) float64 { return math.Round(x*1e9) / 1e9 }
