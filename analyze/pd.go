package analyze

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/tokentrace/tokentrace/internal/fleetseries"

	"github.com/tokentrace/tokentrace/traces"
)

// The prefill side of a disaggregated request (one that names a prefill
// replica) estimated as vLLM counts it, where the server's timings do not
// cover it. Under prefill/decode disaggregation the engine that answers
// the client is the decode replica, so its per-request timings (vLLM's
// metrics object, its span) hold only the decode side: its queue time,
// from the request's arrival there to its first scheduling, which holds
// the KV pull, and its decode time. The client's TTFT is then
//
//	prefill-side queue + prefill + KV transfer + decode-side wait + one decode step
//
// (the decode replica's step that computes the last prompt token and
// samples the first, which the truth counts as prefill). What the
// decode side reports is subtracted from the TTFT, leaving the prefill
// side's own time; where it reports nothing, a model of the prefill
// replica gives it (simulatePrefill: vLLM's FCFS scheduler with chunked
// prefill, the step budget and the concurrency limit). That time is split
// at the request's first scheduling, as vLLM's queue and prefill times
// are: a prefill replica batches the prompts it holds, so a prompt's
// prefill lasts the steps it shares with the others, not its own tokens'
// time alone. The decode side's wait is split between the KV transfer and
// the wait for the decode replica as the evidence says: the servers' NIXL
// transfer histogram where it was scraped, else the transfer time of the
// least-loaded requests, the rest going to whichever the decode replica's
// load points at.

// pdEst is a disaggregated row's estimated TTFT split (ns; NaN queue:
// not estimated) and what it rests on (the pd* bits).
type pdEst struct {
	queue, prefill, kv, dq float32
	how                    uint8
}

// What a pdEst rests on.
const (
	pdReported = 1 << iota // the decode side reported its wait
	pdNIXL                 // the servers' NIXL histogram bounded the transfer
	pdFull                 // the decode replica was as busy as it ever was
	pdSeries               // the decode pool's series gave its wait
)

// pdRow is one disaggregated row being estimated.
type pdRow struct {
	i          int32 // row index
	sent, ttft float64
	step       float64 // the decode replica's step that gives the first token
	wait       float64 // decode-side wait, pull included, as reported (−1 = not)
	series     bool    // the decode replica's series gave the wait instead
	side       float64 // prefill-side time: queue + prefill
	// simSide and simSched are the modelled prefill-side time and first
	// scheduling (modelPrefillSide).
	simSide, simSched float64
	sched             float64 // first scheduled on the prefill replica
	tokens            float64 // prompt tokens pulled
	work              float64 // uncached prompt tokens the prefill replica computes
}

// Scheduler limits of the prefill replicas' model, vLLM's defaults for
// large GPUs (--max-num-batched-tokens, --max-num-seqs).
const (
	pdStepBudget = 8192
	pdMaxSeqs    = 256
)

// PooledFleet is a disaggregated fleet known from its series alone: its
// pools' sizes (the instances of each role).
type PooledFleet struct {
	PrefillReplicas int `json:"prefill_replicas"`
	DecodeReplicas  int `json:"decode_replicas"`
}

// Keys of the pools as a whole in the estimate's per-replica maps, for
// rows that name no replica (Report.PooledFleet).
const (
	pdPrefillPool int32 = -2
	pdDecodePool  int32 = -3
)

// pooledFleet is the fleet the series' roles describe when no row names
// a replica (nil otherwise): two pools, whose histograms can place each
// side's time (the prefill pool's queue and prefill times, the decode
// pool's queue time and NIXL transfers). Without them the rows are
// explained as one engine's.
func (rep *Report) pooledFleet(byInstance map[string][]traces.MetricsSample) *PooledFleet {
	if len(rep.replicas) > 0 {
		return nil
	}
	var pf PooledFleet
	var prefillHist, queueHist, nixl bool
	for _, ss := range byInstance {
		if len(ss) == 0 {
			continue
		}
		pre := fleetseries.IsPrefill(ss[0].Role)
		switch {
		case pre:
			pf.PrefillReplicas++
		case strings.EqualFold(ss[0].Role, RoleDecode):
			pf.DecodeReplicas++
		default:
			continue
		}
		for _, x := range ss {
			prefillHist = prefillHist || pre && x.QueueTimeMeanNs >= 0 && x.PrefillTimeMeanNs >= 0
			queueHist = queueHist || !pre && x.QueueTimeMeanNs >= 0
			nixl = nixl || !pre && x.KVTransferTimeMeanNs >= 0
		}
	}
	if pf.PrefillReplicas == 0 || pf.DecodeReplicas == 0 || !prefillHist || !queueHist || !nixl {
		return nil
	}
	return &pf
}

