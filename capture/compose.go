package capture

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"time"

	"github.com/tokentrace/tokentrace/internal/kmerge"
	"github.com/tokentrace/tokentrace/traces"
)

// Metadata keys of a part (Options.Part) that Compose reads back.
const (
	metaPart         = "capture.part"
	metaPartK        = "capture.kanon_k"
	metaPartIdle     = "capture.session_idle"
	metaPartArrivals = "capture.arrivals"
)

// kNow is the k the capture itself applies: 1 (keep all) in a part, whose
// k-anonymity Compose applies.
func (o *Options) kNow() int {
	if o.Part {
		return 1
	}
	return o.MinCategorySize
}

// ComposeOptions configures Compose. Start from DefaultComposeOptions,
// which takes everything from the parts' metadata.
type ComposeOptions struct {
	// MinCategorySize is k; 0 is the k the parts were captured with
	// (capture.kanon_k), and a smaller k than that is refused. Defaults to
	// 0.
	MinCategorySize int
	// SessionIdle splits a session id's requests into sessions where they
	// are further apart; 0 is the parts' (capture.session_idle). Defaults
	// to 0.
	SessionIdle time.Duration
	// KeepHashes keeps categories and kept blocks as their keyed digests
	// (as Options.KeepHashes); otherwise they are numbered in order of
	// first appearance, as a single capture numbers them. Session ids stay
	// digests either way. Defaults to false.
	KeepHashes bool
	// Read is how the parts are read (Strict, Salvage: see
	// traces.OpenOptions; a part is always allowed its deferred
	// k-anonymity). A part's rows must be in arrival order: the merge
	// relies on it, so a row out of order is an error. Defaults to
	// traces.DefaultOpenOptions().
	Read traces.OpenOptions
}

// DefaultComposeOptions returns every ComposeOptions default.
func DefaultComposeOptions() ComposeOptions {
	return ComposeOptions{MinCategorySize: 0, SessionIdle: 0, KeepHashes: false, Read: traces.DefaultOpenOptions()}
}

// ComposeStats says what Compose did.
type ComposeStats struct {
	Parts, Requests               int64
	Categories, CategoriesDropped int
	Sessions                      int64
	BlocksKept, BlocksDropped     int64
	K                             int
	SessionIdle                   time.Duration
	// Notes say which rows of the parts were skipped (traces.ReadStats.Notes).
	Notes []string
}

// Compose finishes a trace captured in parts (Options.Part): it reads the
// parts (files, directories or globs of them; in any order, merged by
// arrival) twice. The first pass counts the requests of every category,
// prefix block and session; the second writes the finished trace to the
// writer create returns: categories and blocks shared by fewer than k
// requests dropped (a dropped block becomes an id of its own), a session
// id's requests split where idle for longer than SessionIdle (the first
// session keeps the id, a later one a digest of the id and its start), a
// session of one request dropped, turns numbered, and arrivals counted from
// the first request. What it holds grows with the distinct categories,
// blocks and sessions, not with the requests. command, when set, is
// recorded as Meta.Command.
func Compose(ctx context.Context, o ComposeOptions, names []string, command string, create func(traces.Meta) (traces.Writer, error)) (ComposeStats, error) {
	var st ComposeStats
	var parts []string
	for _, n := range names {
		ps, err := traces.DatasetParts(n)
		if err != nil {
			return st, err
		}
		if ps == nil {
			ps = []string{n}
		}
		parts = append(parts, ps...)
	}
	if len(parts) == 0 {
		return st, errors.New("compose: no parts given")
	}
	st.Parts = int64(len(parts))
	meta, k, idle, err := partsMeta(parts)
	if err != nil {
		return st, err
	}
	if o.MinCategorySize != 0 {
		if o.MinCategorySize < k {
			return st, optionErr("ComposeOptions.MinCategorySize", o.MinCategorySize, fmt.Sprintf("at least the parts' k (%d)", k))
		}
		k = o.MinCategorySize
	}
	if o.SessionIdle < 0 {
		return st, optionErr("ComposeOptions.SessionIdle", o.SessionIdle, "want a positive duration (0 = the parts')")
	} else if o.SessionIdle > 0 {
		idle = o.SessionIdle
	}
	st.K, st.SessionIdle = k, idle

	// First pass: counts.
	c := newComposer(k, idle, o.KeepHashes)
	first := true
	if err := mergeParts(ctx, parts, o.Read, &st.Notes, func(r *traces.Record) error {
		if first {
			c.origin, first = r.ArrivalNs, false
		}
		c.count(r)
		return nil
	}); err != nil {
		return st, err
	}
	c.endCount()

	// Second pass: the finished rows.
	meta.Extra = nil
	for key, v := range meta0Extra(parts[0]) {
		meta.Set(key, v)
	}
	meta.KThreshold = k
	meta.Command = command
	meta.Set("capture.composed_parts", strconv.Itoa(len(parts)))
	meta.Set(metaPartIdle, idle.String())
	if o.KeepHashes {
		meta.Set("capture.keep_hashes", "true")
	}
	w, err := create(meta)
	if err != nil {
		return st, err
	}
	batch := make([]traces.Record, 0, 1024)
	err = mergeParts(ctx, parts, o.Read, nil, func(r *traces.Record) error {
		c.rewrite(r)
		st.Requests++
		if batch = append(batch, r.Clone()); len(batch) == cap(batch) {
			_, err := w.Write(batch)
			batch = batch[:0]
			return err
		}
		return nil
	})
	if err == nil && len(batch) > 0 {
		_, err = w.Write(batch)
	}
	if err != nil {
		traces.Abort(w)
		return st, fmt.Errorf("compose: %w", err)
	}
	if err := w.Close(); err != nil {
		return st, fmt.Errorf("compose: write trace: %w", err)
	}
	st.Categories, st.CategoriesDropped = len(c.catLabel), c.catsDropped()
	st.Sessions = c.nSess
	st.BlocksKept, st.BlocksDropped = c.blocksKept, c.blocksDropped
	return st, nil
}

