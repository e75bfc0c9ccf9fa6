package synth

// This file keeps the in-memory fitter as it was before fitting streamed:
// every record in one slice, sorted, with per-record arrays. It is the
// reference the streaming fitter is tested against (fitstream_test.go) and
// is not used by the package. Only names changed (ref prefix), and the
// histograms and gap-family fits are the package's own newHist and fitGaps
// (tested on their own in synth_test.go): what the reference checks is how
// the streaming fitter gathers the values they are built from.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"time"

	"github.com/tokentrace/tokentrace/traces"
	"gonum.org/v1/gonum/stat"
)

// refFit fits a Model to recs (any order; only request columns are used). It
// is deterministic: the same records and options give the same model.
func refFit(ctx context.Context, recs []traces.Record, opts FitOptions) (*Model, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, errors.New("fit: the trace has no records")
	}
	for i := range recs {
		r := &recs[i]
		if r.ArrivalNs < 0 || r.InputTokens < 0 || r.OutputTokens < 0 || r.PrefixTokens < 0 {
			return nil, fmt.Errorf("fit: record seq %d has a negative arrival or token count", r.Seq)
		}
	}
	order := make([]int, len(recs))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		ra, rb := &recs[order[a]], &recs[order[b]]
		if ra.ArrivalNs != rb.ArrivalNs {
			return ra.ArrivalNs < rb.ArrivalNs
		}
		return ra.Seq < rb.Seq
	})
	arr := make([]int64, len(order))
	for i, k := range order {
		arr[i] = recs[k].ArrivalNs
	}
	first, last := arr[0], arr[len(arr)-1]

	m := &Model{
		Format:    ModelFormat,
		Version:   modelVersionNoFollowUps, // it predates follow-up turns (refView)
		Fit:       opts,
		BlockSize: opts.Meta.BlockSize,
		Tokenizer: opts.Meta.Tokenizer,
	}
	m.QuantumNs = int64(opts.Quantum)
	if opts.Quantum == 0 {
		m.QuantumNs = refDetectQuantum(arr)
	} else if opts.Quantum < 0 {
		m.QuantumNs = 0
	}
	if m.QuantumNs > 0 {
		m.SpanNs = last + m.QuantumNs
	} else if len(arr) > 1 && last > first {
		m.SpanNs = last + (last-first)/int64(len(arr)-1)
	} else {
		m.SpanNs = last + 1
	}
	m.BinNs = int64(opts.Bin)
	if q := m.QuantumNs; q > 0 {
		// On a coarsened trace a bin spans at least minQuantaPerBin grid
		// cells, so the model keeps a rate, not the trace's own cell
		// counts.
		m.BinNs = max(minQuantaPerBin*q, (m.BinNs+q/2)/q*q)
	}
	m.Fit.Bin = time.Duration(m.BinNs)
	m.Fit.Quantum = time.Duration(m.QuantumNs)

	sessions := map[int64]bool{}
	cats := map[string]bool{}
	byClass := map[string][]int{}
	for _, k := range order {
		r := &recs[k]
		byClass[r.Class] = append(byClass[r.Class], k)
		if r.Session != 0 {
			sessions[r.Session] = true
		}
		cats[r.Category] = true
	}
	m.FittedOn = FittedOn{
		Source:         opts.Meta.Source,
		File:           opts.File,
		SchemaVersion:  opts.Meta.SchemaVersion,
		Records:        int64(len(recs)),
		FirstArrivalNs: first,
		LastArrivalNs:  last,
		Sessions:       int64(len(sessions)),
		Categories:     len(cats),
		Note:           "histograms, shares and per-bin counts only; no raw records",
	}
	names := make([]string, 0, len(byClass))
	for n := range byClass {
		names = append(names, n)
	}
	sort.Strings(names)
	rng := rand.New(rand.NewPCG(opts.Seed, 0x5eed))
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		c, err := refFitClass(m, recs, byClass[name], opts, rng)
		if err != nil {
			return nil, fmt.Errorf("fit class %q: %w", name, err)
		}
		c.Name = name
		m.Classes = append(m.Classes, c)
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("fit produced an invalid model (bug): %w", err)
	}
	return m, nil
}