// prefillKey and decodeKey are where row r was prefilled and decoded: its
// replicas, or the pools as a whole.
func prefillKey(r *row) int32 {
	if r.pre >= 0 {
		return r.pre
	}
	return pdPrefillPool
}

func decodeKey(r *row) int32 {
	if r.rep >= 0 {
		return r.rep
	}
	return pdDecodePool
}

// disaggregated says row r went through a prefill replica.
func (rep *Report) disaggregated(r *row) bool {
	return r.pre >= 0 || rep.PooledFleet != nil && r.rep < 0
}

// estimatePD fills rep.pd for the disaggregated rows without the server's
// whole split (nothing without a prefill pool).
func (rep *Report) estimatePD(byInstance map[string][]traces.MetricsSample) {
	rep.PooledFleet = rep.pooledFleet(byInstance)
	if (rep.fleet == nil || rep.fleet.nPrefill == 0) && rep.PooledFleet == nil {
		return
	}
	if rep.opts.PrefillSide == PrefillSendOrder {
		rep.estimateSendOrder()
		return
	}
	rows := rep.pdRows()
	if len(rows) == 0 {
		return
	}
	kv := rep.kvEvidence(rows, byInstance) // pdkv.go
	byPre := map[int32][]*pdRow{}
	for k := range rows {
		p := prefillKey(rep.rows.at(int(rows[k].i)))
		byPre[p] = append(byPre[p], &rows[k])
	}
	for p, rs := range byPre {
		n := 1
		if p == pdPrefillPool {
			n = rep.PooledFleet.PrefillReplicas
		}
		rep.modelPrefillSide(rs, n)
	}
	kv.seriesWaits(rep, rows)
	for p, rs := range byPre {
		rep.prefillSide(rs, kv, p)
	}
	rep.pd = newPDEst(rep.rows.n)
	for k := range rows {
		r := &rows[k]
		q := r.sched - r.sent
		kvNs, dq, how := kv.split(rep, r)
		rep.pd[r.i] = pdEst{queue: float32(q), prefill: float32(r.side - q + r.step), kv: float32(kvNs), dq: float32(dq), how: how}
	}
}

// newPDEst is n rows' estimates, none made.
func newPDEst(n int) []pdEst {
	pd := make([]pdEst, n)
	for i := range pd {
		pd[i].queue = float32(math.NaN())
	}
	return pd
}

// pdSplit is row i's estimated split (false: none).
func (rep *Report) pdSplit(i int) (pdEst, bool) {
	if rep.pd == nil {
		return pdEst{}, false
	}
	e := rep.pd[i]
	return e, !math.IsNaN(float64(e.queue))
}

// pdRows are the disaggregated rows to estimate, in send order, with what
// the decode side reported.
func (rep *Report) pdRows() []pdRow {
	var out []pdRow
	for i := range rep.rows.n {
		r := rep.rows.at(i)
		if !r.ok || !rep.disaggregated(r) || r.sent < 0 {
			continue
		}
		ttft, ok := r.ttft()
		if !ok {
			continue
		}
		if !rep.opts.IgnoreServerTimings && r.sq >= 0 && r.sp >= 0 && r.skv >= 0 && r.sdq >= 0 {
			continue // the server's own split
		}
		p := pdRow{i: int32(i), sent: float64(r.sent), ttft: ttft, wait: -1, sched: float64(r.sent),
			tokens: float64(max(r.in-1, 0)), work: max(r.uncached(), 1)}
		p.step = rep.est.unloadedTP
		if tp, ok := r.tpot(); ok {
			p.step = tp
		}
		p.step = min(p.step, ttft)
		if !rep.opts.IgnoreServerTimings && r.sdq >= 0 {
			p.wait = min(float64(r.sdq), ttft-p.step)
			p.side = ttft - p.step - p.wait
		}
		out = append(out, p)
	}
	slices.SortStableFunc(out, func(a, b pdRow) int { return cmp.Compare(a.sent, b.sent) })
	return out
}