// meta0Extra is the first part's metadata that still holds for the
// finished trace (what the part-only keys said no longer does).
func meta0Extra(part string) map[string]string {
	r, err := traces.OpenWith(part, partMeta())
	if err != nil {
		return nil
	}
	defer r.Close()
	m := r.Meta()
	out := map[string]string{}
	for key, v := range m.Extra {
		switch key {
		case traces.MetaKAnon, metaPart, metaPartK, metaPartIdle, metaPartArrivals, "capture.keep_hashes":
		default:
			out[key] = v
		}
	}
	return out
}

// partMeta is how a part is opened for its metadata alone.
func partMeta() traces.OpenOptions {
	o := traces.DefaultOpenOptions()
	o.AllowDeferred = true
	return o
}

// partsMeta checks that every part is a deferred part of one capture (one
// key, schema, block size, k and session idle; arrivals in Unix
// ns; each part index once) and returns the first's metadata. A refusal
// names the part and why.
func partsMeta(parts []string) (traces.Meta, int, time.Duration, error) {
	var first traces.Meta
	var k int
	var idle time.Duration
	index := map[int]string{} // part index → the part that has it
	for i, p := range parts {
		r, err := traces.OpenWith(p, partMeta())
		if err != nil {
			return first, 0, 0, fmt.Errorf("compose: %w", err)
		}
		m := r.Meta()
		r.Close()
		if !m.KAnonDeferred() {
			return first, 0, 0, fmt.Errorf("compose: %s is not a capture part (no %s=%s in its metadata): capture it with %w", p, traces.MetaKAnon, traces.KAnonDeferred, traces.OptionRef("Options.Part"))
		}
		pk, err1 := strconv.Atoi(m.Get(metaPartK))
		pidle, err2 := time.ParseDuration(m.Get(metaPartIdle))
		px, err3 := strconv.Atoi(m.Get(metaPart))
		if err := cmp.Or(err1, err2, err3); err != nil {
			return first, 0, 0, fmt.Errorf("compose: part %s: metadata %s/%s/%s: %w", p, metaPartK, metaPartIdle, metaPart, err)
		}
		if a := m.Get(metaPartArrivals); a != "unix_ns" {
			return first, 0, 0, fmt.Errorf("compose: part %s: metadata %s is %q, not unix_ns: its arrivals cannot be merged with other parts'", p, metaPartArrivals, a)
		}
		if other, dup := index[px]; dup {
			// The same shard twice: its rows would be counted twice
			// toward k and its seqs would collide.
			return first, 0, 0, fmt.Errorf("compose: part %s and part %s are both part %d of the capture (the same part twice, or two captures of one shard)", other, p, px)
		}
		index[px] = p
		if i == 0 {
			first, k, idle = m, pk, pidle
			continue
		}
		if err := partMismatch(p, m, pk, pidle, parts[0], first, k, idle); err != nil {
			return first, 0, 0, err
		}
	}
	return first, k, idle, nil
}

