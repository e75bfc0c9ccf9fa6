package minheap

import (
	"container/heap"
	"math/rand/v2"
	"slices"
	"testing"
)

type item struct{ key, id int }

func itemLess(a, b *item) bool { return a.key < b.key || a.key == b.key && a.id < b.id }

// TestOrder checks that the heap gives its elements back in order, and
// that replacing the least one and moving it down is a pop and a push,
// under pushes, pops and replacements interleaved at random, against a
// sorted slice.
func TestOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var h []item
	var ref []item
	for id := range 5000 {
		x := item{key: rng.IntN(50), id: id}
		switch op := rng.IntN(3); {
		case op == 0 && len(h) > 0:
			got := Pop(&h, itemLess)
			if want := ref[0]; got != want {
				t.Fatalf("pop %d: got %v, want %v", id, got, want)
			}
			ref = ref[1:]
		case op == 1 && len(h) > 0:
			h[0] = x
			Down(h, 0, itemLess)
			ref = insertSorted(ref[1:], x)
		default:
			Push(&h, x, itemLess)
			ref = insertSorted(ref, x)
		}
		if len(h) != len(ref) {
			t.Fatalf("after %d operations the heap holds %d, want %d", id+1, len(h), len(ref))
		}
	}
	for len(h) > 0 {
		got := Pop(&h, itemLess)
		if got != ref[0] {
			t.Fatalf("drain: got %v, want %v", got, ref[0])
		}
		ref = ref[1:]
	}
}

func insertSorted(s []item, x item) []item {
	i, _ := slices.BinarySearchFunc(s, x, func(a, b item) int {
		if itemLess(&a, &b) {
			return -1
		}
		if itemLess(&b, &a) {
			return 1
		}
		return 0
	})
	return slices.Insert(s, i, x)
}

// TestPopClearsSlot checks that a popped pointer does not linger in the
// slice's spare capacity, where it would keep its target alive.
func TestPopClearsSlot(t *testing.T) {
	less := func(a, b **int) bool { return **a < **b }
	var h []*int
	for v := range 3 {
		Push(&h, &v, less)
	}
	Pop(&h, less)
	if spare := h[:cap(h)][len(h)]; spare != nil {
		t.Fatalf("popped slot holds %d, want nil", *spare)
	}
}

// byKey is container/heap's view of items ordered by key alone, so that
// items tie.
type byKey []item

func (h byKey) Len() int           { return len(h) }
func (h byKey) Less(i, j int) bool { return h[i].key < h[j].key }
func (h byKey) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *byKey) Push(x any)        { *h = append(*h, x.(item)) }
func (h *byKey) Pop() any {
	s := *h
	x := s[len(s)-1]
	*h = s[:len(s)-1]
	return x
}

// TestSameAsContainerHeap checks that the heap moves its elements as
// container/heap does, so code moved onto it gives tying elements back in
// the order it did: the two slices are equal after every push and pop.
func TestSameAsContainerHeap(t *testing.T) {
	keyLess := func(a, b *item) bool { return a.key < b.key }
	rng := rand.New(rand.NewPCG(3, 4))
	var mine []item
	var theirs byKey
	for id := range 5000 {
		if rng.IntN(3) == 0 && len(mine) > 0 {
			got, want := Pop(&mine, keyLess), heap.Pop(&theirs).(item)
			if got != want {
				t.Fatalf("pop %d: got %v, container/heap %v", id, got, want)
			}
		} else {
			x := item{key: rng.IntN(8), id: id}
			Push(&mine, x, keyLess)
			heap.Push(&theirs, x)
		}
		if !slices.Equal(mine, theirs) {
			t.Fatalf("after %d operations the heaps differ", id+1)
		}
	}
}
