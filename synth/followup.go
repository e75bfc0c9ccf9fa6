package synth

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"

	"github.com/tokentrace/tokentrace/internal/minheap"
	"github.com/tokentrace/tokentrace/traces"
)

// Follow-up turns (model version 2). A session's rows after its first are
// fitted per category from what the session's previous row left in its
// sessState (input, output, arrival, finish): the tokens a turn adds to the
// context it resends, the turns whose input did not grow (fresh prompts),
// the think time before the turn and the follow-ups' outputs. The state is
// per category, up to fitLimits.categories per class (the rest pooled into
// the tail group), in multisets like the rest of the fit: memory does not
// grow with the number of rows.

// followFit is the follow-up turns of one category (or of the pooled rest).
type followFit struct {
	n, fresh int64
	starts   int64                // second turns: sessions that went on (attributed to this category)
	turns    multiset             // turns per session of those sessions (filled at the end)
	id       int32                // followState.list index + 1
	newIn    multiset             // input − previous input − previous output, when ≥ 0
	freshIn  multiset             // input of the others (fresh prompts)
	in, out  multiset             // the follow-ups' input and output lengths
	think    multiset             // seconds
	dropped  multiset             // the previous row's blocks a growing turn does not reuse
	kept     multiset             // share of a fresh prompt's blocks from the row it follows
	byCtx    map[int32]*ctxBucket // follow-ups by the context they follow (freshctx.go)
	obs      []turnObs            // the sessions of turns, for the censoring at the end (censor.go)
	// Growing turns in a branch (after a fresh prompt) that resumed the
	// row the branch came off, and that went on in the branch.
	resumes, branchTurns int64
}

func newFollowFit(lim fitLimits) *followFit {
	return &followFit{turns: newValues(lim.lengths), newIn: newValues(lim.lengths), freshIn: newValues(lim.lengths), in: newValues(lim.lengths), out: newValues(lim.lengths), think: newValues(lim.values), dropped: newValues(lim.lengths), kept: newValues(lim.values)}
}

func (a *followFit) merge(lim fitLimits, b *followFit) {
	a.n += b.n
	a.fresh += b.fresh
	a.starts += b.starts
	a.turns.merge(&b.turns)
	a.newIn.merge(&b.newIn)
	a.freshIn.merge(&b.freshIn)
	a.in.merge(&b.in)
	a.out.merge(&b.out)
	a.think.merge(&b.think)
	a.dropped.merge(&b.dropped)
	a.kept.merge(&b.kept)
	a.mergeCtx(lim, b)
	a.obs = append(a.obs, b.obs...)
	a.resumes += b.resumes
	a.branchTurns += b.branchTurns
}

// followPooled keys the follow-ups of categories past the per-class limit.
const followPooled = "\x00pooled"

// followState is a class's follow-up turns while streaming.
type followState struct {
	cats                  map[string]*followFit
	list                  []*followFit // by id − 1
	recorded, finish, gap int64        // think-time sources
}