// partMismatch is the error of part p (metadata m, k pk, session idle
// pidle) that does not belong with the first part p0, or nil.
func partMismatch(p string, m traces.Meta, pk int, pidle time.Duration, p0 string, first traces.Meta, k int, idle time.Duration) error {
	switch {
	case m.KeyFingerprint != first.KeyFingerprint:
		return fmt.Errorf("compose: part %s was captured with key %s, part %s with %s: digests would not match", p, m.KeyFingerprint, p0, first.KeyFingerprint)
	case m.SchemaVersion != first.SchemaVersion:
		return fmt.Errorf("compose: part %s has schema %s, part %s %s: capture every part with one tokentrace", p, m.SchemaVersion, p0, first.SchemaVersion)
	case m.BlockSize != first.BlockSize:
		return fmt.Errorf("compose: part %s has block size %d, part %s %d", p, m.BlockSize, p0, first.BlockSize)
	case pk != k || pidle != idle:
		return fmt.Errorf("compose: part %s has k %d and session idle %v, part %s %d and %v", p, pk, pidle, p0, k, idle)
	}
	return nil
}

// mergeParts calls fn with every row of the parts in arrival order (ties
// in part order, then row order), read with ro; notes, when not nil, gets
// what the readers say about the parts' rows.
func mergeParts(ctx context.Context, parts []string, ro traces.OpenOptions, notes *[]string, fn func(r *traces.Record) error) error {
	var srcs []kmerge.Source[*traces.Record]
	var stops []func()
	defer func() {
		for _, s := range stops {
			s()
		}
	}()
	ro.AllowDeferred = true
	var readers []traces.Reader
	for _, p := range parts {
		r, err := traces.OpenWith(p, ro)
		if err != nil {
			return err
		}
		defer r.Close()
		readers = append(readers, r)
		next, stop := iter.Pull2(traces.All(r))
		stops = append(stops, stop)
		var rec traces.Record
		seen := false
		srcs = append(srcs, func() (*traces.Record, bool, error) {
			v, err, ok := next()
			if !ok {
				return nil, false, nil
			}
			if err != nil {
				return nil, false, err
			}
			if seen && v.ArrivalNs < rec.ArrivalNs {
				st := r.Stats()
				return nil, false, fmt.Errorf("compose: %s: compose merges parts that are each in arrival order, as capture writes them", st.OrderNote(p))
			}
			rec, seen = v, true
			return &rec, true, nil
		})
	}
	if notes != nil {
		defer func() {
			for i, r := range readers {
				st := r.Stats()
				*notes = append(*notes, st.Notes(parts[i], "")...)
			}
		}()
	}
	m, err := kmerge.New(srcs, func(a, b *traces.Record) int { return cmp.Compare(a.ArrivalNs, b.ArrivalNs) })
	if err != nil {
		return err
	}
	for n := 0; ; n++ {
		if n&4095 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		r, ok, err := m.Next()
		if err != nil || !ok {
			return err
		}
		if err := fn(r); err != nil {
			return err
		}
	}
}

// composer holds Compose's counts and numbering.
type composer struct {
	k          int32
	idle       int64
	keepHashes bool
	origin     int64

	cats   map[string]*category
	catsN  []string // in order of first appearance
	blocks map[int64]int32

	live     map[int64]*liveComposed // session id → its session under way
	sessions map[sessKey]int32       // sessions of two or more requests → count

	catLabel   map[string]string
	blockFinal map[int64]int64
	nextBlock  int64
	nSess      int64

	blocksKept, blocksDropped int64
}

type sessKey struct{ id, start int64 }

type liveComposed struct {
	start, last int64
	n           int32
	turn        int32
	// later: an earlier session of the same id has ended.
	later bool
}

func newComposer(k int, idle time.Duration, keepHashes bool) *composer {
	return &composer{
		k: int32(k), idle: int64(idle), keepHashes: keepHashes,
		cats: map[string]*category{}, blocks: map[int64]int32{},
		live: map[int64]*liveComposed{}, sessions: map[sessKey]int32{},
		catLabel: map[string]string{}, blockFinal: map[int64]int64{},
	}
}

