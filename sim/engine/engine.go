package engine

import (
	"sync/atomic"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// request is one engine request. Fields above "engine-owned" are set before
// submission and read-only afterwards; engine-owned fields belong to the
// engine goroutine; the handler reads pub/done and, once done is set, fin.
type request struct {
	id    string // truth request id (X-Request-Id, body request_id or generated)
	extID string // the engine request id vLLM reports in OTLP spans: chatcmpl-<id> or cmpl-<id>-<i>
	// W3C trace context from the traceparent/tracestate headers (nil = none).
	traceID, parentSpan []byte
	traceState          string
	seq                 int64
	api                 string
	model               string
	promptLen           int
	// hashes is the chained hashes of the sequence's full blocks: the
	// prompt's, then, as they are computed, those that hold generated
	// tokens (commit appends them); seed starts the chain and tail is the
	// prompt's tokens after its last full block, which the first block
	// with output begins with.
	hashes    []uint64
	seed      uint64
	tail      []int32
	maxOut    int  // tokens this request will generate
	stopByEOS bool // finish_reason "stop" (an EOS draw) rather than "length"
	priority  int
	maxTokens int // the max_tokens parameter (for the histogram)
	arrival   int64
	// remote marks a request whose prompt a prefill replica computed: on
	// admission the engine allocates its blocks and pulls the KV cache
	// (engine.onRemote) instead of computing it, then recomputes only the
	// last prompt token, as vLLM's NIXL connector does.
	remote bool
	// ext is the exported handle of a request built for a Replica.
	ext *Request

	// engine-owned
	numComputed int
	numOut      int
	blocks      []int32
	hashed      int
	cached      int
	firstSched  int64
	firstTok    int64
	lastTok     int64
	preemptions int
	running     bool
	finished    bool
	lastPub     int
	// admitted is when a remote request got its blocks and its pull began,
	// kvAt when the pulled KV landed (-1 before); pulling is set meanwhile.
	admitted, kvAt int64
	pulling        bool

	// published to the handler
	pub    atomic.Int64 // output tokens published so far
	done   atomic.Bool  // fin is valid
	notify chan struct{}
	fin    finalInfo
	abort  atomic.Bool // set by the handler when the client went away
	// chunkNs and chunkTok are the published chunks' times and token
	// counts (Options.ChunkTimes).
	chunkNs  []int64
	chunkTok []int32
	// ackPending is set in Virtual mode while the engine waits for the
	// handler to write what was published.
	ackPending atomic.Bool
	// abortStatus is the truth status of an aborted request, written before abort is set.
	abortStatus string
}

// finalInfo is what the engine tells the handler when a request ends.
type finalInfo struct {
	outTokens    int
	cachedTokens int
	finishReason string
	arrival      int64
	firstSched   int64
	firstTok     int64
	lastTok      int64
	aborted      bool
}

func newRequest() *request {
	return &request{firstSched: -1, firstTok: -1, lastTok: -1, admitted: -1, kvAt: -1, notify: make(chan struct{}, 1)}
}

func (r *request) total() int { return r.promptLen + r.numOut }

// blockHash is the chained hash of full block i past the prompt's full
// blocks (i == len(r.hashes)): the prompt's tail, then generated tokens,
// whose ids (OutputTokenID) are known up to the tokens computed.
func (r *request) blockHash(i, bs int) uint64 {
	prev := r.seed
	if i > 0 {
		prev = r.hashes[i-1]
	}
	var buf [64]int32
	toks := buf[:0]
	for p := i * bs; p < (i+1)*bs; p++ {
		if k := p - r.promptLen; k >= 0 {
			toks = append(toks, OutputTokenID(k))
		} else {
			toks = append(toks, r.tail[p-(r.promptLen-len(r.tail))])
		}
	}
	return hashBlock(prev, toks)
}

// published is what the handler may stream: the output tokens published so
// far and whether the request ended (then n is final).
func (r *request) published() (n int, done bool) {
	if r.done.Load() {
		return r.fin.outTokens, true
	}
	return int(r.pub.Load()), false
}

type schedItem struct {
	r *request
	n int
}

// engine is the V1-like scheduler. It is not safe for concurrent use: the
// server's engine goroutine or Simulate owns it.
type engine struct {
	o        Options
	kv       *kvCache
	waiting  []*request
	running  []*request
	sched    []schedItem
	hitBuf   []int32
	st       *stats
	onFinish func(r *request, status string)
	// onPublish, when set, is called just before tokens are published to
	// r's handler.
	onPublish func(r *request)
	// onRemote, when set, starts pulling tokens tokens of a remote
	// request's KV cache; kvArrived ends the pull. Unset, the KV lands at
	// once.
	onRemote func(r *request, tokens int, now int64)
	// pulls counts admitted remote requests whose KV is still on its way
	// (vLLM counts them as waiting).
	pulls  int
	aborts int

	// plan results
	prefillTokens, decodeSeqs, ctxTokens int
	steps                                int64
}

func newEngine(o Options, st *stats) *engine {
	return &engine{o: o, kv: newKVCache(o.NumGPUBlocks, o.BlockSize, !o.DisablePrefixCaching), st: st}
}

// idle reports whether nothing is queued or running (KV pulls may still
// be on their way: see pulls).
func (e *engine) idle() bool { return len(e.waiting) == 0 && len(e.running) == 0 }

// numWaiting is vllm:num_requests_waiting: the queue and the requests
// waiting for their KV cache to arrive.
func (e *engine) numWaiting() int { return len(e.waiting) + e.pulls }

// add puts a request in the waiting queue (arrival already stamped).
func (e *engine) add(r *request) {
	if e.o.Policy == "priority" {
		i := len(e.waiting)
		for i > 0 && less(r, e.waiting[i-1]) {
			i--
		}
		e.waiting = append(e.waiting, nil)
		copy(e.waiting[i+1:], e.waiting[i:])
		e.waiting[i] = r
		return
	}
	e.waiting = append(e.waiting, r)
}

// less orders requests for the priority policy: lower priority value, then
// earlier arrival.
func less(a, b *request) bool {
	if a.priority != b.priority {
		return a.priority < b.priority
	}
	return a.arrival < b.arrival || a.arrival == b.arrival && a.seq < b.seq
}

// reapAborts drops requests whose client went away.
func (e *engine) reapAborts(now int64) {
	if e.aborts == 0 {
		return
	}
	e.aborts = 0
	keep := e.waiting[:0]
	for _, r := range e.waiting {
		if r.abort.Load() {
			e.finish(r, now, traces.StatusDisconnect)
			continue
		}
		keep = append(keep, r)
	}
	clear(e.waiting[len(keep):])
	e.waiting = keep
	for _, r := range e.running {
		if r.abort.Load() && !r.finished {
			e.finish(r, now, traces.StatusDisconnect)
		}
	}
	e.compactRunning()
	e.st.mu.Lock()
	e.st.running, e.st.waiting, e.st.kvUsage = len(e.running), e.numWaiting(), e.kv.usage()
	e.st.kvUsagePeak = max(e.st.kvUsagePeak, e.st.kvUsage)
	e.st.mu.Unlock()
}

func (e *engine) compactRunning() {
	keep := e.running[:0]
	for _, r := range e.running {
		if r.running {
			keep = append(keep, r)
		}
	}
	clear(e.running[len(keep):])
	e.running = keep
}

// blocksFor is how many blocks n computed tokens need.
func (e *engine) blocksFor(n int) int { return (n + e.o.BlockSize - 1) / e.o.BlockSize }

// plan schedules one step at time now and returns its modelled duration.
// It returns 0, false when there is nothing to do.
func (e *engine) plan(now int64) (time.Duration, bool) {
	e.sched = e.sched[:0]
	e.prefillTokens, e.decodeSeqs, e.ctxTokens = 0, 0, 0
	budget, preempted := e.scheduleRunning(e.o.MaxNumBatchedTokens)
	if !preempted {
		e.admitWaiting(now, budget)
	}
	if len(e.sched) == 0 {
		return 0, false
	}
	return e.stepTime(), true
}

// scheduleRunning schedules the running requests first, in order, each
// as many tokens as it has left within the budget; a request whose next
// blocks do not fit preempts others (see makeRoom). It returns the budget
// left and whether the step preempted.
func (e *engine) scheduleRunning(budget int) (int, bool) {
	preempted := false
	for i := 0; i < len(e.running) && budget > 0; i++ {
		r := e.running[i]
		n := min(r.total()-r.numComputed, budget)
		need := e.blocksFor(r.numComputed+n) - len(r.blocks)
		if need > 0 && !e.kv.canAllocate(nil, need) {
			preempted = true
			if !e.makeRoom(i, r, need) {
				i-- // the slot now holds the next request (or the loop ends)
				continue
			}
		}
		if need > 0 {
			r.blocks = e.kv.allocate(r.blocks, need)
		}
		e.sched = append(e.sched, schedItem{r, n})
		budget -= n
	}
	return budget, preempted
}

// makeRoom preempts (recompute) running requests, from position i on,
// until need blocks fit for the running request r there: the last one
// under FCFS, the lowest-priority one under the priority policy. It
// returns false when r itself was preempted.
func (e *engine) makeRoom(i int, r *request, need int) bool {
	for !e.kv.canAllocate(nil, need) {
		v := len(e.running) - 1
		if e.o.Policy == "priority" {
			for j := i; j < len(e.running); j++ {
				if less(e.running[v], e.running[j]) {
					v = j
				}
			}
		}
		victim := e.running[v]
		e.preempt(victim)
		e.running = append(e.running[:v], e.running[v+1:]...)
		if victim == r {
			return false
		}
	}
	return true
}

// admitWaiting admits waiting requests in queue order while the budget,
// MaxNumSeqs and the KV cache allow: a remote request whose KV has not
// been pulled starts its pull (admitRemote) and leaves the queue until
// it lands.
func (e *engine) admitWaiting(now int64, budget int) {
	for len(e.waiting) > 0 && budget > 0 && len(e.running) < e.o.MaxNumSeqs {
		r := e.waiting[0]
		if r.remote && r.kvAt < 0 {
			if !e.admitRemote(r, now) {
				return
			}
			continue
		}
		var n int
		var ok bool
		if r.kvAt >= 0 && len(r.blocks) > 0 {
			n, ok = e.admitLanded(r, budget)
		} else {
			n, ok = e.admitLocal(r, budget)
		}
		if !ok {
			return
		}
		if r.firstSched < 0 {
			r.firstSched = now
		}
		e.startRunning(r, n)
		budget -= n
	}
}

// admitLanded schedules a remote request whose KV landed: its blocks are
// held, one prompt token is left to compute. It returns the tokens
// scheduled, or false when a further block does not fit.
func (e *engine) admitLanded(r *request, budget int) (int, bool) {
	n := min(r.total()-r.numComputed, budget)
	need := e.blocksFor(r.numComputed+n) - len(r.blocks)
	if need > 0 && !e.kv.canAllocate(nil, need) {
		return 0, false
	}
	if need > 0 {
		r.blocks = e.kv.allocate(r.blocks, need)
	}
	return n, true
}

// admitLocal admits a request that computes its own prompt: its cached
// prefix (never the block of its last token) is taken from the prefix
// cache, and blocks for the tokens this step computes are allocated. It
// returns the tokens scheduled, or false when the blocks do not fit.
func (e *engine) admitLocal(r *request, budget int) (int, bool) {
	total := r.total()
	hit := e.cachedPrefix(r)
	computed := len(hit) * e.o.BlockSize
	n := min(total-computed, budget)
	need := e.blocksFor(computed+n) - len(hit)
	if !e.kv.canAllocate(hit, need) {
		return 0, false
	}
	e.takeBlocks(r, hit, need)
	r.numComputed = computed
	r.hashed = len(hit)
	if r.firstSched < 0 {
		r.cached = computed
	}
	return n, true
}

// cachedPrefix is the blocks of r's longest cached prefix, short of the
// block that holds its last token (which is always computed).
func (e *engine) cachedPrefix(r *request) []int32 {
	hit := e.hitBuf[:0]
	if !e.o.DisablePrefixCaching {
		hit = e.kv.lookup(r.hashes[:min(len(r.hashes), (r.total()-1)/e.o.BlockSize)], hit)
		e.hitBuf = hit
	}
	return hit
}

// takeBlocks gives r the cached blocks hit and need fresh ones (the
// caller checked they fit), counting the prefix-cache query.
func (e *engine) takeBlocks(r *request, hit []int32, need int) {
	if !e.o.DisablePrefixCaching {
		e.st.prefixQuery(r.total(), len(hit)*e.o.BlockSize)
	}
	e.kv.touch(hit)
	r.blocks = append(r.blocks[:0], hit...)
	r.blocks = e.kv.allocate(r.blocks, need)
}

// startRunning moves r from the head of the waiting queue to the batch,
// with n tokens in this step.
func (e *engine) startRunning(r *request, n int) {
	e.waiting[0] = nil
	e.waiting = e.waiting[1:]
	r.running = true
	e.running = append(e.running, r)
	e.sched = append(e.sched, schedItem{r, n})
}

// stepTime counts the planned step's prefill tokens, decoding sequences
// and context tokens and returns its modelled duration.
func (e *engine) stepTime() time.Duration {
	for _, it := range e.sched {
		if it.n == 1 && it.r.numOut > 0 && it.r.numComputed == it.r.total()-1 {
			e.decodeSeqs++
		} else {
			e.prefillTokens += it.n
		}
		e.ctxTokens += it.r.numComputed + it.n
	}
	return e.o.StepFixed +
		time.Duration(e.prefillTokens)*e.o.PrefillPerToken +
		time.Duration(e.decodeSeqs)*e.o.DecodePerSeq +
		time.Duration(e.ctxTokens)*e.o.AttnPerContextToken
}

// admitRemote admits the remote request r at the head of the waiting
// queue: it takes the blocks of the whole prompt (the local prefix-cache
// hits among them) and starts pulling the rest of the KV, all but the last
// prompt token, which the engine recomputes to sample the first output
// token. It returns false when the blocks do not fit (r keeps its place).
func (e *engine) admitRemote(r *request, now int64) bool {
	total := r.total()
	hit := e.cachedPrefix(r)
	computed := len(hit) * e.o.BlockSize
	need := e.blocksFor(total) - len(hit)
	if !e.kv.canAllocate(hit, need) {
		return false
	}
	e.takeBlocks(r, hit, need)
	r.numComputed, r.hashed, r.cached, r.admitted = computed, len(hit), computed, now
	e.waiting[0] = nil
	e.waiting = e.waiting[1:]
	tokens := total - 1 - computed
	if tokens <= 0 || e.onRemote == nil {
		e.kvArrived(r, now)
		return true
	}
	r.pulling = true
	e.pulls++
	e.onRemote(r, tokens, now)
	return true
}

// kvArrived ends r's pull at time now: its prompt KV (all but the last
// token) is computed and its full blocks join the prefix cache, and r
// goes back to the waiting queue in arrival order to be scheduled.
func (e *engine) kvArrived(r *request, now int64) {
	pulled := r.pulling
	if pulled {
		r.pulling = false
		e.pulls--
	}
	if r.finished {
		return
	}
	r.kvAt = now
	r.numComputed = max(r.total()-1, r.numComputed)
	bs := e.o.BlockSize
	full := r.numComputed / bs
	for i := r.hashed; i < full && i < len(r.hashes) && !e.o.DisablePrefixCaching; i++ {
		e.kv.commit(r.blocks[i], r.hashes[i])
	}
	r.hashed = max(r.hashed, min(full, len(r.hashes)))
	if pulled {
		e.st.mu.Lock()
		e.st.kvPulled(float64(now-r.admitted)/1e9, r.total()-1-r.cached)
		e.st.mu.Unlock()
	}
	if r.abort.Load() {
		e.finish(r, now, traces.StatusDisconnect)
		return
	}
	if e.o.Policy == "priority" {
		e.add(r)
		return
	}
	i := len(e.waiting)
	for i > 0 && (e.waiting[i-1].arrival > r.arrival || e.waiting[i-1].arrival == r.arrival && e.waiting[i-1].seq > r.seq) {
		i--
	}
	e.waiting = append(e.waiting, nil)
	copy(e.waiting[i+1:], e.waiting[i:])
	e.waiting[i] = r
}

// preempt frees a running request's blocks and puts it back at the front of
// the waiting queue; it will recompute prompt and output so far.
func (e *engine) preempt(r *request) {
	e.kv.free(r.blocks)
	r.blocks = r.blocks[:0]
	r.numComputed, r.hashed = 0, 0
	r.running = false
	r.preemptions++
	e.st.preemption()
	if e.o.Policy == "priority" {
		e.add(r)
		return
	}
	e.waiting = append(e.waiting, nil)
	copy(e.waiting[1:], e.waiting)
	e.waiting[0] = r
}

// commit applies the planned step, which ended at time end.
func (e *engine) commit(end int64) {
	e.steps++
	bs := e.o.BlockSize
	e.st.mu.Lock()
	e.st.iteration(e.prefillTokens + e.decodeSeqs)
	anyFinished := false
	for _, it := range e.sched {
		r := it.r
		r.numComputed += it.n
		if full := r.numComputed / bs; full > r.hashed {
			for i := r.hashed; i < full && !e.o.DisablePrefixCaching; i++ {
				if i == len(r.hashes) {
					r.hashes = append(r.hashes, r.blockHash(i, bs))
				}
				e.kv.commit(r.blocks[i], r.hashes[i])
			}
			r.hashed = full
		}
		if r.numComputed < r.total() {
			continue // a prefill chunk: no token yet
		}
		r.numOut++
		e.st.generation++
		if r.numOut == 1 {
			r.firstTok = end
			e.st.promptTokens += int64(r.promptLen)
			e.st.ttft.observe(float64(end-r.arrival) / 1e9)
		} else {
			e.st.itl.observe(float64(end-r.lastTok) / 1e9)
		}
		r.lastTok = end
		if r.numOut >= r.maxOut {
			e.finishLocked(r, end, traces.StatusOK)
			anyFinished = true
			continue
		}
		if r.numOut == 1 || r.numOut-r.lastPub >= e.o.StreamInterval {
			e.chunk(r, end)
			r.lastPub = r.numOut
			if e.onPublish != nil {
				e.onPublish(r) // before the handler can see the tokens
			}
			r.pub.Store(int64(r.numOut))
			select {
			case r.notify <- struct{}{}:
			default:
			}
		}
	}
	if anyFinished {
		e.compactRunning()
	}
	e.st.running, e.st.waiting, e.st.kvUsage = len(e.running), e.numWaiting(), e.kv.usage()
	e.st.kvUsagePeak = max(e.st.kvUsagePeak, e.st.kvUsage)
	e.st.mu.Unlock()
}

func (e *engine) finish(r *request, now int64, status string) {
	e.st.mu.Lock()
	e.finishLocked(r, now, status)
	e.st.mu.Unlock()
}

// finishLocked ends a request (e.st.mu held): frees its blocks, records its
// stats and truth, and publishes the final state to its handler. The caller
// removes it from running (compactRunning) or waiting.
func (e *engine) finishLocked(r *request, now int64, status string) {
	if r.finished {
		return
	}
	r.finished = true
	r.running = false
	e.kv.free(r.blocks)
	r.blocks = nil
	reason := "length"
	if r.stopByEOS {
		reason = "stop"
	}
	if status == traces.StatusOK {
		e.st.finished(r, reason, now)
	} else {
		e.st.success["abort"]++
	}
	r.fin = finalInfo{
		outTokens: r.numOut, cachedTokens: r.cached, finishReason: reason,
		arrival: r.arrival, firstSched: r.firstSched, firstTok: r.firstTok, lastTok: r.lastTok,
		aborted: status != traces.StatusOK,
	}
	if status == traces.StatusOK {
		e.chunk(r, now) // before the truth row is taken
	}
	if e.onFinish != nil {
		e.onFinish(r, status)
	}
	r.lastPub = r.numOut
	if e.onPublish != nil && status == traces.StatusOK {
		e.onPublish(r) // before the handler can see the end
	}
	r.done.Store(true) // pub keeps the last streamed count; fin has the final one
	select {
	case r.notify <- struct{}{}:
	default:
	}
}

// chunk records the chunk of r's tokens published at time at, when the
// options ask for chunk times.
func (e *engine) chunk(r *request, at int64) {
	if e.o.ChunkTimes && r.numOut > r.lastPub {
		r.chunkNs = append(r.chunkNs, at)
		r.chunkTok = append(r.chunkTok, int32(r.numOut-r.lastPub))
	}
}

// truthRecord is the engine's account of a finished request.
func truthRecord(r *request, status string) traces.Record {
	t := traces.NewRecord()
	t.Seq = r.seq
	t.ArrivalNs = r.arrival
	t.InputTokens = int32(r.promptLen)
	t.OutputTokens = int32(r.numOut)
	t.Model = r.model
	t.API = r.api
	t.Run = "sim"
	t.RequestID = r.id
	t.Status = status
	t.HTTPStatus = 200
	t.ServerPromptTokens = int32(r.promptLen)
	t.ServerOutputTokens = int32(r.numOut)
	t.ServerCachedTokens = int32(r.cached)
	t.ServerPreemptions = int32(r.preemptions)
	if r.firstSched >= 0 {
		t.ServerQueueNs = r.firstSched - r.arrival
	}
	if r.firstTok >= 0 {
		t.ServerPrefillNs = r.firstTok - r.firstSched
		t.ServerDecodeNs = r.lastTok - r.firstTok
		t.FirstTokenNs = r.firstTok
		t.LastTokenNs = r.lastTok
	}
	if r.firstSched < 0 {
		t.ServerCachedTokens = traces.NotReported
	}
	t.ChunkNs, t.ChunkTokens = r.chunkNs, r.chunkTok
	if r.remote && r.admitted >= 0 {
		// The decode side of a disaggregated request: its queue is the
		// wait for blocks and, once the KV landed, for a batch; its
		// prefill only the last prompt token (the prefill replica's row
		// has the rest); the pull sits between.
		t.ServerQueueNs = traces.NotReported
		if r.kvAt >= 0 {
			t.ServerKVTransferNs = r.kvAt - r.admitted
		}
		if r.firstSched >= 0 {
			t.ServerDecodeQueueNs = r.admitted - r.arrival + r.firstSched - r.kvAt
		}
		if r.firstTok < 0 {
			t.ServerPrefillNs, t.ServerDecodeNs = traces.NotReported, traces.NotReported
		}
	}
	return t
}
