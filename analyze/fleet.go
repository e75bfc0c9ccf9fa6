package analyze

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/tokentrace/tokentrace/internal/fleetseries"
	"github.com/tokentrace/tokentrace/traces"
)

// The tail across a fleet. When the results name the replica that served
// each request (the replica column; prefill_replica under prefill/decode
// disaggregation), the analysis measures, at every request's send, how
// many other requests were in flight on its own replica and on the other
// replicas of its pool (computed from the results alone: a request
// occupies its serving replica from its send to its last token, and its
// prefill replica from its send to its first token), splits a
// disaggregated request's time into the prefill side, the KV transfer and
// the decode side, and names what the tail came from: routing imbalance
// (a busy replica while the others had room), a saturated prefill pool, a
// slow KV transfer, and cache-unaware routing (prefixcache.go).

// maxReplicaNames bounds the replicas the analysis tells apart (a fleet
// larger than the simulator's 10000 replicas lumps the rest together).
const maxReplicaNames = 10000

// otherReplicas names the replicas past maxReplicaNames.
const otherReplicas = "(other replicas)"

// Replica roles in ReplicaStats.
const (
	RolePrefill = "prefill" // named in prefill_replica: prefilled disaggregated requests
	RoleDecode  = "decode"  // served disaggregated requests after their prefill elsewhere
)

// Fleet findings (Fleet.Findings), each also a sentence of the diagnosis.
const (
	FindingRoutingImbalance     = "routing imbalance"
	FindingPrefillPoolSaturated = "prefill pool saturated"
	FindingKVTransferSlow       = "KV transfer slow"
	FindingDecodePoolQueueing   = "decode pool queueing"
	FindingCacheUnawareRouting  = "cache-unaware routing"
)

// fleetAcc is the Analyzer's view of the replicas: their names and how
// many requests each served or prefilled (exact, whatever the sampling).
type fleetAcc struct {
	ids               map[string]int32
	names             []string
	served, prefilled []int64
	lastName, lastPre string
	lastID, lastPreID int32
	pd, named         int64 // analyzed rows disaggregated, naming a serving replica
}

// id is name's replica id (−1 for "").
func (f *fleetAcc) id(name string) int32 {
	if name == "" {
		return -1
	}
	if id, ok := f.ids[name]; ok {
		return id
	}
	if f.ids == nil {
		f.ids = map[string]int32{}
	}
	if len(f.names) >= maxReplicaNames {
		name = otherReplicas
		if id, ok := f.ids[name]; ok {
			return id
		}
	}
	id := int32(len(f.names))
	f.ids[name] = id
	f.names = append(f.names, name)
	f.served = append(f.served, 0)
	f.prefilled = append(f.prefilled, 0)
	return id
}

// replicaIDs are r's serving and prefill replica ids (−1 = none); the
// last names are kept, as a replica's rows often follow each other.
func (f *fleetAcc) replicaIDs(r *traces.Record) (rep, pre int32) {
	rep, pre = -1, -1
	if r.Replica != "" {
		if r.Replica != f.lastName {
			f.lastName, f.lastID = r.Replica, f.id(r.Replica)
		}
		rep = f.lastID
	}
	if r.PrefillReplica != "" {
		if r.PrefillReplica != f.lastPre {
			f.lastPre, f.lastPreID = r.PrefillReplica, f.id(r.PrefillReplica)
		}
		pre = f.lastPreID
	}
	return rep, pre
}

// count counts an analyzed row served by rep and prefilled by pre.
func (f *fleetAcc) count(rep, pre int32) {
	if rep >= 0 {
		f.served[rep]++
		f.named++
	}
	if pre >= 0 {
		f.prefilled[pre]++
		f.pd++
	}
}

// cacheReplica is where r's prompt was computed: its prefill replica
// under disaggregation, else its serving replica (−1 = not named).
func cacheReplica(rep, pre int32) int32 {
	if pre >= 0 {
		return pre
	}
	return rep
}

// Fleet is the run across the replicas that served it (null when no row
// names a replica): each replica's requests and share of the tail, the
// load its requests met, and the findings about routing and pools.
type Fleet struct {
	// Replicas are the serving replicas (the replica column) then the
	// prefill replicas (prefill_replica), each by name.
	Replicas []ReplicaStats `json:"replicas"`
	// Requests is the analyzed requests that named a serving replica;
	// Disaggregated those that also named a prefill replica.
	Requests      int64 `json:"requests"`
	Disaggregated int64 `json:"disaggregated_requests"`
	// Imbalance is the routing-imbalance evidence of each pool with two
	// replicas or more that served tail requests ("serving", "prefill").
	Imbalance []Imbalance `json:"routing_imbalance,omitempty"`
	// PrefillPool is the prefill pool's load at the tail's sends (null
	// without disaggregated tail requests).
	PrefillPool *PoolInFlight `json:"prefill_pool,omitempty"`
	// DecodePool is the same for the replicas that served disaggregated
	// requests (their in-flight requests from send to last token).
	DecodePool *PoolInFlight `json:"decode_pool,omitempty"`
	// Findings name what the diagnosis found (the Finding* values).
	Findings []string `json:"findings"`
}

