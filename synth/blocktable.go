package synth

import "math/bits"

// blockTable remembers the last row (class index) each prefix block was
// seen in. It is exact while a class has fewer than gen distinct blocks;
// past that it keeps two generations of gen blocks and drops the older when
// the newer fills, so a block is forgotten only after at least gen other
// distinct blocks were seen since it was last seen (then a row reusing it
// counts as fresh). At 512 tokens a block, the default 2^19 blocks are
// 268 M tokens, far beyond any prefix cache the model is meant to describe;
// the table takes at most 32 MB.
//
// Both generations live in one open-addressing table, each entry stamped
// with its generation, so a block costs one probe whether it is new, in the
// current generation or in the older one (two tables cost a new block two
// probes, each a cache miss once the table outgrows the caches). A block of
// the older generation seen again moves to the current one by its stamp.
// When the current generation fills, one pass over the table drops the
// older generation's blocks that were not seen again and settles the rest
// where a lookup finds them.
type blockTable struct {
	gen     int
	dropped int64 // blocks forgotten

	slots []bslot
	used  int   // live entries, both generations
	shift uint  // 64 - log2(len(slots))
	mix   bool  // place by a multiplicative hash, not the low bits (slot)
	swaps int64 // swaps so far
	// steps of probes longer than 64 slots while placing by the low bits
	longSteps int64
	stamp     uint64 // the current generation's stamp: 0 or bslotGen
	cur       int    // entries of the current generation
	old       int    // entries of the older generation
	moved     int    // of those, seen again in the current one (so in cur too)
}

// bslot is a block and its row: v is row + 1 with the generation stamp in
// its top bit; 0 = empty.
type bslot struct {
	k int64
	v uint64
}

const (
	bslotGen = 1 << 63
	bslotRow = bslotGen - 1
)

// seenAt is a block's last row, if it was seen.
type seenAt struct {
	row int64
	ok  bool
}

// swap sets block b's row to row and returns the row it had, if the table
// still knew it. It is the get and the set in one probe.
func (t *blockTable) swap(b, row int64) (int64, bool) {
	if t.slots == nil {
		t.resize(64)
	}
	t.swaps++
	e := t.slot(b)
	v := uint64(row+1) | t.stamp
	if e.v != 0 {
		prev := int64(e.v&bslotRow) - 1
		if e.v&bslotGen != t.stamp { // of the older generation: moves
			t.cur++
			t.moved++
			e.v = v
			t.flip()
			return prev, true
		}
		e.v = v
		return prev, true
	}
	e.k, e.v = b, v
	t.used++
	t.cur++
	if 2*t.used > len(t.slots) {
		t.resize(2 * len(t.slots))
	}
	t.flip()
	return 0, false
}

// flip drops the older generation when the current one is full: its
// blocks not seen again are forgotten, and the current generation becomes
// the older.
func (t *blockTable) flip() {
	if t.cur < t.gen {
		return
	}
	t.dropped += int64(t.old - t.moved)
	t.purge(t.stamp ^ bslotGen)
	t.old, t.cur, t.moved = t.cur, 0, 0
	t.stamp ^= bslotGen
}

// purge removes the entries stamped stale in one pass, in place: starting
// after an empty slot, each entry left is taken out and put back from its
// home slot, so it lands at or before where it was and no lookup crosses a
// hole (Knuth's deletion for linear probing, for many entries at once).
func (t *blockTable) purge(stale uint64) {
	mask := len(t.slots) - 1
	start := 0
	for t.slots[start].v != 0 { // the table is at most half full
		start++
	}
	for n := 1; n <= len(t.slots); n++ {
		i := (start + n) & mask
		e := t.slots[i]
		if e.v == 0 {
			continue
		}
		t.slots[i] = bslot{}
		if e.v&bslotGen == stale {
			t.used--
			continue
		}
		*t.place(e.k) = e
	}
}

// home is block k's first slot. Blocks are placed by their low bits: dense
// block ids (Mooncake's hash_ids, synth's own) then sit side by side as
// they are met, so a row's blocks share cache lines, and hashed ids are
// random anyway. Should a probe run long (ids with a stride), the table
// may rehash with a multiplicative hash for good (slot).
func (t *blockTable) home(k int64) int {
	if t.mix {
		return int((uint64(k) * 0x9E3779B97F4A7C15) >> t.shift)
	}
	return int((uint64(k) ^ uint64(k)>>32) & uint64(len(t.slots)-1))
}

// slot is where block k is or would go. A dense run of blocks makes a
// probe for a block outside it (say one forgotten and seen again) walk to
// the run's end, which is rare and sequential; only when long probes cost
// more than longProbeSteps steps a swap on average does the table switch
// to the mixing hash (ids with a stride, piling up on a few slots).
func (t *blockTable) slot(k int64) *bslot {
	mask := len(t.slots) - 1
	i := t.home(k)
	for steps := 0; ; steps++ {
		e := &t.slots[i]
		if e.v == 0 || e.k == k {
			if steps > 64 && !t.mix {
				t.longSteps += int64(steps)
				if t.longSteps > longProbeSteps*t.swaps {
					t.mix = true
					t.resize(len(t.slots))
					return t.slot(k)
				}
			}
			return e
		}
		i = (i + 1) & mask
	}
}

// longProbeSteps is the average cost of long probes, in steps a swap, past
// which the block table switches to its mixing hash.
const longProbeSteps = 16

// place is the first empty slot from block k's home, for a block not in
// the table (rehashing and purging).
func (t *blockTable) place(k int64) *bslot {
	mask := len(t.slots) - 1
	i := t.home(k)
	for t.slots[i].v != 0 {
		i = (i + 1) & mask
	}
	return &t.slots[i]
}

// resize rehashes into size slots (a power of two).
func (t *blockTable) resize(size int) {
	old := t.slots
	t.slots = make([]bslot, size)
	t.shift = uint(64 - bits.TrailingZeros(uint(size)))
	for _, e := range old {
		if e.v != 0 {
			*t.place(e.k) = e
		}
	}
}
