package synth

import (
	"math"
	"math/rand/v2"
	"slices"
	"sort"
)

// Fresh prompts by context (model version 3). Whether a follow-up is a
// fresh prompt, and how long it is, depends on the context it follows: an
// agent resends its history turn after turn (a "fresh" prompt there is the
// history less a dropped reasoning block: 99 % of it) until the history
// nears the model's window, and then compacts it to a tenth. A fresh share
// and a fresh length drawn whatever the context grow synthetic histories
// past every real one, or cut them where no real client would. So each
// category's follow-ups are counted by the context they follow (the input
// + output of the turn before, in eighth-octave buckets while streaming),
// and the fit cuts the buckets into ranges of a few follow-ups each, with
// its share of fresh prompts, their input as a share of the context and
// the share of their blocks that the turn before held.

// ctxBucketsPerOctave is the streaming buckets' resolution: eight per
// doubling of the context (each about 9 % wide).
const ctxBucketsPerOctave = 8

// ctxBucket is one bucket of follow-ups while streaming.
type ctxBucket struct {
	turns, fresh int64
	resumed      int64    // fresh prompts whose branch point a later row resumed
	share, kept  multiset // of the fresh prompts; created with the first
}

// ctxBucketOf is the bucket of a context of ctx tokens.
func ctxBucketOf(ctx int64) int32 {
	return int32(math.Floor(ctxBucketsPerOctave * math.Log2(float64(max(ctx, 0))+1)))
}

// ctxBucketTop is the largest context of bucket k (its upper edge).
func ctxBucketTop(k int32) float64 {
	return math.Exp2(float64(k+1)/ctxBucketsPerOctave) - 1
}

// addCtx counts a follow-up after a context of ctx tokens; a fresh prompt
// with its input's share of ctx and the share of its blocks kept. It
// returns the bucket.
func (a *followFit) addCtx(lim fitLimits, ctx int64, fresh bool, share, kept float64) *ctxBucket {
	if a.byCtx == nil {
		a.byCtx = map[int32]*ctxBucket{}
	}
	k := ctxBucketOf(ctx)
	b := a.byCtx[k]
	if b == nil {
		b = &ctxBucket{}
		a.byCtx[k] = b
	}
	b.turns++
	if !fresh {
		return b
	}
	if b.fresh == 0 {
		b.share, b.kept = newValues(lim.values), newValues(lim.values)
	}
	b.fresh++
	addFloat(&b.share, share)
	addFloat(&b.kept, kept)
	return b
}

// mergeCtx adds b's buckets to a's.
func (a *followFit) mergeCtx(lim fitLimits, b *followFit) {
	for k, o := range b.byCtx {
		if a.byCtx == nil {
			a.byCtx = map[int32]*ctxBucket{}
		}
		t := a.byCtx[k]
		if t == nil {
			t = &ctxBucket{}
			a.byCtx[k] = t
		}
		if o.fresh > 0 && t.fresh == 0 {
			t.share, t.kept = newValues(lim.values), newValues(lim.values)
		}
		t.add(o)
	}
}

// add sums bucket o into t, whose multisets exist when o has fresh
// prompts.
func (t *ctxBucket) add(o *ctxBucket) {
	t.turns += o.turns
	t.fresh += o.fresh
	t.resumed += o.resumed
	if o.fresh > 0 {
		t.share.merge(&o.share)
		t.kept.merge(&o.kept)
	}
}

