package synth

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// The streaming fitter sees each record once, in (arrival_ns, seq) order,
// and keeps counts and multisets (multiset.go), never the records. What
// needs the end of the stream (the bin width and grid, load levels, a
// group's input ranges) is fitted from logs replayed at the end (spill.go):
// session-start arrivals and, per row, category id, input and output
// lengths and block reuse, as varints (2–6 bytes a row), in memory up to
// 1 MiB a log and then in a temporary file. In memory it keeps:
//
//   - per class: model and API counts, the inter-turn gap multiset;
//   - per session: its turn count and its last row's arrival, finish,
//     input and output, for the whole fit (a later turn may come at any
//     time), about 60 bytes: memory grows with the number of sessions;
//   - per class, per category up to fitLimits.categories: the follow-up
//     turns' multisets (followup.go);
//   - per prefix block: the last row that used it, for at most 2 ×
//     fitLimits.blocks blocks per class (blockTable);
//   - per category, up to fitLimits.categories per class: its record count
//     and, below MinCategoryRecords rows, those rows' lengths (≤ 24 bytes
//     each), from then on its prefix, input and reuse-distance multisets:
//     memory grows with the number of categories (classFit.category), and
//     categories past the limit are counted in at most 2^18 hashes and
//     then a 16 KiB sketch (distinct);
//   - the positive gaps between consecutive arrivals, for detectQuantum.
//
// Every multiset is exact up to its limit of distinct values (2^15 for
// gaps, 2^17 for token counts, which keeps a real length column exact),
// blocks and categories are tracked up to their limits, and the logs are
// exact, so the model is the one the in-memory fitter made of the same
// records (fitref_test.go keeps that fitter; fitstream_test.go compares
// them) until a limit is passed. Then FittedOn.Approximations says what
// happened: a distribution is fitted on values truncated to fewer
// significant bits (each lowered by less than a relative 2^-bits, see
// multiset), blocks unseen for long are forgotten, late categories are
// pooled, or the number of categories is estimated (distinct). Memory
// then still grows with sessions and with categories below their limit.

// fitLimits bound the fitter's memory; tests lower them to exercise the
// approximations.
type fitLimits struct {
	values     int // distinct values of a multiset of gaps
	lengths    int // distinct values of a multiset of lengths or counts
	blocks     int // prefix blocks per blockTable generation
	categories int // categories tracked per class
	untracked  int // categories past those counted exactly per class
	logMem     int // bytes of each varintLog kept in memory
}

var defaultFitLimits = fitLimits{
	values:     defaultValueLimit,
	lengths:    defaultLengthLimit,
	blocks:     1 << 19,
	categories: 1 << 16,
	untracked:  1 << 18,
	logMem:     1 << 20,
}

// approx collects where a fit is not exact, for FittedOn.Approximations.
type approx struct {
	bits      int // coarsest precision values were truncated to; 0 = none
	truncated int // histograms cut from truncated values
	notes     []string
}

// note records that a histogram is cut from values kept to sig bits.
func (a *approx) note(sig int) {
	if sig == 0 {
		return
	}
	a.truncated++
	if a.bits == 0 || sig < a.bits {
		a.bits = sig
	}
}

// runs is runsOf(s), noting its precision.
func (a *approx) runs(s *multiset) []run {
	a.note(s.sig)
	r, _ := runsOf(s)
	return r
}

// insert merges o's approximations into a as if they had been noted when
// a had its first at notes.
func (a *approx) insert(at int, o *approx) {
	if o.bits != 0 && (a.bits == 0 || o.bits < a.bits) {
		a.bits = o.bits
	}
	a.truncated += o.truncated
	a.notes = slices.Insert(a.notes, at, o.notes...)
}

// list is FittedOn.Approximations.
func (a *approx) list() []string {
	out := slices.Clone(a.notes)
	if a.truncated > 0 {
		out = append(out, fmt.Sprintf("%d distributions fitted on values truncated to %d bits after the leading one (each lowered by less than a relative 2^-%d): more distinct values than the fitter keeps exactly", a.truncated, a.bits, a.bits))
	}
	return out
}

// fitRow is what fitting reads of a record.
type fitRow struct {
	arrival, seq, session       int64
	finish, think, parent       int64 // FinishNs, ThinkNs, ParentSeq
	class, category, model, api string
	input, output, prefix       int32
	blocks                      []int64
}

func (r *fitRow) set(rec *traces.Record) {
	*r = fitRow{
		arrival: rec.ArrivalNs, seq: rec.Seq, session: rec.Session,
		finish: rec.FinishNs, think: rec.ThinkNs, parent: rec.ParentSeq,
		class: rec.Class, category: rec.Category, model: rec.Model, api: rec.API,
		input: rec.InputTokens, output: rec.OutputTokens, prefix: rec.PrefixTokens,
		blocks: rec.PrefixBlocks,
	}
}