// refDetectQuantum finds the grid of a coarsened trace: at least a quarter of
// the arrivals share an instant with the one before, and 99% of the gaps
// between distinct instants are within 1% of a multiple of their median.
func refDetectQuantum(sorted []int64) int64 {
	var gaps []int64
	for i := 1; i < len(sorted); i++ {
		if d := sorted[i] - sorted[i-1]; d > 0 {
			gaps = append(gaps, d)
		}
	}
	if len(gaps) < 10 || float64(len(gaps)) > 0.75*float64(len(sorted)-1) {
		return 0
	}
	s := slices.Clone(gaps)
	slices.Sort(s)
	q := s[len(s)/2]
	if q < int64(time.Millisecond) {
		return 0
	}
	q = (q + int64(time.Millisecond)/2) / int64(time.Millisecond) * int64(time.Millisecond)
	tol := float64(q) / 100
	ok := 0
	for _, g := range gaps {
		k := math.Round(float64(g) / float64(q))
		if k >= 1 && math.Abs(float64(g)-k*float64(q)) <= tol {
			ok++
		}
	}
	if float64(ok) < 0.99*float64(len(gaps)) {
		return 0
	}
	return q
}

func refFitClass(m *Model, recs []traces.Record, idx []int, opts FitOptions, rng *rand.Rand) (Class, error) {
	c := Class{Records: int64(len(idx))}
	models, apis := map[string]int64{}, map[string]int64{}
	for _, k := range idx {
		models[recs[k].Model]++
		apis[recs[k].API]++
	}
	c.Models, c.APIs = sharesOf(models), sharesOf(apis)

	// Sessions: starts are single-shot rows and each session's first row.
	type sess struct {
		turns int
		last  int64
	}
	ss := map[int64]*sess{}
	var starts []int64
	var turnGaps []float64
	var sessOrder []int64
	for _, k := range idx {
		r := &recs[k]
		if r.Session == 0 {
			starts = append(starts, r.ArrivalNs)
			continue
		}
		s, ok := ss[r.Session]
		if !ok {
			ss[r.Session] = &sess{turns: 1, last: r.ArrivalNs}
			sessOrder = append(sessOrder, r.Session)
			starts = append(starts, r.ArrivalNs)
			continue
		}
		turnGaps = append(turnGaps, float64(r.ArrivalNs-s.last)/1e9)
		s.turns++
		s.last = r.ArrivalNs
	}
	if len(ss) > 0 {
		// The trace's end cuts sessions short: turns are fitted as a
		// survival distribution (censor.go) from the gaps between turns.
		var end int64
		for i := range recs {
			end = max(end, recs[i].ArrivalNs)
		}
		turns := make([]float64, 0, len(ss))
		obs := make([]turnObs, 0, len(ss))
		for _, id := range sessOrder {
			turns = append(turns, float64(ss[id].turns))
			obs = append(obs, turnObs{int64(ss[id].turns), end - ss[id].last})
		}
		slices.Sort(turns)
		slices.Sort(turnGaps)
		var gapRuns []run
		for _, g := range turnGaps {
			if n := len(gapRuns); n > 0 && gapRuns[n-1].v == g {
				gapRuns[n-1].n++
			} else {
				gapRuns = append(gapRuns, run{g, 1})
			}
		}
		c.Sessions = &Sessions{
			Share: float64(len(ss)) / float64(len(starts)),
			Turns: censoredTurns(newHist(turns, opts.LengthBins, opts.MinBinCount, true), obs, newGapSurvival(gapRuns)),
			GapS:  newHist(turnGaps, opts.GapBins, opts.MinBinCount, false),
		}
	}
	c.Arrival = refFitArrival(m, starts, opts, rng)

	// Block reuse, in arrival order within the class. A follow-up's
	// blocks are its session's: the reuse model is fitted on the other
	// rows.
	reused := make([]float64, len(idx))
	dist := make([]float64, len(idx))
	follow := make([]bool, len(idx))
	hasBlocks, derivedOK := 0, 0
	seen := map[int64]int{}
	inSession := map[int64]bool{}
	for i, k := range idx {
		r := &recs[k]
		if r.Session != 0 {
			follow[i] = inSession[r.Session]
			inSession[r.Session] = true
		}
		if len(r.PrefixBlocks) == 0 {
			dist[i] = -1
			continue
		}
		hasBlocks++
		L := 0
		for L < len(r.PrefixBlocks) {
			if _, ok := seen[r.PrefixBlocks[L]]; !ok {
				break
			}
			L++
		}
		reused[i] = float64(L)
		dist[i] = -1
		want := ""
		if L > 0 && !follow[i] {
			dist[i] = float64(i - seen[r.PrefixBlocks[L-1]])
		}
		if L > 0 {
			want = fmt.Sprintf("%s%d", blockCategoryPrefix, r.PrefixBlocks[L-1])
		}
		if r.Category == want {
			derivedOK++
		}
		for _, b := range r.PrefixBlocks {
			seen[b] = i
		}
	}
	blocksShare := float64(hasBlocks) / float64(len(idx))
	if hasBlocks > 0 {
		freq := map[float64]int{}
		for i, k := range idx {
			if len(recs[k].PrefixBlocks) > 0 && i > 0 {
				freq[reused[i]]++
			}
		}
		bestN, bestR := 0, 0.0
		for r, n := range freq {
			if r > 0 && (n > bestN || (n == bestN && r < bestR)) {
				bestN, bestR = n, r
			}
		}
		if float64(bestN) >= 0.1*float64(hasBlocks) {
			c.SharedPrefixBlocks = int(bestR)
		}
	}
	c.CategoriesFromBlocks = hasBlocks > 0 && blocksShare >= 0.5 && float64(derivedOK) >= 0.99*float64(hasBlocks)

	// Groups: categories (small ones pooled), or one group when categories
	// are derived from blocks.
	groupOf := make([]int, len(idx))
	if c.CategoriesFromBlocks {
		c.Groups = []Group{{Name: ""}}
	} else {
		counts := map[string]int{}
		for _, k := range idx {
			counts[recs[k].Category]++
		}
		var big []string
		tail, tailCats := 0, 0
		for name, n := range counts {
			if name == "" || n >= opts.MinCategoryRecords {
				big = append(big, name)
			} else {
				tail += n
				tailCats++
			}
		}
		sort.Strings(big)
		pos := map[string]int{}
		for i, name := range big {
			pos[name] = i
			c.Groups = append(c.Groups, Group{Name: name})
		}
		if tail > 0 {
			c.Groups = append(c.Groups, Group{Name: "tail", Tail: true, TailCategories: int64(tailCats)})
		}
		for i, k := range idx {
			if p, ok := pos[recs[k].Category]; ok {
				groupOf[i] = p
			} else {
				groupOf[i] = len(big)
			}
		}
	}
	members := make([][]int, len(c.Groups))
	for i := range idx {
		members[groupOf[i]] = append(members[groupOf[i]], i)
	}
	for gi := range c.Groups {
		g := &c.Groups[gi]
		mem := members[gi]
		g.Records = int64(len(mem))
		g.Share = float64(len(mem)) / float64(len(idx))
		var prefix, input, dists []float64
		withBlocks := 0
		for _, i := range mem {
			r := &recs[idx[i]]
			prefix = append(prefix, float64(r.PrefixTokens))
			input = append(input, float64(r.InputTokens))
			if len(r.PrefixBlocks) > 0 {
				withBlocks++
				if dist[i] > 0 {
					dists = append(dists, dist[i])
				}
			}
		}
		slices.Sort(prefix)
		slices.Sort(input)
		g.PrefixTokens = newHist(prefix, opts.LengthBins, opts.MinBinCount, true)
		g.InputTokens = newHist(input, opts.LengthBins, opts.MinBinCount, true)
		g.Blocks = float64(withBlocks) / float64(len(mem))
		useBlocks := g.Blocks >= 0.5
		if useBlocks && len(dists) > 0 {
			slices.Sort(dists)
			h := newHist(dists, opts.GapBins, opts.MinBinCount, true)
			g.ReuseDistance = &h
		}
		// Joint: consecutive input bins of about equal mass.
		nb := len(g.InputTokens.Bins)
		rangeOf := make([]int, nb)
		per := float64(len(mem)) / float64(opts.JointBins)
		var bounds []int // first bin index of each range
		acc := 0.0
		for b := 0; b < nb; b++ {
			if b == 0 || acc >= per {
				bounds = append(bounds, b)
				acc = 0
			}
			rangeOf[b] = len(bounds) - 1
			acc += g.InputTokens.Bins[b].Count
		}
		outs := make([][]float64, len(bounds))
		reuse := make([][]float64, len(bounds))
		fresh := make([][]float64, len(bounds))
		for _, i := range mem {
			r := &recs[idx[i]]
			k := rangeOf[binOf(&g.InputTokens, float64(r.InputTokens))]
			outs[k] = append(outs[k], float64(r.OutputTokens))
			if len(r.PrefixBlocks) > 0 && i > 0 && !follow[i] {
				// The class's first row has nothing to reuse (Generate
				// knows); leave it out of the reuse distribution.
				if int(reused[i]) > c.SharedPrefixBlocks {
					fresh[k] = append(fresh[k], reused[i]/float64(len(r.PrefixBlocks)))
				} else {
					reuse[k] = append(reuse[k], reused[i])
				}
			}
		}
		n := make([]int64, len(bounds))
		for k := range n {
			n[k] = int64(len(reuse[k]) + len(fresh[k]))
		}
		pools := reusePools(n, opts.MinBinCount)
		pooled := func(x [][]float64, k int) []float64 {
			var out []float64
			for i := pools[k][0]; i < pools[k][1]; i++ {
				out = append(out, x[i]...)
			}
			return out
		}
		for k := range bounds {
			end := nb
			if k+1 < len(bounds) {
				end = bounds[k+1]
			}
			slices.Sort(outs[k])
			cd := Cond{
				InputBins:    end - bounds[k],
				InputMax:     g.InputTokens.Bins[end-1].Hi,
				OutputTokens: newHist(outs[k], opts.OutputBins, opts.MinBinCount, true),
			}
			if useBlocks {
				ru, fr := pooled(reuse, k), pooled(fresh, k)
				slices.Sort(ru)
				h := newHist(ru, opts.OutputBins, opts.MinBinCount, true)
				cd.ReusedBlocks = &h
				if n := len(ru) + len(fr); n > 0 && len(fr) > 0 {
					slices.Sort(fr)
					cd.DeepShare = float64(len(fr)) / float64(n)
					f := newHist(fr, opts.OutputBins, opts.MinBinCount, false)
					cd.DeepFraction = &f
				}
			}
			g.Joint = append(g.Joint, cd)
		}
	}
	return c, nil
}

