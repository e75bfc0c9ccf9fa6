package synth

import (
	"cmp"
	"fmt"
	"sort"

	"github.com/tokentrace/tokentrace/traces"
)

// reorder puts a nearly sorted stream back in (arrival_ns, seq) order with
// bounded memory: it holds up to window records, sorted, and releases the
// earliest when a new one arrives past that. Ties keep stream order, as a
// stable sort of the whole stream would. A record that sorts before one
// already released cannot be placed: push reports it.
type reorder struct {
	window   int
	slots    []fitRow // held records; their block lists are their own
	free     []int32
	q        []int32 // held slots in order, from head
	head     int
	last     fitRow // the last released record's key (arrival, seq)
	released bool
}

func newReorder(window int) *reorder { return &reorder{window: window} }

func rowCompare(a, b *fitRow) int {
	return cmp.Or(cmp.Compare(a.arrival, b.arrival), cmp.Compare(a.seq, b.seq))
}

// push takes rec (its lists are copied) and releases to out what no later
// record can precede.
func (w *reorder) push(rec *traces.Record, out func(*fitRow) error) error {
	if w.window == 0 {
		var r fitRow
		r.set(rec)
		if err := w.check(&r); err != nil {
			return err
		}
		w.last, w.released = fitRow{arrival: r.arrival, seq: r.seq}, true
		return out(&r)
	}
	var s int32
	if n := len(w.free); n > 0 {
		s, w.free = w.free[n-1], w.free[:n-1]
	} else {
		w.slots = append(w.slots, fitRow{})
		s = int32(len(w.slots) - 1)
	}
	r := &w.slots[s]
	blocks := r.blocks
	if cap(blocks) > 2*len(rec.PrefixBlocks)+16 {
		blocks = nil // a slot keeps no more than twice what it holds
	}
	r.set(rec)
	r.blocks = append(blocks[:0], rec.PrefixBlocks...)
	if err := w.check(r); err != nil {
		return err
	}
	held := w.q[w.head:]
	if len(held) == 0 || rowCompare(&w.slots[held[len(held)-1]], r) <= 0 {
		w.q = append(w.q, s)
	} else {
		// After every held record that sorts before or with it.
		at := w.head + sort.Search(len(held), func(i int) bool { return rowCompare(&w.slots[held[i]], r) > 0 })
		w.q = append(w.q, 0)
		copy(w.q[at+1:], w.q[at:])
		w.q[at] = s
	}
	if len(w.q)-w.head > w.window {
		return w.release(out)
	}
	return nil
}

// reorderWindow is the option check's errors name.
const reorderWindow = traces.OptionRef("FitOptions.ReorderWindow")

// check reports a record that sorts before one already released.
func (w *reorder) check(r *fitRow) error {
	if w.released && rowCompare(r, &w.last) < 0 {
		if w.window == 0 {
			return fmt.Errorf("fit: record seq %d (arrival_ns %d) comes after arrival_ns %d (seq %d), though the trace says it is sorted by arrival_ns, seq (or %w is negative): sort it, or fit it as JSON lines or CSV with a reorder window", r.seq, r.arrival, w.last.arrival, w.last.seq, reorderWindow)
		}
		return fmt.Errorf("fit: record seq %d (arrival_ns %d) is more than %d records out of arrival order: records up to arrival_ns %d (seq %d) were already fitted; sort the trace by arrival_ns, seq (tokentrace writes Parquet sorted) or raise %w",
			r.seq, r.arrival, w.window, w.last.arrival, w.last.seq, reorderWindow)
	}
	return nil
}

// release hands the earliest held record to out.
func (w *reorder) release(out func(*fitRow) error) error {
	s := w.q[w.head]
	w.head++
	if w.head >= 1024 && w.head*2 >= len(w.q) {
		w.q = w.q[:copy(w.q, w.q[w.head:])]
		w.head = 0
	}
	r := &w.slots[s]
	w.last, w.released = fitRow{arrival: r.arrival, seq: r.seq}, true
	w.free = append(w.free, s)
	return out(r)
}

// drain releases every held record.
func (w *reorder) drain(out func(*fitRow) error) error {
	for w.head < len(w.q) {
		if err := w.release(out); err != nil {
			return err
		}
	}
	return nil
}