// ReplicaStats is one replica's part in the run. Counts past
// Options.ExactRows come from the sample, scaled (Requests stays exact).
type ReplicaStats struct {
	Name string `json:"name"`
	// Role is "prefill" for a replica named in prefill_replica, "decode"
	// for one that served disaggregated requests, "" for one that served
	// its requests whole.
	Role string `json:"role"`
	// Requests is the analyzed requests it served (a prefill replica: it
	// prefilled); RequestShare their share of the requests its pool
	// served.
	Requests     int64   `json:"requests"`
	RequestShare float64 `json:"request_share"`
	// TailRequests is the tail requests among them, TailShare their share
	// of the tail (of the tail's disaggregated requests, for a prefill
	// replica).
	TailRequests int     `json:"tail_requests"`
	TailShare    float64 `json:"tail_share"`
	// InFlight is the mean of the other requests in flight on this
	// replica when its requests were sent; TailInFlight over its tail
	// requests (null without any).
	InFlight     float64  `json:"in_flight"`
	TailInFlight *float64 `json:"tail_in_flight"`
	// MeanMs is the mean component of its successful requests (ms).
	MeanMs Shares `json:"mean_ms"`
	// TTFTMs and TPOTMs are its requests' mean TTFT and TPOT (ms).
	TTFTMs float64 `json:"ttft_ms"`
	TPOTMs float64 `json:"tpot_ms"`
	// CachedFraction is the server-cached share of its prompt tokens
	// (null when its requests reported none).
	CachedFraction *float64 `json:"cached_fraction"`
}

// Imbalance compares the load a pool's tail requests met on their own
// replica with the pool's other replicas at the same sends.
type Imbalance struct {
	// Pool is "serving" (the replica column) or "prefill".
	Pool     string `json:"pool"`
	Replicas int    `json:"replicas"`
	// TailInFlight is the mean of the requests in flight on a tail
	// request's own replica at its send; TailOthersInFlight the mean over
	// the pool's other replicas at those sends, TailLeastInFlight the
	// least busy one's. AllInFlight and AllOthersInFlight are the same
	// over every request.
	TailInFlight       float64 `json:"tail_in_flight"`
	TailOthersInFlight float64 `json:"tail_others_in_flight"`
	TailLeastInFlight  float64 `json:"tail_least_in_flight"`
	AllInFlight        float64 `json:"all_in_flight"`
	AllOthersInFlight  float64 `json:"all_others_in_flight"`
	// Hot are the fewest replicas holding at least unevenShare of the
	// pool's tail, when they are fewer than the pool and hold more than
	// their share of its requests; HotTailShare and HotRequestShare their
	// shares of the tail and of the requests.
	Hot             []string `json:"hot,omitempty"`
	HotTailShare    float64  `json:"hot_tail_share,omitempty"`
	HotRequestShare float64  `json:"hot_request_share,omitempty"`
	// Found says the tail waited on busier replicas while the others had
	// room: TailInFlight ≥ 2 × TailOthersInFlight, and ≥ 1 request more.
	Found bool `json:"found"`
}

// PoolInFlight is a pool's load at the sends of the tail's requests against
// every request's.
type PoolInFlight struct {
	Replicas int `json:"replicas"`
	// TailInFlight is the mean in-flight requests per replica of the pool
	// at the tail's sends, TailLeastInFlight the least busy replica's;
	// AllInFlight and AllLeastInFlight the same at every send.
	TailInFlight      float64 `json:"tail_in_flight"`
	TailLeastInFlight float64 `json:"tail_least_in_flight"`
	AllInFlight       float64 `json:"all_in_flight"`
	AllLeastInFlight  float64 `json:"all_least_in_flight"`
	// Saturated says every replica of the pool was busy at the tail's
	// sends (the least busy held at least one request) and the pool held
	// at least saturatedLoad times its run-wide mean.
	Saturated bool `json:"saturated"`
}

// Thresholds of the fleet findings.
const (
	// A tail request's replica is busier than the rest of its pool when
	// it held imbalanceRatio × the others' mean, and imbalanceMargin
	// requests more.
	imbalanceRatio  = 2.0
	imbalanceMargin = 1.0
	// A pool is saturated when it held saturatedLoad × its run-wide load
	// at the tail's sends, its least busy replica at least one request.
	saturatedLoad = 2.0
	// minFleetShare is the share of the tail's time a fleet component
	// (kv_transfer, decode_queue) needs to be named as a cause.
	minFleetShare = 0.25
	// Cache-unaware routing: the server cached cacheGapPoints fewer
	// points than the trace implies, and at least half the gap (and
	// routingLossPoints) is lost by routing (the requests one replica got
	// implied less than all of them together).
	cacheGapPoints    = 15.0
	routingLossPoints = 10.0
)

// fleetState is a Report's per-row fleet measurements (nil without
// replicas), parallel to its rows: at each send, the requests in flight
// on the row's own serving and prefill replica, the mean over the other
// replicas of that pool and the least busy one's (−1 = not measured).
type fleetState struct {
	repIn, repOth, repMin []float32
	preIn, preOth, preMin []float32
	// sizes of the serving and the prefill pool
	nServing, nPrefill int
}