// refFitArrival bins the arrivals and fits the within-bin gap distribution.
func refFitArrival(m *Model, starts []int64, opts FitOptions, rng *rand.Rand) Arrival {
	nbins := int((m.SpanNs + m.BinNs - 1) / m.BinNs)
	counts := make([]float64, nbins)
	t := slices.Clone(starts)
	if q := m.QuantumNs; q > 0 {
		// Spread each arrival over its grid cell: the order inside a cell
		// is unknown, so fit gaps on a uniform spread. Stamps go to the
		// nearest grid point first (Mooncake's 2999 ms belongs to 3000 ms).
		for i := range t {
			t[i] = (t[i]+q/2)/q*q + int64(rng.Float64()*float64(q))
		}
		slices.Sort(t)
	}
	binIdx := func(x int64) int { return min(int(x/m.BinNs), nbins-1) }
	for _, x := range t {
		counts[binIdx(x)]++
	}
	width := func(b int) float64 {
		if b == nbins-1 {
			return float64(m.SpanNs - int64(nbins-1)*m.BinNs)
		}
		return float64(m.BinNs)
	}
	// Gap levels: bins ranked by count, cut at count quantiles.
	var busy []float64
	for _, c := range counts {
		if c >= 2 {
			busy = append(busy, c)
		}
	}
	slices.Sort(busy)
	var maxes []float64
	for k := 1; k <= opts.GapLevels && len(busy) > 0; k++ {
		v := busy[(k*len(busy)+opts.GapLevels-1)/opts.GapLevels-1]
		if len(maxes) == 0 || v > maxes[len(maxes)-1] {
			maxes = append(maxes, v)
		}
	}
	if len(maxes) == 0 {
		maxes = []float64{1}
	}
	levelOf := func(c float64) int {
		for i, m := range maxes {
			if c <= m {
				return i
			}
		}
		return len(maxes) - 1
	}
	// Within each bin, arrivals closer than ClusterGap form a cluster
	// (a client's batch); per level keep the cluster sizes, the gaps inside
	// clusters and the gaps between them.
	type acc struct{ inter, intra, sizes []float64 }
	accs := make([]acc, len(maxes))
	eps := int64(opts.ClusterGap)
	for i := 0; i < len(t); {
		b := binIdx(t[i])
		l := levelOf(counts[b])
		j := i + 1
		for j < len(t) && binIdx(t[j]) == b {
			j++
		}
		// The gap from the previous bin's last arrival counts too when
		// that bin is the one just before: gaps inside one bin alone are
		// biased short (a long gap is likely to cross a bin edge).
		if i > 0 && binIdx(t[i-1]) == b-1 {
			g := t[i] - t[i-1]
			if g <= eps {
				accs[l].intra = append(accs[l].intra, float64(g)/1e9)
			} else {
				accs[l].inter = append(accs[l].inter, float64(g)/1e9)
			}
		}
		size := 1
		for k := i + 1; k < j; k++ {
			g := t[k] - t[k-1]
			if g <= eps {
				accs[l].intra = append(accs[l].intra, float64(g)/1e9)
				size++
			} else {
				accs[l].sizes = append(accs[l].sizes, float64(size))
				accs[l].inter = append(accs[l].inter, float64(g)/1e9)
				size = 1
			}
		}
		accs[l].sizes = append(accs[l].sizes, float64(size))
		i = j
	}
	// Merge levels with too few clusters into the next one (the last into
	// the one before).
	type group struct {
		max float64
		acc
	}
	var groups []group
	var cur acc
	for l := range maxes {
		cur.inter = append(cur.inter, accs[l].inter...)
		cur.intra = append(cur.intra, accs[l].intra...)
		cur.sizes = append(cur.sizes, accs[l].sizes...)
		if len(cur.sizes) < minLevelGaps && l < len(maxes)-1 {
			continue
		}
		groups = append(groups, group{maxes[l], cur})
		cur = acc{}
	}
	if n := len(groups); n > 1 && len(groups[n-1].sizes) < minLevelGaps {
		g := &groups[n-2]
		g.inter = append(g.inter, groups[n-1].inter...)
		g.intra = append(g.intra, groups[n-1].intra...)
		g.sizes = append(g.sizes, groups[n-1].sizes...)
		g.max = groups[n-1].max
		groups = groups[:n-1]
	}
	var levels []GapLevel
	for _, g := range groups {
		slices.Sort(g.inter)
		slices.Sort(g.intra)
		slices.Sort(g.sizes)
		all := append(slices.Clone(g.inter), g.intra...)
		cv := 0.0
		if len(all) > 1 {
			m, sd := stat.MeanStdDev(all, nil)
			if m > 0 {
				cv = sd / m
			}
		}
		levels = append(levels, GapLevel{
			CV:           cv,
			Layout:       layoutFor(cv),
			MaxCount:     g.max,
			Gap:          fitGaps(g.inter, opts),
			ClusterSizes: newHist(g.sizes, opts.GapBins, opts.MinBinCount, true),
			IntraGapS:    newHist(g.intra, opts.GapBins, opts.MinBinCount, false),
		})
	}
	levels[len(levels)-1].MaxCount = math.MaxFloat64
	if w := width(nbins - 1); w > 0 && w < float64(m.BinNs) {
		counts[nbins-1] *= float64(m.BinNs) / w
	}
	return Arrival{CountsPerBin: counts, Levels: levels}
}
