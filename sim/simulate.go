package sim

import (
	"context"
	"fmt"
	"io"
	"iter"
	"math"
	"strconv"

	"github.com/tokentrace/tokentrace/internal/minheap"
	"github.com/tokentrace/tokentrace/sim/engine"
	"github.com/tokentrace/tokentrace/traces"
)

// Result is what Simulate reports besides the truth rows.
type Result struct {
	// Requests is the number of truth rows emitted.
	Requests int64
	// Replicas are the fleet's replicas (one, unnamed, for plain options)
	// with their engines' counters at the end.
	Replicas []ReplicaResult
	// MaxInFlight is the most requests the fleet held at once: what the
	// simulation's memory follows.
	MaxInFlight int
	// KVPulls counts the KV pulls between the pools; MaxConcurrentPulls is
	// the most that shared the link at once.
	KVPulls, MaxConcurrentPulls int

	layout *layout
	meters []engine.Meter
	link   *link
}

// ReplicaResult is one replica at the end of a simulation.
type ReplicaResult struct {
	Name, Role string
	Counters   engine.Counters
	// Routed counts the requests the router sent here, by reason.
	Routed map[string]int64
}

// WriteMetrics writes the fleet's /metrics at the end of the simulation:
// every replica's vLLM families with pod and role labels, and the router's.
func (r *Result) WriteMetrics(w io.Writer) error {
	if err := engine.WriteMetrics(w, r.layout.o.Model, r.layout.metricsSources(func(i int) engine.Meter { return r.meters[i] })); err != nil {
		return err
	}
	return r.layout.writeRouterMetrics(w, func() (int, float64) {
		if r.link == nil {
			return 0, 0
		}
		return r.link.inflight, r.link.totalTokens
	})
}

// Simulate runs the fleet o describes (or plain options' one engine)
// offline in virtual time: requests arrive at their ArrivalNs, are routed,
// queue, prefill, pull their KV and decode in modelled time; nothing
// sleeps. It is deterministic for given options and requests.
//
// reqs must come in arrival order (ArrivalNs never decreasing); they are
// read as the virtual clock reaches them, so memory follows the requests
// in flight, not their number. A request's truth row (Seq = its position
// in reqs, RequestID = its ID or "sim-SEQ") goes to emit when it ends, so
// rows come in the order requests finish; an emit error stops the run. A
// request longer than the context length gets an error row (status
// http_error, 400) at once, as vLLM answers.
func Simulate(ctx context.Context, o Options, reqs iter.Seq2[Request, error], emit func(traces.Record) error) (*Result, error) {
	f := &offline{emit: emit}
	l, err := newLayout(o, func(i int) int { return f.reps[i].rp.Waiting() })
	if err != nil {
		return nil, err
	}
	f.l = l
	for i := range l.reps {
		rp, err := engine.NewReplica(l.reps[i].spec.Options)
		if err != nil {
			return nil, fmt.Errorf("fleet: replica %s: %w", l.reps[i].spec.Name, err)
		}
		r := &offReplica{idx: i, rp: rp}
		rp.OnFinish = func(q *engine.Request, t traces.Record) { f.finished(r, q, t) }
		rp.OnRemote = func(q *engine.Request, tokens int, now int64) { f.link.start(now, tokens, q) }
		f.reps = append(f.reps, r)
	}
	if o.Disaggregated() {
		fo := o.Fleet
		f.link = newLink(fo.KVTransferLatency, fo.KVTransferPerToken, fo.KVTransferBandwidth, fo.KVTransferBytesPerToken)
	}
	// Requests are built once with the fleet's options: block size,
	// context length, output-length seed are fleet-wide.
	f.base = o.Options
	next, stop := iter.Pull2(reqs)
	defer stop()
	runErr := f.run(ctx, next)
	res := &Result{Requests: f.emitted, MaxInFlight: f.maxInFlight, layout: l, link: f.link}
	if f.link != nil {
		res.KVPulls, res.MaxConcurrentPulls = int(f.pulls), f.link.maxMoving
	}
	for i, r := range f.reps {
		res.meters = append(res.meters, r.rp.Meter())
		rr := ReplicaResult{Name: l.reps[i].spec.Name, Role: l.reps[i].spec.Role, Counters: r.rp.Meter().Counters(), Routed: map[string]int64{}}
		for k, n := range l.reps[i].member.decisions {
			if n > 0 {
				rr.Routed[l.reasons[k]] = n
			}
		}
		res.Replicas = append(res.Replicas, rr)
	}
	return res, runErr
}

