package synth

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tokentrace/tokentrace/internal/minheap"
	"github.com/tokentrace/tokentrace/traces"
	"gonum.org/v1/gonum/stat/distuv"
)

// Generation defaults, shared by the CLI flags and GenOptions.
const (
	DefaultSeed        = 1
	DefaultRateScale   = 1.0
	DefaultLengthScale = 1.0
	GapsEmpirical      = "empirical"
	GapsFitted         = "fitted"
	DefaultGaps        = GapsEmpirical
)

// GapsModes lists the valid GenOptions.Gaps values.
var GapsModes = []string{GapsEmpirical, GapsFitted}

// GenOptions tunes Generate. Start from DefaultGenOptions: a field's zero
// is a value of its own, never its default.
type GenOptions struct {
	// Seed seeds the generator: the same model, seed and options give the
	// same records. Defaults to DefaultSeed (1).
	Seed uint64
	// Duration of the generated trace; 0 is the model's span. Beyond the
	// model's span the fitted rate profile repeats. Defaults to 0.
	Duration time.Duration
	// RateScale multiplies the arrival rate in every bin; lengths are
	// unchanged. Defaults to DefaultRateScale (1).
	RateScale float64
	// LengthScale multiplies input, output and prefix lengths (rounded,
	// at least 1 token when the fitted length was positive). Defaults to
	// DefaultLengthScale (1).
	LengthScale float64
	// InputLengthScale multiplies input and prefix lengths alone (on top
	// of LengthScale): a follow-up's new tokens and the maximum context
	// too, so prompts scale and outputs do not. Defaults to
	// DefaultLengthScale (1).
	InputLengthScale float64
	// OutputLengthScale multiplies output lengths alone (on top of
	// LengthScale): a follow-up resends the previous output at its
	// unscaled length, so prompts do not change with it. Defaults to
	// DefaultLengthScale (1).
	OutputLengthScale float64
	// Mix overrides category shares in every class: category → share
	// ("none" is the empty category, "tail" the pooled small categories).
	// Unlisted categories share the rest in their fitted proportions; nil
	// is the fitted mix. Defaults to nil.
	Mix map[string]float64
	// Gaps picks the within-bin gap distribution: GapsEmpirical (the
	// histogram) or GapsFitted (the best parametric fit). Defaults to
	// DefaultGaps (empirical).
	Gaps string
	// MaxContextTokens caps a follow-up turn's input (the previous turn's
	// input + output + new tokens, version-2 models); a longer context is
	// cut to it, as a client trims its history; 0 is the longest input of
	// the class's fitted histograms, times LengthScale. Defaults to 0.
	MaxContextTokens int
}

// DefaultGenOptions returns every GenOptions default, the values the
// field docs name: a generation starts from them and changes what it
// means.
func DefaultGenOptions() GenOptions {
	return GenOptions{
		Seed:              DefaultSeed,
		Duration:          0,
		RateScale:         DefaultRateScale,
		LengthScale:       DefaultLengthScale,
		InputLengthScale:  DefaultLengthScale,
		OutputLengthScale: DefaultLengthScale,
		Mix:               nil,
		Gaps:              DefaultGaps,
		MaxContextTokens:  0,
	}
}

// span is how long the generated trace lasts: Duration, or for 0 the
// model's span (arrivals stay within what a trace holds,
// traces.MaxTimeNs).
func (o *GenOptions) span(m *Model) time.Duration {
	if o.Duration != 0 {
		return o.Duration
	}
	return time.Duration(min(m.SpanNs, traces.MaxTimeNs))
}

// Validate reports the first option that cannot be used as given (a zero
// is a value like any other, never the default), naming it in a
// *traces.OptionError.
func (o GenOptions) Validate() error {
	positive := func(v float64) bool { return v > 0 && !math.IsInf(v, 0) }
	switch {
	case o.Duration < 0 || o.Duration > traces.MaxTimeNs:
		return traces.OptionErrorf("synth", "Options.Duration", "must be > 0 and at most about 146 years (traces.MaxTimeNs), got %v", o.Duration)
	case !positive(o.RateScale):
		return traces.OptionErrorf("synth", "Options.RateScale", "must be > 0, got %g", o.RateScale)
	case !positive(o.LengthScale):
		return traces.OptionErrorf("synth", "Options.LengthScale", "must be > 0, got %g", o.LengthScale)
	case !positive(o.InputLengthScale):
		return traces.OptionErrorf("synth", "Options.InputLengthScale", "must be > 0, got %g", o.InputLengthScale)
	case !positive(o.OutputLengthScale):
		return traces.OptionErrorf("synth", "Options.OutputLengthScale", "must be > 0, got %g", o.OutputLengthScale)
	case o.MaxContextTokens < 0:
		return traces.OptionErrorf("synth", "Options.MaxContextTokens", "must be >= 0, got %d", o.MaxContextTokens)
	case !slices.Contains(GapsModes, o.Gaps):
		return traces.OptionErrorf("synth", "Options.Gaps", "must be one of %s, got %q", strings.Join(GapsModes, ", "), o.Gaps)
	}
	sum := 0.0
	for k, v := range o.Mix {
		if !(v >= 0 && v <= 1) {
			return traces.OptionErrorf("synth", "Options.Mix", "%s=%g: a share must be in [0, 1]", k, v)
		}
		sum += v
	}
	if sum > 1+1e-9 {
		return traces.OptionErrorf("synth", "Options.Mix", "shares add up to %g, more than 1", sum)
	}
	return nil
}