// replicaName is the name of replica id ("" for −1).
func (rep *Report) replicaName(id int32) string {
	if id < 0 || int(id) >= len(rep.replicas) {
		return ""
	}
	return rep.replicas[id]
}

// minCount tracks the least count over a pool's replicas in O(1): how
// many replicas hold each count, and the least count held.
type minCount struct {
	hist []int32
	min  int32
}

func newMinCount(size int) minCount { return minCount{hist: []int32{int32(size)}} }

func (m *minCount) inc(old int32) {
	if int(old)+1 >= len(m.hist) {
		m.hist = append(m.hist, 0)
	}
	m.hist[old]--
	m.hist[old+1]++
	if old == m.min && m.hist[old] == 0 {
		m.min++
	}
}

func (m *minCount) dec(old int32) {
	if old <= 0 {
		return // nothing to take off (never: every end follows its start)
	}
	m.hist[old]--
	m.hist[old-1]++
	m.min = min(m.min, old-1)
}

// prefillEnd is when r left its prefill replica, as the client sees it:
// its first token (its end when it has none).
func (r *row) prefillEnd() int64 {
	if r.first < r.sent {
		return r.end()
	}
	return r.first
}

// computeFleetLoad sweeps the rows in send order: a row occupies its
// serving replica over [sent, end) and its prefill replica over [sent,
// first token). Counts of a sample are scaled to the run.
func (rep *Report) computeFleetLoad() {
	if len(rep.replicas) == 0 {
		return
	}
	rows := &rep.rows
	inS := make([]bool, len(rep.replicas))
	inP := make([]bool, len(rep.replicas))
	type ev struct {
		t    int64
		id   int32
		pool uint8
	}
	var starts []int32
	var ends []ev
	for i := range rows.n {
		r := rows.at(i)
		if r.rep >= 0 {
			inS[r.rep] = true
		}
		if r.pre >= 0 {
			inP[r.pre] = true
		}
		if r.sent < 0 || r.end() < r.sent || (r.rep < 0 && r.pre < 0) {
			continue
		}
		starts = append(starts, int32(i))
		// An empty interval (the end at the send) occupies nothing.
		if r.rep >= 0 && r.end() > r.sent {
			ends = append(ends, ev{r.end(), r.rep, 0})
		}
		if e := r.prefillEnd(); r.pre >= 0 && e > r.sent {
			ends = append(ends, ev{e, r.pre, 1})
		}
	}
	fs := &fleetState{}
	for id := range rep.replicas {
		if inS[id] {
			fs.nServing++
		}
		if inP[id] {
			fs.nPrefill++
		}
	}
	n := rows.n
	for _, s := range []*[]float32{&fs.repIn, &fs.repOth, &fs.repMin, &fs.preIn, &fs.preOth, &fs.preMin} {
		*s = make([]float32, n)
		for i := range *s {
			(*s)[i] = -1
		}
	}
	bySent := func(x, y int32) int { return cmp.Compare(rows.at(int(x)).sent, rows.at(int(y)).sent) }
	if !slices.IsSortedFunc(starts, bySent) {
		slices.SortStableFunc(starts, bySent)
	}
	slices.SortFunc(ends, func(x, y ev) int { return cmp.Compare(x.t, y.t) })
	var cnt [2][]int32
	cnt[0], cnt[1] = make([]int32, len(rep.replicas)), make([]int32, len(rep.replicas))
	var tot [2]int64
	least := [2]minCount{newMinCount(fs.nServing), newMinCount(fs.nPrefill)}
	size := [2]int{fs.nServing, fs.nPrefill}
	f := float32(rep.oneIn())
	e := 0
	measure := func(pool int, id int32, in, oth, mn []float32, i int32, occupies bool) {
		in[i] = float32(cnt[pool][id]) * f
		if size[pool] >= 2 {
			oth[i] = float32(tot[pool]-int64(cnt[pool][id])) / float32(size[pool]-1) * f
			mn[i] = float32(least[pool].min) * f
		}
		if occupies {
			least[pool].inc(cnt[pool][id])
			cnt[pool][id]++
			tot[pool]++
		}
	}
	for _, i := range starts {
		r := rows.at(int(i))
		for e < len(ends) && ends[e].t <= r.sent {
			x := ends[e]
			least[x.pool].dec(cnt[x.pool][x.id])
			cnt[x.pool][x.id]--
			tot[x.pool]--
			e++
		}
		if r.rep >= 0 {
			measure(0, r.rep, fs.repIn, fs.repOth, fs.repMin, i, r.end() > r.sent)
		}
		if r.pre >= 0 {
			measure(1, r.pre, fs.preIn, fs.preOth, fs.preMin, i, r.prefillEnd() > r.sent)
		}
	}
	rep.fleet = fs
}