// prefillSide splits prefill replica pre's requests' prefill-side time
// (in send order) at their first scheduling: from when each left the
// replica where the decode side gave the time (firstScheduled); where the
// decode replica's series gave it, with the prefill the replica's own
// histogram gives the requests that finished with it, shared out by their
// model's prefills; else as modelled
// (modelPrefillSide), which then also gives the time.
func (rep *Report) prefillSide(rs []*pdRow, kv *kvModel, pre int32) {
	var known []*pdRow
	for _, r := range rs {
		switch {
		case r.wait >= 0:
			known = append(known, r)
		case r.series:
			r.sched = r.sent + r.side*min(max(r.simSched-r.sent, 0)/max(r.simSide, 1), 1)
			if iv := kv.interval(pre, r.sent+r.side); iv != nil && iv.queueNs >= 0 && iv.prefillNs >= 0 && iv.queueNs+iv.prefillNs > 0 {
				// The replica's own split of its requests' time, for a
				// request that left it with them; a request whose end is
				// misplaced among them (a long wait read into a light
				// interval) takes at most prefillCap of their prefill.
				p := min(r.side*iv.prefillNs/(iv.queueNs+iv.prefillNs), prefillCap*iv.prefillNs)
				r.sched = r.sent + r.side - p
			}
		default:
			r.side, r.sched = r.simSide, r.simSched
		}
	}
	if len(known) == 0 {
		return
	}
	sent, end := make([]float64, len(known)), make([]float64, len(known))
	for k, r := range known {
		sent[k], end[k] = r.sent, r.sent+r.side
	}
	sched := firstScheduled(sent, end, rep.stepTolerance())
	for k, r := range known {
		r.sched = min(max(sched[k], r.sent), end[k])
	}
}

// prefillCap bounds a request's prefill, split by its prefill replica's
// histograms, to that many times their mean.
const prefillCap = 3

// modelPrefillSide simulates one prefill replica (or a pool of n, its
// requests taking them in turn) over all its requests (every one
// occupies it, whatever was reported of it) and sets each one's modelled
// prefill-side time and first scheduling, within its TTFT.
func (rep *Report) modelPrefillSide(rs []*pdRow, n int) {
	fixed, perTok, overhead := rep.prefillStepModel()
	scale := float64(rep.oneIn()) // a sample's request stands for OneIn
	for lane := range n {
		var mine []*pdRow
		for k := lane; k < len(rs); k += n {
			mine = append(mine, rs[k])
		}
		at, work := make([]float64, len(mine)), make([]float64, len(mine))
		for k, r := range mine {
			at[k], work[k] = r.sent, r.work*scale
		}
		sched, end := simulatePrefill(at, work, pdStepBudget, pdMaxSeqs, fixed, perTok)
		for k, r := range mine {
			r.simSide = min(end[k]-r.sent+overhead, r.ttft-r.step)
			r.simSched = min(sched[k], r.sent+r.simSide)
		}
	}
}

// prefillStepModel is the prefill replica's step for simulatePrefill,
// from the fitted prefill model: a step's fixed time is at most a decode
// step's (the unloaded TPOT); the rest of the fitted fixed time is
// per-request overhead (network, the hand-over) that occupies no step.
func (rep *Report) prefillStepModel() (fixed, perToken, overhead float64) {
	m := rep.est
	fixed = m.a
	if m.unloadedTP > 0 {
		fixed = min(m.a, m.unloadedTP)
	}
	return fixed, m.b, m.a - fixed
}

// stepTolerance is how close two prefill-side ends must be to count as
// the same engine step: a third of the smallest step the fitted model
// allows, between 1 and 5 ms.
func (rep *Report) stepTolerance() float64 {
	fixed, _, _ := rep.prefillStepModel()
	return min(max(fixed/3, 1e6), 5e6)
}

