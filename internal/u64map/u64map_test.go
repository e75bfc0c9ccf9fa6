package u64map

import (
	"math/rand/v2"
	"testing"
)

// TestAgainstGoMap runs random puts, gets and deletes, with keys that
// collide on purpose (small and clustered), against Go's map.
func TestAgainstGoMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, keyspace := range []uint64{16, 1000, 1 << 40} {
		var m Map
		ref := map[uint64]int32{}
		for op := range 200000 {
			k := rng.Uint64N(keyspace)
			if keyspace > 1000 && op%3 == 0 {
				k = uint64(op) << 32 // same low bits
			}
			switch rng.IntN(6) {
			case 0, 1:
				v := rng.Int32()
				m.Put(k, v)
				ref[k] = v
			case 2:
				m.Delete(k)
				delete(ref, k)
			case 3:
				p, existed := m.Upsert(k)
				if rv, ok := ref[k]; existed != ok || existed && *p != rv || !existed && *p != 0 {
					t.Fatalf("keyspace %d op %d: Upsert(%d) = %d, %v; want %d, %v", keyspace, op, k, *p, existed, rv, ok)
				}
				*p = int32(op)
				ref[k] = int32(op)
			case 4:
				v := rng.Int32N(3)
				m.DeleteIf(k, v)
				if ref[k] == v {
					delete(ref, k)
				}
			default:
				v, ok := m.Get(k)
				if rv, rok := ref[k]; ok != rok || v != rv {
					t.Fatalf("keyspace %d op %d: Get(%d) = %d, %v; want %d, %v", keyspace, op, k, v, ok, rv, rok)
				}
			}
			if m.Len() != len(ref) {
				t.Fatalf("keyspace %d op %d: Len %d, want %d", keyspace, op, m.Len(), len(ref))
			}
		}
		for k, rv := range ref {
			if v, ok := m.Get(k); !ok || v != rv {
				t.Fatalf("keyspace %d: Get(%d) = %d, %v at the end; want %d", keyspace, k, v, ok, rv)
			}
		}
	}
}

func BenchmarkGet(b *testing.B) {
	m := New(1 << 20)
	keys := make([]uint64, 1<<20)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range keys {
		keys[i] = rng.Uint64()
		m.Put(keys[i], int32(i))
	}
	b.ResetTimer()
	for i := range b.N {
		m.Get(keys[i&(len(keys)-1)])
	}
}