// shownComponents are the components the report shows, in the order a
// request meets them: the fleet's only where some request has them.
func (rep *Report) shownComponents() []string {
	var kv, dq bool
	for i := range rep.rows.n {
		r := rep.rows.at(i)
		if !r.ok {
			continue
		}
		server := !rep.opts.IgnoreServerTimings && r.sq >= 0
		kv = kv || rep.disaggregated(r) || (server && r.skv >= 0)
		if e, ok := rep.pdSplit(i); ok && e.dq > 0 {
			dq = true
		}
		dq = dq || (server && r.sdq >= 0)
		if kv && dq {
			break
		}
	}
	var out []string
	for _, k := range componentOrder {
		if (k == cKVTransfer && !kv) || (k == cDecodeQueue && !dq) {
			continue
		}
		out = append(out, ComponentNames[k])
	}
	return out
}

// shownIndices are Attribution.Components as indices (every component in
// componentOrder when it is empty: an attribution made before the field).
func (at *Attribution) shownIndices() []int {
	if len(at.Components) == 0 {
		var out []int
		for _, k := range componentOrder {
			if !isFleetComponent(k) {
				out = append(out, k)
			}
		}
		return out
	}
	out := make([]int, 0, len(at.Components))
	for _, n := range at.Components {
		out = append(out, indexOf(n))
	}
	return out
}

// unionShown is the components any of ats shows, in componentOrder (for
// reports that put several attributions side by side).
func unionShown(ats ...*Attribution) []int {
	var in [nComponents]bool
	for _, at := range ats {
		for _, k := range at.shownIndices() {
			in[k] = true
		}
	}
	var out []int
	for _, k := range componentOrder {
		if in[k] {
			out = append(out, k)
		}
	}
	return out
}

// nameWidth is the width of a column of ks' names (at least "component"
// and "dominant" fit).
func nameWidth(ks []int) int {
	w := 10
	for _, k := range ks {
		w = max(w, len(ComponentNames[k]))
	}
	return w
}

// barComponents are the components a bar of a metric's split stacks:
// decode is never part of TTFT.
func barComponents(ks []int, metric string) []int {
	var out []int
	for _, k := range ks {
		if k == cDecode && metric == MetricTTFT {
			continue
		}
		out = append(out, k)
	}
	return out
}

// replicaAcc sums one replica's rows for ReplicaStats.
type replicaAcc struct {
	n, nTail, nIn, nTailIn int
	in, tailIn, ttft       float64
	comp                   [nComponents]float64
	calls                  callSums
}

// poolAcc sums a pool's load over rows.
type poolAcc struct {
	n                    int
	own, oth, least, avg float64
}

func (p *poolAcc) add(own, oth, least float32, size int) {
	if own < 0 {
		return
	}
	p.n++
	p.own += float64(own)
	if oth >= 0 {
		p.oth += float64(oth)
		p.least += float64(least)
		p.avg += (float64(own) + float64(oth)*float64(size-1)) / float64(size)
	} else {
		p.avg += float64(own)
	}
}

func (p *poolAcc) mean(v float64) float64 { return ratio(v, float64(p.n)) }

// fleetSums sums the rows per replica (as the server of a request and as
// its prefill side) and per pool (serving, prefill, and the serving
// pool's disaggregated requests: the decode side), over all rows and
// over the tail's.
type fleetSums struct {
	served, prefilled                     []replicaAcc
	servedPD                              []bool // a replica served a disaggregated request: the decode role
	sTail, sAll, pTail, pAll, dTail, dAll poolAcc
	tailRows, tailPD                      int
}

// add sums row r (its components c, the requests in flight at its send
// on this replica, whether it is in the tail) into a.
func (a *replicaAcc) add(r *row, c [nComponents]float64, in float32, tail bool) {
	a.n++
	for k := range c {
		a.comp[k] += c[k]
	}
	if t, ok := r.ttft(); ok {
		a.ttft += t
	}
	a.calls.add(r)
	if in >= 0 {
		a.nIn++
		a.in += float64(in)
	}
	if tail {
		a.nTail++
		if in >= 0 {
			a.nTailIn++
			a.tailIn += float64(in)
		}
	}
}

// fleetSection fills rep.Fleet (nil when no row names a replica).
func (rep *Report) fleetSection() {
	fs := rep.fleet
	if fs == nil {
		return
	}
	acc := rep.sumFleet(fs)
	fl := &Fleet{Requests: rep.fleetNamed, Disaggregated: rep.fleetPD}
	fl.Replicas = rep.replicasStats(acc)
	if acc.sTail.n > 0 && fs.nServing >= 2 {
		fl.Imbalance = append(fl.Imbalance, imbalanceOf("serving", fs.nServing, &acc.sTail, &acc.sAll, fl.Replicas, ""))
	}
	if acc.pTail.n > 0 && fs.nPrefill >= 2 {
		fl.Imbalance = append(fl.Imbalance, imbalanceOf("prefill", fs.nPrefill, &acc.pTail, &acc.pAll, fl.Replicas, RolePrefill))
	}
	if acc.pTail.n > 0 {
		fl.PrefillPool = poolInFlightOf(fs.nPrefill, &acc.pTail, &acc.pAll)
	}
	if acc.dTail.n > 0 {
		fl.DecodePool = poolInFlightOf(fs.nServing, &acc.dTail, &acc.dAll)
	}
	fl.Findings = []string{}
	rep.Fleet = fl
}