// freshByContext cuts a category's buckets into up to opts.JointBins
// ranges of about equal follow-ups (the last one joins the range before
// when it has fewer than opts.MinBinCount), each with its share of fresh
// prompts: enough follow-ups per range that a few long sessions do not
// set the share where they alone go. A range's input and kept shares are
// fitted on its own fresh prompts when it has at least opts.MinBinCount of
// them, else on its neighbours' too (reusePools), so no histogram pins
// down a few prompts. nil without buckets.
func (f *fitter) freshByContext(a *followFit) []FreshCond {
	if len(a.byCtx) == 0 {
		return nil
	}
	opts := f.opts
	keys := make([]int32, 0, len(a.byCtx))
	var total int64
	for k, b := range a.byCtx {
		keys = append(keys, k)
		total += b.turns
	}
	slices.Sort(keys)
	per := max(float64(total)/float64(max(opts.JointBins, 1)), float64(opts.MinBinCount))
	type cut struct {
		top float64
		ctxBucket
	}
	var cuts []*cut
	var cur *cut
	for _, k := range keys {
		b := a.byCtx[k]
		if cur == nil {
			cur = &cut{ctxBucket: ctxBucket{share: newValues(f.lim.values), kept: newValues(f.lim.values)}}
		}
		cur.top = ctxBucketTop(k)
		cur.add(b)
		if float64(cur.turns) >= per {
			cuts = append(cuts, cur)
			cur = nil
		}
	}
	if cur != nil {
		if n := len(cuts); n > 0 && cur.turns < int64(opts.MinBinCount) {
			p := cuts[n-1]
			p.top = cur.top
			p.add(&cur.ctxBucket)
		} else {
			cuts = append(cuts, cur)
		}
	}
	n := make([]int64, len(cuts))
	for i, c := range cuts {
		n[i] = c.fresh
	}
	pools := reusePools(n, opts.MinBinCount)
	out := make([]FreshCond, 0, len(cuts))
	for i, c := range cuts {
		fc := FreshCond{ContextMax: math.Round(c.top), Turns: c.turns, FreshPrompts: c.fresh, Resumed: c.resumed}
		if c.fresh > 0 {
			share, kept := &c.share, &c.kept
			if p := pools[i]; p[1]-p[0] > 1 {
				s, k := newValues(f.lim.values), newValues(f.lim.values)
				for _, o := range cuts[p[0]:p[1]] {
					s.merge(&o.share)
					k.merge(&o.kept)
				}
				share, kept = &s, &k
			}
			fc.InputShare = newHistRuns(f.approx.runs(share), opts.OutputBins, opts.MinBinCount, false)
			k := newHistRuns(f.approx.runs(kept), opts.OutputBins, opts.MinBinCount, false)
			fc.KeptShare = &k
		}
		out = append(out, fc)
	}
	return out
}

// genFreshCond is a FreshCond ready to sample.
type genFreshCond struct {
	max         float64
	p           float64 // share of fresh prompts
	resume      float64 // share of those a later turn goes back from
	share, kept *sampler
}

func newGenFreshConds(fcs []FreshCond) []genFreshCond {
	out := make([]genFreshCond, 0, len(fcs))
	for i := range fcs {
		fc := &fcs[i]
		g := genFreshCond{max: fc.ContextMax, share: newSampler(&fc.InputShare)}
		if fc.Turns > 0 {
			g.p = float64(fc.FreshPrompts) / float64(fc.Turns)
		}
		if fc.FreshPrompts > 0 {
			g.resume = float64(fc.Resumed) / float64(fc.FreshPrompts)
		}
		if fc.KeptShare != nil {
			g.kept = newSampler(fc.KeptShare)
		}
		out = append(out, g)
	}
	return out
}

// freshAt is the range of a context of ctx tokens (the last range holds
// every longer one; nil without ranges).
func (g *genFollow) freshAt(ctx float64) *genFreshCond {
	if len(g.byCtx) == 0 {
		return nil
	}
	i := sort.Search(len(g.byCtx), func(i int) bool { return g.byCtx[i].max >= ctx })
	return &g.byCtx[min(i, len(g.byCtx)-1)]
}

// top is the range of the longest contexts with fresh prompts (nil:
// none).
func (g *genFollow) top() *genFreshCond {
	for i := len(g.byCtx) - 1; i >= 0; i-- {
		if !g.byCtx[i].share.empty() {
			return &g.byCtx[i]
		}
	}
	return nil
}

// draw says whether the follow-up is a fresh prompt, and for one, its
// input (0: draw it from the category's fresh lengths), the sampler of the
// share of its blocks kept (nil: the category's) and whether a later turn
// goes back to the context it branches off (a subagent's spawner, not a
// compacted history).
func (c *genFreshCond) draw(rng *rand.Rand, ctx float64) (fresh bool, in int64, kept *sampler, resumable bool) {
	if rng.Float64() >= c.p {
		return false, 0, nil, false
	}
	if !c.share.empty() {
		v, _ := c.share.sample(rng)
		in = max(1, int64(math.Round(v*ctx)))
	}
	return true, in, c.kept, rng.Float64() < c.resume
}
