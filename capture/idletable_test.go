package capture

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
)

// TestIdleTable is a table of operation sequences on an idleTable, each
// checked against a Go map doing the same.
func TestIdleTable(t *testing.T) {
	type op struct {
		sweep bool   // else put
		k, v  uint64 // put
		t     int64  // put: the time; sweep: the limit
	}
	puts := func(n int, key func(i int) uint64) []op {
		var ops []op
		for i := range n {
			ops = append(ops, op{k: key(i), v: uint64(i), t: int64(i)})
		}
		return ops
	}
	tests := []struct {
		name   string
		ops    []op
		absent []uint64 // keys to look up that were never put
	}{
		{"entries put are found with their value and time",
			[]op{{k: 5, v: 1, t: 10}, {k: 9, v: 2, t: 20}}, []uint64{6, 1 << 63}},
		{"a second put of a key overwrites its value and time",
			[]op{{k: 5, v: 1, t: 10}, {k: 5, v: 3, t: 30}}, []uint64{4}},
		{"key 0 is a key like any other",
			[]op{{k: 0, v: 7, t: 1}, {k: 3, v: 8, t: 2}, {sweep: true, t: 2}}, []uint64{1}},
		{"a sweep removes the entries before its limit and keeps the rest",
			append(puts(100, func(i int) uint64 { return uint64(i + 1) }), op{sweep: true, t: 50}), []uint64{1000}},
		{"growth past many sizes keeps every entry",
			puts(10000, func(i int) uint64 { return uint64(i)*0x9E3779B97F4A7C15 + 1 }), []uint64{2, 3}},
		{"a sweep of a crowded table keeps the survivors findable",
			append(puts(3000, func(i int) uint64 { return uint64(i + 1) }), op{sweep: true, t: 1500}, op{k: 77, v: 9, t: 5000}), []uint64{1 << 40}},
		{"sweeping everything leaves an empty table that takes new entries",
			append(puts(500, func(i int) uint64 { return uint64(i + 1) }), op{sweep: true, t: 1 << 40}, op{k: 3, v: 3, t: 3}), []uint64{4}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var tb idleTable
			want := map[uint64]idleSlot{}
			var gone []uint64
			for _, o := range tc.ops {
				if !o.sweep {
					tb.put(o.k, o.v, o.t)
					want[o.k] = idleSlot{o.k, o.v, o.t}
					continue
				}
				var wantGone []uint64
				for k, s := range want {
					if s.t < o.t {
						wantGone = append(wantGone, k)
						delete(want, k)
					}
				}
				gone = gone[:0]
				err := tb.sweep(o.t, func(k, v uint64) error {
					gone = append(gone, k)
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				slices.Sort(gone)
				slices.Sort(wantGone)
				if !slices.Equal(gone, wantGone) {
					t.Fatalf("sweep to %d removed %d entries, want %d", o.t, len(gone), len(wantGone))
				}
			}
			if tb.len() != len(want) {
				t.Errorf("%d entries, want %d", tb.len(), len(want))
			}
			for k, w := range want {
				if s := tb.find(k); s == nil || *s != w {
					t.Fatalf("key %d: %v, want %v", k, s, w)
				}
			}
			for _, k := range tc.absent {
				if s := tb.find(k); s != nil {
					t.Errorf("absent key %d found: %v", k, *s)
				}
			}
			seen := map[uint64]uint64{}
			tb.each(func(k, v uint64) error { seen[k] = v; return nil })
			if !maps.EqualFunc(seen, want, func(v uint64, s idleSlot) bool { return v == s.v }) {
				t.Errorf("each saw %d entries, want %d", len(seen), len(want))
			}
		})
	}
}

// Keys sharing the last home slot of a shard wrap around its end; a sweep
// that removes some of them shifts the rest back across the end, and every
// survivor is still found.
func TestIdleShardWrap(t *testing.T) {
	sh := idleShard{slots: make([]idleSlot, 16)}
	var keys []uint64
	for k := uint64(1); len(keys) < 6; k++ {
		if sh.home(k) == 15 {
			keys = append(keys, k)
		}
	}
	for i, k := range keys {
		sh.insert(idleSlot{k, uint64(i), int64(i % 2)}) // odd ones survive
	}
	if err := sh.sweep(1, nil); err != nil {
		t.Fatal(err)
	}
	if sh.n != 3 {
		t.Fatalf("%d entries after the sweep, want 3", sh.n)
	}
	for i, k := range keys {
		s := sh.find(k)
		if i%2 == 1 && (s == nil || s.v != uint64(i)) {
			t.Errorf("survivor %d: %v", i, s)
		}
		if i%2 == 0 && s != nil {
			t.Errorf("swept %d still found", i)
		}
	}
}

// A random mix of puts and sweeps over a sliding window, as the sessions
// stage makes them, agrees with a Go map at every step.
func TestIdleTableRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var tb idleTable
	want := map[uint64]idleSlot{}
	for now := int64(0); now < 200000; now++ {
		k := r.Uint64N(5000)
		tb.put(k, uint64(now), now)
		want[k] = idleSlot{k, uint64(now), now}
		if now%997 == 0 {
			limit := now - 3000
			tb.sweep(limit, nil)
			for k, s := range want {
				if s.t < limit {
					delete(want, k)
				}
			}
			if tb.len() != len(want) {
				t.Fatalf("at %d: %d entries, want %d", now, tb.len(), len(want))
			}
			for q := range uint64(5100) {
				s := tb.find(q)
				w, ok := want[q]
				switch {
				case !ok && s != nil:
					t.Fatalf("at %d: absent key %d found: %v", now, q, *s)
				case ok && (s == nil || *s != w):
					t.Fatalf("at %d: key %d: %v, want %v", now, q, s, w)
				}
			}
		}
	}
}

func heapAlloc() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkSessionStateBytes reports the bytes per live entry of the
// sessions stage's state (key → session and last arrival) as an idleTable
// and as the Go map it replaced, over a range of entry counts (the
// table's fill depends on where the count falls between two growths).
func BenchmarkSessionStateBytes(b *testing.B) {
	type convEnd struct {
		id sessionID
		t  int64
	}
	for _, n := range []int{1 << 20, 1_500_000, 3_000_000, 4_000_000} {
		key := func(i int) uint64 { return uint64(i+1) * 0x9E3779B97F4A7C15 }
		b.Run(fmt.Sprintf("map/%d", n), func(b *testing.B) {
			var per float64
			for range b.N {
				h0 := heapAlloc()
				m := map[uint64]convEnd{}
				for i := range n {
					m[key(i)] = convEnd{sessionID(i), int64(i)}
				}
				per = float64(heapAlloc()-h0) / float64(n)
				runtime.KeepAlive(m)
			}
			b.ReportMetric(per, "B/entry")
		})
		b.Run(fmt.Sprintf("table/%d", n), func(b *testing.B) {
			var per float64
			for range b.N {
				h0 := heapAlloc()
				var tb idleTable
				for i := range n {
					tb.put(key(i), uint64(i), int64(i))
				}
				per = float64(heapAlloc()-h0) / float64(n)
				runtime.KeepAlive(&tb)
			}
			b.ReportMetric(per, "B/entry")
		})
	}
}