// simulatePrefill runs vLLM's scheduler on one prefill replica: requests
// arrive at at (ascending) needing work tokens each; every step takes the
// running requests' next chunks in order, then admits waiting ones (up to
// maxSeqs running) while budget tokens remain, and lasts fixed +
// perToken·tokens; a request is done at the end of the step that computed
// its last token. It returns each request's first scheduling and end.
func simulatePrefill(at, work []float64, budget, maxSeqs int, fixed, perToken float64) (sched, end []float64) {
	n := len(at)
	sched, end = make([]float64, n), make([]float64, n)
	left := slices.Clone(work)
	type chunk struct {
		k int
		n float64
	}
	var running []int
	var plan []chunk
	next, t := 0, math.Inf(-1)
	for next < n || len(running) > 0 {
		if len(running) == 0 && at[next] > t {
			t = at[next]
		}
		plan = plan[:0]
		b := float64(budget)
		for _, k := range running {
			if b <= 0 {
				break
			}
			plan = append(plan, chunk{k, min(left[k], b)})
			b -= plan[len(plan)-1].n
		}
		for b > 0 && next < n && at[next] <= t && len(running) < maxSeqs {
			k := next
			next++
			sched[k] = t
			running = append(running, k)
			plan = append(plan, chunk{k, min(left[k], b)})
			b -= plan[len(plan)-1].n
		}
		t += fixed + perToken*(float64(budget)-b)
		for _, c := range plan {
			left[c.k] -= c.n
		}
		kept := running[:0]
		for _, k := range running {
			if left[k] <= 0 {
				end[k] = t
				continue
			}
			kept = append(kept, k)
		}
		running = kept
	}
	return sched, end
}

// firstScheduled reconstructs when each request of one prefill replica
// was first scheduled from when each left it (sent ascending; ends
// within tol of each other belong to one engine step). Under vLLM's FCFS
// scheduler a request's first chunk goes into the step in which the one
// before it finishes (that step's leftover budget), or, when it arrived
// after that step began, into the next; after the one before it finished,
// it is scheduled on arrival.
func firstScheduled(sent, end []float64, tol float64) []float64 {
	n := len(sent)
	sched := make([]float64, n)
	if n == 0 {
		return sched
	}
	// The steps: distinct ends, clustered.
	order := make([]int, n)
	for k := range order {
		order[k] = k
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(end[a], end[b]) })
	stepOf := make([]int, n)
	var stepEnd, stepFirst []float64 // per step: its end, the earliest send among its requests
	for _, k := range order {
		if m := len(stepEnd); m == 0 || end[k]-stepEnd[m-1] > tol {
			stepEnd = append(stepEnd, end[k])
			stepFirst = append(stepFirst, sent[k])
		} else {
			stepEnd[m-1] = end[k]
			stepFirst[m-1] = min(stepFirst[m-1], sent[k])
		}
		stepOf[k] = len(stepEnd) - 1
	}
	start := func(s int) float64 {
		if s == 0 {
			return stepFirst[0]
		}
		return max(stepEnd[s-1], stepFirst[s])
	}
	for k := range sent {
		sched[k] = sent[k]
		if k == 0 || end[k-1] <= sent[k] {
			continue // the one before had finished: scheduled on arrival
		}
		s := stepOf[k-1]
		if st := start(s); st >= sent[k] {
			sched[k] = st
		} else {
			sched[k] = stepEnd[s]
		}
	}
	return sched
}

// pdTail counts the tail's disaggregated requests whose split was
// estimated, and of them those resting on each pd* bit.
type pdTail struct {
	n, reported, nixl, full, series int
}

func (rep *Report) pdTailBasis() pdTail {
	var b pdTail
	for _, i := range rep.tail {
		e, ok := rep.pdSplit(int(i))
		if !ok {
			continue
		}
		b.n++
		if e.how&pdReported != 0 {
			b.reported++
		}
		if e.how&pdNIXL != 0 {
			b.nixl++
		}
		if e.how&pdFull != 0 {
			b.full++
		}
		if e.how&pdSeries != 0 {
			b.series++
		}
	}
	return b
}

// pdBasis is what some of the tail's estimates rest on: how many, and the
// note that says it.
type pdBasis struct {
	n    int
	note string
}