// checkRecord rejects what Fit cannot fit.
func checkRecord(r *traces.Record) error {
	// The rules every reader applies (a file's rows already passed them):
	// arrivals and counts in range, so no span or bin overflows.
	if err := r.Validate(); err != nil {
		return fmt.Errorf("fit: record seq %d: %w", r.Seq, err)
	}
	return nil
}

// maxArrivalBins bounds the arrival-rate bins of a model (8 MiB of counts
// per class): 48 days at the default bin, beyond which the bin widens.
const maxArrivalBins = 1 << 20

// fitter is the state of one streaming fit.
type fitter struct {
	opts FitOptions
	lim  fitLimits

	n           int64
	first, last int64
	// Arrivals at the same instant as the one before, and the positive gaps
	// between consecutive arrivals (ns): what detectQuantum needs.
	zeroGaps int64
	gaps     multiset

	classes map[string]*classFit
	cur     *classFit // the previous record's class
	label   []byte    // scratch for a derived category label
	stage   *catStage // the category stage while it runs (fitstage.go)
	catBuf  []catRow  // rows not yet handed to it
	prev    []seenAt  // scratch: what each block of a row found
	approx  approx
}

func newFitter(opts FitOptions, lim fitLimits) *fitter {
	return &fitter{
		opts:    opts,
		lim:     lim,
		gaps:    newMultiset(lim.values, truncUint),
		classes: map[string]*classFit{},
	}
}

// close stops the category stage and releases temporary files.
func (f *fitter) close() error {
	f.syncCats()
	var errs []error
	for _, c := range f.classes {
		errs = append(errs, c.starts.close(), c.joint.close())
	}
	return errors.Join(errs...)
}

// add fits the next record in (arrival_ns, seq) order. r's lists are not
// kept.
func (f *fitter) add(r *fitRow) error {
	if f.n == 0 {
		f.first = r.arrival
	} else if d := r.arrival - f.last; d > 0 {
		f.gaps.add(uint64(d), 1)
	} else {
		f.zeroGaps++
	}
	f.last = r.arrival
	f.n++
	c := f.cur
	if c == nil || c.name != r.class {
		c = f.classes[r.class]
		if c == nil {
			c = newClassFit(r.class, f)
			f.classes[r.class] = c
		}
		f.cur = c
	}
	return c.add(f, r)
}

// counter counts names; most rows repeat the previous row's name.
type counter struct {
	m     map[string]*int64
	last  string
	lastN *int64
}

func (c *counter) inc(name string) {
	if c.lastN == nil || name != c.last {
		n := c.m[name]
		if n == nil {
			n = new(int64)
			c.m[name] = n
		}
		c.last, c.lastN = name, n
	}
	*c.lastN++
}

func (c *counter) counts() map[string]int64 {
	out := make(map[string]int64, len(c.m))
	for k, n := range c.m {
		out[k] = *n
	}
	return out
}

// sessRow is what a later row of a session needs of an earlier one: its
// arrival, finish (traces.NotReported = unknown), index in its class, seq,
// input, output and prefix blocks, and the seq of the row its branch came
// off (the turn before a fresh prompt it descends from; −1: none).
type sessRow struct {
	last     int64
	finish   int64
	row      int64 // the row's index in its class
	seq      int64
	branchOf int64
	in       int32
	out      int32
	blocks   int32
}

// backRow is a recent row of a session (sessState.back), a fresh
// prompt's branch point among them.
type backRow struct {
	sessRow
	// spawned says a fresh prompt branched off the row, bucket is that
	// prompt's context bucket (nil without blocks); turns counts the
	// growing rows in the branch until a row resumes the context, resumed
	// says one has.
	spawned bool
	bucket  *ctxBucket
	turns   int64
	resumed bool
}

// maxBackRows bounds sessState.back.
const maxBackRows = 8

// sessState is one session: rows so far, its last row, and the follow-up
// category of its second turn (followState.list index + 1; 0 = none yet).
type sessState struct {
	sessRow
	turns  int64
	follow int32
	// back holds the session's recent rows a later row may name as its
	// parent (parent_seq), when rows name their parents: at most
	// maxBackRows, so memory grows with sessions, not rows.
	back []backRow
}

