package replay

import (
	"context"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// Source opens the trace to replay at its first record. Replay reads it
// twice, once in Scan and once while sending, and never holds it whole
// (except where a Plan says so); each Open must give the same records.
type Source func() (traces.Reader, error)

// Records is a Source over a trace already in memory.
func Records(recs []traces.Record, m traces.Meta) Source {
	return func() (traces.Reader, error) { return traces.NewSliceReader(recs, m), nil }
}

// Plan is what Scan learned about a trace under a set of options: enough to
// check the target and size the run before the trace is read again, a
// little ahead of the schedule, to send it.
type Plan struct {
	// Selected is how many records the options select.
	Selected int
	// Longest is the largest input + output tokens of a selected record.
	Longest int
	// Damaged is set when the trace ended in damage; the records before it
	// are replayed.
	Damaged bool
	// InMemory says the trace is held in memory for the run: a trace out
	// of arrival order has to be sorted, and strict closed sessions are
	// checked whole before anything is sent. Otherwise it is streamed.
	InMemory bool
	// Meta is the trace's metadata.
	Meta traces.Meta
	// LongestWait is the longest the run waits with nothing to send: the
	// largest gap in the schedule between a selected record and the next
	// (or from the start to the first), at the options' speed.
	// LongestWaitSeq is the seq of the record sent after it.
	LongestWait    time.Duration
	LongestWaitSeq int64

	src       Source
	sel       selection
	head      []*traces.Record // the first selected records, cloned: preflight, warm-up, background model
	needModel bool             // a selected record names no model
	needChat  bool
	maxSeq    int64
	last      time.Duration // schedule of the last selected record

	// with InMemory
	recs   []traces.Record
	sorted []*traces.Record

	// sessionCalls counts each session's selected calls when closed
	// sessions stream (closedstream.go); nil otherwise.
	sessionCalls map[int64]int32
}

// selection is the part of Options that decides which records are sent
// and when; Run checks it is the one Scan planned for.
type selection struct {
	from, to      time.Duration
	shard, shards int
	duration      time.Duration
	speed         float64
	sessions      string
	api           string
	forceAPI      bool
	warmup        int
}

func selectionOf(o *Options) selection {
	return selection{o.WindowFrom, o.WindowTo, o.ShardIndex, o.ShardCount, o.Duration, o.Speed, o.Sessions, o.API, o.ForceAPI, o.Warmup}
}

// selects reports whether o sends rec.
func (o *Options) selects(rec *traces.Record) bool {
	a := time.Duration(rec.ArrivalNs)
	if a < o.WindowFrom || (o.WindowTo > 0 && a >= o.WindowTo) {
		return false
	}
	if o.ShardCount > 1 && ShardOf(rec, o.ShardCount) != o.ShardIndex {
		return false
	}
	return o.Duration <= 0 || scaled(a-o.WindowFrom, o.Speed) <= o.Duration
}

// at is a record's schedule: its offset from the run's start.
func (o *Options) at(rec *traces.Record) time.Duration {
	return scaled(time.Duration(rec.ArrivalNs)-o.WindowFrom, o.Speed)
}

// Scan reads src once and plans its replay under o: which records o
// selects, whether they come in arrival order (then the run streams them),
// what the target must serve. A trace with nothing to send is an
// ErrNothingToSend that says which option left nothing. Memory stays
// bounded, except that a trace out of arrival order, and closed sessions
// with Options.StrictSessions, are read into memory (Plan.InMemory);
// closed sessions otherwise keep a count per session. o is validated as
// Validate does, its URL aside (the target may start later).
func Scan(ctx context.Context, src Source, o Options) (*Plan, error) {
	if err := o.validate(false); err != nil {
		return nil, err
	}
	p := &Plan{src: src, sel: selectionOf(&o), maxSeq: -1}
	rd, err := src()
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	p.Meta = rd.Meta()
	nHead := max(o.Warmup, 1)
	var total int
	var lo, hi int64
	inOrder := true
	var prev *traces.Record
	var prevCopy traces.Record
	closed := o.Sessions == SessionsClosed
	if closed {
		p.sessionCalls = map[int64]int32{}
	}
	buf := make([]traces.Record, 1024)
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		n, err := rd.Read(buf)
		for i := range buf[:n] {
			rec := &buf[i]
			if total == 0 {
				lo, hi = rec.ArrivalNs, rec.ArrivalNs
			}
			total++
			lo, hi = min(lo, rec.ArrivalNs), max(hi, rec.ArrivalNs)
			if !o.selects(rec) {
				continue
			}
			if prev != nil && (rec.ArrivalNs < prev.ArrivalNs || rec.ArrivalNs == prev.ArrivalNs && rec.Seq < prev.Seq) {
				inOrder = false
			}
			prevCopy = traces.Record{ArrivalNs: rec.ArrivalNs, Seq: rec.Seq}
			prev = &prevCopy
			p.Selected++
			if closed && rec.Session != 0 {
				p.sessionCalls[rec.Session]++
			}
			if len(p.head) < nHead {
				c := rec.Clone()
				p.head = append(p.head, &c)
			}
			p.needModel = p.needModel || rec.Model == ""
			p.needChat = p.needChat || rec.API == traces.APIChat || (rec.API == "" && o.API == traces.APIChat)
			p.maxSeq = max(p.maxSeq, rec.Seq)
			p.Longest = max(p.Longest, int(rec.InputTokens)+int(rec.OutputTokens))
			at := o.at(rec)
			if inOrder { // else load sorts the records and finds the waits
				p.noteWait(at, p.last, rec.Seq)
			}
			p.last = max(p.last, at)
		}
		if err == io.EOF {
			// A damaged trace ends at its damage only when read so
			// (traces.OpenOptions.Salvage); otherwise the damage is an error.
			p.Damaged = rd.Stats().Truncated
			break
		}
		if err != nil {
			return nil, fmt.Errorf("replay: read trace: %w", err)
		}
	}
	if o.ForceAPI {
		p.needChat = o.API == traces.APIChat
	}
	if p.Selected == 0 {
		return nil, nothingToSend(total, lo, hi, &o)
	}
	// Closed sessions stream when the trace is in arrival order; strict
	// sessions are checked whole before anything is sent.
	if !inOrder || closed && o.StrictSessions {
		p.sessionCalls = nil
		if err := p.load(ctx, &o); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// load reads the trace into memory and sorts the selected records by
// arrival (closed sessions, or a trace out of order).
func (p *Plan) load(ctx context.Context, o *Options) error {
	rd, err := p.src()
	if err != nil {
		return err
	}
	defer rd.Close()
	recs, err := traces.Collect(traces.All(rd))
	if err != nil {
		return fmt.Errorf("replay: read trace: %w", err)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	p.InMemory = true
	p.recs = recs
	for i := range recs {
		if o.selects(&recs[i]) {
			p.sorted = append(p.sorted, &recs[i])
		}
	}
	sort.SliceStable(p.sorted, func(i, j int) bool {
		if p.sorted[i].ArrivalNs != p.sorted[j].ArrivalNs {
			return p.sorted[i].ArrivalNs < p.sorted[j].ArrivalNs
		}
		return p.sorted[i].Seq < p.sorted[j].Seq
	})
	p.head = p.sorted[:min(len(p.head), len(p.sorted))]
	p.LongestWait, p.LongestWaitSeq = 0, 0
	var prev time.Duration
	for _, r := range p.sorted {
		at := o.at(r)
		p.noteWait(at, prev, r.Seq)
		prev = at
	}
	return nil
}

// noteWait keeps the longest wait: a record scheduled at at after one at
// prev (0: the start).
func (p *Plan) noteWait(at, prev time.Duration, seq int64) {
	if w := at - prev; w > p.LongestWait {
		p.LongestWait, p.LongestWaitSeq = w, seq
	}
}

// feed returns the next item to schedule, in arrival order: from memory
// for an InMemory plan (static items), otherwise read from the trace a
// batch at a time. It returns nil at the end; err is a read failure.
type feed func() (*item, error)

func sliceFeed(items []*item) feed {
	return func() (*item, error) {
		if len(items) == 0 {
			return nil, nil
		}
		it := items[0]
		items = items[1:]
		return it, nil
	}
}

// streamFeed reads the trace again and hands out the selected records as
// items, each with its own copy of the record; close releases the reader.
func (p *Plan) streamFeed(o *Options) (f feed, close func(), err error) {
	rd, err := p.src()
	if err != nil {
		return nil, nil, err
	}
	buf := make([]traces.Record, 256)
	var pending []traces.Record
	eof := false
	var rerr error
	f = func() (*item, error) {
		for {
			for len(pending) > 0 {
				rec := &pending[0]
				pending = pending[1:]
				if !o.selects(rec) {
					continue
				}
				c := rec.Clone()
				return &item{rec: &c, sched: o.at(&c)}, nil
			}
			if eof {
				return nil, rerr
			}
			n, err := rd.Read(buf)
			pending = buf[:n]
			switch {
			case err == io.EOF:
				eof = true
			case err != nil:
				eof, rerr = true, fmt.Errorf("read trace: %w", err)
			}
		}
	}
	return f, func() { rd.Close() }, nil
}
