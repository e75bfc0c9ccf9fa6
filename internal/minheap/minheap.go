// Package minheap is the binary min-heap of the hot paths, on a plain
// slice: container/heap boxes every element it pushes and pops in an any
// (an allocation each) and reaches the slice through an interface.
package minheap

// Push adds x to heap h (ordered by less) and returns the heap.
func Push[T any](h []T, x T, less func(a, b *T) bool) []T {
	h = append(h, x)
	for i := len(h) - 1; i > 0; {
		up := (i - 1) / 2
		if !less(&h[i], &h[up]) {
			break
		}
		h[i], h[up] = h[up], h[i]
		i = up
	}
	return h
}

// Pop removes the least element of the non-empty heap h and returns it
// and the heap. The slot it leaves is zeroed, so the slice's spare
// capacity holds on to nothing.
func Pop[T any](h []T, less func(a, b *T) bool) (T, []T) {
	n := len(h) - 1
	top := h[0]
	var zero T
	h[0], h[n] = h[n], zero
	h = h[:n]
	Down(h, 0, less)
	return top, h
}

// Down moves h[i] down to its place, after it was replaced by an element
// no less than the one before: replacing the least element and calling
// Down(h, 0, less) is a pop and a push in one pass.
func Down[T any](h []T, i int, less func(a, b *T) bool) {
	for {
		c := 2*i + 1
		if c >= len(h) {
			return
		}
		if r := c + 1; r < len(h) && less(&h[r], &h[c]) {
			c = r
		}
		if !less(&h[c], &h[i]) {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}
