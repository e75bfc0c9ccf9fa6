// Package kmerge merges sorted streams into one sorted stream: the merge
// step of the external sorts in capture (spilled requests, session counts)
// and traces (the Parquet writer's spilled runs), and the step that keeps
// those sorts' open run files at most MaxRuns (Compact).
package kmerge

import "container/heap"

// A Source yields the values of one sorted stream: ok is false at its end.
// The value may be valid only until the next call (a reused buffer).
type Source[T any] func() (v T, ok bool, err error)

// Merger pulls from its sources in order of cmp; values that compare equal
// come from the earlier source first, so a merge of runs cut from one
// stream in order keeps that stream's order among equals (a stable sort).
type Merger[T any] struct {
	h mergeHeap[T]
	// taken: the top's value was handed out and its source not yet
	// advanced, so that the value stays valid until the next call.
	taken bool
}

// New starts a merge of srcs; it reads the first value of each.
func New[T any](srcs []Source[T], cmp func(a, b T) int) (*Merger[T], error) {
	m := &Merger[T]{h: mergeHeap[T]{cmp: cmp}}
	for i, s := range srcs {
		v, ok, err := s()
		if err != nil {
			return nil, err
		}
		if ok {
			m.h.items = append(m.h.items, head[T]{v: v, src: s, idx: i})
		}
	}
	heap.Init(&m.h)
	return m, nil
}

// Peek returns the next value without taking it; ok is false at the end.
func (m *Merger[T]) Peek() (v T, ok bool, err error) {
	if err := m.advance(); err != nil {
		return v, false, err
	}
	if len(m.h.items) == 0 {
		return v, false, nil
	}
	return m.h.items[0].v, true, nil
}

// Next takes the next value; ok is false at the end. The value is valid
// until the next call to Next or Peek.
func (m *Merger[T]) Next() (v T, ok bool, err error) {
	if v, ok, err = m.Peek(); ok {
		m.taken = true
	}
	return v, ok, err
}

// advance moves past the value Next handed out last.
func (m *Merger[T]) advance() error {
	if !m.taken {
		return nil
	}
	m.taken = false
	top := &m.h.items[0]
	nv, more, err := top.src()
	if err != nil {
		return err
	}
	if more {
		top.v = nv
		heap.Fix(&m.h, 0)
	} else {
		heap.Pop(&m.h)
	}
	return nil
}

type head[T any] struct {
	v   T
	src Source[T]
	idx int
}

type mergeHeap[T any] struct {
	items []head[T]
	cmp   func(a, b T) int
}

func (h *mergeHeap[T]) Len() int { return len(h.items) }
func (h *mergeHeap[T]) Less(i, j int) bool {
	if c := h.cmp(h.items[i].v, h.items[j].v); c != 0 {
		return c < 0
	}
	return h.items[i].idx < h.items[j].idx
}
func (h *mergeHeap[T]) Swap(i, j int) { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *mergeHeap[T]) Push(x any)    { h.items = append(h.items, x.(head[T])) }
func (h *mergeHeap[T]) Pop() any {
	x := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return x
}