// add fits follow-up row r of a session whose last row left s (prev:
// what r's blocks found in the class's table) and returns the session's
// sessState.follow, the row's sessRow.branchOf and sessState.back. The row
// follows the row its parent_seq names, among the session's last row and
// its back rows (else the last row): a growing turn adds tokens to that
// row's context, a fresh prompt branches off it, a row that names the row
// a branch came off resumes that context (FollowUp.Resumes: Generate's
// sessions run a branch, then go back).
func (st *followState) add(f *fitter, r *fitRow, s *sessState, prev []seenAt) (int32, int64, []backRow) {
	base, back := &s.sessRow, s.back
	var resumed *backRow // the branch point r resumes
	if r.parent >= 0 {
		// Rows name their parents: keep the last row, a later one may
		// name it (branches interleave, a call spawns several).
		if !slices.ContainsFunc(back, func(b backRow) bool { return b.seq == s.seq }) {
			back = pushBack(back, backRow{sessRow: s.sessRow})
		}
		if i := slices.IndexFunc(back, func(b backRow) bool { return b.seq == r.parent }); i >= 0 && r.parent != s.seq {
			b := back[i].sessRow
			base = &b
			if back[i].spawned && !back[i].resumed {
				back[i].resumed = true
				resumed = &back[i]
			}
		}
	}
	kept := keptBlocks(prev, base)
	if st.cats == nil {
		st.cats = map[string]*followFit{}
	}
	ff := st.cats[r.category]
	if ff == nil {
		name := r.category
		if len(st.cats) >= f.lim.categories {
			name = followPooled
			ff = st.cats[name]
		}
		if ff == nil {
			ff = newFollowFit(f.lim)
			st.list = append(st.list, ff)
			ff.id = int32(len(st.list))
			st.cats[name] = ff
		}
	}
	ff.n++
	sf := s.follow
	if s.turns == 1 {
		ff.starts++
		sf = ff.id
	}
	addFloat(&ff.in, float64(r.input))
	addFloat(&ff.out, float64(r.output))
	grow := int64(r.input) - int64(base.in) - int64(base.out)
	branchOf := base.branchOf
	if resumed != nil {
		ff.resumes++
		ff.branchTurns += resumed.turns
		if resumed.bucket != nil {
			resumed.bucket.resumed++
		}
	} else if grow >= 0 && branchOf >= 0 {
		// A turn of a branch: counted with it once a row resumes the
		// context it came off (a compacted history never is).
		if i := slices.IndexFunc(back, func(b backRow) bool { return b.seq == branchOf }); i >= 0 {
			if back[i].resumed {
				ff.branchTurns++
			} else {
				back[i].turns++
			}
		}
	}
	b := base
	var bucket *ctxBucket
	if ctx := int64(b.in) + int64(b.out); kept >= 0 && ctx > 0 {
		bucket = ff.addCtx(f.lim, ctx, grow < 0, float64(r.input)/float64(ctx), float64(kept)/float64(len(r.blocks)))
	}
	if grow < 0 && r.parent >= 0 {
		// A fresh prompt: a branch off b, which a later row may resume
		// (when rows name their parents).
		branchOf = b.seq
		if i := slices.IndexFunc(back, func(x backRow) bool { return x.seq == b.seq }); i >= 0 {
			back[i].spawned, back[i].bucket, back[i].turns, back[i].resumed = true, bucket, 0, false
		} else {
			back = pushBack(back, backRow{sessRow: *b, spawned: true, bucket: bucket})
		}
	}
	if grow >= 0 {
		addFloat(&ff.newIn, float64(grow))
		if kept >= 0 && f.blockK() == 0 {
			full := b.blocks
			if bs := f.opts.Meta.BlockSize; bs > 0 {
				full = min(full, b.in/int32(bs))
			}
			addFloat(&ff.dropped, float64(max(full-kept, 0)))
		}
	} else {
		ff.fresh++
		addFloat(&ff.freshIn, float64(r.input))
		if kept >= 0 {
			addFloat(&ff.kept, float64(kept)/float64(len(r.blocks)))
		}
	}
	// A finish before the turn's own arrival is no finish (a zero value).
	finished := b.finish >= b.last
	var think int64
	switch {
	case r.think >= 0:
		think = r.think
		st.recorded++
	case finished:
		think = r.arrival - b.finish
		st.finish++
	default:
		think = r.arrival - b.last
		st.gap++
	}
	addFloat(&ff.think, float64(max(think, 0))/1e9)
	return sf, branchOf, back
}

// pushBack adds r to a session's back rows, dropping the oldest past
// maxBackRows (the oldest not waiting to be resumed, if there is one).
func pushBack(back []backRow, r backRow) []backRow {
	if len(back) == maxBackRows {
		i := slices.IndexFunc(back, func(b backRow) bool { return !b.spawned || b.resumed })
		back = slices.Delete(back, max(i, 0), max(i, 0)+1)
	}
	return append(back, r)
}

// blockK is the fitted trace's k-anonymity threshold for prefix blocks
// (Model.BlockK), 0 when it has none.
func (f *fitter) blockK() int32 {
	if k := f.opts.Meta.KThreshold; k >= 2 && f.opts.Meta.BlockSize > 0 {
		return int32(k)
	}
	return 0
}

