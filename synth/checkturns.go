package synth

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/tokentrace/tokentrace/traces"
	"gonum.org/v1/gonum/stat"
)

// Context growth and think time in fidelity checks: for traces with
// follow-up turns, Check compares the input length by turn index (how
// context grows across a session's turns) and the think time before
// follow-ups.

// Defaults of the follow-up checks (see Thresholds).
const (
	DefaultContextGrowthError = 0.25
	DefaultKSThink            = 0.10
)

// Turn indexes compared: 1 to maxTurnIndex, each with at least
// minTurnRows rows in both traces.
const (
	maxTurnIndex = 8
	minTurnRows  = 20
)

// TurnInput compares the input lengths of one turn index.
type TurnInput struct {
	Turn        int     `json:"turn"`
	RealRows    int     `json:"real_rows"`
	SynthRows   int     `json:"synth_rows"`
	RealMedian  float64 `json:"real_median"`
	SynthMedian float64 `json:"synth_median"`
	RealP90     float64 `json:"real_p90"`
	SynthP90    float64 `json:"synth_p90"`
}

// turnStats is what Check reads of a trace's sessions: input lengths by
// turn index (a session's n-th row in arrival order) and the think times
// before follow-ups (think_ns, else arrival − the previous row's finish_ns,
// else the arrival gap: as Fit measures them), sorted.
type turnStats struct {
	input     [][]float64 // by turn index − 1, up to maxTurnIndex
	think     []float64   // seconds
	thinkDeff float64     // the design effect of think times by session
	// gaps are the seconds between a session's consecutive arrivals,
	// sorted, and gapDeff their design effect by session.
	gaps    []float64
	gapDeff float64
}

// turnAcc reads rows in arrival order and keeps, per open session, its
// last row's arrival and finish: the input length by turn index and the
// think time before each follow-up.
type turnAcc struct {
	st        turnStats
	open      map[int64]turnPrev
	thinkUnit []int32 // the unit of each think time
	gapUnit   []int32 // the unit of each gap within a session
	units     int32
}

type turnPrev struct {
	n int
	turnRow
	// recent are the session's last rows, when rows name their parents
	// (parent_seq): a row's think time runs from its parent's finish, as
	// Fit measures it (at most maxBackRows; the last row if none names).
	recent []turnRow
}

type turnRow struct{ seq, arrival, finsh int64 }

func (a *turnAcc) add(r *traces.Record, unit int32) {
	a.units = max(a.units, unit+1)
	if r.Session == 0 {
		return
	}
	if a.open == nil {
		a.open = map[int64]turnPrev{}
	}
	st := &a.st
	p, ok := a.open[r.Session]
	if ok {
		from := p.turnRow
		if r.ParentSeq >= 0 {
			if i := slices.IndexFunc(p.recent, func(x turnRow) bool { return x.seq == r.ParentSeq }); i >= 0 {
				from = p.recent[i]
			}
		}
		var think int64
		switch {
		case r.ThinkNs >= 0:
			think = r.ThinkNs
		case from.finsh >= from.arrival:
			think = r.ArrivalNs - from.finsh
		default:
			think = r.ArrivalNs - from.arrival
		}
		st.think = append(st.think, float64(max(think, 0))/1e9)
		a.thinkUnit = append(a.thinkUnit, unit)
		st.gaps = append(st.gaps, float64(r.ArrivalNs-p.arrival)/1e9)
		a.gapUnit = append(a.gapUnit, unit)
	}
	p.n++
	p.turnRow = turnRow{r.Seq, r.ArrivalNs, r.FinishNs}
	if r.ParentSeq >= 0 || p.recent != nil {
		if len(p.recent) == maxBackRows {
			p.recent = slices.Delete(p.recent, 0, 1)
		}
		p.recent = append(p.recent, p.turnRow)
	}
	a.open[r.Session] = p
	if p.n <= maxTurnIndex {
		for len(st.input) < p.n {
			st.input = append(st.input, nil)
		}
		st.input[p.n-1] = append(st.input[p.n-1], float64(r.InputTokens))
	}
}

func (a *turnAcc) finish() turnStats {
	for _, in := range a.st.input {
		slices.Sort(in)
	}
	a.st.thinkDeff = designEffect(a.st.think, a.thinkUnit, a.units)
	a.st.gapDeff = designEffect(a.st.gaps, a.gapUnit, a.units)
	a.thinkUnit, a.gapUnit = nil, nil
	slices.Sort(a.st.think)
	slices.Sort(a.st.gaps)
	a.open = nil
	return a.st
}

// gapPair is what ks.interarrival and cv compare (Report.SessionGaps):
// the sorted gaps of each trace in seconds, their design effects, their
// CVs and the part the checks report ("" = consecutive arrivals).
type gapPair struct {
	real, synth  []float64
	deffR, deffS float64
	cvR, cvS     float64
	at           string
}

