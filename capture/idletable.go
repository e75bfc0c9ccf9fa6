package capture

import "math/bits"

// idleTable maps uint64 keys to a value and a time: the sessions stage's
// state, whose entries end when idle (sweep). Go maps took 37–56 bytes per
// entry for these 24-byte entries (groups left half full by each
// doubling); this open-addressing table fills its slots to between 72 %
// and 90 % (a shard grows by a quarter), about 30 bytes per entry, and
// holds no pointers for the GC to scan. Robin Hood probing keeps probes
// short at that load, also for absent keys; deletion shifts the following
// entries back, so there are no tombstones. The table is split into
// shards that grow one at a time, so a growth briefly holds two copies of
// one shard, not of the whole table, and the fill averages over shards at
// different points between growths (uniform keys would keep shards of one
// size growing in step, so they start at staggered sizes).
type idleTable struct {
	shards [idleShards]idleShard
	// Key 0 marks an empty slot, so its entry, if any, lives here.
	zero    idleSlot
	hasZero bool
}

const idleShards = 64

type idleShard struct {
	slots []idleSlot // k == 0: empty
	n     int        // used slots
}

type idleSlot struct {
	k, v uint64
	t    int64
}

// maxLoad is the fill, in tenths, at which a shard grows.
const maxLoad = 9

// mix spreads keys that are not hashes (session ids) over the shards and
// slots: the top bits pick the shard, the rest the home slot.
func mix(k uint64) uint64 { return k * 0x9E3779B97F4A7C15 }

func (tb *idleTable) shard(k uint64) (*idleShard, int) {
	i := int(mix(k) >> (64 - 6))
	return &tb.shards[i], i
}

func (sh *idleShard) home(k uint64) int {
	hi, _ := bits.Mul64(mix(k)<<6, uint64(len(sh.slots)))
	return int(hi)
}

// dist is how far slot i is from the home of its key k.
func (sh *idleShard) dist(i int, k uint64) int {
	d := i - sh.home(k)
	if d < 0 {
		d += len(sh.slots)
	}
	return d
}

// len is the number of entries.
func (tb *idleTable) len() int {
	n := 0
	if tb.hasZero {
		n++
	}
	for i := range tb.shards {
		n += tb.shards[i].n
	}
	return n
}

// find returns k's entry, nil if absent. The pointer is good until the
// next put or sweep.
func (tb *idleTable) find(k uint64) *idleSlot {
	if k == 0 {
		if tb.hasZero {
			return &tb.zero
		}
		return nil
	}
	sh, _ := tb.shard(k)
	return sh.find(k)
}

func (sh *idleShard) find(k uint64) *idleSlot {
	if len(sh.slots) == 0 {
		return nil
	}
	i := sh.home(k)
	for d := 0; ; d++ {
		s := &sh.slots[i]
		if s.k == k {
			return s
		}
		// Robin Hood order: k would sit before any entry nearer its home.
		if s.k == 0 || sh.dist(i, s.k) < d {
			return nil
		}
		if i++; i == len(sh.slots) {
			i = 0
		}
	}
}

// put sets k's entry.
func (tb *idleTable) put(k, v uint64, t int64) {
	if k == 0 {
		tb.zero, tb.hasZero = idleSlot{k, v, t}, true
		return
	}
	sh, i := tb.shard(k)
	if s := sh.find(k); s != nil {
		s.v, s.t = v, t
		return
	}
	if sh.slots == nil {
		// 64 to 79 slots: sizes spread over one growth's ratio.
		sh.slots = make([]idleSlot, 64+i%16)
	}
	if (sh.n+1)*10 > len(sh.slots)*maxLoad {
		sh.grow()
	}
	sh.insert(idleSlot{k, v, t})
}

// insert places c, whose key is absent, and there is a free slot.
func (sh *idleShard) insert(c idleSlot) {
	i, d := sh.home(c.k), 0
	for {
		s := &sh.slots[i]
		if s.k == 0 {
			*s = c
			sh.n++
			return
		}
		if sd := sh.dist(i, s.k); sd < d {
			c, *s = *s, c
			d = sd
		}
		if i++; i == len(sh.slots) {
			i = 0
		}
		d++
	}
}

// grow makes room by a quarter: a doubling would leave the shard half
// empty, and these tables are the largest thing capture holds.
func (sh *idleShard) grow() {
	old := sh.slots
	sh.slots = make([]idleSlot, len(old)+len(old)/4)
	sh.n = 0
	for _, s := range old {
		if s.k != 0 {
			sh.insert(s)
		}
	}
}

// deleteAt empties slot i and shifts the entries after it back toward
// their homes.
func (sh *idleShard) deleteAt(i int) {
	for {
		j := i + 1
		if j == len(sh.slots) {
			j = 0
		}
		if s := sh.slots[j]; s.k == 0 || sh.dist(j, s.k) == 0 {
			break
		}
		sh.slots[i] = sh.slots[j]
		i = j
	}
	sh.slots[i] = idleSlot{}
	sh.n--
}

// sweep removes the entries with t before limit, calling gone (if not nil)
// with each; an error from gone stops the sweep and is returned.
func (tb *idleTable) sweep(limit int64, gone func(k, v uint64) error) error {
	if tb.hasZero && tb.zero.t < limit {
		tb.hasZero = false
		if gone != nil {
			if err := gone(0, tb.zero.v); err != nil {
				return err
			}
		}
	}
	for i := range tb.shards {
		if err := tb.shards[i].sweep(limit, gone); err != nil {
			return err
		}
	}
	return nil
}

func (sh *idleShard) sweep(limit int64, gone func(k, v uint64) error) error {
	n := len(sh.slots)
	if sh.n == 0 {
		return nil
	}
	// Start at an entry in its home slot or an empty one: no shift moves
	// an entry across it, so one pass sees every entry.
	start := 0
	for ; start < n; start++ {
		if s := sh.slots[start]; s.k == 0 || sh.dist(start, s.k) == 0 {
			break
		}
	}
	for c := 0; c < n; {
		i := start + c
		if i >= n {
			i -= n
		}
		s := sh.slots[i]
		if s.k == 0 || s.t >= limit {
			c++
			continue
		}
		sh.deleteAt(i) // the next entry may now be at i: look again
		if gone != nil {
			if err := gone(s.k, s.v); err != nil {
				return err
			}
		}
	}
	return nil
}

// each calls f with every entry; an error from f stops it.
func (tb *idleTable) each(f func(k, v uint64) error) error {
	if tb.hasZero {
		if err := f(0, tb.zero.v); err != nil {
			return err
		}
	}
	for i := range tb.shards {
		for _, s := range tb.shards[i].slots {
			if s.k != 0 {
				if err := f(s.k, s.v); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// reset empties the table and lets its memory go.
func (tb *idleTable) reset() { *tb = idleTable{} }