// classFit is the streaming state of one traffic class.
type classFit struct {
	name string
	n    int64 // rows so far (the next row's index within the class)

	models, apis counter

	sess      map[int64]sessState
	turnGaps  multiset
	endSurv   gapSurvival // the inter-turn gaps' survival (censor.go), at the end
	follow    followState // follow-up turns (followup.go)
	starts    varintLog   // session-start arrivals, as deltas × 2 + 1 for a session's first row
	lastStart int64
	// Per row: category id (0 = pooled) × 2 + 1 for a follow-up, input and output tokens, and for
	// rows with blocks after the class's first, reused blocks + 1 and
	// blocks (else 0): the joint model, whose input ranges are known only
	// at the end.
	joint varintLog

	seen       blockTable
	hasBlocks  int64
	derivedOK  int64           // rows with blocks whose category is the derived label
	reusedFreq map[int32]int64 // rows with blocks after the class's first: reused leading blocks → rows

	cats    map[string]*catFit
	lastCat *catFit
	lastCN  string
	// Past fitLimits.categories, rows of categories seen for the first time
	// go to overflow (pooled into tail), or, when categories look derived
	// from blocks, every row goes to all (collapsed).
	overflow  *lenState
	all       *lenState
	collapsed bool
	untracked distinct // the categories not tracked
}

func newClassFit(name string, f *fitter) *classFit {
	return &classFit{
		name:       name,
		models:     counter{m: map[string]*int64{}},
		apis:       counter{m: map[string]*int64{}},
		sess:       map[int64]sessState{},
		turnGaps:   newValues(f.lim.values),
		starts:     varintLog{what: "session starts", dir: f.opts.TempDir, memLimit: f.lim.logMem},
		joint:      varintLog{what: "joint lengths", dir: f.opts.TempDir, memLimit: f.lim.logMem},
		seen:       blockTable{gen: f.lim.blocks},
		reusedFreq: map[int32]int64{},
		cats:       map[string]*catFit{},
		untracked:  distinct{limit: f.lim.untracked},
	}
}

// lenRow is what a category keeps of a row (the joint log the rest).
type lenRow struct {
	input, prefix int32
	blocks        bool  // the row has prefix blocks
	dist          int64 // rows since the last reused block was seen; -1 = none
}

func (c *classFit) add(f *fitter, r *fitRow) error {
	i := c.n
	c.n++
	c.models.inc(r.model)
	c.apis.inc(r.api)

	row, reused, prev := c.addBlocks(f, r, i)

	// Sessions: starts are single-shot rows and each session's first row.
	start := true
	if r.session != 0 {
		next := sessState{turns: 1, sessRow: sessRow{last: r.arrival, finish: r.finish, row: i, seq: r.seq, branchOf: -1, in: r.input, out: r.output, blocks: int32(len(r.blocks))}}
		if s, ok := c.sess[r.session]; ok {
			addFloat(&c.turnGaps, float64(r.arrival-s.last)/1e9)
			next.follow, next.branchOf, next.back = c.follow.add(f, r, &s, prev)
			next.turns = s.turns + 1
			start = false
		}
		c.sess[r.session] = next
	}
	if start {
		// The delta, and whether the start is a session's first row.
		sess := uint64(0)
		if r.session != 0 {
			sess = 1
		}
		c.starts.put(uint64(r.arrival-c.lastStart)<<1 | sess)
		c.lastStart = r.arrival
	} else {
		// A follow-up's blocks are its session's (fillFollowUp rebuilds
		// them from the previous turn): the group's reuse model, which
		// Generate draws first turns and single-shot rows from, is fitted
		// on those rows alone.
		row.dist = -1
	}
	f.queueCat(catRow{
		c: c, name: r.category, row: row, derived: c.looksDerived(), follow: !start,
		input: r.input, output: r.output, reused: int32(reused), blocks: int32(len(r.blocks)),
	})
	return nil
}

// keptBlocks is how many of a follow-up's leading prefix blocks it shares
// with the session's row s it follows (the blocks last seen in that row or
// after it), or −1 when either row has no blocks.
func keptBlocks(prev []seenAt, s *sessRow) int32 {
	if len(prev) == 0 || s.blocks == 0 {
		return -1
	}
	k := int32(0)
	for _, p := range prev {
		if !p.ok || p.row < s.row {
			break
		}
		k++
	}
	return min(k, s.blocks)
}

// addBlocks reads row i's prefix blocks, in arrival order within the class:
// the row as its category keeps it, the leading blocks it reuses (−1 for
// the class's first row or a row without blocks) and what each block found
// in the table (valid until the next row).
func (c *classFit) addBlocks(f *fitter, r *fitRow, i int64) (row lenRow, reused int, prev []seenAt) {
	row = lenRow{input: r.input, prefix: r.prefix, blocks: len(r.blocks) > 0, dist: -1}
	reused = -1
	if len(r.blocks) == 0 {
		return row, reused, nil
	}
	c.hasBlocks++
	// One probe per block looks the block up and marks it seen in this
	// row. The leading run of blocks seen in earlier rows is the reused
	// prefix; a block repeated within the row answers with what its first
	// occurrence found (the table as it was before the row).
	prev = f.prev[:0]
	L, leading := 0, true
	for j, b := range r.blocks {
		at, ok := c.seen.swap(b, i)
		if ok && at == i {
			for k := range j {
				if r.blocks[k] == b {
					at, ok = prev[k].row, prev[k].ok
					break
				}
			}
		}
		prev = append(prev, seenAt{at, ok})
		if leading && ok {
			L++
		} else {
			leading = false
		}
	}
	f.prev = prev
	if L > 0 {
		at := prev[L-1].row
		row.dist = i - at
		f.label = strconv.AppendInt(append(f.label[:0], blockCategoryPrefix...), r.blocks[L-1], 10)
		if string(f.label) == r.category {
			c.derivedOK++
		}
	} else if r.category == "" {
		c.derivedOK++
	}
	if i > 0 {
		c.reusedFreq[int32(L)]++
		reused = L
	}
	return row, reused, prev
}