// fitFollowUps sets cl's follow-up model: each category's follow-ups go to
// the group its rows went to (groups[i] holds group i's rows, groupOf maps
// a category id to its group).
func (f *fitter) fitFollowUps(cl *Class, c *classFit, groups []*lenState, groupOf []int) {
	st := &c.follow
	if len(st.cats) == 0 || cl.Sessions == nil {
		return
	}
	opts := f.opts
	for _, s := range c.sess {
		if s.follow > 0 {
			ff := st.list[s.follow-1]
			addFloat(&ff.turns, float64(s.turns))
			ff.obs = append(ff.obs, turnObs{s.turns, f.last - s.last})
		}
	}
	names := make([]string, 0, len(st.cats))
	for n := range st.cats {
		names = append(names, n)
	}
	sort.Strings(names)
	byGroup := make([]*followFit, len(cl.Groups))
	for _, n := range names {
		gi := len(cl.Groups) - 1 // pooled: the tail group, which comes last
		if cl.CategoriesFromBlocks {
			gi = 0
		} else if ct := c.cats[n]; ct != nil {
			gi = groupOf[ct.id]
		}
		if byGroup[gi] == nil {
			byGroup[gi] = newFollowFit(f.lim)
		}
		byGroup[gi].merge(f.lim, st.cats[n])
	}
	s := cl.Sessions
	clamped := false
	model := func(ff *followFit) *FollowUp {
		s.FollowUps += ff.n
		var dropped, kept *Hist
		if ff.dropped.len() > 0 {
			h := newHistRuns(f.approx.runs(&ff.dropped), opts.LengthBins, opts.MinBinCount, true)
			dropped = &h
		}
		if ff.kept.len() > 0 {
			h := newHistRuns(f.approx.runs(&ff.kept), opts.OutputBins, opts.MinBinCount, false)
			kept = &h
		}

		return &FollowUp{
			FreshKeptShare:   kept,
			FreshByContext:   f.freshByContext(ff),
			Resumes:          ff.resumes,
			BranchTurns:      ff.branchTurns,
			DroppedBlocks:    dropped,
			Turns:            ff.n,
			FreshPrompts:     ff.fresh,
			NewInputTokens:   newHistRuns(f.approx.runs(&ff.newIn), opts.LengthBins, opts.MinBinCount, true),
			FreshInputTokens: newHistRuns(f.approx.runs(&ff.freshIn), opts.LengthBins, opts.MinBinCount, true),
			OutputTokens:     newHistRuns(f.approx.runs(&ff.out), opts.OutputBins, opts.MinBinCount, true),
			ThinkS:           newHistRuns(f.approx.runs(&ff.think), opts.GapBins, opts.MinBinCount, false),
			TurnsPerSession:  censoredTurns(newHistRuns(f.approx.runs(&ff.turns), opts.LengthBins, opts.MinBinCount, true), ff.obs, c.endSurv),
			FirstInputTokens: Hist{Integer: true, Bins: []Bin{}},
		}
	}
	var pooled *followFit
	for gi, ff := range byGroup {
		if ff == nil {
			continue
		}
		cl.Groups[gi].SessionStarts, cl.Groups[gi].FollowUps = ff.starts, ff.n
		if ff.n < int64(opts.MinCategoryRecords) {
			if pooled == nil {
				pooled = newFollowFit(f.lim)
			}
			pooled.merge(f.lim, ff)
			continue
		}
		first, short := withoutValues(&groups[gi].input, &ff.in, &f.approx)
		clamped = clamped || short
		fu := model(ff)
		fu.FirstInputTokens = newHistRuns(first, opts.LengthBins, opts.MinBinCount, true)
		cl.Groups[gi].FollowUp = fu
	}
	if pooled != nil {
		s.PooledFollowUp = model(pooled)
	}
	if clamped {
		f.approx.notes = append(f.approx.notes, fmt.Sprintf("class %q: some follow-up turns' categories were pooled differently from their rows, so first-turn input lengths are approximate", c.name))
	}
	s.ThinkRecorded, s.ThinkFromFinishCount, s.ThinkFromGapCount = st.recorded, st.finish, st.gap
	switch {
	case st.recorded == s.FollowUps:
		s.ThinkFrom = ThinkFromRecorded
	case st.finish == s.FollowUps:
		s.ThinkFrom = ThinkFromFinish
	case st.gap == s.FollowUps:
		s.ThinkFrom = ThinkFromArrivalGap
	default:
		s.ThinkFrom = ThinkFromMixed
	}
}