// sumFleet sums every row whose components are known into its replicas
// and pools.
func (rep *Report) sumFleet(fs *fleetState) *fleetSums {
	inTail := make(map[int32]bool, len(rep.tail))
	for _, i := range rep.tail {
		inTail[i] = true
	}
	nr := len(rep.replicas)
	acc := &fleetSums{served: make([]replicaAcc, nr), prefilled: make([]replicaAcc, nr), servedPD: make([]bool, nr)}
	for i := range rep.rows.n {
		r := rep.rows.at(i)
		c, _, ok := rep.components(i, r)
		if !ok {
			continue
		}
		c = clampPos(c)
		tail := inTail[int32(i)]
		if tail {
			acc.tailRows++
			if r.pre >= 0 {
				acc.tailPD++
			}
		}
		if r.rep >= 0 {
			acc.servedPD[r.rep] = acc.servedPD[r.rep] || r.pre >= 0
			acc.served[r.rep].add(r, c, fs.repIn[i], tail)
			acc.sAll.add(fs.repIn[i], fs.repOth[i], fs.repMin[i], fs.nServing)
			if tail {
				acc.sTail.add(fs.repIn[i], fs.repOth[i], fs.repMin[i], fs.nServing)
			}
			if r.pre >= 0 {
				acc.dAll.add(fs.repIn[i], fs.repOth[i], fs.repMin[i], fs.nServing)
				if tail {
					acc.dTail.add(fs.repIn[i], fs.repOth[i], fs.repMin[i], fs.nServing)
				}
			}
		}
		if r.pre >= 0 {
			acc.prefilled[r.pre].add(r, c, fs.preIn[i], tail)
			acc.pAll.add(fs.preIn[i], fs.preOth[i], fs.preMin[i], fs.nPrefill)
			if tail {
				acc.pTail.add(fs.preIn[i], fs.preOth[i], fs.preMin[i], fs.nPrefill)
			}
		}
	}
	return acc
}

// replicasStats are the serving replicas' stats, then the prefill
// replicas', each by name.
func (rep *Report) replicasStats(acc *fleetSums) []ReplicaStats {
	nr := len(rep.replicas)
	var servedTotal, prefTotal int64
	for id := range nr {
		servedTotal += rep.fleetServed[id]
		prefTotal += rep.fleetPrefilled[id]
	}
	var out []ReplicaStats
	for id := range nr {
		if rep.fleetServed[id] == 0 && acc.served[id].n == 0 {
			continue
		}
		role := ""
		if acc.servedPD[id] {
			role = RoleDecode
		}
		out = append(out, rep.replicaStats(id, &acc.served[id], role, rep.fleetServed[id], servedTotal, acc.tailRows))
	}
	nServed := len(out)
	for id := range nr {
		if rep.fleetPrefilled[id] == 0 && acc.prefilled[id].n == 0 {
			continue
		}
		out = append(out, rep.replicaStats(id, &acc.prefilled[id], RolePrefill, rep.fleetPrefilled[id], prefTotal, acc.tailPD))
	}
	byName := func(a, b ReplicaStats) int { return naturalCompare(a.Name, b.Name) }
	slices.SortStableFunc(out[:nServed], byName)
	slices.SortStableFunc(out[nServed:], byName)
	return out
}

// replicaStats are replica id's stats in a role from its sums: requests
// of poolRequests in its pool, its rows of poolTail tail rows.
func (rep *Report) replicaStats(id int, a *replicaAcc, role string, requests, poolRequests int64, poolTail int) ReplicaStats {
	scale := int(rep.oneIn())
	s := ReplicaStats{Name: rep.replicas[id], Role: role, Requests: requests, RequestShare: ratio(float64(requests), float64(poolRequests)),
		TailRequests: a.nTail * scale, TailShare: ratio(float64(a.nTail), float64(poolTail)), InFlight: ratio(a.in, float64(a.nIn))}
	if a.nTailIn > 0 {
		v := a.tailIn / float64(a.nTailIn)
		s.TailInFlight = &v
	}
	var m [nComponents]float64
	for k := range m {
		m[k] = ratio(a.comp[k], float64(a.n)) * msPerNs
	}
	s.MeanMs = sharesOf(m)
	s.TTFTMs, s.TPOTMs = ratio(a.ttft, float64(a.n))*msPerNs, a.calls.tpotMs()
	s.CachedFraction = a.calls.cachedFraction()
	return s
}

// naturalCompare orders names by their text, then by the number they end
// with ("replica-2" before "replica-10").
func naturalCompare(a, b string) int {
	split := func(s string) (string, int64, bool) {
		i := len(s)
		for i > 0 && s[i-1] >= '0' && s[i-1] <= '9' {
			i--
		}
		if i == len(s) || len(s)-i > 18 {
			return s, 0, false
		}
		n, _ := strconv.ParseInt(s[i:], 10, 64)
		return s[:i], n, true
	}
	pa, na, oka := split(a)
	pb, nb, okb := split(b)
	if pa == pb && oka && okb {
		return cmp.Or(cmp.Compare(na, nb), cmp.Compare(a, b))
	}
	return cmp.Compare(a, b)
}

