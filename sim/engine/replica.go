package engine

import (
	"slices"

	"github.com/tokentrace/tokentrace/traces"
)

// Replica is one engine driven step by step on a caller's clock, for a
// simulator that runs several under one virtual clock (sim.Simulate): the
// caller adds requests, plans a step, and commits it
// when its clock reaches the step's end. It is not safe for concurrent use.
type Replica struct {
	o  Options
	st *stats
	e  *engine
	// planned is the end of the step Plan returned (-1: none).
	planned int64

	// OnFinish, when set, receives every request that ends, with its truth
	// row (see truth columns in the package doc; a remote request's row
	// has only the decode side: ServerQueueNs is NotReported,
	// ServerPrefillNs covers the last prompt token).
	OnFinish func(q *Request, t traces.Record)
	// OnRemote, when set, is called when a remote request (AddRemote) is
	// admitted and its KV cache must be pulled: tokens tokens from time
	// now. The caller calls KVArrived once they are there. Unset, pulled
	// KV arrives at once.
	OnRemote func(q *Request, tokens int, now int64)
}

// NewReplica returns an idle engine configured by o.
func NewReplica(o Options) (*Replica, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	st := newStats(o.MaxModelLen)
	st.kvBytesPerToken = o.KVBytesPerToken
	rp := &Replica{o: o, st: st, e: newEngine(o, st), planned: -1}
	rp.e.onFinish = func(r *request, status string) {
		if rp.OnFinish != nil {
			rp.OnFinish(r.ext, truthRecord(r, status))
		}
	}
	rp.e.onRemote = func(r *request, tokens int, now int64) {
		if rp.OnRemote == nil {
			rp.e.kvArrived(r, now)
			return
		}
		rp.OnRemote(r.ext, tokens, now)
	}
	return rp, nil
}

// Options returns the replica's options.
func (rp *Replica) Options() Options { return rp.o }

// Meter returns the replica's metrics.
func (rp *Replica) Meter() Meter { return Meter{rp.st} }

// Request is an engine request built for Replicas by NewRequest.
type Request struct {
	r *request
	// Tag is the caller's; the replica never reads it.
	Tag any
}

// NewRequest builds the engine request for q as Simulate would (seq is its
// truth row's Seq; the output length is drawn from o's seed and q.ID): an
// error when it does not fit o.MaxModelLen. The prompt's block hashes are
// computed even when o turns prefix caching off, for a router to score.
func NewRequest(o Options, q Arrival, seq int64) (*Request, error) {
	o.DisablePrefixCaching = false
	r, err := buildRequest(o, q.ID, seq, traces.APICompletions, q.Prompt, "", genParams{
		maxTokens: q.MaxTokens, minTokens: q.MinTokens, ignoreEOS: q.IgnoreEOS, priority: q.Priority})
	if err != nil {
		return nil, err
	}
	r.arrival = q.ArrivalNs
	x := &Request{r: r}
	r.ext = x
	return x, nil
}

// BlockHashes are the chained hashes of the prompt's full KV blocks, as
// the engines' prefix caches key them. The caller must not modify them.
func (q *Request) BlockHashes() []uint64 { return q.r.hashes[:len(q.r.hashes):len(q.r.hashes)] }

// PromptTokens is the prompt's length.
func (q *Request) PromptTokens() int { return q.r.promptLen }

// PrefillPart returns the share of q that a prefill replica serves under
// prefill/decode disaggregation: the same prompt with one output token (the
// max_tokens=1 request llm-d's routing sidecar sends). q itself is then
// served by the decode replica with AddRemote.
func (q *Request) PrefillPart() *Request {
	r := newRequest()
	o := q.r
	r.id, r.extID, r.seq, r.api, r.model, r.priority = o.id, o.extID, o.seq, o.api, o.model, o.priority
	r.promptLen, r.seed, r.tail = o.promptLen, o.seed, o.tail
	// Clipped: appending an output block's hash must not write into q's.
	r.hashes = slices.Clip(o.hashes)
	r.maxOut, r.maxTokens, r.arrival = 1, 1, o.arrival
	x := &Request{r: r}
	r.ext = x
	return x
}

// Add puts q in the waiting queue, arriving at now.
func (rp *Replica) Add(q *Request, now int64) {
	q.r.arrival = now
	rp.e.add(q.r)
	rp.syncWaiting()
}

// AddRemote puts q in the waiting queue, arriving at now, as a request
// whose prompt a prefill replica computed: when admitted it takes its
// blocks and pulls the KV (OnRemote) instead of computing it.
func (rp *Replica) AddRemote(q *Request, now int64) {
	q.r.remote = true
	q.r.hashes = slices.Clip(q.r.hashes)
	rp.Add(q, now)
}

// KVArrived tells the replica that q's KV pull ended at now.
func (rp *Replica) KVArrived(q *Request, now int64) {
	rp.e.kvArrived(q.r, now)
	rp.syncWaiting()
}

func (rp *Replica) syncWaiting() {
	rp.st.mu.Lock()
	rp.st.waiting = rp.e.numWaiting()
	rp.st.mu.Unlock()
}

// Plan schedules the replica's next step at now and returns when it
// ends; false when there is nothing to run. Commit applies it.
func (rp *Replica) Plan(now int64) (end int64, ok bool) {
	d, ok := rp.e.plan(now)
	if !ok {
		rp.planned = -1
		return 0, false
	}
	rp.planned = now + int64(d)
	return rp.planned, true
}

// Commit applies the planned step at its end: tokens, finished requests
// (OnFinish), freed blocks.
func (rp *Replica) Commit() {
	if rp.planned < 0 {
		return
	}
	end := rp.planned
	rp.planned = -1
	rp.e.commit(end)
}

// Idle reports whether the replica has nothing queued, running or being
// pulled.
func (rp *Replica) Idle() bool { return rp.e.idle() && rp.e.pulls == 0 }

// Waiting is vllm:num_requests_waiting: queued requests and those whose KV
// is being pulled.
func (rp *Replica) Waiting() int { return rp.e.numWaiting() }

// Running is vllm:num_requests_running.
func (rp *Replica) Running() int { return len(rp.e.running) }

// KVUsage is vllm:kv_cache_usage_perc.
func (rp *Replica) KVUsage() float64 { return rp.e.kv.usage() }