// note is the note of the first basis that at least half the tail's
// estimates rest on ("" when none was estimated, fallback's when no basis
// holds half).
func (b pdTail) note(fallback func() string, bases ...pdBasis) string {
	if b.n == 0 {
		return ""
	}
	for _, x := range bases {
		if 2*x.n >= b.n {
			return x.note
		}
	}
	return fallback()
}

// pdPrefillNote says how the tail's prefill side was estimated ("" when
// the servers timed it).
func (rep *Report) pdPrefillNote() string {
	b := rep.pdTailBasis()
	return b.note(func() string {
		fixed, perTok, _ := rep.prefillStepModel()
		return fmt.Sprintf(" (estimated from a model of each prefill replica: vLLM's first-come first-served scheduler batching prompts in steps of up to %d tokens, each %s + %.1f µs per uncached token, fitted on the least-loaded requests; the decode side reported nothing)",
			pdStepBudget, fmtMs(fixed*msPerNs), perTok*1e-3)
	},
		pdBasis{b.series, " (estimated: a request's prefill side is its TTFT less its decode side from the decode pool's histograms and one decode step, " +
			"split as the prefill pool's own queue and prefill time histograms split its requests' time)"},
		pdBasis{b.reported, " (estimated: a request's prefill side is its TTFT less the wait its decode replica reported and one decode step, " +
			"split where vLLM's scheduler first took it on its prefill replica, in the step in which the request before it finished)"})
}

// pdKVNote says what the tail's transfer estimate rests on ("" when the
// servers timed it).
func (rep *Report) pdKVNote() string {
	b := rep.pdTailBasis()
	return b.note(func() string { return " (estimated: the least-loaded requests' transfer time by prompt length)" },
		pdBasis{b.nixl, " (estimated: within the decode replicas' own NIXL transfer histogram for the intervals the pulls ended in, shared out by prompt length)"},
		pdBasis{b.reported, " (estimated: the wait the decode replica reported, which held the pull; the replica had room for more requests, so the pull is what the request waited for)"})
}

// pdQueueNote says what the tail's decode-side wait estimate rests on.
func (rep *Report) pdQueueNote() string {
	b := rep.pdTailBasis()
	return b.note(func() string { return " (estimated)" },
		pdBasis{b.series, " (estimated: the decode replicas' queue time histogram past their NIXL transfers, for the requests that finished with the tail, shared out by the time each one's TTFT leaves past its modelled prefill side)"},
		pdBasis{b.nixl, " (estimated: the wait the decode replica reported less the transfer its NIXL histogram allows)"},
		pdBasis{b.full, " (estimated: the decode replicas held nearly the most requests they ever held when the tail reached them, so beyond the least-loaded requests' transfer time the wait was theirs)"})
}

// estimateSendOrder is Options.PrefillSendOrder's estimate: each prefill
// replica a lane working through its requests in send order, each taking
// the fitted per-token prefill time of its uncached prompt (the fixed part
// overlapping in a batch); a request waits for its lane to be free, its
// prefill is the fitted model's, and the rest of its TTFT is the KV
// transfer. What the decode side reported is not used. A sample's
// requests stand for OneIn requests each.
func (rep *Report) estimateSendOrder() {
	rows := &rep.rows
	var order []int32
	for i := range rows.n {
		if r := rows.at(i); r.ok && r.pre >= 0 && r.sent >= 0 && r.first >= r.sent {
			order = append(order, int32(i))
		}
	}
	slices.SortStableFunc(order, func(x, y int32) int { return cmp.Compare(rows.at(int(x)).sent, rows.at(int(y)).sent) })
	rep.pd = newPDEst(rows.n)
	free := make([]float64, len(rep.replicas))
	scale := float64(rep.oneIn())
	for _, i := range order {
		r := rows.at(int(i))
		if !rep.opts.IgnoreServerTimings && r.sq >= 0 && r.sp >= 0 && r.skv >= 0 && r.sdq >= 0 {
			continue
		}
		ttft, _ := r.ttft()
		work := rep.est.prefill(r.uncached())
		start := max(float64(r.sent), free[r.pre])
		free[r.pre] = start + work*scale
		pre := min(work, ttft)
		q := min(start-float64(r.sent), ttft-pre)
		rep.pd[i] = pdEst{queue: float32(q), prefill: float32(pre), kv: float32(ttft - pre - q)}
	}
}