// category returns where a row of category name goes — its catFit, or
// the lenState it is pooled into — and its id in the joint log (0 =
// pooled). Up to fitLimits.categories categories per class are tracked one
// by one (the empty category always is). A category first seen past that is not:
// if the class's categories look derived from blocks (derived, looksDerived
// as of the row; then Fit keeps one group anyway) every category is
// pooled from then on, else the new
// category's rows are pooled into the tail group whatever its final size —
// the one place where a big trace can get a different model: a category
// first seen after 65,536 others in its class that ends up with
// MinCategoryRecords rows or more is fitted as part of tail.
func (c *classFit) category(f *fitter, name string, derived bool) (*catFit, *lenState, int) {
	if c.collapsed {
		if _, ok := c.cats[name]; !ok {
			c.untrack(name)
		}
		return nil, c.all, 0
	}
	if c.lastCat != nil && c.lastCN == name {
		return c.lastCat, nil, c.lastCat.id
	}
	ct := c.cats[name]
	if ct == nil {
		if name != "" && len(c.cats) >= f.lim.categories {
			c.untrack(name)
			if derived {
				c.collapse(f)
				return nil, c.all, 0
			}
			if c.overflow == nil {
				c.overflow = newLenState(f.lim)
			}
			return nil, c.overflow, 0
		}
		ct = &catFit{id: len(c.cats) + 1}
		c.cats[name] = ct
	}
	c.lastCat, c.lastCN = ct, name
	return ct, nil, ct.id
}

func (c *classFit) untrack(name string) { c.untracked.add(name) }

// looksDerived is the CategoriesFromBlocks test on the rows so far.
func (c *classFit) looksDerived() bool {
	return c.hasBlocks > 0 && float64(c.hasBlocks)/float64(c.n) >= 0.5 && float64(c.derivedOK) >= 0.99*float64(c.hasBlocks)
}

// collapse pools every category's rows into c.all.
func (c *classFit) collapse(f *fitter) {
	c.all = newLenState(f.lim)
	names := make([]string, 0, len(c.cats))
	for n := range c.cats {
		names = append(names, n)
	}
	sort.Strings(names) // merging order decides nothing, but keep it fixed
	for _, n := range names {
		ct := c.cats[n]
		ct.mergeInto(c.all)
		ct.st, ct.pending = nil, nil
	}
	if c.overflow != nil {
		c.all.merge(c.overflow)
		c.overflow = nil
	}
	c.collapsed = true
	c.lastCat = nil
}

// catFit is one category of a class.
type catFit struct {
	id int // in the joint log
	n  int64
	// Rows of a category with fewer than MinCategoryRecords rows are kept
	// as they are (it may end in the tail group); from then on st holds
	// them.
	pending []lenRow
	st      *lenState
}

func (ct *catFit) add(f *fitter, r *lenRow) {
	ct.n++
	if ct.st == nil {
		if ct.n < int64(f.opts.MinCategoryRecords) {
			ct.pending = append(ct.pending, *r)
			return
		}
		ct.st = newLenState(f.lim)
		for i := range ct.pending {
			ct.st.add(&ct.pending[i])
		}
		ct.pending = nil
	}
	ct.st.add(r)
}

// mergeInto adds the category's rows to s.
func (ct *catFit) mergeInto(s *lenState) {
	if ct.st != nil {
		s.merge(ct.st)
	}
	for i := range ct.pending {
		s.add(&ct.pending[i])
	}
}

// lenState is the length model of a group's rows, as multisets (outputs
// and reuse come from the joint log).
type lenState struct {
	n, withBlocks int64
	prefix, input multiset
	dists         multiset // reuse distances (rows) of rows with blocks
}

func newLenState(lim fitLimits) *lenState {
	return &lenState{
		prefix: newValues(lim.lengths),
		input:  newValues(lim.lengths),
		dists:  newValues(lim.lengths),
	}
}

func (s *lenState) add(r *lenRow) {
	s.n++
	addFloat(&s.prefix, float64(r.prefix))
	addFloat(&s.input, float64(r.input))
	if r.blocks {
		s.withBlocks++
		if r.dist > 0 {
			addFloat(&s.dists, float64(r.dist))
		}
	}
}

