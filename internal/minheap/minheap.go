// Package minheap is a binary min-heap on a plain slice, ordered by a
// function: container/heap boxes every element it pushes and pops in an
// any (an allocation each) and wants five methods of each heap's type.
// Its operations are container/heap's, step for step, so elements that
// tie come out in the same order.
package minheap

// Push adds x to the heap *h, ordered by less.
func Push[T any](h *[]T, x T, less func(a, b *T) bool) {
	s := append(*h, x)
	for i := len(s) - 1; i > 0; {
		up := (i - 1) / 2
		if !less(&s[i], &s[up]) {
			break
		}
		s[i], s[up] = s[up], s[i]
		i = up
	}
	*h = s
}

// Pop removes the least element of the non-empty heap *h and returns it.
// The slot it leaves is zeroed, so the slice's spare capacity holds on to
// nothing.
func Pop[T any](h *[]T, less func(a, b *T) bool) T {
	s := *h
	n := len(s) - 1
	top := s[0]
	var zero T
	s[0], s[n] = s[n], zero
	s = s[:n]
	Down(s, 0, less)
	*h = s
	return top
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