// offline is one run of Simulate: a discrete-event loop over the replicas'
// step ends, the link's pulls and the arrivals.
type offline struct {
	l    *layout
	base engine.Options
	reps []*offReplica
	link *link
	busy []*offReplica // a min-heap by stepEndsFirst
	// dirty are replicas whose state changed and that may need a step.
	dirty []*offReplica
	now   int64
	emit  func(traces.Record) error
	err   error

	emitted               int64
	inFlight, maxInFlight int
	pulls                 int64
}

type offReplica struct {
	idx   int
	rp    *engine.Replica
	busy  bool
	end   int64
	dirty bool
}

// flight is a request in the fleet.
type flight struct {
	seq     int64
	arrival int64
	q       *engine.Request
	route
	// The prefill side of a disaggregated request, once it ended.
	pQueue, pPrefill  int64
	pCached, pPreempt int32
}

func (f *offline) markDirty(r *offReplica) {
	if !r.dirty {
		r.dirty = true
		f.dirty = append(f.dirty, r)
	}
}

func (f *offline) run(ctx context.Context, next func() (Request, error, bool)) error {
	var pend Request
	have := false
	pos := int64(0)
	last := int64(math.MinInt64)
	pull := func() error {
		q, err, ok := next()
		have = ok && err == nil
		if !ok {
			return nil
		}
		if err != nil {
			return fmt.Errorf("fleet: request %d: %w", pos, err)
		}
		if q.ArrivalNs < last {
			return fmt.Errorf("fleet: request %d (%s) arrives at %d ns, before the one before it (%d ns): requests must come in arrival order", pos, q.ID, q.ArrivalNs, last)
		}
		last, pend = q.ArrivalNs, q
		return nil
	}
	if err := pull(); err != nil {
		return err
	}
	if have {
		f.now = min(0, pend.ArrivalNs)
	}
	for k := 0; ; k++ {
		if k%1024 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		t := int64(math.MaxInt64)
		if have {
			t = max(pend.ArrivalNs, f.now)
		}
		if len(f.busy) > 0 {
			t = min(t, f.busy[0].end)
		}
		if f.link != nil {
			if ev := f.link.next(); ev >= 0 {
				t = min(t, max(ev, f.now))
			}
		}
		if t == math.MaxInt64 {
			break
		}
		f.now = t
		for len(f.busy) > 0 && f.busy[0].end == t {
			r := minheap.Pop(&f.busy, stepEndsFirst)
			r.busy = false
			r.rp.Commit()
			f.markDirty(r)
		}
		if f.link != nil {
			for _, tag := range f.link.advance(t) {
				q := tag.(*engine.Request)
				r := f.reps[q.Tag.(*flight).rep]
				r.rp.KVArrived(q, t)
				f.markDirty(r)
			}
		}
		for have && pend.ArrivalNs <= t {
			f.arrive(pend, pos)
			pos++
			if err := pull(); err != nil {
				return err
			}
		}
		for i, r := range f.dirty {
			r.dirty = false
			f.dirty[i] = nil
			if r.busy {
				continue
			}
			if end, ok := r.rp.Plan(t); ok {
				r.busy, r.end = true, end
				minheap.Push(&f.busy, r, stepEndsFirst)
			}
		}
		f.dirty = f.dirty[:0]
		if f.err != nil {
			return f.err
		}
	}
	for i, r := range f.reps {
		if !r.rp.Idle() {
			return fmt.Errorf("fleet: replica %s stalled at %d ns with %d waiting and %d running requests that can never be scheduled",
				f.l.reps[i].spec.Name, f.now, r.rp.Waiting(), r.rp.Running())
		}
	}
	return nil
}