func (s *lenState) merge(o *lenState) {
	s.n += o.n
	s.withBlocks += o.withBlocks
	s.prefix.merge(&o.prefix)
	s.input.merge(&o.input)
	s.dists.merge(&o.dists)
}

// model finishes the fit.
func (f *fitter) model(ctx context.Context) (*Model, error) {
	opts := f.opts
	f.syncCats()
	if f.n == 0 {
		return nil, errors.New("fit: the trace has no records")
	}
	first, last := f.first, f.last
	m := &Model{
		Format:    ModelFormat,
		Version:   ModelVersion,
		Fit:       opts,
		BlockSize: opts.Meta.BlockSize,
		Tokenizer: opts.Meta.Tokenizer,
	}
	m.QuantumNs = int64(opts.Quantum)
	if opts.Quantum == 0 {
		m.QuantumNs = f.detectQuantum()
	} else if opts.Quantum < 0 {
		m.QuantumNs = 0
	}
	if m.QuantumNs > 0 {
		m.SpanNs = last + m.QuantumNs
	} else if f.n > 1 && last > first {
		m.SpanNs = last + (last-first)/(f.n-1)
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
	if bins := (m.SpanNs-1)/m.BinNs + 1; bins > maxArrivalBins {
		// A span this long at this bin would take a count per bin (and a
		// model) that grows with the span: widen the bin instead.
		w := (m.SpanNs-1)/maxArrivalBins + 1
		if q := m.QuantumNs; q > 0 {
			w = (w-1)/q*q + q
		}
		f.approx.notes = append(f.approx.notes, fmt.Sprintf("the arrival-rate bin is %v, not %v: the span of %v would take %d bins of %v (at most %d)",
			time.Duration(w), time.Duration(m.BinNs), time.Duration(m.SpanNs).Round(time.Second), bins, time.Duration(m.BinNs), maxArrivalBins))
		m.BinNs = w
	}
	m.Fit.Bin = time.Duration(m.BinNs)
	m.Fit.Quantum = time.Duration(m.QuantumNs)

	names := make([]string, 0, len(f.classes))
	for n := range f.classes {
		names = append(names, n)
	}
	sort.Strings(names)
	m.FittedOn = FittedOn{
		Source:         opts.Meta.Source,
		File:           opts.File,
		SchemaVersion:  opts.Meta.SchemaVersion,
		Records:        f.n,
		FirstArrivalNs: first,
		LastArrivalNs:  last,
		Sessions:       f.sessions(names),
		Categories:     f.categories(names),
		Note:           "histograms, shares and per-bin counts only; no raw records",
	}
	rng := rand.New(rand.NewPCG(opts.Seed, 0x5eed))
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		c, err := f.fitClass(m, f.classes[name], rng)
		if err != nil {
			return nil, fmt.Errorf("fit class %q: %w", name, err)
		}
		c.Name = name
		m.Classes = append(m.Classes, c)
	}
	m.FittedOn.Approximations = f.approx.list()
	for _, c := range f.classes {
		if c.hasBlocks > 0 && len(c.follow.cats) > 0 {
			m.BlockK = int(f.blockK())
		}
	}
	m.Version = m.lowestVersion()
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("fit produced an invalid model (bug): %w", err)
	}
	return m, nil
}

// sessions counts distinct non-zero sessions over all classes.
func (f *fitter) sessions(names []string) int64 {
	var n int64
	for i, name := range names {
	next:
		for id := range f.classes[name].sess {
			for _, other := range names[:i] {
				if _, ok := f.classes[other].sess[id]; ok {
					continue next
				}
			}
			n++
		}
	}
	return n
}

// categories counts distinct categories over all classes: exactly, unless
// a class saw more than fitLimits.untracked categories past those it
// tracks (then an estimate, see distinct).
func (f *fitter) categories(names []string) int {
	if len(names) == 1 { // a class's tracked and untracked ones are disjoint
		c := f.classes[names[0]]
		if c.untracked.estimated() {
			f.approx.notes = append(f.approx.notes, "the number of categories is an estimate (HyperLogLog, standard error 0.8%)")
		}
		return len(c.cats) + int(c.untracked.count())
	}
	var tracked []string
	var ds []*distinct
	for _, name := range names {
		c := f.classes[name]
		for cat := range c.cats {
			tracked = append(tracked, cat)
		}
		ds = append(ds, &c.untracked)
	}
	n, est := unionCount(tracked, ds)
	if est {
		f.approx.notes = append(f.approx.notes, "the number of categories is an estimate (HyperLogLog, standard error 0.8%)")
	}
	return int(n)
}

