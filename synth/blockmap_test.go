package synth

import "testing"

// TestBlockTableKeys checks the block table on dense ids (placed by their
// low bits), on hashed ids and on ids with a stride that would pile up on
// a few slots (the table must switch to a mixing hash): every block reads
// back the last row that set it, and a block never set is not found.
func TestBlockTableKeys(t *testing.T) {
	for _, tc := range []struct {
		name    string
		key     func(i int64) int64
		wantMix bool
	}{
		{"dense ids stay placed by their low bits", func(i int64) int64 { return i }, false},
		{"hashed ids", func(i int64) int64 { return int64(uint64(i+1) * 0xD6E8FEB86659FD93) }, false},
		{"ids with a 2^20 stride switch to a mixing hash", func(i int64) int64 { return i << 20 }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bt := blockTable{gen: 1 << 20}
			const n = 20000
			for i := range int64(n) {
				if _, ok := bt.swap(tc.key(i), i); ok {
					t.Fatalf("block %d found before it was set", i)
				}
			}
			for i := range int64(n) {
				row, ok := bt.swap(tc.key(i), n+i)
				if !ok || row != i {
					t.Fatalf("block %d: row %d, %v; want %d", i, row, ok, i)
				}
			}
			if bt.mix != tc.wantMix {
				t.Errorf("mix = %v, want %v", bt.mix, tc.wantMix)
			}
		})
	}
}
