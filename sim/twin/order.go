package twin

import (
	"iter"

	"github.com/tokentrace/tokentrace/internal/minheap"
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
		var h []heldRow // a min-heap by heldFirst
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
			minheap.Push(&h, heldRow{r: r.Clone(), at: t, pos: pos}, heldFirst)
			pos++
			latest = max(latest, t)
			for len(h) > 0 && h[0].at < latest-window {
				x := minheap.Pop(&h, heldFirst)
				released = x.at
				if !yield(x.r, nil) {
					return
				}
			}
		}
		for len(h) > 0 {
			x := minheap.Pop(&h, heldFirst)
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

// heldFirst orders the rows held back: by send time, then position.
func heldFirst(a, b *heldRow) bool {
	return a.at < b.at || a.at == b.at && a.pos < b.pos
}