// imbalanceOf is a pool's imbalance evidence; the hot replicas are
// chosen among stats' replicas of the role.
func imbalanceOf(pool string, size int, tail, all *poolAcc, stats []ReplicaStats, role string) Imbalance {
	im := Imbalance{Pool: pool, Replicas: size,
		TailInFlight: tail.mean(tail.own), TailOthersInFlight: tail.mean(tail.oth), TailLeastInFlight: tail.mean(tail.least),
		AllInFlight: all.mean(all.own), AllOthersInFlight: all.mean(all.oth)}
	im.Found = im.TailInFlight >= imbalanceRatio*im.TailOthersInFlight && im.TailInFlight-im.TailOthersInFlight >= imbalanceMargin
	var mine []ReplicaStats
	for _, s := range stats {
		if (role == RolePrefill) == (s.Role == RolePrefill) {
			mine = append(mine, s)
		}
	}
	slices.SortStableFunc(mine, func(a, b ReplicaStats) int { return cmp.Compare(b.TailShare, a.TailShare) })
	var ts, rs float64
	var hot []string
	for _, s := range mine {
		if ts >= unevenShare {
			break
		}
		hot = append(hot, s.Name)
		ts += s.TailShare
		rs += s.RequestShare
	}
	if len(hot) < len(mine) && ts >= 1.5*rs {
		im.Hot, im.HotTailShare, im.HotRequestShare = hot, ts, rs
	}
	return im
}

func poolInFlightOf(size int, tail, all *poolAcc) *PoolInFlight {
	pl := &PoolInFlight{Replicas: size, TailInFlight: tail.mean(tail.avg), AllInFlight: all.mean(all.avg)}
	if size >= 2 {
		pl.TailLeastInFlight, pl.AllLeastInFlight = tail.mean(tail.least), all.mean(all.least)
	} else {
		pl.TailLeastInFlight, pl.AllLeastInFlight = pl.TailInFlight, pl.AllInFlight
	}
	pl.Saturated = pl.TailLeastInFlight >= 1 && pl.TailInFlight >= saturatedLoad*pl.AllInFlight
	return pl
}

// mostlyDisaggregated says whether most tail requests named a prefill
// replica (their queue is then the prefill side's).
func (rep *Report) mostlyDisaggregated() bool {
	n := 0
	for _, i := range rep.tail {
		if rep.disaggregated(rep.rows.at(int(i))) { // pd.go
			n++
		}
	}
	return len(rep.tail) > 0 && 2*n >= len(rep.tail)
}

// finding records a fleet finding.
func (rep *Report) finding(name string) {
	if rep.Fleet != nil && !slices.Contains(rep.Fleet.Findings, name) {
		rep.Fleet.Findings = append(rep.Fleet.Findings, name)
	}
}

// prefillQueueCause is the queue cause of a mostly disaggregated tail:
// the wait was on the prefill side, with the prefill pool's load at the
// tail's sends from the results and, where the servers' series name the
// prefill pool saturated, their evidence too (one finding, not two).
func (rep *Report) prefillQueueCause() string {
	at := &rep.Attribution
	m, all := at.MeanMs.Array(), at.MeanAllMs.Array()
	est := ""
	if at.Source != SourceServer {
		est = rep.pdPrefillNote() // pd.go
	}
	var pl *PoolInFlight
	if fl := rep.Fleet; fl != nil {
		pl = fl.PrefillPool
	}
	series := rep.citePool(fleetseries.IsPrefill)
	saturated := series != "" || pl != nil && pl.Saturated
	s := "Prefill-side queueing: "
	if saturated {
		rep.finding(FindingPrefillPoolSaturated)
		s = "Prefill pool saturated: "
	}
	s += fmt.Sprintf("tail requests waited %s on average for their prefill replica against %s overall%s", fmtMs(m[cQueue]), fmtMs(all[cQueue]), est)
	if pl != nil {
		s += fmt.Sprintf("; when they were sent the prefill pool's %d replica(s) each held %.1f requests awaiting their first token (the least busy %.1f) against %.1f (%.1f) over the run",
			pl.Replicas, pl.TailInFlight, pl.TailLeastInFlight, pl.AllInFlight, pl.AllLeastInFlight)
		if pl.Saturated {
			s += ", so every prefill replica was busy"
		}
	}
	switch {
	case series != "" && pl != nil && pl.Saturated:
		s += ", and the servers' own series agree: " + series
	case series != "":
		s += "; the servers' own series: " + series
	}
	if saturated {
		s += ": the prefill pool lacked capacity for the burst (more or faster prefill replicas, or fewer prompt tokens per request), not the routing"
	}
	return s + "."
}

