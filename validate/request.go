package validate

import (
	"cmp"
	"fmt"
	"io"
	"iter"
	"slices"

	"github.com/tokentrace/tokentrace/replay"
	"github.com/tokentrace/tokentrace/traces"
)

// request is what validate keeps of a workload's row: what the simulator,
// a replay, the transplants and the fidelity check read, about 180 bytes
// and its prefix blocks instead of a whole record (and none of its
// outcome). A loaded workload holds its requests in arrival order.
type request struct {
	seq, arrival, session, think, parent, finish int64
	in, out, prefix, turn                        int32
	category, class, model, api                  string
	blocks, after                                []int64
}

// interner shares one copy of each string the requests repeat (a
// category, a model name) instead of one per row.
type interner map[string]string

func (in interner) of(s string) string {
	if s == "" {
		return ""
	}
	if v, ok := in[s]; ok {
		return v
	}
	in[s] = s
	return s
}

// requestOf keeps what validate needs of r. Its lists are copied: a
// reader reuses its rows' memory for the next ones.
func requestOf(r *traces.Record, in interner) request {
	return request{
		seq: r.Seq, arrival: r.ArrivalNs, session: r.Session, think: r.ThinkNs, parent: r.ParentSeq, finish: r.FinishNs,
		in: r.InputTokens, out: r.OutputTokens, prefix: r.PrefixTokens, turn: r.Turn,
		category: in.of(r.Category), class: in.of(r.Class), model: in.of(r.Model), api: in.of(r.API),
		blocks: clone(r.PrefixBlocks), after: clone(r.AfterSeqs),
	}
}

// clone copies a list, nil when empty.
func clone(x []int64) []int64 {
	if len(x) == 0 {
		return nil
	}
	return slices.Clone(x)
}

// record fills r with q's request columns; r's outcome is cleared.
func (q *request) record(r *traces.Record) {
	*r = traces.Record{
		Seq: q.seq, ArrivalNs: q.arrival, Session: q.session, Turn: q.turn, Category: q.category,
		PrefixTokens: q.prefix, PrefixBlocks: q.blocks, InputTokens: q.in, OutputTokens: q.out,
		Model: q.model, API: q.api, Class: q.class, FinishNs: q.finish, ThinkNs: q.think,
		ParentSeq: q.parent, AfterSeqs: q.after,
	}
	r.ClearOutcome()
}

// load gives w its requests, in arrival order: from Records, or read once
// from Source. The loaded workload does not refer to Records.
func (w Workload) load() (Workload, error) {
	if w.reqs != nil {
		return w, nil
	}
	in := interner{}
	switch {
	case w.Records != nil:
		w.reqs = make([]request, len(w.Records))
		for i := range w.Records {
			w.reqs[i] = requestOf(&w.Records[i], in)
		}
	case w.Source != nil:
		rd, err := w.Source()
		if err != nil {
			return w, fmt.Errorf("read the %s workload: %w", w.Name, err)
		}
		defer rd.Close()
		if w.Meta.SchemaVersion == "" {
			w.Meta = rd.Meta()
		}
		w.reqs = []request{}
		for r, err := range traces.All(rd) {
			if err != nil {
				return w, fmt.Errorf("read the %s workload: %w", w.Name, err)
			}
			w.reqs = append(w.reqs, requestOf(&r, in))
		}
	default:
		w.reqs = []request{}
	}
	w.Records, w.Source = nil, nil
	if !slices.IsSortedFunc(w.reqs, byArrival) {
		slices.SortStableFunc(w.reqs, byArrival)
	}
	return w, nil
}

// span is the first and last arrival of w, read from its Source (and not
// kept) when it is not in memory.
func (w Workload) span() (lo, hi int64, err error) {
	first := true
	see := func(t int64) {
		if first {
			lo, hi, first = t, t, false
		}
		lo, hi = min(lo, t), max(hi, t)
	}
	switch {
	case w.reqs != nil:
		for i := range w.reqs {
			see(w.reqs[i].arrival)
		}
	case w.Records != nil:
		for i := range w.Records {
			see(w.Records[i].ArrivalNs)
		}
	case w.Source != nil:
		rd, err := w.Source()
		if err != nil {
			return 0, 0, fmt.Errorf("read the %s workload: %w", w.Name, err)
		}
		defer rd.Close()
		for r, err := range traces.All(rd) {
			if err != nil {
				return 0, 0, fmt.Errorf("read the %s workload: %w", w.Name, err)
			}
			see(r.ArrivalNs)
		}
	}
	return lo, hi, nil
}

func byArrival(a, b request) int {
	if c := cmp.Compare(a.arrival, b.arrival); c != 0 {
		return c
	}
	return cmp.Compare(a.seq, b.seq)
}

// each yields the loaded workload's rows as records, in arrival order
// (the same scratch record each time).
func (w Workload) each() iter.Seq[*traces.Record] {
	return func(yield func(*traces.Record) bool) {
		var r traces.Record
		for i := range w.reqs {
			w.reqs[i].record(&r)
			if !yield(&r) {
				return
			}
		}
	}
}

// source reads the loaded workload's requests as records, for a replay.
func (w Workload) source() replay.Source {
	return func() (traces.Reader, error) { return &requestReader{reqs: w.reqs, meta: w.Meta}, nil }
}

type requestReader struct {
	reqs []request
	meta traces.Meta
	n    int
}

func (r *requestReader) Read(recs []traces.Record) (int, error) {
	if r.n == len(r.reqs) {
		return 0, io.EOF
	}
	k := 0
	for ; k < len(recs) && r.n < len(r.reqs); k++ {
		r.reqs[r.n].record(&recs[k])
		r.n++
	}
	return k, nil
}

func (r *requestReader) Meta() traces.Meta { return r.meta }
func (r *requestReader) Stats() traces.ReadStats {
	return traces.ReadStats{Rows: int64(r.n)}
}
func (r *requestReader) Close() error { return nil }