// detectQuantum finds the grid of a coarsened trace: at least a quarter of
// the arrivals share an instant with the one before, and 99% of the gaps
// between distinct instants are within 1% of a multiple of their median.
func (f *fitter) detectQuantum() int64 {
	if f.n < 2 {
		return 0
	}
	npos := f.n - 1 - f.zeroGaps
	if npos < 10 || float64(npos) > 0.75*float64(f.n-1) {
		return 0
	}
	f.approx.note(f.gaps.sig)
	type gapRun struct {
		g uint64
		n int64
	}
	runs := make([]gapRun, 0, f.gaps.len())
	f.gaps.each(func(g uint64, n int64) { runs = append(runs, gapRun{g, n}) })
	slices.SortFunc(runs, func(a, b gapRun) int { return cmp.Compare(a.g, b.g) })
	var q int64
	var at int64
	for _, r := range runs {
		at += r.n
		if at > npos/2 {
			q = int64(r.g)
			break
		}
	}
	if q < int64(time.Millisecond) {
		return 0
	}
	q = (q + int64(time.Millisecond)/2) / int64(time.Millisecond) * int64(time.Millisecond)
	tol := float64(q) / 100
	var ok int64
	for _, r := range runs {
		k := math.Round(float64(r.g) / float64(q))
		if k >= 1 && math.Abs(float64(r.g)-k*float64(q)) <= tol {
			ok += r.n
		}
	}
	if float64(ok) < 0.99*float64(npos) {
		return 0
	}
	return q
}

func (f *fitter) fitClass(m *Model, c *classFit, rng *rand.Rand) (Class, error) {
	opts := f.opts
	cl := Class{Records: c.n}
	cl.Models, cl.APIs = sharesOf(c.models.counts()), sharesOf(c.apis.counts())

	if len(c.sess) > 0 {
		turns := map[float64]int64{}
		obs := make([]turnObs, 0, len(c.sess))
		for _, s := range c.sess {
			turns[float64(s.turns)]++
			obs = append(obs, turnObs{s.turns, f.last - s.last})
		}
		gaps := f.approx.runs(&c.turnGaps)
		c.endSurv = newGapSurvival(gaps)
		cl.Sessions = &Sessions{
			Share: float64(len(c.sess)) / float64(c.starts.n),
			Turns: censoredTurns(newHistRuns(runsOfMap(turns), opts.LengthBins, opts.MinBinCount, true), obs, c.endSurv),
			GapS:  newHistRuns(gaps, opts.GapBins, opts.MinBinCount, false),
		}
	}
	// The arrival process (a second pass over the starts log) and the
	// length model (a pass over the joint log) are independent: fit them
	// on two cores. fitArrival notes its approximations apart, and they
	// are put where a sequential fit would have put them.
	var (
		arrAp      approx
		arrErr     error
		sessStarts []float64
		done       = make(chan struct{})
		at         = len(f.approx.notes)
	)
	go func() {
		defer close(done)
		cl.Arrival, sessStarts, arrErr = fitArrival(m, &c.starts, opts, f.lim, &arrAp, rng)
	}()
	defer func() { <-done }() // never leave it running on an early return
	err := f.fitLengths(&cl, c)
	<-done
	f.approx.insert(at, &arrAp)
	if arrErr != nil {
		return cl, arrErr
	}
	if cl.Sessions != nil {
		cl.Sessions.StartsPerBin = sessStarts
	}
	return cl, err
}