// withoutValues is the runs of all's values less sub's (sub's values are
// a part of all's), both at the coarser of their precisions. short says a
// value of sub was not in all (then it is left out).
func withoutValues(all, sub *multiset, ap *approx) (runs []run, short bool) {
	if finer(all.sig, sub.sig) {
		all.coarsen(sub.sig)
	} else if finer(sub.sig, all.sig) {
		sub.coarsen(all.sig)
	}
	less := map[uint64]int64{}
	sub.each(func(k uint64, n int64) { less[k] += n })
	ap.note(all.sig)
	rs, _ := runsOf(all)
	out := rs[:0]
	for _, r := range rs {
		k := math.Float64bits(r.v)
		d := min(less[k], r.n)
		if d < less[k] {
			short = true
		}
		delete(less, k)
		if r.n > d {
			out = append(out, run{r.v, r.n - d})
		}
	}
	return out, short || len(less) > 0
}

// prepareFollowUps readies a version-2 class's follow-up samplers.
func (gc *genClass) prepareFollowUps(opts GenOptions) {
	s := gc.c.Sessions
	if s.FollowUps == 0 {
		return
	}
	gc.followUps = true
	if len(opts.Mix) > 0 {
		gc.mixStarts()
	} else {
		// A session's category by its sessions, a single-shot row's by
		// its other rows (counts of version-2 models; the mix override
		// keeps one share per category).
		var sess, single []float64
		for _, gg := range gc.groups {
			g := gg.g
			sess = append(sess, cumLast(sess)+float64(g.SessionStarts))
			single = append(single, cumLast(single)+float64(max(0, g.Records-g.SessionStarts-g.FollowUps)))
		}
		if cumLast(sess) > 0 {
			gc.sessCum = sess
		}
		if cumLast(single) > 0 {
			gc.singleCum = single
		}
	}
	if s.PooledFollowUp != nil {
		gc.pooled = newGenFollow(s.PooledFollowUp)
	}
	longest := 0.0
	for _, gg := range gc.groups {
		if n := len(gg.g.InputTokens.Bins); n > 0 {
			longest = max(longest, gg.g.InputTokens.Bins[n-1].Hi)
		}
		if fu := gg.g.FollowUp; fu != nil {
			gg.follow = newGenFollow(fu)
			if len(fu.FirstInputTokens.Bins) > 0 {
				gg.first = newSampler(&fu.FirstInputTokens)
			}
		}
	}
	gc.maxContext = max(1, scaleLen(longest, opts.inScale()))
	if opts.MaxContextTokens > 0 {
		gc.maxContext = int32(min(opts.MaxContextTokens, math.MaxInt32))
	}
}

// mixStarts sets the category draws of a mix override so that the
// categories' shares of requests, not of session starts, are the mix's
// (groupCum holds them): a category whose sessions run longer gets fewer
// starts. Each category's fitted session starts and single-shot rows are
// weighted by one factor, found by fixed-point iteration on the expected
// rows.
func (gc *genClass) mixStarts() {
	n := len(gc.groups)
	want, sess, single, rows := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	var multi, starts float64
	for i, gg := range gc.groups {
		g := gg.g
		want[i] = gc.groupCum[i] - cumLast(gc.groupCum[:i])
		sess[i] = float64(g.SessionStarts)
		single[i] = float64(max(0, g.Records-g.SessionStarts-g.FollowUps))
		if g.SessionStarts > 0 {
			rows[i] = float64(g.SessionStarts+g.FollowUps) / float64(g.SessionStarts)
		}
		multi += sess[i]
		starts += sess[i] + single[i]
	}
	if multi == 0 || starts == 0 {
		return
	}
	pMulti := multi / starts
	f := make([]float64, n)
	for i := range f {
		f[i] = 1
		if want[i] == 0 {
			f[i] = 0
		}
	}
	share := make([]float64, n)
	for range 200 {
		var fs, fo, tot float64
		for i := range f {
			fs += f[i] * sess[i]
			fo += f[i] * single[i]
		}
		for i := range f {
			share[i] = 0
			if fs > 0 {
				share[i] += pMulti * f[i] * sess[i] / fs * rows[i]
			}
			if fo > 0 {
				share[i] += (1 - pMulti) * f[i] * single[i] / fo
			}
			tot += share[i]
		}
		for i := range f {
			if share[i] > 0 && tot > 0 {
				f[i] *= want[i] / (share[i] / tot)
			}
		}
	}
	var sc, oc []float64
	for i := range f {
		sc = append(sc, cumLast(sc)+f[i]*sess[i])
		oc = append(oc, cumLast(oc)+f[i]*single[i])
	}
	if cumLast(sc) > 0 {
		gc.sessCum = sc
	}
	if cumLast(oc) > 0 {
		gc.singleCum = oc
	}
}