// arrive routes the request q (position pos in the stream) at f.now.
func (f *offline) arrive(q Request, pos int64) {
	if q.ID == "" {
		q.ID = "sim-" + strconv.FormatInt(pos, 10)
	}
	x, err := engine.NewRequest(f.base, q, pos)
	if err != nil {
		t := traces.NewRecord()
		t.Seq, t.ArrivalNs, t.RequestID, t.InputTokens = pos, q.ArrivalNs, q.ID, int32(len(q.Prompt))
		t.Run, t.Status, t.HTTPStatus, t.Error = "sim", traces.StatusHTTPError, 400, "context length exceeded"
		f.out(t)
		return
	}
	fl := &flight{seq: pos, arrival: f.now, q: x}
	fl.route = f.l.route(x.BlockHashes(), q.Session, f.now)
	x.Tag = fl
	f.inFlight++
	f.maxInFlight = max(f.maxInFlight, f.inFlight)
	if fl.pre >= 0 {
		p := x.PrefillPart()
		p.Tag = fl
		r := f.reps[fl.pre]
		r.rp.Add(p, f.now)
		f.markDirty(r)
		return
	}
	r := f.reps[fl.rep]
	r.rp.Add(x, f.now)
	f.markDirty(r)
}

// finished takes a request that ended on replica r.
func (f *offline) finished(r *offReplica, q *engine.Request, t traces.Record) {
	fl := q.Tag.(*flight)
	if r.idx == fl.pre {
		// The prefill side: the decode replica takes the request now.
		f.l.reps[fl.pre].member.outstanding--
		fl.pQueue, fl.pPrefill, fl.pCached, fl.pPreempt = t.ServerQueueNs, t.ServerPrefillNs, t.ServerCachedTokens, t.ServerPreemptions
		if t.Status != traces.StatusOK {
			f.l.reps[fl.rep].member.outstanding--
			f.done(fl, t)
			return
		}
		fl.pre = -fl.pre - 2 // prefilled: keep the replica, mark the side done
		d := f.reps[fl.rep]
		f.pulls++
		d.rp.AddRemote(fl.q, f.now)
		f.markDirty(d)
		return
	}
	f.l.reps[fl.rep].member.outstanding--
	if fl.pre <= -2 {
		// Merge the prefill side into the decode side's row.
		t.ServerQueueNs = fl.pQueue
		if fl.pPrefill >= 0 && t.ServerPrefillNs >= 0 {
			t.ServerPrefillNs += fl.pPrefill
		}
		t.ServerCachedTokens = fl.pCached
		if fl.pPreempt >= 0 && t.ServerPreemptions >= 0 {
			t.ServerPreemptions += fl.pPreempt
		}
	}
	f.done(fl, t)
}

// done emits a request's truth row with the fleet's columns.
func (f *offline) done(fl *flight, t traces.Record) {
	f.inFlight--
	t.Seq, t.ArrivalNs = fl.seq, fl.arrival
	if !f.l.plain {
		t.Replica, t.RouteReason = f.l.reps[fl.rep].spec.Name, fl.reason
		if pre := fl.pre; pre != -1 {
			if pre < 0 {
				pre = -pre - 2
			}
			t.PrefillReplica = f.l.reps[pre].spec.Name
		}
	}
	f.out(t)
}

func (f *offline) out(t traces.Record) {
	if f.err != nil {
		return
	}
	if err := f.emit(t); err != nil {
		f.err = err
		return
	}
	f.emitted++
}

// stepEndsFirst orders the busy replicas, a min-heap (minheap): by the
// end of their step, then index.
func stepEndsFirst(a, b **offReplica) bool {
	return (*a).end < (*b).end || (*a).end == (*b).end && (*a).idx < (*b).idx
}