// fitLengths fits a class's length, reuse and group model.
func (f *fitter) fitLengths(cl *Class, c *classFit) error {
	opts := f.opts

	if c.hasBlocks > 0 {
		bestN, bestR := int64(0), int32(0)
		for r, n := range c.reusedFreq {
			if r > 0 && (n > bestN || (n == bestN && r < bestR)) {
				bestN, bestR = n, r
			}
		}
		if float64(bestN) >= 0.1*float64(c.hasBlocks) {
			cl.SharedPrefixBlocks = int(bestR)
		}
	}
	blocksShare := float64(c.hasBlocks) / float64(c.n)
	cl.CategoriesFromBlocks = c.hasBlocks > 0 && blocksShare >= 0.5 && float64(c.derivedOK) >= 0.99*float64(c.hasBlocks)
	if c.collapsed && !cl.CategoriesFromBlocks {
		// Pooled while streaming, the categories cannot be told apart now.
		return fmt.Errorf("its categories looked derived from prefix blocks when it reached %d of them, so the fitter pooled them, but by the end fewer than 99%% of its rows with blocks carry their derived label: fit the trace in parts", f.lim.categories)
	}

	// Groups: categories (small ones pooled), or one group when categories
	// are derived from blocks.
	names := make([]string, 0, len(c.cats))
	for n := range c.cats {
		names = append(names, n)
	}
	sort.Strings(names)
	var groups []*lenState
	groupOf := make([]int, len(c.cats)+1) // category id → group; 0 = pooled
	if cl.CategoriesFromBlocks {
		all := c.all
		if all == nil {
			all = newLenState(f.lim)
			for _, n := range names {
				c.cats[n].mergeInto(all)
			}
			if c.overflow != nil {
				all.merge(c.overflow)
			}
		}
		cl.Groups = []Group{{Name: ""}}
		groups = []*lenState{all}
	} else {
		var small []int
		tail := newLenState(f.lim)
		tailCats := c.untracked.count()
		if c.overflow != nil {
			tail.merge(c.overflow)
		}
		for _, n := range names {
			ct := c.cats[n]
			if n == "" || ct.n >= int64(opts.MinCategoryRecords) {
				s := ct.st
				if s == nil { // the empty category, below MinCategoryRecords
					s = newLenState(f.lim)
					ct.mergeInto(s)
				}
				groupOf[ct.id] = len(groups)
				cl.Groups = append(cl.Groups, Group{Name: n})
				groups = append(groups, s)
			} else {
				ct.mergeInto(tail)
				tailCats++
				small = append(small, ct.id)
			}
		}
		if tail.n > 0 {
			for _, id := range append(small, 0) {
				groupOf[id] = len(groups)
			}
			cl.Groups = append(cl.Groups, Group{Name: "tail", Tail: true, TailCategories: tailCats})
			groups = append(groups, tail)
		}
	}
	joints := make([]*groupJoint, len(cl.Groups))
	for gi := range cl.Groups {
		joints[gi] = fitGroup(&cl.Groups[gi], groups[gi], c.n, opts, f.lim, &f.approx)
	}
	if err := c.replayJoint(groupOf, joints, cl.SharedPrefixBlocks); err != nil {
		return err
	}
	for gi := range cl.Groups {
		joints[gi].finish(&cl.Groups[gi], opts, f.lim, &f.approx)
	}
	f.fitFollowUps(cl, c, groups, groupOf)
	if c.seen.dropped > 0 {
		f.approx.notes = append(f.approx.notes, fmt.Sprintf("class %q: %d prefix blocks not seen within %d distinct blocks were forgotten (a later reuse of them counts as fresh)", c.name, c.seen.dropped, c.seen.gen))
	}
	if n := c.untracked.count(); n > 0 && !cl.CategoriesFromBlocks {
		f.approx.notes = append(f.approx.notes, fmt.Sprintf("class %q: %d categories first seen after %d others were pooled into tail whatever their size", c.name, n, f.lim.categories))
	}
	return nil
}

// groupJoint is a group's joint model while the joint log is replayed:
// its input ranges and, per range, the outputs, reused blocks and fresh
// fractions.
type groupJoint struct {
	rangeOf   []int     // input bin → range
	bounds    []int     // first input bin of each range
	his       []float64 // Hi of the non-empty input bins, as binOf sees them
	useBlocks bool
	outs      []multiset
	reuse     []multiset
	fresh     []multiset
}

// fitGroup fits a group's length histograms from its multisets and
// prepares its joint model.
func fitGroup(g *Group, s *lenState, classRows int64, opts FitOptions, lim fitLimits, ap *approx) *groupJoint {
	g.Records = s.n
	g.Share = float64(s.n) / float64(classRows)
	prefix, input := ap.runs(&s.prefix), ap.runs(&s.input)
	g.PrefixTokens = newHistRuns(prefix, opts.LengthBins, opts.MinBinCount, true)
	g.InputTokens = newHistRuns(input, opts.LengthBins, opts.MinBinCount, true)
	g.Blocks = float64(s.withBlocks) / float64(s.n)
	j := &groupJoint{useBlocks: g.Blocks >= 0.5}
	for _, b := range g.InputTokens.Bins {
		if b.Count > 0 {
			j.his = append(j.his, b.Hi)
		}
	}
	if j.useBlocks && s.dists.len() > 0 {
		h := newHistRuns(ap.runs(&s.dists), opts.GapBins, opts.MinBinCount, true)
		g.ReuseDistance = &h
	}
	// Joint: consecutive input bins of about equal mass.
	nb := len(g.InputTokens.Bins)
	j.rangeOf = make([]int, nb)
	per := float64(s.n) / float64(opts.JointBins)
	acc := 0.0
	for b := 0; b < nb; b++ {
		if b == 0 || acc >= per {
			j.bounds = append(j.bounds, b)
			acc = 0
		}
		j.rangeOf[b] = len(j.bounds) - 1
		acc += g.InputTokens.Bins[b].Count
	}
	for range j.bounds {
		j.outs = append(j.outs, newValues(lim.lengths))
		j.reuse = append(j.reuse, newValues(lim.lengths))
		j.fresh = append(j.fresh, newValues(lim.values))
	}
	return j
}

