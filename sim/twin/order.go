package twin

import (
	"container/heap"
	"iter"

	"github.com/tokentrace/tokentrace/traces"
)

// DefaultReorderWindow is how far out of send order rows may come (a
// results file is in trace order, which sends may overtake by the
// client's lateness; an offline simulation's rows come as requests end):
// 60 s of send time.
const DefaultReorderWindow int64 = 60e9

// sentAt is when a row reached the server: its send time when it has an
// outcome, else its arrival (a trace without outcomes).
func sentAt(r *traces.Record) int64 {
	if r.SentNs >= 0 && r.HasOutcome() {
		return r.SentNs
	}
	return r.ArrivalNs
}

// bySent yields rows in send order (sentAt, then position), holding rows
// within window of the latest send seen. A row later than that behind
// the rows already yielded is counted in late and skipped. Rows are
// cloned: the caller may keep them.
func bySent(rows iter.Seq2[traces.Record, error], window int64, late *int64) iter.Seq2[traces.Record, error] {
	return func(yield func(traces.Record, error) bool) {
		var h rowHeap
		var pos, latest int64
		released := int64(-1 << 62)
		for r, err := range rows {
			if err != nil {
				yield(traces.Record{}, err)
				return
			}
			t := sentAt(&r)
			if t < released {
				*late++
				continue
			}
			heap.Push(&h, heldRow{r: r.Clone(), at: t, pos: pos})
			pos++
			latest = max(latest, t)
			for h.Len() > 0 && h[0].at < latest-window {
				x := heap.Pop(&h).(heldRow)
				released = x.at
				if !yield(x.r, nil) {
					return
				}
			}
		}
		for h.Len() > 0 {
			x := heap.Pop(&h).(heldRow)
			if !yield(x.r, nil) {
				return
			}
		}
	}
}

type heldRow struct {
	r   traces.Record
	at  int64
	pos int64
}

type rowHeap []heldRow

func (h rowHeap) Len() int { return len(h) }
func (h rowHeap) Less(i, j int) bool {
	return h[i].at < h[j].at || h[i].at == h[j].at && h[i].pos < h[j].pos
}
func (h rowHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *rowHeap) Push(x any)   { *h = append(*h, x.(heldRow)) }
func (h *rowHeap) Pop() any {
	s := *h
	x := s[len(s)-1]
	s[len(s)-1] = heldRow{}
	*h = s[:len(s)-1]
	return x
}
