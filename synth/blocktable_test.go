package synth

import (
	"math/rand/v2"
	"testing"
)

// refBlockTable is the two-generation table as first written: two maps, a
// block looked up in the current one, then in the older one.
type refBlockTable struct {
	gen      int
	cur, old map[int64]int64
	dropped  int64
}

func (t *refBlockTable) swap(b, row int64) (int64, bool) {
	if prev, ok := t.cur[b]; ok {
		t.cur[b] = row
		return prev, true
	}
	prev, ok := t.old[b]
	t.cur[b] = row
	if len(t.cur) >= t.gen {
		for k := range t.old {
			if _, ok := t.cur[k]; !ok {
				t.dropped++
			}
		}
		t.old, t.cur = t.cur, map[int64]int64{}
	}
	return prev, ok
}

// TestBlockTableGenerations checks the one-table block table against the
// two-map one on streams that cross many generations: every swap returns
// the same row and found flag, and the same number of blocks is forgotten.
func TestBlockTableGenerations(t *testing.T) {
	for _, tc := range []struct {
		name string // what the stream is like
		gen  int
		key  func(rng *rand.Rand, i int64) int64
		mix  bool // the table ends placing by a mixing hash
	}{
		{"dense new ids with reuse of recent ones, as in Mooncake", 1000, func(rng *rand.Rand, i int64) int64 {
			if rng.IntN(3) == 0 {
				return max(0, i-int64(rng.IntN(3000)))
			}
			return i
		}, false},
		{"dense ids with an old shared block now and then", 1000, func(rng *rand.Rand, i int64) int64 {
			if rng.IntN(50) == 0 {
				return int64(rng.IntN(4))
			}
			return i
		}, false},
		{"hashed ids from a small and a large pool", 700, func(rng *rand.Rand, i int64) int64 {
			n := 1500
			if rng.IntN(2) == 0 {
				n = 100000
			}
			return int64(uint64(rng.IntN(n)+1) * 0xD6E8FEB86659FD93)
		}, false},
		{"ids with a 2^20 stride (the table switches to a mixing hash)", 500, func(rng *rand.Rand, i int64) int64 {
			return (i - int64(rng.IntN(800))) << 20
		}, true},
		{"a generation of one block", 1, func(rng *rand.Rand, i int64) int64 { return int64(rng.IntN(5)) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			bt := blockTable{gen: tc.gen}
			ref := refBlockTable{gen: tc.gen, cur: map[int64]int64{}, old: map[int64]int64{}}
			for i := range int64(200000) {
				b := tc.key(rng, i)
				row, ok := bt.swap(b, i)
				wrow, wok := ref.swap(b, i)
				if ok != wok || (ok && row != wrow) {
					t.Fatalf("swap %d (block %d) = %d, %v; want %d, %v", i, b, row, ok, wrow, wok)
				}
			}
			if bt.dropped != ref.dropped || bt.dropped == 0 {
				t.Errorf("%d blocks forgotten, want %d (and some)", bt.dropped, ref.dropped)
			}
			if bt.mix != tc.mix {
				t.Errorf("mix = %v, want %v", bt.mix, tc.mix)
			}
			if 2*bt.used > len(bt.slots) || len(bt.slots) > 8*tc.gen+64 {
				t.Errorf("%d entries in %d slots for generations of %d blocks", bt.used, len(bt.slots), tc.gen)
			}
		})
	}
}