// rangeOfInput is the input range of a row with in input tokens: the
// range of binOf(InputTokens, in), by binary search.
func (j *groupJoint) rangeOfInput(in int32) int {
	k, _ := slices.BinarySearchFunc(j.his, float64(in), func(hi, v float64) int {
		if hi < v {
			return -1
		}
		return 1 // the first bin with v <= Hi
	})
	return j.rangeOf[min(k, len(j.his)-1)]
}

// replayJoint reads the joint log into the groups' ranges.
func (c *classFit) replayJoint(groupOf []int, joints []*groupJoint, sharedBlocks int) error {
	r, err := c.joint.replay()
	if err != nil {
		return err
	}
	for range c.n {
		idf, in, out, reused := r.next(), int32(r.next()), r.next(), int(r.next())-1
		id, follow := idf>>1, idf&1 == 1
		j := joints[groupOf[id]]
		k := j.rangeOfInput(in)
		addFloat(&j.outs[k], float64(out))
		if reused < 0 {
			continue
		}
		blocks := r.next()
		if !j.useBlocks || follow {
			continue
		}
		// The class's first row has nothing to reuse (Generate knows); it
		// is not in the log's reuse.
		if reused > sharedBlocks {
			addFloat(&j.fresh[k], float64(reused)/float64(blocks))
		} else {
			addFloat(&j.reuse[k], float64(reused))
		}
	}
	return r.err
}

// finish fits the group's conditional histograms.
func (j *groupJoint) finish(g *Group, opts FitOptions, lim fitLimits, ap *approx) {
	nb := len(g.InputTokens.Bins)
	var pools [][2]int
	if j.useBlocks {
		n := make([]int64, len(j.bounds))
		for k := range n {
			n[k] = j.reuse[k].total() + j.fresh[k].total()
		}
		pools = reusePools(n, opts.MinBinCount)
	}
	for k := range j.bounds {
		end := nb
		if k+1 < len(j.bounds) {
			end = j.bounds[k+1]
		}
		cd := Cond{
			InputBins:    end - j.bounds[k],
			InputMax:     g.InputTokens.Bins[end-1].Hi,
			OutputTokens: newHistRuns(ap.runs(&j.outs[k]), opts.OutputBins, opts.MinBinCount, true),
		}
		if j.useBlocks {
			reuse, fresh := &j.reuse[k], &j.fresh[k]
			if p := pools[k]; p[1]-p[0] > 1 {
				r, f := newValues(lim.lengths), newValues(lim.values)
				for i := p[0]; i < p[1]; i++ {
					r.merge(&j.reuse[i])
					f.merge(&j.fresh[i])
				}
				reuse, fresh = &r, &f
			}
			ru, fr := ap.runs(reuse), ap.runs(fresh)
			h := newHistRuns(ru, opts.OutputBins, opts.MinBinCount, true)
			cd.ReusedBlocks = &h
			nr, nf := countOf(ru), countOf(fr)
			if n := nr + nf; n > 0 && nf > 0 {
				cd.DeepShare = float64(nf) / float64(n)
				f := newHistRuns(fr, opts.OutputBins, opts.MinBinCount, false)
				cd.DeepFraction = &f
			}
		}
		g.Joint = append(g.Joint, cd)
	}
}

// reusePools says, for each input range of a group's reuse model, which
// ranges [lo, hi) its reuse is fitted on: the range alone when it holds
// at least minCount rows (n[k]), else it and its neighbours, the fuller
// side first (the lower on a tie), until they do or none is left. The
// model is fitted on the rows Generate draws with it (first turns and
// single-shot rows), whose inputs are shorter than a conversation's
// later turns: a range that holds few of them would give a first turn
// drawn there no reuse, or pin down a single row's.
func reusePools(n []int64, minCount int) [][2]int {
	out := make([][2]int, len(n))
	for k := range n {
		lo, hi, sum := k, k+1, n[k]
		for sum < int64(minCount) && (lo > 0 || hi < len(n)) {
			switch {
			case lo == 0:
				sum += n[hi]
				hi++
			case hi == len(n) || n[lo-1] >= n[hi]:
				lo--
				sum += n[lo]
			default:
				sum += n[hi]
				hi++
			}
		}
		out[k] = [2]int{lo, hi}
	}
	return out
}

// runsOfMap returns value → count as runs in increasing value order.
func runsOfMap(m map[float64]int64) []run {
	out := make([]run, 0, len(m))
	for v, n := range m {
		out = append(out, run{v, n})
	}
	slices.SortFunc(out, func(a, b run) int {
		if a.v < b.v {
			return -1
		}
		if a.v > b.v {
			return 1
		}
		return 0
	})
	return out
}

func countOf(runs []run) int64 {
	var n int64
	for _, r := range runs {
		n += r.n
	}
	return n
}