// kvTransferCause explains a tail spent pulling KV caches.
func (rep *Report) kvTransferCause() string {
	at := &rep.Attribution
	m, all := at.MeanMs.Array(), at.MeanAllMs.Array()
	rep.finding(FindingKVTransferSlow)
	perTok := func(rows []int32, every bool) float64 {
		var ns, tok float64
		add := func(i int) {
			r := rep.rows.at(i)
			c, _, ok := rep.components(i, r)
			if !ok || r.pre < 0 || r.in <= 0 {
				return
			}
			ns += max(c[cKVTransfer], 0)
			tok += float64(r.in)
		}
		if every {
			for i := range rep.rows.n {
				add(i)
			}
		} else {
			for _, i := range rows {
				add(int(i))
			}
		}
		return ratio(ns, tok) / 1e3
	}
	s := fmt.Sprintf("KV transfer slow: tail requests spent %s on average pulling their prompt's KV cache from the prefill to the decode replica (%.1f µs per prompt token) against %s overall (%.1f µs per token)",
		fmtMs(m[cKVTransfer]), perTok(rep.tail, false), fmtMs(all[cKVTransfer]), perTok(nil, true))
	if at.Source != SourceServer {
		s += rep.pdKVNote() // pd.go
	}
	if fl := rep.Fleet; fl != nil {
		if pl := fl.PrefillPool; pl != nil {
			s += fmt.Sprintf("; the prefill pool held %.1f requests per replica at their sends against %.1f over the run", pl.TailInFlight, pl.AllInFlight)
		}
		if dl := fl.DecodePool; dl != nil {
			s += fmt.Sprintf(", the decode replicas %.1f against %.1f", dl.TailInFlight, dl.AllInFlight)
		}
		s += ": the transfers, not the pools, were slow (link bandwidth shared by concurrent pulls, the connector's setup, or a slow network path between the pools)"
	}
	if ev := rep.citeKV(); ev != "" {
		s += ". The servers' own series: " + ev
	}
	return s + "."
}

// decodeQueueCause explains a tail that waited on its decode replica.
func (rep *Report) decodeQueueCause() string {
	at := &rep.Attribution
	m, all := at.MeanMs.Array(), at.MeanAllMs.Array()
	rep.finding(FindingDecodePoolQueueing)
	s := fmt.Sprintf("Decode pool queueing: tail requests waited %s on average on their decode replica (for KV blocks and, once the KV landed, for a batch) against %s overall",
		fmtMs(m[cDecodeQueue]), fmtMs(all[cDecodeQueue]))
	if at.Source != SourceServer {
		s += rep.pdQueueNote() // pd.go
	}
	if fl := rep.Fleet; fl != nil && fl.DecodePool != nil {
		dl := fl.DecodePool
		s += fmt.Sprintf("; the decode replicas each held %.1f requests at their sends (the least busy %.1f) against %.1f over the run", dl.TailInFlight, dl.TailLeastInFlight, dl.AllInFlight)
	}
	if ev := rep.citePool(func(role string) bool { return role != "" && !fleetseries.IsPrefill(role) }); ev != "" {
		s += "; the servers' own series name the pool saturated: " + ev
	}
	return s + "."
}

// replicaSentences are the diagnosis' fleet findings not tied to one
// component: routing imbalance and cache-unaware routing.
func (rep *Report) replicaSentences() []string {
	fl := rep.Fleet
	if fl == nil {
		return nil
	}
	var d []string
	for _, im := range fl.Imbalance {
		if !im.Found {
			continue
		}
		rep.finding(FindingRoutingImbalance)
		pool := "serving replicas"
		if im.Pool == "prefill" {
			pool = "prefill replicas"
		}
		s := "Routing imbalance: "
		if len(im.Hot) > 0 {
			s += fmt.Sprintf("%.0f%% of the tail ran on %s, which got %.0f%% of the requests; ", 100*im.HotTailShare, strings.Join(im.Hot, ", "), 100*im.HotRequestShare)
		}
		s += fmt.Sprintf("when tail requests were sent their own replica held %.1f requests in flight while the other %d %s held %.1f on average (the least busy %.1f), against %.1f and %.1f over the run: the router kept sending requests to a busy replica while others had room",
			im.TailInFlight, im.Replicas-1, pool, im.TailOthersInFlight, im.TailLeastInFlight, im.AllInFlight, im.AllOthersInFlight)
		if slow := rep.slowReplicas(im); slow != "" {
			s += "; " + slow
		}
		s += "."
		if ev := rep.citeInstances(im.Hot); ev != "" {
			s += " The servers' own series agree: " + ev
		}
		d = append(d, s)
	}
	if s := rep.cacheRoutingSentence(); s != "" {
		d = append(d, s)
	}
	return d
}

// slowReplicas says which of the hot replicas are also slow per request
// (TPOT or TTFT well above the rest of their pool), "" when none is.
func (rep *Report) slowReplicas(im Imbalance) string {
	var rest []ReplicaStats
	hot := map[string]bool{}
	for _, n := range im.Hot {
		hot[n] = true
	}
	isPool := func(s ReplicaStats) bool { return (im.Pool == "prefill") == (s.Role == RolePrefill) }
	for _, s := range rep.Fleet.Replicas {
		if isPool(s) && !hot[s.Name] {
			rest = append(rest, s)
		}
	}
	if len(rest) == 0 {
		return ""
	}
	med := func(f func(ReplicaStats) float64) float64 {
		v := make([]float64, len(rest))
		for i, s := range rest {
			v[i] = f(s)
		}
		slices.Sort(v)
		return Quantile(v, 0.5)
	}
	tpot := med(func(s ReplicaStats) float64 { return s.TPOTMs })
	var parts []string
	for _, s := range rep.Fleet.Replicas {
		if !isPool(s) || !hot[s.Name] {
			continue
		}
		if tpot > 0 && s.TPOTMs >= 1.5*tpot {
			parts = append(parts, fmt.Sprintf("%s is also slow per request: TPOT %s against %s on the others (%.1f×)", s.Name, fmtMs(s.TPOTMs), fmtMs(tpot), s.TPOTMs/tpot))
		}
	}
	return strings.Join(parts, "; ")
}