// count is the first pass over one row.
func (c *composer) count(r *traces.Record) {
	if r.Category != "" {
		ct := c.cats[r.Category]
		if ct == nil {
			ct = &category{}
			c.cats[r.Category] = ct
			c.catsN = append(c.catsN, r.Category)
		}
		// A part's rows hold the category's prefix cut to their own
		// prompts: the longest is the category's (as long as a prompt
		// that holds it all), and cutting it to each row's prompt again
		// gives what one capture of all the logs writes.
		ct.prefixTokens = max(ct.prefixTokens, r.PrefixTokens)
		ct.count++
	}
	for _, b := range r.PrefixBlocks {
		if b >= 0 {
			c.blocks[b]++
		}
	}
	if r.Session != 0 {
		if ls := c.session(r); ls.n == 2 {
			c.sessions[sessKey{r.Session, ls.start}] = 2
		} else if ls.n > 2 {
			c.sessions[sessKey{r.Session, ls.start}] = ls.n
		}
	}
}

// session finds r's session under way (a new one when its id's last
// request is more than idle before r) and counts r in it.
func (c *composer) session(r *traces.Record) *liveComposed {
	ls := c.live[r.Session]
	if ls == nil || r.ArrivalNs-ls.last > c.idle {
		ls = &liveComposed{start: r.ArrivalNs, later: ls != nil}
		c.live[r.Session] = ls
	}
	ls.n++
	ls.last = r.ArrivalNs
	return ls
}

func (c *composer) endCount() { clear(c.live) }

// rewrite is the second pass over one row.
func (c *composer) rewrite(r *traces.Record) {
	// Sessions first: the first pass saw the arrivals unshifted.
	if r.Session != 0 {
		id := r.Session
		ls := c.session(r)
		if c.sessions[sessKey{id, ls.start}] < 2 {
			r.Session, r.Turn = 0, 0
			r.ParentSeq = traces.NotReported // links stay within a session
		} else {
			ls.turn++
			r.Turn = ls.turn
			if ls.turn == 1 {
				c.nSess++
			}
			if ls.later {
				r.Session = int64(mix63(uint64(id) ^ uint64(ls.start)))
			}
			if ls.turn == c.sessions[sessKey{id, ls.start}] {
				delete(c.sessions, sessKey{id, ls.start})
			}
		}
	}
	shift := func(v *int64) {
		if *v != traces.NotReported {
			*v -= c.origin
		}
	}
	shift(&r.ArrivalNs)
	shift(&r.ScheduledNs)
	shift(&r.SentNs)
	shift(&r.FirstTokenNs)
	shift(&r.LastTokenNs)
	shift(&r.FinishNs)
	for i := range r.ChunkNs {
		r.ChunkNs[i] -= c.origin
	}
	if r.Category != "" {
		ct := c.cats[r.Category]
		if ct.count < c.k {
			r.Category, r.PrefixTokens = "", 0
		} else {
			label, ok := c.catLabel[r.Category]
			if !ok {
				label = r.Category
				if !c.keepHashes {
					label = "c" + strconv.Itoa(len(c.catLabel)+1)
				}
				c.catLabel[r.Category] = label
			}
			r.Category, r.PrefixTokens = label, min(ct.prefixTokens, r.InputTokens)
		}
	}
	for i, b := range r.PrefixBlocks {
		switch {
		case b < 0:
			r.PrefixBlocks[i] = c.unique()
		case c.blocks[b] < c.k:
			r.PrefixBlocks[i] = c.unique()
			c.blocksDropped++
		default:
			id, ok := c.blockFinal[b]
			if !ok {
				id = b
				if !c.keepHashes {
					c.nextBlock++
					id = c.nextBlock
				}
				c.blockFinal[b] = id
			}
			r.PrefixBlocks[i] = id
			c.blocksKept++
		}
	}
}

// unique is a block id no other block has.
func (c *composer) unique() int64 {
	c.nextBlock++
	if c.keepHashes {
		return -c.nextBlock
	}
	return c.nextBlock
}

func (c *composer) catsDropped() int {
	n := 0
	for _, ct := range c.cats {
		if ct.count < c.k {
			n++
		}
	}
	return n
}

// mix63 scrambles x into a positive 63-bit id (splitmix64's finalizer).
func mix63(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return max(x>>1, 1)
}
