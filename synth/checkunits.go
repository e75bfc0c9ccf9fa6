package synth

import (
	"math"
	"slices"

	"github.com/tokentrace/tokentrace/traces"
)

// The independent units of a trace, for the noise floors of Check. A
// session's rows are not independent draws (its category is fixed, its
// prompts grow, its turns resend the same blocks): a property measured
// over rows varies as much as the units behind it, a session or a
// single-shot row. unitAcc reads a trace in arrival order and keeps, per
// unit, what the floors need: its rows by category, its blocks and
// reused blocks (overall, by category), and, per row, the unit it belongs
// to (for the design effect of a length distribution).

// ratioAcc sums the per-unit terms of a ratio estimator R = Σr / Σb:
// its variance is Σ(r_u − R·b_u)² / (Σb)², from Σr², Σrb and Σb².
type ratioAcc struct {
	r, b, rr, rb, bb float64
	units            int
	rows             int
}

func (a *ratioAcc) addUnit(r, b float64) {
	a.r, a.b = a.r+r, a.b+b
	a.rr, a.rb, a.bb = a.rr+r*r, a.rb+r*b, a.bb+b*b
	a.units++
}

// ratio is Σr / Σb (0 without b).
func (a *ratioAcc) ratio() float64 {
	if a.b == 0 {
		return 0
	}
	return a.r / a.b
}

// variance is the ratio's sampling variance over its units.
func (a *ratioAcc) variance() float64 {
	if a.b == 0 || a.units < 2 {
		return 0
	}
	R := a.ratio()
	s := a.rr - 2*R*a.rb + R*R*a.bb
	// n/(n−1): the residuals are about an estimated ratio.
	return max(s, 0) / (a.b * a.b) * float64(a.units) / float64(a.units-1)
}

// unitCat is one unit's rows, blocks and reused blocks in a category.
type unitCat struct {
	cat            string
	rows           int
	blocks, reused float64
}

// unitState is an open session while the trace is read.
type unitState struct {
	id   int32
	rows int
	cats []unitCat
}

// unitAcc is the per-unit accounting of statsOfSeq.
type unitAcc struct {
	open  map[int64]*unitState
	n     int32   // units so far
	rowOf []int32 // per row (arrival order), its unit
	turns []float64
	// Filled by finish.
	shares map[string]*ratioAcc // category: rows of it (r) over rows (b), by unit
	reuse  ratioAcc
	byCat  map[string]*ratioAcc
	byTurn map[int]*ratioAcc // 0 = single-shot, 1..maxTurnIndex, maxTurnIndex+1 = later
	sizes  []float64         // rows per unit
	// The earliest and latest arrival of a unit's first row.
	startLo, startHi int64
}

// add counts row r, which reuses reused of its blocks, and returns its
// unit.
func (a *unitAcc) add(r *traces.Record, reused int) int32 {
	if a.open == nil {
		a.open, a.byTurn = map[int64]*unitState{}, map[int]*ratioAcc{}
	}
	blocks := float64(len(r.PrefixBlocks))
	turn := 0 // single-shot
	var u *unitState
	if r.Session == 0 || a.open[r.Session] == nil {
		if a.n == 0 {
			a.startLo, a.startHi = r.ArrivalNs, r.ArrivalNs
		}
		a.startLo, a.startHi = min(a.startLo, r.ArrivalNs), max(a.startHi, r.ArrivalNs)
	}
	if r.Session != 0 {
		u = a.open[r.Session]
		if u == nil {
			u = &unitState{id: a.n}
			a.n++
			a.open[r.Session] = u
		}
		u.rows++
		turn = u.rows
	}
	if blocks > 0 {
		bucket := min(turn, maxTurnIndex+1)
		bt := a.byTurn[bucket]
		if bt == nil {
			bt = &ratioAcc{}
			a.byTurn[bucket] = bt
		}
		bt.addUnit(float64(reused), blocks) // a session has one row per turn index
		bt.rows++
	}
	if u == nil {
		id := a.n
		a.n++
		a.rowOf = append(a.rowOf, id)
		a.sizes = append(a.sizes, 1)
		a.finishUnit(1, []unitCat{{cat: r.Category, rows: 1, blocks: blocks, reused: float64(reused)}})
		return id
	}
	a.rowOf = append(a.rowOf, u.id)
	i := slices.IndexFunc(u.cats, func(c unitCat) bool { return c.cat == r.Category })
	if i < 0 {
		u.cats = append(u.cats, unitCat{cat: r.Category})
		i = len(u.cats) - 1
	}
	c := &u.cats[i]
	c.rows++
	c.blocks += blocks
	c.reused += float64(reused)
	return u.id
}

