package synth

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
)

// fitArrival bins the session starts and fits the within-bin gap
// distribution, in named steps over an arrivalFit: the counts per bin
// (a first replay of the start log), the load levels cut at the busy bins'
// count quantiles, the gaps and clusters of each level (a second replay),
// levels with too few clusters merged into the next, and each level's
// fits.
// It returns too the sessions' first rows per bin (Sessions.StartsPerBin;
// nil without sessions).
func fitArrival(m *Model, starts *varintLog, opts FitOptions, lim fitLimits, ap *approx, rng *rand.Rand) (Arrival, []float64, error) {
	a := &arrivalFit{m: m, starts: starts, opts: opts, lim: lim, nbins: int((m.SpanNs-1)/m.BinNs + 1)}
	if err := a.count(); err != nil {
		return Arrival{}, nil, err
	}
	a.cutLevels()
	if err := a.collectGaps(rng); err != nil {
		return Arrival{}, nil, err
	}
	levels := a.fitLevels(a.mergeLevels(), ap)
	if w := a.width(a.nbins - 1); w > 0 && w < float64(m.BinNs) {
		a.counts[a.nbins-1] *= float64(m.BinNs) / w
		if a.sess != nil {
			a.sess[a.nbins-1] *= float64(m.BinNs) / w
		}
	}
	return Arrival{CountsPerBin: a.counts, Levels: levels}, a.sess, nil
}

// arrivalFit is fitArrival under way.
type arrivalFit struct {
	m      *Model
	starts *varintLog
	opts   FitOptions
	lim    fitLimits
	nbins  int
	counts []float64   // starts per bin
	sess   []float64   // of those, sessions' first rows (nil: none)
	maxes  []float64   // each load level's largest bin count
	accs   []levelGaps // per level
}

// levelGaps are a load level's gaps between clusters, gaps inside them
// and cluster sizes.
type levelGaps struct{ inter, intra, sizes multiset }

func (a *arrivalFit) newLevelGaps() levelGaps {
	return levelGaps{newValues(a.lim.values), newValues(a.lim.values), newValues(a.lim.lengths)}
}

// grid puts x on the quantized trace's grid point. On a quantized trace
// each arrival is spread over its grid cell (collectGaps) but stays in
// the bin of its grid point: bins are whole cells and the spread is at
// most q-1 ns.
func (a *arrivalFit) grid(x int64) int64 {
	if q := a.m.QuantumNs; q > 0 {
		return (x + q/2) / q * q
	}
	return x
}

func (a *arrivalFit) binIdx(x int64) int { return min(int(x/a.m.BinNs), a.nbins-1) }

// width is bin b's width in ns (the last one may be partial).
func (a *arrivalFit) width(b int) float64 {
	if b == a.nbins-1 {
		return float64(a.m.SpanNs - int64(a.nbins-1)*a.m.BinNs)
	}
	return float64(a.m.BinNs)
}

// each replays the start log, calling fn with each start's arrival.
func (a *arrivalFit) each(fn func(x int64)) error {
	return a.eachStart(func(x int64, _ bool) { fn(x) })
}

// eachStart replays the start log, calling fn with each start's arrival
// and whether it is a session's first row.
func (a *arrivalFit) eachStart(fn func(x int64, sess bool)) error {
	r, err := a.starts.replay()
	if err != nil {
		return err
	}
	var x int64
	for range a.starts.n {
		v := r.next()
		x += int64(v >> 1)
		fn(x, v&1 == 1)
	}
	return r.err
}

// count fills the starts per bin, and the sessions' among them.
func (a *arrivalFit) count() error {
	a.counts = make([]float64, a.nbins)
	return a.eachStart(func(x int64, sess bool) {
		b := a.binIdx(a.grid(x))
		a.counts[b]++
		if sess {
			if a.sess == nil {
				a.sess = make([]float64, a.nbins)
			}
			a.sess[b]++
		}
	})
}

// cutLevels ranks the bins with at least two starts by count and cuts
// them into up to GapLevels load levels at count quantiles.
func (a *arrivalFit) cutLevels() {
	var busy []float64
	for _, c := range a.counts {
		if c >= 2 {
			busy = append(busy, c)
		}
	}
	slices.Sort(busy)
	for k := 1; k <= a.opts.GapLevels && len(busy) > 0; k++ {
		v := busy[(k*len(busy)+a.opts.GapLevels-1)/a.opts.GapLevels-1]
		if len(a.maxes) == 0 || v > a.maxes[len(a.maxes)-1] {
			a.maxes = append(a.maxes, v)
		}
	}
	if len(a.maxes) == 0 {
		a.maxes = []float64{1}
	}
	a.accs = make([]levelGaps, len(a.maxes))
	for l := range a.accs {
		a.accs[l] = a.newLevelGaps()
	}
}

// levelOf is the load level of a bin of c starts.
func (a *arrivalFit) levelOf(c float64) int {
	for i, m := range a.maxes {
		if c <= m {
			return i
		}
	}
	return len(a.maxes) - 1
}