// arrivalGaps picks the gaps ks.interarrival and cv compare: between a
// session's consecutive turns when every unit of the real trace starts at
// one instant and both traces have minTurnRows such gaps (it sets
// SessionGaps), else between consecutive arrivals.
func (rep *Report) arrivalGaps(rs, ss *traceStats) gapPair {
	if rs.units.startsTogether() && len(rs.turns.gaps) >= minTurnRows && len(ss.turns.gaps) >= minTurnRows {
		rep.SessionGaps = fmt.Sprintf("the real trace's %d sessions all start at %.0f s: its arrival process is each session's own timing, so the gaps compared are those between a session's consecutive turns", rs.units.n, float64(rs.units.startLo)/1e9)
		return gapPair{real: rs.turns.gaps, synth: ss.turns.gaps, deffR: rs.turns.gapDeff, deffS: ss.turns.gapDeff,
			cvR: cvOf(rs.turns.gaps), cvS: cvOf(ss.turns.gaps), at: "gaps within sessions"}
	}
	return gapPair{real: rs.gaps, synth: ss.gaps, deffR: 1, deffS: 1, cvR: rs.sum.CV, cvS: ss.sum.CV}
}

// cvOf is the coefficient of variation of x (0 with fewer than two values
// or a zero mean).
func cvOf(x []float64) float64 {
	if len(x) < 2 {
		return 0
	}
	m, sd := stat.MeanStdDev(x, nil)
	if m <= 0 {
		return 0
	}
	return sd / m
}

// nearestRank is the q-quantile of sorted values (nearest rank).
func nearestRank(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// compareTurns fills the report's follow-up figures and returns whether
// there were follow-ups to compare in both traces.
func (rep *Report) compareTurns(real, synth turnStats) (growth, think bool) {
	for t := 1; t <= min(len(real.input), len(synth.input)); t++ {
		r, s := real.input[t-1], synth.input[t-1]
		if len(r) < minTurnRows || len(s) < minTurnRows {
			break
		}
		ti := TurnInput{Turn: t, RealRows: len(r), SynthRows: len(s),
			RealMedian: nearestRank(r, 0.5), SynthMedian: nearestRank(s, 0.5),
			RealP90: nearestRank(r, 0.9), SynthP90: nearestRank(s, 0.9)}
		rep.InputByTurn = append(rep.InputByTurn, ti)
		rep.ContextGrowth = max(rep.ContextGrowth, relErr(ti.SynthMedian, ti.RealMedian), relErr(ti.SynthP90, ti.RealP90))
	}
	rep.Real.FollowUps, rep.Synth.FollowUps = int64(len(real.think)), int64(len(synth.think))
	if len(real.think) > 0 {
		rep.Real.MedianThinkS = nearestRank(real.think, 0.5)
	}
	if len(synth.think) > 0 {
		rep.Synth.MedianThinkS = nearestRank(synth.think, 0.5)
	}
	think = len(real.think) >= minTurnRows && len(synth.think) >= minTurnRows
	if think {
		rep.KS.Think = ks(real.think, synth.think)
		rep.Wasserstein.ThinkS = wasserstein1(real.think, synth.think)
	}
	return len(rep.InputByTurn) >= 2, think
}

// writeTurns adds the input-by-turn table to a text report.
func (rep *Report) writeTurns(b *strings.Builder) {
	if len(rep.InputByTurn) == 0 && rep.Real.FollowUps == 0 && rep.Synth.FollowUps == 0 {
		return
	}
	fmt.Fprintf(b, "%-28s %14d %14d\n", "follow_ups", rep.Real.FollowUps, rep.Synth.FollowUps)
	fmt.Fprintf(b, "%-28s %14.3f %14.3f\n", "median_think_s", rep.Real.MedianThinkS, rep.Synth.MedianThinkS)
	if len(rep.InputByTurn) == 0 {
		return
	}
	fmt.Fprintf(b, "\n%-6s %10s %10s %12s %12s %12s %12s\n", "turn", "real_rows", "synth_rows", "real_median", "synth_median", "real_p90", "synth_p90")
	for _, t := range rep.InputByTurn {
		fmt.Fprintf(b, "%-6d %10d %10d %12.0f %12.0f %12.0f %12.0f\n", t.Turn, t.RealRows, t.SynthRows, t.RealMedian, t.SynthMedian, t.RealP90, t.SynthP90)
	}
}

// growthParts are context_growth's figures, the median and p90 input of
// each of the first n turn indexes, with the standard deviation of their
// relative differences by chance (a session has one row per turn index:
// its rows are independent).
func growthParts(real, synth turnStats, n int) []part {
	var parts []part
	for t := 1; t <= n; t++ {
		r, s := real.input[t-1], synth.input[t-1]
		for _, q := range []struct {
			q    float64
			name string
		}{{0.5, "median"}, {0.9, "p90"}} {
			rv, sv := nearestRank(r, q.q), nearestRank(s, q.q)
			if rv == 0 {
				continue
			}
			sd := math.Hypot(quantileSD(r, q.q), quantileSD(s, q.q)) / math.Abs(rv)
			parts = append(parts, part{value: relErr(sv, rv), sd: sd, at: fmt.Sprintf("turn %d %s", t, q.name)})
		}
	}
	return parts
}

// writeReuse adds the prefix reuse by turn index and by category to a
// text report.
func (rep *Report) writeReuse(b *strings.Builder) {
	for _, t := range []struct {
		name   string
		groups []GroupReuse
	}{{"reuse by turn", rep.ReuseByTurn}, {"reuse by category", rep.ReuseByCategory}} {
		if len(t.groups) == 0 {
			continue
		}
		fmt.Fprintf(b, "\n%-20s %10s %10s %10s %10s\n", t.name, "real_rows", "synth_rows", "real", "synth")
		for _, g := range t.groups {
			fmt.Fprintf(b, "%-20s %10d %10d %10.3f %10.3f\n", g.Name, g.RealRows, g.SynthRows, g.Real, g.Synth)
		}
	}
}