// finishUnit adds a unit of rows rows, cats its rows by category.
func (a *unitAcc) finishUnit(rows int, cats []unitCat) {
	if a.shares == nil {
		a.shares, a.byCat = map[string]*ratioAcc{}, map[string]*ratioAcc{}
	}
	var blocks, reused float64
	for _, c := range cats {
		blocks += c.blocks
		reused += c.reused
		bc := a.byCat[c.cat]
		if bc == nil {
			bc = &ratioAcc{}
			a.byCat[c.cat] = bc
		}
		if c.blocks > 0 {
			bc.addUnit(c.reused, c.blocks)
			bc.rows += c.rows
		}
	}
	a.reuse.addUnit(reused, blocks)
	a.reuse.rows += rows
	// Category shares: the ratio of the category's rows to all rows, unit
	// by unit. A unit without rows of a category adds its rows to the
	// denominator only: its terms are summed once at the end (sharesDone).
	for _, c := range cats {
		s := a.shares[c.cat]
		if s == nil {
			s = &ratioAcc{}
			a.shares[c.cat] = s
		}
		r, b := float64(c.rows), float64(rows)
		s.r, s.rr, s.rb = s.r+r, s.rr+r*r, s.rb+r*b
	}
}

// finish closes the open sessions and completes the share accumulators.
func (a *unitAcc) finish() {
	ids := make([]int64, 0, len(a.open))
	for id := range a.open {
		ids = append(ids, id)
	}
	slices.Sort(ids) // the sums are order-free up to rounding; keep them fixed
	for _, id := range ids {
		u := a.open[id]
		a.finishUnit(u.rows, u.cats)
		a.sizes = append(a.sizes, float64(u.rows))
		a.turns = append(a.turns, float64(u.rows))
	}
	a.open = nil
	var b, bb float64
	for _, s := range a.sizes {
		b, bb = b+s, bb+s*s
	}
	for _, s := range a.shares {
		s.b, s.bb, s.units = b, bb, len(a.sizes)
	}
}

// startsTogether says whether every unit (at least two) starts at the
// same instant: a trace whose format gives conversations but not when
// they began (WEKA's all start at 0), whose only arrival process is each
// session's own timing.
func (a *unitAcc) startsTogether() bool {
	return a.n >= 2 && a.startLo == a.startHi
}

// clusterIndex is E[S²]/E[S] of the units' sizes: the index of dispersion
// of request counts over windows longer than a session, where a unit's
// rows arrive together (1 without sessions).
func (a *unitAcc) clusterIndex() float64 {
	var s, ss float64
	for _, x := range a.sizes {
		s, ss = s+x, ss+x*x
	}
	if s == 0 {
		return 1
	}
	return max(ss/s, 1)
}

// designEffect is how many times the variance of the empirical CDF of
// values (in arrival order, rowOf their units) exceeds that of as many
// independent rows: the largest over the quartiles, at least 1.
func designEffect(values []float64, rowOf []int32, units int32) float64 {
	n := len(values)
	if n < 2 || int(units) >= n {
		return 1
	}
	sorted := slices.Clone(values)
	slices.Sort(sorted)
	sum := make([]float64, units)
	deff := 1.0
	for _, q := range []float64{0.25, 0.5, 0.75} {
		x := sorted[min(int(q*float64(n)), n-1)]
		below := 0
		for _, v := range sorted {
			if v > x {
				break
			}
			below++
		}
		p := float64(below) / float64(n)
		if p <= 0 || p >= 1 {
			continue
		}
		clear(sum)
		for i, v := range values {
			d := -p
			if v <= x {
				d = 1 - p
			}
			sum[rowOf[i]] += d
		}
		var ss float64
		for _, s := range sum {
			ss += s * s
		}
		deff = max(deff, ss/(float64(n)*p*(1-p)))
	}
	if math.IsNaN(deff) {
		return 1
	}
	return deff
}