// followOf is the follow-up model of group gi (nil: none).
func (gc *genClass) followOf(gi int) *genFollow {
	if f := gc.groups[gi].follow; f != nil {
		return f
	}
	return gc.pooled
}

// scheduleFollowUps draws a version-2 multi-turn session's group (a
// session of one row, turns < 2, keeps group −1: its row's category is
// drawn like a single-shot row's), its turns from the group's
// TurnsPerSession, and puts turns 2.. in the pending heap. Each arrives at the previous turn's
// arrival + a gap drawn from Sessions.GapS (the recorded arrival-to-arrival
// spacing, which open-loop replay reproduces) and carries a think time
// drawn from the group's ThinkS as think_ns (what a closed-session replay
// waits after the previous turn finishes). The two are drawn
// independently: a recorded gap is a service time plus a think time, and
// the server replayed against decides the first.
func (gc *genClass) scheduleFollowUps(m *Model, rng *rand.Rand, info *sessInfo, first pending, turns int, dur int64, pend *[]pending, order *int64) {
	if turns < 2 {
		return
	}
	cum := gc.groupCum
	if gc.sessCum != nil {
		cum = gc.sessCum
	}
	info.group = pickIndex(rng, cum)
	fu := gc.followOf(info.group)
	if fu != nil && !fu.turns.empty() {
		v, _ := fu.turns.sample(rng)
		turns = max(2, int(v))
	}
	ft := first.t
	for k := 2; k <= turns; k++ {
		think := 0.0
		if fu != nil {
			think, _ = fu.think.sample(rng) // 0 from an empty sampler
		}
		thinkNs := int64(think * 1e9)
		g, _ := gc.turnGap.sample(rng)
		ft = m.quantize(ft + int64(g*1e9))
		if ft >= dur {
			break
		}
		minheap.Push(pend, pending{t: ft, order: *order, class: first.class, sess: first.sess, turn: int32(k), think: thinkNs}, pendingFirst)
		*order++
		info.last = int32(k)
	}
}

// sessMain is the context a session's branch came off (see
// FollowUp.Resumes): the turn before its first fresh prompt.
type sessMain struct {
	chain           []int64
	keep            int
	seq             int64
	prevIn, prevOut int32
}

// branch keeps the context a fresh prompt branches off, when the session
// may resume it (resumable: a fresh prompt by context says whether it
// may), and resumes it for a growing turn in a branch with the fitted
// share.
func (info *sessInfo) branch(rng *rand.Rand, fu *genFollow, fresh, resumable bool) {
	if fu.resumeShare <= 0 {
		return
	}
	switch {
	case fresh && resumable && info.main == nil:
		info.main = &sessMain{chain: info.chain, keep: info.keep, seq: info.prevSeq, prevIn: info.prevIn, prevOut: info.prevOut}
	case !fresh && info.main != nil && rng.Float64() < fu.resumeShare:
		mn := info.main
		info.chain, info.keep, info.prevSeq, info.prevIn, info.prevOut = mn.chain, mn.keep, mn.seq, mn.prevIn, mn.prevOut
		info.main = nil
	}
}