// collectGaps replays the starts a second time: within each bin, arrivals
// closer than ClusterGap form a cluster (a client's batch); per level it
// keeps the cluster sizes, the gaps inside clusters and those between
// them. A quantized trace's arrivals are spread uniformly over their grid
// cells first (the order inside a cell is unknown).
func (a *arrivalFit) collectGaps(rng *rand.Rand) error {
	g := gapCollector{a: a, eps: int64(a.opts.ClusterGap), prevBin: -2}
	if q := a.m.QuantumNs; q > 0 {
		// Stamps go to the nearest grid point first (Mooncake's 2999 ms
		// belongs to 3000 ms). Cells do not overlap, so sorting each
		// cell's arrivals sorts all.
		var cell []int64
		cellAt := int64(-1)
		flush := func() {
			slices.Sort(cell)
			for _, t := range cell {
				g.emit(t)
			}
			cell = cell[:0]
		}
		if err := a.each(func(x int64) {
			gp := a.grid(x)
			if gp != cellAt {
				flush()
				cellAt = gp
			}
			cell = append(cell, gp+int64(rng.Float64()*float64(q)))
		}); err != nil {
			return err
		}
		flush()
	} else if err := a.each(g.emit); err != nil {
		return err
	}
	if g.seen {
		addFloat(&a.accs[g.lvl].sizes, float64(g.size))
	}
	return nil
}

// gapCollector is collectGaps' state between arrivals.
type gapCollector struct {
	a       *arrivalFit
	eps     int64
	prev    int64
	prevBin int
	size    int
	lvl     int
	seen    bool
}

// emit adds the arrival at t to its bin's level.
func (g *gapCollector) emit(t int64) {
	accs := g.a.accs
	b := g.a.binIdx(t)
	gap := t - g.prev
	switch {
	case !g.seen || b != g.prevBin:
		if g.seen {
			addFloat(&accs[g.lvl].sizes, float64(g.size))
		}
		g.lvl = g.a.levelOf(g.a.counts[b])
		// The gap from the previous bin's last arrival counts too when
		// that bin is the one just before: gaps inside one bin alone are
		// biased short (a long gap is likely to cross a bin edge).
		if g.seen && g.prevBin == b-1 {
			if gap <= g.eps {
				addFloat(&accs[g.lvl].intra, float64(gap)/1e9)
			} else {
				addFloat(&accs[g.lvl].inter, float64(gap)/1e9)
			}
		}
		g.size = 1
	case gap <= g.eps:
		addFloat(&accs[g.lvl].intra, float64(gap)/1e9)
		g.size++
	default:
		addFloat(&accs[g.lvl].sizes, float64(g.size))
		addFloat(&accs[g.lvl].inter, float64(gap)/1e9)
		g.size = 1
	}
	g.prev, g.prevBin, g.seen = t, b, true
}

// levelGroup is a load level after merging: its largest bin count and
// gaps.
type levelGroup struct {
	max float64
	levelGaps
}

// mergeLevels merges levels with too few clusters into the next one (the
// last into the one before).
func (a *arrivalFit) mergeLevels() []levelGroup {
	var groups []levelGroup
	cur := a.newLevelGaps()
	for l := range a.maxes {
		cur.inter.merge(&a.accs[l].inter)
		cur.intra.merge(&a.accs[l].intra)
		cur.sizes.merge(&a.accs[l].sizes)
		if cur.sizes.total() < minLevelGaps && l < len(a.maxes)-1 {
			continue
		}
		groups = append(groups, levelGroup{a.maxes[l], cur})
		cur = a.newLevelGaps()
	}
	if n := len(groups); n > 1 && groups[n-1].sizes.total() < minLevelGaps {
		g := &groups[n-2]
		g.inter.merge(&groups[n-1].inter)
		g.intra.merge(&groups[n-1].intra)
		g.sizes.merge(&groups[n-1].sizes)
		g.max = groups[n-1].max
		groups = groups[:n-1]
	}
	return groups
}

// fitLevels fits each level: its CV and layout, cluster sizes, gaps inside
// clusters, and the parametric fits of the gaps between them (bisections
// over its distinct gaps, independent: they run side by side).
func (a *arrivalFit) fitLevels(groups []levelGroup, ap *approx) []GapLevel {
	opts := a.opts
	levels := make([]GapLevel, 0, len(groups))
	var wg sync.WaitGroup
	for _, g := range groups {
		inter, intra, sizes := ap.runs(&g.inter), ap.runs(&g.intra), ap.runs(&g.sizes)
		cv := 0.0
		if countOf(inter)+countOf(intra) > 1 {
			m, sd := meanStdDevRuns(inter, intra)
			if m > 0 {
				cv = sd / m
			}
		}
		levels = append(levels, GapLevel{
			CV:           cv,
			Layout:       layoutFor(cv),
			MaxCount:     g.max,
			ClusterSizes: newHistRuns(sizes, opts.GapBins, opts.MinBinCount, true),
			IntraGapS:    newHistRuns(intra, opts.GapBins, opts.MinBinCount, false),
		})
		lv := &levels[len(levels)-1]
		wg.Go(func() { lv.Gap = fitGapsRuns(inter, opts) })
	}
	wg.Wait()
	levels[len(levels)-1].MaxCount = math.MaxFloat64
	return levels
}