// cacheRoutingSentence is the cache-unaware routing finding, "" when the
// server's cache hit rate is near what the trace implies or the loss is
// not the routing's.
func (rep *Report) cacheRoutingSentence() string {
	pc := rep.PrefixCache
	if pc == nil || pc.Replicas < 2 || pc.ReportedRequests == 0 {
		return ""
	}
	gap := 100 * (pc.ImpliedRateReported - pc.RealisedRate)
	loss := 100 * (pc.ImpliedRateReported - pc.ReplicaImpliedRateReported)
	if gap < cacheGapPoints || loss < routingLossPoints || loss < gap/2 {
		return ""
	}
	rep.finding(FindingCacheUnawareRouting)
	return fmt.Sprintf("Cache-unaware routing: the trace implies %.0f%% of prompt tokens could come from the prefix cache (%s), but the %d replicas served %.0f%% from theirs; with one such cache per replica, fed only the requests the router sent it, %.0f%% — so %.0f of the %.0f points were lost by sending requests that share a prefix to different replicas, each computing it again (a prefix-aware router, such as llm-d's prefix-cache scorer, keeps them together).",
		100*pc.ImpliedRateReported, pc.cacheName(), pc.Replicas, 100*pc.RealisedRate, 100*pc.ReplicaImpliedRateReported, loss, gap)
}

// writeFleetText writes the per-replica table of the text report.
func (rep *Report) writeFleetText(p func(string, ...any)) {
	fl := rep.Fleet
	if fl == nil || len(fl.Replicas) == 0 {
		return
	}
	at := &rep.Attribution
	p("\nReplicas (p%s %s tail; in flight = other requests on the replica at a send, its tail's in brackets; means in ms)\n",
		fmtPct(at.TailPercentile), strings.ToUpper(at.TailMetric))
	shown := barComponents(at.shownIndices(), at.TailMetric)
	p("  %-16s %-7s %8s %6s %6s %6s %15s", "replica", "role", "requests", "share", "tail", "share", "in flight")
	for _, k := range shown {
		if k == cLateness || k == cOther {
			continue
		}
		p(" %9s", shortComponent(k))
	}
	p(" %8s %7s\n", "TPOT", "cached")
	for _, s := range fl.Replicas {
		tin := "-"
		if s.TailInFlight != nil {
			tin = fmt.Sprintf("%.1f", *s.TailInFlight)
		}
		p("  %-16s %-7s %8d %5.1f%% %6d %5.1f%% %15s", trunc(s.Name, 16), orDash(s.Role), s.Requests, 100*s.RequestShare, s.TailRequests, 100*s.TailShare,
			fmt.Sprintf("%.1f (%s)", s.InFlight, tin))
		mm := s.MeanMs.Array()
		for _, k := range shown {
			if k == cLateness || k == cOther {
				continue
			}
			p(" %9.1f", mm[k])
		}
		ck := "-"
		if s.CachedFraction != nil {
			ck = fmt.Sprintf("%.0f%%", 100**s.CachedFraction)
		}
		p(" %8.1f %7s\n", s.TPOTMs, ck)
	}
	if len(fl.Findings) > 0 {
		p("  findings: %s\n", strings.Join(fl.Findings, ", "))
	}
}

// shortComponent is a component's column name in the replica table.
func shortComponent(k int) string {
	switch k {
	case cKVTransfer:
		return "kv xfer"
	case cDecodeQueue:
		return "dec queue"
	}
	return ComponentNames[k]
}

// fleetHTMLRow is one replica in the HTML table.
type fleetHTMLRow struct {
	ReplicaStats
	Means []string
	Tail  string
	Cache string
}

// fleetHTML is the per-replica table for the HTML report (nil without
// replicas): the column names of the means and the rows.
func (rep *Report) fleetHTML() (cols []string, rows []fleetHTMLRow) {
	fl := rep.Fleet
	if fl == nil || len(fl.Replicas) == 0 {
		return nil, nil
	}
	shown := barComponents(rep.Attribution.shownIndices(), rep.Attribution.TailMetric)
	for _, k := range shown {
		if k != cLateness && k != cOther {
			cols = append(cols, ComponentNames[k])
		}
	}
	for _, s := range fl.Replicas {
		r := fleetHTMLRow{ReplicaStats: s, Tail: "-", Cache: "-"}
		if s.TailInFlight != nil {
			r.Tail = fmt.Sprintf("%.1f", *s.TailInFlight)
		}
		if s.CachedFraction != nil {
			r.Cache = fmt.Sprintf("%.0f%%", 100**s.CachedFraction)
		}
		mm := s.MeanMs.Array()
		for _, k := range shown {
			if k != cLateness && k != cOther {
				r.Means = append(r.Means, fmt.Sprintf("%.1f", mm[k]))
			}
		}
		rows = append(rows, r)
	}
	return cols, rows
}