// fillFollowUp draws a version-2 follow-up turn: its input is the previous
// turn's input + output + new tokens drawn from the category's
// NewInputTokens (capped at the class's maximum context), or, with the
// category's share of fresh prompts, an input drawn from FreshInputTokens;
// its output comes from the follow-ups' OutputTokens. It keeps the
// session's category and prefix, and its prefix blocks extend the
// previous turn's chain less the trailing blocks drawn from
// DroppedBlocks (version 3; a version-2 model keeps the whole chain). It
// returns the row's block chain.
func (gc *genClass) fillFollowUp(rec *traces.Record, rng *rand.Rand, m *Model, opts GenOptions, info *sessInfo, nextBlock *int64) []int64 {
	gg := gc.groups[info.group]
	fu := gc.followOf(info.group)
	if fu == nil {
		return gc.fill(rec, rng, m, opts, info.group, info.chain, nextBlock)
	}
	var (
		fresh, resumable bool
		freshIn          int64
		kept             = fu.kept
	)
	ctx := float64(int64(info.prevIn) + int64(info.prevOut))
	if fc := fu.freshAt(ctx / opts.inScale()); fc != nil {
		var k *sampler
		if fresh, freshIn, k, resumable = fc.draw(rng, ctx); k != nil {
			kept = k
		}
	} else {
		fresh = rng.Float64() < fu.freshShare
		resumable = fresh
	}
	info.branch(rng, fu, fresh, resumable)
	var in int64
	switch {
	case fresh && freshIn > 0:
		in = freshIn
	case fresh:
		s := fu.freshIn
		if s.empty() && gg.first != nil {
			s = gg.first
		} else if s.empty() {
			s = gg.input
		}
		v, _ := s.sample(rng)
		in = int64(scaleLen(v, opts.inScale()))
	default:
		v, _ := fu.newIn.sample(rng)
		in = int64(info.prevIn) + int64(info.prevOut)
		if v > 0 {
			in += int64(scaleLen(v, opts.inScale()))
		}
		if top := fu.top(); top != nil && in > int64(gc.maxContext) {
			// The window is full: the client compacts its history as
			// the trace's fresh prompts after its longest contexts do.
			v, _ := top.share.sample(rng)
			in, fresh = max(1, int64(math.Round(v*ctx))), true
			if top.kept != nil {
				kept = top.kept
			}
		}
	}
	out, _ := fu.out.sample(rng)
	rec.InputTokens = int32(max(1, min(in, int64(gc.maxContext))))
	rec.OutputTokens = scaleLen(out, opts.outScale())
	gc.ctxOut = scaleLen(out, opts.inScale())
	rec.PrefixTokens = min(info.prefix, rec.InputTokens)
	rec.Category = info.category
	if !gg.blocks {
		return nil
	}
	bs := int64(m.BlockSize)
	nb := int((int64(rec.InputTokens) + bs - 1) / bs)
	r := min(info.keep, len(info.chain), nb)
	switch {
	case fresh && kept != nil && !kept.empty():
		f, _ := kept.sample(rng)
		r = min(r, int(math.Round(f*float64(nb))))
	case fresh:
		r = min(r, int(int64(info.prefix)/bs))
	case fu.dropped != nil && !fu.dropped.empty():
		d, _ := fu.dropped.sample(rng)
		r = max(r-int(d), 0)
	}
	if len(gc.arena) < nb {
		gc.arena = make([]int64, max(nb, arenaChunk))
	}
	chain := gc.arena[:nb:nb]
	gc.arena = gc.arena[nb:]
	copy(chain, info.chain[:r])
	for i := r; i < nb; i++ {
		chain[i] = *nextBlock
		*nextBlock++
	}
	gc.reused = r
	rec.PrefixBlocks = chain
	if gc.c.CategoriesFromBlocks {
		rec.Category, rec.PrefixTokens = "", 0
		if r > 0 {
			rec.Category = blockCategoryPrefix + strconv.FormatInt(chain[r-1], 10)
			rec.PrefixTokens = int32(min(int64(r)*bs, int64(rec.InputTokens)))
		}
	}
	gc.remember(chain, info.group)
	return chain
}