// ParseMix parses "category=share,..." (shares in [0, 1] or percentages
// with a % suffix; "none" is the empty category).
func ParseMix(s string) (map[string]float64, error) {
	out := map[string]float64{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || k == "" {
			return nil, traces.OptionErrorf("synth", "Options.Mix", "%q: want category=share", part)
		}
		pct := strings.HasSuffix(v, "%")
		f, err := strconv.ParseFloat(strings.TrimSuffix(v, "%"), 64)
		if err != nil {
			return nil, traces.OptionErrorf("synth", "Options.Mix", "%q: share is not a number", part)
		}
		if pct {
			f /= 100
		}
		if _, dup := out[k]; dup {
			return nil, traces.OptionErrorf("synth", "Options.Mix", "category %q given twice", k)
		}
		out[k] = f
	}
	return out, nil
}

// GenMeta is the metadata Generate's output should carry.
func (m *Model) GenMeta(o GenOptions) traces.Meta {
	meta := traces.NewMeta("synth:gen")
	meta.BlockSize = m.BlockSize
	meta.Tokenizer = m.Tokenizer
	meta.Set("synth.seed", strconv.FormatUint(o.Seed, 10))
	meta.Set("synth.duration_ns", strconv.FormatInt(int64(o.span(m)), 10))
	meta.Set("synth.rate_scale", strconv.FormatFloat(o.RateScale, 'g', -1, 64))
	meta.Set("synth.length_scale", strconv.FormatFloat(o.LengthScale, 'g', -1, 64))
	if o.InputLengthScale != 1 {
		meta.Set("synth.input_length_scale", strconv.FormatFloat(o.InputLengthScale, 'g', -1, 64))
	}
	if o.OutputLengthScale != 1 {
		meta.Set("synth.output_length_scale", strconv.FormatFloat(o.OutputLengthScale, 'g', -1, 64))
	}
	meta.Set("synth.gaps", o.Gaps)
	if o.MaxContextTokens > 0 {
		meta.Set("synth.max_context_tokens", strconv.Itoa(o.MaxContextTokens))
	}
	if len(o.Mix) > 0 {
		keys := make([]string, 0, len(o.Mix))
		for k := range o.Mix {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var parts []string
		for _, k := range keys {
			parts = append(parts, k+"="+strconv.FormatFloat(o.Mix[k], 'g', -1, 64))
		}
		meta.Set("synth.mix", strings.Join(parts, ","))
	}
	src := m.FittedOn.Source
	if src == "" {
		src = m.FittedOn.File
	}
	meta.Set("synth.fitted_on", src)
	return meta
}

// maxGenPerBin bounds the arrivals Generate puts in one bin.
const maxGenPerBin = 1e8

// genGroup is a Group ready to sample.
type genGroup struct {
	g       *Group
	prefix  *sampler
	input   *sampler
	rangeOf []int
	outs    []*sampler
	reuse   []*sampler
	fresh   []*sampler
	deep    []float64
	dist    *sampler
	blocks  bool
	tailNew float64
	follow  *genFollow // nil: the class's pooled one, if any
	first   *sampler   // input of rows that are not follow-ups; nil = input
}

// genFollow is a FollowUp ready to sample.
type genFollow struct {
	newIn, freshIn, out, think, turns *sampler
	dropped                           *sampler       // nil: reuse the whole previous chain
	kept                              *sampler       // nil: a fresh prompt keeps its category prefix
	byCtx                             []genFreshCond // nil: freshShare, freshIn and kept
	freshShare                        float64
	resumeShare                       float64 // of growing turns in a branch
}

func newGenFollow(fu *FollowUp) *genFollow {
	g := &genFollow{newIn: newSampler(&fu.NewInputTokens), freshIn: newSampler(&fu.FreshInputTokens), turns: newSampler(&fu.TurnsPerSession), out: newSampler(&fu.OutputTokens), think: newSampler(&fu.ThinkS)}
	if fu.Turns > 0 {
		g.freshShare = float64(fu.FreshPrompts) / float64(fu.Turns)
	}
	if fu.DroppedBlocks != nil {
		g.dropped = newSampler(fu.DroppedBlocks)
	}
	if fu.FreshKeptShare != nil {
		g.kept = newSampler(fu.FreshKeptShare)
	}
	g.byCtx = newGenFreshConds(fu.FreshByContext)
	if n := fu.Resumes + fu.BranchTurns; n > 0 {
		g.resumeShare = float64(fu.Resumes) / float64(n)
	}
	return g
}

type genClass struct {
	c          *Class
	groups     []*genGroup
	groupCum   []float64
	modelNames []string
	modelCum   []float64
	apiNames   []string
	apiCum     []float64
	levels     []*genLevel
	turns      *sampler
	turnGap    *sampler
	// Follow-up turns (version 2): drawn per the session's category.
	followUps bool
	// Category draws of version-2 models: sessions by SessionStarts,
	// single-shot rows by the rest (nil: groupCum for both).
	sessCum, singleCum []float64
	pooled             *genFollow
	maxContext         int32
	reused             int       // leading blocks the last filled row reused
	ctxOut             int32     // its output as the next turn resends it
	history            [][]int64 // recent block chains, ring
	histGroup          []int32   // each one's group
	histPos            int
	histLen            int
	tailLabels         []string
	nextTail           int
	arena              []int64 // block ids are carved from here (never reused)
}

// arenaChunk is the size of a block-id allocation.
const arenaChunk = 1 << 16

const historyCap = 1 << 16

// sessInfo is an open synthetic session.
type sessInfo struct {
	out   int64   // output session number (0 until its first row is written)
	last  int32   // its last scheduled turn
	chain []int64 // the previous turn's prefix blocks
	keep  int     // of those, how many the next turn may reuse (keepFor)
	// Version-2 follow-ups: the session's group and its previous row.
	group           int
	prevSeq         int64
	prevIn, prevOut int32
	prefix          int32
	category        string
	main            *sessMain // the context a branch came off (nil: none)
}

// pending is a request due in the current window before its lengths are drawn.
type pending struct {
	t     int64
	order int64
	class int
	sess  int64 // internal session id, 0 = single-shot
	turn  int32
	think int64 // drawn think time of a version-2 follow-up (ns)
}

// pendingFirst orders the pending requests' heap: by due time, then in
// the order they were scheduled.
func pendingFirst(a, b *pending) bool {
	if a.t != b.t {
		return a.t < b.t
	}
	return a.order < b.order
}

// Generate writes a synthetic trace drawn from the model to w (it does not
// close w) and returns the number of records written. Output is sorted by
// arrival, Seq from 0, sessions renumbered in order of first appearance.
// Same model, Seed and options → same records.
//
// Arrivals: each BinNs bin of the output gets count × RateScale session
// starts (stochastic rounding of the fraction) from the fitted bin at the
// same offset (the profile repeats past the model's span). They are laid
// out from the gap level of the bin's load: cluster sizes, gaps inside and
// between clusters, fitted to the bin as GapLevel.Layout says; quantized
// models put arrivals back on their grid. Multi-turn sessions add follow-up
// turns at fitted inter-turn gaps. Lengths: category by share, input from
// its histogram, output from the histogram of the input's range, prefix
// blocks by the fitted reuse. In a version-2 model's sessions, follow-ups
// keep the session's category, resend the previous turn's input and output
// plus new tokens, and carry parent_seq and a drawn think_ns
// (scheduleFollowUps, fillFollowUp); a version-1 model's follow-ups draw
// their lengths like first turns.
func (m *Model) Generate(ctx context.Context, opts GenOptions, w traces.Writer) (int64, error) {
	if err := opts.Validate(); err != nil {
		return 0, err
	}
	if err := m.Validate(); err != nil {
		return 0, err
	}
	classes, err := m.prepare(opts)
	if err != nil {
		return 0, err
	}
	st := &genState{m: m, opts: opts, classes: classes, sessions: map[int64]*sessInfo{}, blank: traces.NewRecord(),
		rng: rand.New(rand.NewPCG(opts.Seed, 0x7e1d))}
	for _, gc := range classes {
		gc.setGapSampler(opts, st.rng)
	}
	dur := int64(opts.span(m))
	for b := int64(0); b*m.BinNs < dur; b++ {
		if err := ctx.Err(); err != nil {
			return st.seq, err
		}
		ws, we := b*m.BinNs, min((b+1)*m.BinNs, dur)
		if we-ws <= 0 {
			break // b × BinNs overflowed
		}
		st.window = st.window[:0]
		if err := st.arrivals(b, ws, we, dur); err != nil {
			return st.seq, err
		}
		for len(st.pend) > 0 && st.pend[0].t < we {
			st.window = append(st.window, minheap.Pop(&st.pend, pendingFirst))
		}
		if len(st.window) == 0 {
			continue
		}
		if _, err := w.Write(st.fillWindow()); err != nil {
			return st.seq, fmt.Errorf("write synthetic trace: %w", err)
		}
	}
	return st.seq, nil
}

// genState is a generation under way.
type genState struct {
	m        *Model
	opts     GenOptions
	classes  []*genClass
	rng      *rand.Rand
	pend     []pending // follow-up turns due later, a heap (pendingFirst)
	order    int64
	nextSess int64
	sessions map[int64]*sessInfo // open sessions
	nextOut  int64
	seq      int64
	blocks   int64 // the next block id
	window   []pending
	out      []traces.Record
	blank    traces.Record
	lay      layout
}

// arrivals draws the session starts of bin b ([ws, we) of a trace of dur)
// into the window, and schedules their sessions' later turns.
func (st *genState) arrivals(b, ws, we, dur int64) error {
	m, opts, rng := st.m, st.opts, st.rng
	width := we - ws
	nbins := len(m.Classes[0].Arrival.CountsPerBin)
	src := int(b % int64(nbins))
	for ci, gc := range st.classes {
		exp := gc.c.Arrival.CountsPerBin[src] * opts.RateScale * float64(width) / float64(m.BinNs)
		if exp > maxGenPerBin {
			return fmt.Errorf("synth gen: %.3g arrivals in one %v bin (more than %g): lower %w or refit with a smaller bin", exp, time.Duration(m.BinNs), float64(maxGenPerBin), traces.OptionRef("Options.RateScale"))
		}
		n := int(exp)
		if rng.Float64() < exp-float64(n) {
			n++
		}
		if n == 0 {
			continue
		}
		prevIdle := gc.c.Arrival.CountsPerBin[(src+nbins-1)%nbins] == 0 && b > 0
		nextIdle := gc.c.Arrival.CountsPerBin[(src+1)%nbins] == 0 && (b+1)*m.BinNs < dur
		for _, a := range st.lay.layout(rng, gc.level(float64(n)), n, float64(width-1)/1e9, prevIdle, nextIdle) {
			off := int64(a * 1e9)
			p := pending{t: m.quantize(ws + min(max(off, 0), width-1)), order: st.order, class: ci}
			st.order++
			if s := gc.c.Sessions; s != nil && rng.Float64() < s.shareAt(src, gc.c.Arrival.CountsPerBin) {
				st.startSession(gc, &p, dur)
			}
			st.window = append(st.window, p)
		}
	}
	return nil
}

// shareAt is the share of bin b's arrivals that start a session: the
// bin's own (StartsPerBin), else Share.
func (s *Sessions) shareAt(b int, counts []float64) float64 {
	if s.StartsPerBin != nil && counts[b] > 0 {
		return s.StartsPerBin[b] / counts[b]
	}
	return s.Share
}

// startSession makes p the first turn of a new session and schedules its
// later turns.
func (st *genState) startSession(gc *genClass, p *pending, dur int64) {
	rng := st.rng
	st.nextSess++
	p.sess, p.turn = st.nextSess, 1
	turns := 1
	if !gc.turns.empty() {
		v, _ := gc.turns.sample(rng)
		turns = max(1, int(v))
	}
	info := &sessInfo{last: 1, group: -1}
	st.sessions[p.sess] = info
	if gc.followUps {
		gc.scheduleFollowUps(st.m, rng, info, *p, turns, dur, &st.pend, &st.order)
		return
	}
	ft := p.t
	for k := 2; k <= turns; k++ {
		g, _ := gc.turnGap.sample(rng) // 0 from an empty sampler
		ft = st.m.quantize(ft + int64(g*1e9))
		if ft >= dur {
			break
		}
		minheap.Push(&st.pend, pending{t: ft, order: st.order, class: p.class, sess: p.sess, turn: int32(k)}, pendingFirst)
		st.order++
		info.last = int32(k)
	}
}

// fillWindow draws the window's rows in arrival order and returns them
// (valid until the next call).
func (st *genState) fillWindow() []traces.Record {
	m, opts, rng := st.m, st.opts, st.rng
	slices.SortFunc(st.window, func(a, b pending) int {
		if a.t != b.t {
			return cmp.Compare(a.t, b.t)
		}
		return cmp.Compare(a.order, b.order)
	})
	st.out = st.out[:0]
	for _, p := range st.window {
		gc := st.classes[p.class]
		st.out = append(st.out, st.blank)
		rec := &st.out[len(st.out)-1]
		rec.Seq = st.seq
		st.seq++
		rec.ArrivalNs = p.t
		rec.Class = gc.c.Name
		rec.Model = pickShare(rng, gc.modelNames, gc.modelCum)
		rec.API = pickShare(rng, gc.apiNames, gc.apiCum)
		info := st.sessions[p.sess]
		if info == nil {
			gc.fill(rec, rng, m, opts, -1, nil, &st.blocks)
			continue
		}
		if info.out == 0 {
			st.nextOut++
			info.out = st.nextOut
		}
		rec.Session, rec.Turn = info.out, p.turn
		var chain []int64
		switch {
		case !gc.followUps:
			chain = gc.fill(rec, rng, m, opts, -1, info.chain, &st.blocks)
		case p.turn == 1:
			chain = gc.fill(rec, rng, m, opts, info.group, nil, &st.blocks)
		default:
			chain = gc.fillFollowUp(rec, rng, m, opts, info, &st.blocks)
			rec.ParentSeq, rec.ThinkNs = info.prevSeq, p.think
		}
		if chain != nil {
			info.chain = chain
			info.keep = gc.keepFor(m, rec, info, p.turn)
		}
		info.prevSeq, info.prevIn, info.prevOut = rec.Seq, rec.InputTokens, gc.ctxOut
		info.prefix, info.category = rec.PrefixTokens, rec.Category
		if p.turn >= info.last {
			delete(st.sessions, p.sess)
		}
	}
	return st.out
}

// layout holds the scratch slices of (*layout).layout.
type layout struct {
	sizes             []int
	gaps, intra, offs []float64
}

// layout places n arrivals in a bin of w seconds and returns their offsets
// in seconds (valid until the next call), using the gap level of the bin's
// load. An "even" level (Poisson-like) draws n+1 gaps from the level's whole
// gap distribution and stretches them by one factor to fill the bin: exact
// for a Poisson process given its count. A "clusters" level (bursty) draws
// cluster sizes until they hold n arrivals, the gaps inside each cluster and
// len(sizes)+1 gaps between clusters (the outer two run to the bin's
// edges); the gaps inside clusters keep their size (and sharp modes such as
// a 100 ms client tick), the gaps between clusters take up the difference,
// and next to an empty bin (prevIdle, nextIdle) the edge gap takes the time
// left over, so a silence goes on.
func (l *layout) layout(rng *rand.Rand, lv *genLevel, n int, w float64, prevIdle, nextIdle bool) []float64 {
	l.sizes, l.gaps, l.intra, l.offs = l.sizes[:0], l.gaps[:0], l.intra[:0], l.offs[:0]
	if lv.even {
		// A renewal process: n+1 gaps from the whole gap distribution
		// (inside and between clusters in their fitted proportion),
		// stretched by one factor.
		total := 0.0
		for i := 0; i <= n; i++ {
			g := 0.0
			if rng.Float64() < lv.pIntra {
				g = lv.intraGap(rng)
			} else {
				g = lv.draw(rng)
			}
			total += g
			l.gaps = append(l.gaps, total)
		}
		for i := 0; i < n; i++ {
			if total > 0 {
				l.offs = append(l.offs, l.gaps[i]/total*w)
			} else {
				l.offs = append(l.offs, float64(i+1)/float64(n+1)*w)
			}
		}
		return l.offs
	}
	for rem := n; rem > 0; {
		k := min(lv.size(rng), rem)
		l.sizes = append(l.sizes, k)
		rem -= k
	}
	var inter, in float64
	for i := 0; i <= len(l.sizes); i++ {
		g := lv.draw(rng)
		l.gaps = append(l.gaps, g)
		inter += g
	}
	for _, k := range l.sizes {
		for range k - 1 {
			g := lv.intraGap(rng)
			l.intra = append(l.intra, g)
			in += g
		}
	}
	scale, iscale := 1.0, 1.0
	left := w - inter - in
	gaps := l.gaps
	switch {
	case inter+in == 0:
		for i := range gaps {
			gaps[i] = w / float64(len(gaps))
		}
	case left >= 0 && prevIdle && nextIdle:
		gaps[0] += left / 2
		gaps[len(gaps)-1] += left / 2
	case left >= 0 && prevIdle:
		gaps[0] += left
	case left >= 0 && nextIdle:
		gaps[len(gaps)-1] += left
	case in < w && inter > 0:
		scale = (w - in) / inter
	default:
		scale = w / (inter + in)
		iscale = scale
	}
	at, ig := 0.0, 0
	for c, k := range l.sizes {
		at += gaps[c] * scale
		for j := 0; j < k; j++ {
			if j > 0 {
				at += l.intra[ig] * iscale
				ig++
			}
			l.offs = append(l.offs, at)
		}
	}
	return l.offs
}

func (m *Model) quantize(t int64) int64 {
	if q := m.QuantumNs; q > 0 {
		return t / q * q
	}
	return t
}

// prepare builds the samplers and applies the mix override.
func (m *Model) prepare(opts GenOptions) ([]*genClass, error) {
	nbins := len(m.Classes[0].Arrival.CountsPerBin)
	known := map[string]bool{}
	for ci := range m.Classes {
		if len(m.Classes[ci].Arrival.CountsPerBin) != nbins {
			return nil, fmt.Errorf("%w: classes have different numbers of arrival bins", ErrBadModel)
		}
		for _, g := range m.Classes[ci].Groups {
			if !m.Classes[ci].CategoriesFromBlocks {
				known[mixName(&g)] = true
			}
		}
	}
	for k := range opts.Mix {
		if !known[k] {
			names := make([]string, 0, len(known))
			for n := range known {
				names = append(names, n)
			}
			sort.Strings(names)
			if len(names) == 0 {
				return nil, traces.OptionErrorf("synth", "Options.Mix", "%s: the model has no categories to mix (categories derived from prefix blocks are not mixable)", k)
			}
			return nil, traces.OptionErrorf("synth", "Options.Mix", "%s: no such category; the model has %s", k, strings.Join(names, ", "))
		}
	}
	var out []*genClass
	for ci := range m.Classes {
		c := &m.Classes[ci]
		gc := &genClass{c: c}
		for _, s := range c.Models {
			gc.modelNames = append(gc.modelNames, s.Name)
			gc.modelCum = append(gc.modelCum, cumLast(gc.modelCum)+float64(s.Count))
		}
		for _, s := range c.APIs {
			gc.apiNames = append(gc.apiNames, s.Name)
			gc.apiCum = append(gc.apiCum, cumLast(gc.apiCum)+float64(s.Count))
		}
		// Shares with the mix override.
		given, rest := 0.0, 0.0
		for gi := range c.Groups {
			if v, ok := opts.Mix[mixName(&c.Groups[gi])]; ok {
				given += v
			} else {
				rest += c.Groups[gi].Share
			}
		}
		for gi := range c.Groups {
			g := &c.Groups[gi]
			share := g.Share
			if len(opts.Mix) > 0 {
				if v, ok := opts.Mix[mixName(g)]; ok {
					share = v
				} else if rest > 0 {
					share = g.Share / rest * (1 - given)
				} else {
					share = 0
				}
			}
			gg := &genGroup{g: g, prefix: newSampler(&g.PrefixTokens), input: newSampler(&g.InputTokens)}
			gg.blocks = g.Blocks >= 0.5 && m.BlockSize > 0
			if g.ReuseDistance != nil {
				gg.dist = newSampler(g.ReuseDistance)
			}
			for k := range g.Joint {
				cd := &g.Joint[k]
				for range cd.InputBins {
					gg.rangeOf = append(gg.rangeOf, k)
				}
				gg.outs = append(gg.outs, newSampler(&cd.OutputTokens))
				var reuse, fresh *sampler
				if cd.ReusedBlocks != nil {
					reuse = newSampler(cd.ReusedBlocks)
				}
				if cd.DeepFraction != nil {
					fresh = newSampler(cd.DeepFraction)
				}
				gg.reuse = append(gg.reuse, reuse)
				gg.fresh = append(gg.fresh, fresh)
				gg.deep = append(gg.deep, cd.DeepShare)
			}
			if g.Tail && g.Records > 0 {
				gg.tailNew = float64(g.TailCategories) / float64(g.Records)
			}
			gc.groups = append(gc.groups, gg)
			gc.groupCum = append(gc.groupCum, cumLast(gc.groupCum)+share)
		}
		if cumLast(gc.groupCum) <= 0 {
			return nil, traces.OptionErrorf("synth", "Options.Mix", "leaves class %q with no category to draw from", c.Name)
		}
		if s := c.Sessions; s != nil {
			gc.turns = newSampler(&s.Turns)
			gc.turnGap = newSampler(&s.GapS)
			gc.prepareFollowUps(opts)
		}
		out = append(out, gc)
	}
	return out, nil
}

func mixName(g *Group) string {
	if g.Tail {
		return "tail"
	}
	return groupName(g.Name)
}

func cumLast(c []float64) float64 {
	if len(c) == 0 {
		return 0
	}
	return c[len(c)-1]
}

// genLevel samples one gap level.
type genLevel struct {
	max       float64
	gap       *sampler
	sizes     *sampler
	intra     *sampler
	fitted    func() float64
	zeroShare float64
	even      bool
	pIntra    float64 // share of the level's gaps inside clusters
}

func (gc *genClass) setGapSampler(opts GenOptions, rng *rand.Rand) {
	for li := range gc.c.Arrival.Levels {
		lv := &gc.c.Arrival.Levels[li]
		g := &lv.Gap
		gl := &genLevel{max: lv.MaxCount, gap: newSampler(&g.Empirical), zeroShare: g.ZeroShare,
			sizes: newSampler(&lv.ClusterSizes), intra: newSampler(&lv.IntraGapS), even: lv.Layout == LayoutEven}
		if opts.Gaps == GapsFitted {
			for _, f := range g.Fits {
				if f.Family != g.Best {
					continue
				}
				switch f.Family {
				case "exponential":
					d := distuv.Exponential{Rate: f.Params["rate"], Src: rng}
					gl.fitted = d.Rand
				case "gamma":
					d := distuv.Gamma{Alpha: f.Params["shape"], Beta: f.Params["rate"], Src: rng}
					gl.fitted = d.Rand
				case "weibull":
					d := distuv.Weibull{K: f.Params["shape"], Lambda: f.Params["scale"], Src: rng}
					gl.fitted = d.Rand
				}
			}
		}
		if t := gl.intra.total + gl.gap.total; t > 0 {
			gl.pIntra = gl.intra.total / t
		}
		gc.levels = append(gc.levels, gl)
	}
}

// level returns the gap level of a bin with n arrivals.
func (gc *genClass) level(n float64) *genLevel {
	for _, l := range gc.levels {
		if n <= l.max {
			return l
		}
	}
	if len(gc.levels) == 0 {
		return &genLevel{}
	}
	return gc.levels[len(gc.levels)-1]
}

// size draws a cluster size (≥ 1).
func (l *genLevel) size(rng *rand.Rand) int {
	if l.sizes.empty() {
		return 1
	}
	v, _ := l.sizes.sample(rng)
	return max(1, int(v))
}

// intraGap draws a gap inside a cluster, in seconds.
func (l *genLevel) intraGap(rng *rand.Rand) float64 {
	if l.intra.empty() {
		return 0
	}
	v, _ := l.intra.sample(rng)
	return v
}

// draw draws one within-bin gap in seconds.
func (l *genLevel) draw(rng *rand.Rand) float64 {
	if l.fitted != nil {
		if l.zeroShare > 0 && rng.Float64() < l.zeroShare {
			return 0
		}
		return l.fitted()
	}
	if l.gap.empty() {
		return 0
	}
	v, _ := l.gap.sample(rng)
	return v
}

// inScale and outScale are the scales of prompts and of outputs.
func (o GenOptions) inScale() float64  { return o.LengthScale * o.InputLengthScale }
func (o GenOptions) outScale() float64 { return o.LengthScale * o.OutputLengthScale }

func scaleLen(v float64, s float64) int32 {
	if s == 1 || v <= 0 {
		return int32(min(v, math.MaxInt32))
	}
	x := math.Round(v * s)
	if x < 1 {
		x = 1
	}
	return int32(min(x, math.MaxInt32))
}

// fill draws the request columns of rec from group gi (-1: draw one); prev
// is the previous turn's block chain for a follow-up turn of a version-1
// model. It returns the row's block chain.
func (gc *genClass) fill(rec *traces.Record, rng *rand.Rand, m *Model, opts GenOptions, gi int, prev []int64, nextBlock *int64) []int64 {
	if gi < 0 {
		cum := gc.groupCum
		if gc.singleCum != nil {
			cum = gc.singleCum
		}
		gi = pickIndex(rng, cum)
	}
	gg := gc.groups[gi]
	g := gg.g
	var in float64
	var bin int
	if gg.first != nil {
		in, _ = gg.first.sample(rng)
		bin = binOf(&g.InputTokens, in)
	} else {
		in, bin = gg.input.sample(rng)
	}
	k := 0
	if bin < len(gg.rangeOf) {
		k = gg.rangeOf[bin]
	}
	out, _ := gg.outs[k].sample(rng)
	prefix := 0.0
	if !gc.c.CategoriesFromBlocks {
		prefix, _ = gg.prefix.sample(rng)
	}
	if prefix > in {
		in = prefix
	}
	rec.InputTokens = scaleLen(in, opts.inScale())
	rec.OutputTokens = scaleLen(out, opts.outScale())
	gc.ctxOut = scaleLen(out, opts.inScale())
	rec.PrefixTokens = min(scaleLen(prefix, opts.inScale()), rec.InputTokens)
	switch {
	case g.Tail:
		if len(gc.tailLabels) == 0 || rng.Float64() < gg.tailNew {
			gc.nextTail++
			label := "tail-" + strconv.Itoa(gc.nextTail)
			if gc.c.Name != "" {
				label = gc.c.Name + "-" + label
			}
			gc.tailLabels = append(gc.tailLabels, label)
			if len(gc.tailLabels) > 64 {
				gc.tailLabels = gc.tailLabels[1:]
			}
			rec.Category = label
		} else {
			rec.Category = gc.tailLabels[rng.IntN(len(gc.tailLabels))]
		}
	default:
		rec.Category = g.Name
	}
	if !gg.blocks {
		return nil
	}
	bs := int64(m.BlockSize)
	nb := int((int64(rec.InputTokens) + bs - 1) / bs)
	r := 0
	var src []int64
	if prev != nil {
		src, r = prev, min(len(prev), nb)
	} else if gc.histLen > 0 && (gg.reuse[k] != nil || gg.fresh[k] != nil) {
		if gg.fresh[k] != nil && (gg.reuse[k].empty() || rng.Float64() < gg.deep[k]) {
			f, _ := gg.fresh[k].sample(rng)
			r = max(gc.c.SharedPrefixBlocks+1, int(math.Round(f*float64(nb))))
		} else {
			v, _ := gg.reuse[k].sample(rng)
			r = int(v)
		}
		r = min(r, nb)
		if r > 0 {
			d := 1
			if !gg.dist.empty() {
				dv, _ := gg.dist.sample(rng)
				d = max(1, int(dv))
			}
			src = gc.findChain(d, r, gi)
			r = min(r, len(src))
		}
	}
	if len(gc.arena) < nb {
		gc.arena = make([]int64, max(nb, arenaChunk))
	}
	chain := gc.arena[:nb:nb]
	gc.arena = gc.arena[nb:]
	copy(chain, src[:r])
	for i := r; i < nb; i++ {
		chain[i] = *nextBlock
		*nextBlock++
	}
	gc.reused = r
	rec.PrefixBlocks = chain
	if gc.c.CategoriesFromBlocks {
		rec.Category = ""
		rec.PrefixTokens = 0
		if r > 0 {
			rec.Category = blockCategoryPrefix + strconv.FormatInt(chain[r-1], 10)
			rec.PrefixTokens = int32(min(int64(r)*bs, int64(rec.InputTokens)))
		}
	}
	gc.remember(chain, gi)
	return chain
}

// keepFor is how many leading blocks of a session's row rec, its turn
// turn, the session's next turn may reuse. A version-2 model's follow-ups
// reuse the whole chain. From version 3 on, never the trailing partial
// block (the next prompt fills it with other tokens, so its hash differs),
// and with Model.BlockK, none of the blocks the row added unless at least
// BlockK rows (this turn and the session's later ones) resend them: the
// k-anonymity rule capture applied to the fitted trace.
func (gc *genClass) keepFor(m *Model, rec *traces.Record, info *sessInfo, turn int32) int {
	if m.Version < 3 || m.BlockSize <= 0 {
		return len(info.chain)
	}
	keep := min(int(rec.InputTokens)/m.BlockSize, len(info.chain))
	if m.BlockK > 1 && int(info.last-turn)+1 < m.BlockK {
		keep = min(keep, gc.reused)
	}
	return keep
}

// remember adds a block chain of group gi to the class's recent chains.
func (gc *genClass) remember(chain []int64, gi int) {
	if len(gc.history) < historyCap {
		gc.history = append(gc.history, chain)
		gc.histGroup = append(gc.histGroup, int32(gi))
	} else {
		gc.history[gc.histPos], gc.histGroup[gc.histPos] = chain, int32(gi)
	}
	gc.histPos = (gc.histPos + 1) % historyCap
	gc.histLen = min(gc.histLen+1, historyCap)
}

// findChain returns a recent chain of group gi about d requests back with
// at least r blocks (searching nearby): a category's rows share its
// prefixes (its system prompt), not another's. Without one nearby, a
// chain of gi with fewer blocks, else the chain d back whatever its group.
func (gc *genClass) findChain(d, r, gi int) []int64 {
	d = min(d, gc.histLen)
	at := func(back int) int { // back ≥ 1
		i := (gc.histPos - back) % historyCap
		if i < 0 {
			i += historyCap
		}
		return i
	}
	best := gc.history[at(d)]
	same := -1
	for step := 0; step < 1024; step++ {
		for _, b := range [2]int{d + step, d - step} {
			if b < 1 || b > gc.histLen {
				continue
			}
			i := at(b)
			if int(gc.histGroup[i]) != gi {
				continue
			}
			if len(gc.history[i]) >= r {
				return gc.history[i]
			}
			if same < 0 {
				same = i
			}
		}
	}
	if same >= 0 {
		return gc.history[same]
	}
	return best
}
