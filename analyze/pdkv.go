package analyze

import (
	"cmp"
	"math"
	"slices"
	"strings"

	"github.com/tokentrace/tokentrace/internal/fleetseries"
	"github.com/tokentrace/tokentrace/traces"
)

// kvModel splits a disaggregated request's decode-side wait (its arrival
// at the decode replica to its first scheduling there) between the KV
// transfer and the wait for the decode replica (pd.go).
//
// The transfer is bounded by the best evidence there is: the decode
// replica's own NIXL transfer histogram for the interval the pull ended
// in (its mean, shared out by prompt length), else the transfer time of
// the least-loaded requests (fitted on their decode-side waits by prompt
// length). What the wait holds past that bound goes to the decode-side
// queue when the histogram bounds the transfer, or when the decode
// replica was as busy as it ever was (a batch or its KV cache full); else
// to the transfer, which the replica's room leaves as the only thing the
// request could wait for (a link shared by concurrent pulls).
type kvModel struct {
	// ka + kb·tokens is the least-loaded requests' transfer (ns); fitted
	// is false without decode-side waits to fit on.
	ka, kb float64
	fitted bool
	// nixl is each decode replica's transfer histogram by interval, from
	// the series (empty without).
	nixl map[int32][]kvInterval
	// busy is each decode replica's decoding requests over time.
	busy map[int32]*occupancy
}

// kvInterval is one scrape interval of a decode replica's series.
type kvInterval struct {
	from, to float64 // ns from the run's start
	// meanNs is the NIXL transfer mean (−1 = none); tokens and n are the
	// prompt tokens of the trace's pulls that ended in the interval.
	meanNs    float64
	tokens, n float64
	// queueNs and prefillNs are the replica's queue and prefill time
	// means over its requests that finished in the interval (−1 = none):
	// on a decode replica its waits, pulls included; on a prefill replica
	// the prefill side's queue and prefill.
	queueNs, prefillNs float64
}

// kvEvidence builds the model for rows (pd.go).
func (rep *Report) kvEvidence(rows []pdRow, byInstance map[string][]traces.MetricsSample) *kvModel {
	m := &kvModel{nixl: rep.seriesIntervals(byInstance), busy: map[int32]*occupancy{}}
	m.fit(rep, rows)
	for k := range rows {
		r := rep.rows.at(int(rows[k].i))
		if iv := m.interval(decodeKey(r), pullEnd(&rows[k])); iv != nil {
			iv.tokens += rows[k].tokens
			iv.n++
		}
	}
	for i := range rep.rows.n {
		r := rep.rows.at(i)
		if r.ok && rep.disaggregated(r) && r.first >= 0 && r.last >= r.first {
			o := m.busy[decodeKey(r)]
			if o == nil {
				o = &occupancy{}
				m.busy[decodeKey(r)] = o
			}
			o.add(float64(r.first), float64(r.last))
		}
	}
	for _, o := range m.busy {
		o.done()
	}
	return m
}

// seriesIntervals are each replica's series by interval, keyed by its id
// (the instance named as the rows name it), or with a pooled fleet each
// pool's, its instances' rows at each time together.
func (rep *Report) seriesIntervals(byInstance map[string][]traces.MetricsSample) map[int32][]kvInterval {
	ids := map[string]int32{}
	for id, n := range rep.replicas {
		ids[n] = int32(id)
	}
	type agg struct {
		from, to                  int64
		xfers, xferNs, fin, q, pf float64
		qn, pn                    float64
	}
	aggs := map[int32]map[int64]*agg{}
	for name, ss := range byInstance {
		id, ok := ids[name]
		for _, x := range ss {
			switch {
			case ok:
			case rep.PooledFleet != nil && fleetseries.IsPrefill(x.Role):
				id = pdPrefillPool
			case rep.PooledFleet != nil && strings.EqualFold(x.Role, RoleDecode):
				id = pdDecodePool
			default:
				continue
			}
			if x.ScrapeError != "" || x.IntervalNs <= 0 {
				continue
			}
			if aggs[id] == nil {
				aggs[id] = map[int64]*agg{}
			}
			a := aggs[id][x.TimeNs]
			if a == nil {
				a = &agg{from: x.TimeNs - x.IntervalNs, to: x.TimeNs}
				aggs[id][x.TimeNs] = a
			}
			if x.KVTransfers > 0 && x.KVTransferTimeMeanNs >= 0 {
				a.xfers += float64(x.KVTransfers)
				a.xferNs += float64(x.KVTransfers) * float64(x.KVTransferTimeMeanNs)
			}
			if f := float64(x.RequestsFinished); f > 0 {
				if x.QueueTimeMeanNs >= 0 {
					a.q, a.qn = a.q+f*float64(x.QueueTimeMeanNs), a.qn+f
				}
				if x.PrefillTimeMeanNs >= 0 {
					a.pf, a.pn = a.pf+f*float64(x.PrefillTimeMeanNs), a.pn+f
				}
			}
		}
	}
	out := map[int32][]kvInterval{}
	for id, byT := range aggs {
		for _, a := range byT {
			iv := kvInterval{from: float64(a.from), to: float64(a.to), meanNs: -1, queueNs: -1, prefillNs: -1}
			if a.xfers > 0 {
				iv.meanNs = a.xferNs / a.xfers
			}
			if a.qn > 0 {
				iv.queueNs = a.q / a.qn
			}
			if a.pn > 0 {
				iv.prefillNs = a.pf / a.pn
			}
			out[id] = append(out[id], iv)
		}
		slices.SortFunc(out[id], func(a, b kvInterval) int { return cmp.Compare(a.to, b.to) })
	}
	return out
}

// pullEnd is when r's pull ended, about: a decode step before its first
// token.
func pullEnd(r *pdRow) float64 { return r.sent + r.ttft - r.step }

// interval is decode replica rep's series interval holding t (nil).
func (m *kvModel) interval(rep int32, t float64) *kvInterval {
	ivs := m.nixl[rep]
	k, _ := slices.BinarySearchFunc(ivs, t, func(iv kvInterval, t float64) int { return cmp.Compare(iv.to, t) })
	if k < len(ivs) && ivs[k].from < t {
		return &ivs[k]
	}
	return nil
}

// fit fits the least-loaded requests' transfer: the lower envelope of
// their decode-side waits by prompt length (as fitEstimator fits the
// prefill).
func (m *kvModel) fit(rep *Report, rows []pdRow) {
	var cand []*pdRow
	for k := range rows {
		if rows[k].wait >= 0 && rep.load.inflight[rows[k].i] >= 0 {
			cand = append(cand, &rows[k])
		}
	}
	if len(cand) == 0 {
		return
	}
	slices.SortStableFunc(cand, func(a, b *pdRow) int { return cmp.Compare(rep.load.inflight[a.i], rep.load.inflight[b.i]) })
	cand = cand[:max((len(cand)-1)/fitShareDiv+1, min(20, len(cand)))]
	xs, ys := make([]float64, len(cand)), make([]float64, len(cand))
	for k, r := range cand {
		xs[k], ys[k] = r.tokens, r.wait
	}
	m.ka, m.kb = envelopeFit(xs, ys)
	m.fitted = true
}

// envelopeFit is fitLine through the fitEnvelope quantile of y in up to 8
// log-spaced bins of x.
func envelopeFit(xs, ys []float64) (a, b float64) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, x := range xs {
		lo, hi = min(lo, math.Log1p(x)), max(hi, math.Log1p(x))
	}
	const nb = 8
	bx, by := make([][]float64, nb), make([][]float64, nb)
	for k, x := range xs {
		b := 0
		if hi > lo {
			b = min(int((math.Log1p(x)-lo)/(hi-lo)*nb), nb-1)
		}
		bx[b], by[b] = append(bx[b], x), append(by[b], ys[k])
	}
	var fx, fy []float64
	for b := range bx {
		if len(bx[b]) == 0 {
			continue
		}
		slices.Sort(bx[b])
		slices.Sort(by[b])
		fx, fy = append(fx, Quantile(bx[b], 0.5)), append(fy, Quantile(by[b], fitEnvelope))
	}
	return fitLine(fx, fy)
}

// nixlKV is r's transfer from its decode replica's NIXL histogram: the
// mean of the interval its pull ended in, shared out by prompt length
// (false without one).
func (m *kvModel) nixlKV(rep *Report, r *pdRow) (float64, bool) {
	iv := m.interval(decodeKey(rep.rows.at(int(r.i))), pullEnd(r))
	if iv == nil || iv.meanNs < 0 {
		return 0, false
	}
	if iv.n > 0 && iv.tokens > 0 {
		return iv.meanNs * r.tokens / (iv.tokens / iv.n), true
	}
	return iv.meanNs, true
}

// seriesWaits gives each row whose decode side reported nothing its
// decode-side wait from its decode replica's series, where that has
// both histograms: the transfer its NIXL histogram allows, and of what
// the replica's queue time histogram counted past the transfers for the
// requests that finished with it (vLLM observes a request's queue time
// when it finishes), a share as large as the time its TTFT leaves past
// the modelled prefill side and its transfer.
func (m *kvModel) seriesWaits(rep *Report, rows []pdRow) {
	type acc struct{ kv, rest, n float64 }
	sums := map[*kvInterval]*acc{}
	kvs, rests := make([]float64, len(rows)), make([]float64, len(rows))
	at := func(r *pdRow) *kvInterval {
		row := rep.rows.at(int(r.i))
		return m.interval(decodeKey(row), float64(row.end()))
	}
	for k := range rows {
		r := &rows[k]
		kvs[k] = -1
		x, ok := m.nixlKV(rep, r)
		if !ok {
			continue
		}
		kvs[k], rests[k] = x, max(r.ttft-r.step-r.simSide-x, 0)
		if iv := at(r); iv != nil {
			if sums[iv] == nil {
				sums[iv] = &acc{}
			}
			a := sums[iv]
			a.kv, a.rest, a.n = a.kv+x, a.rest+rests[k], a.n+1
		}
	}
	for k := range rows {
		r := &rows[k]
		iv := at(r)
		if r.wait >= 0 || kvs[k] < 0 || iv == nil || iv.queueNs < 0 || sums[iv] == nil {
			continue
		}
		a := sums[iv]
		dq := max(iv.queueNs-a.kv/a.n, 0)
		if a.rest > 0 {
			dq *= rests[k] / (a.rest / a.n)
		}
		// The prefill side takes at least the request's unloaded prefill.
		w := min(kvs[k]+dq, r.ttft-r.step-min(rep.est.prefill(r.work), r.simSide))
		r.series, r.side = true, r.ttft-r.step-max(w, 0)
	}
}

// split is r's KV transfer and decode-side queue, out of the time between
// its prefill side's end and its first token's decode step: what the
// decode side reported as its wait (or its series gave), or else what the
// model leaves. The rest of a time nothing reported is left unexplained.
// how says what the split rests on (pdEst's bits).
func (m *kvModel) split(rep *Report, r *pdRow) (kv, dq float64, how uint8) {
	reported := r.wait >= 0 || r.series
	switch {
	case r.wait >= 0:
		how |= pdReported
	case r.series:
		how |= pdSeries
	}
	w := max(r.ttft-r.step-r.side, 0)
	row := rep.rows.at(int(r.i))
	full := m.full(decodeKey(row), r)
	if full {
		how |= pdFull
	}
	if x, ok := m.nixlKV(rep, r); ok {
		how |= pdNIXL
		kv = min(x, w)
		if reported || full {
			dq = w - kv // the histogram bounds the transfer
		}
		return kv, dq, how
	}
	if m.fitted {
		kv = min(max(m.ka+m.kb*r.tokens, 0), w)
	}
	switch {
	case full:
		return kv, w - kv, how
	case reported:
		// The decode replica had room: what it waited for was the pull.
		return w, 0, how
	}
	return kv, 0, how
}

// full says decode replica rep was nearly as busy as it ever was when r
// reached it.
func (m *kvModel) full(rep int32, r *pdRow) bool {
	o := m.busy[rep]
	return o != nil && o.full(r.sent+r.side)
}

// occupancy is a replica's requests in flight over time.
type occupancy struct {
	starts, ends []float64
	max          int
}

func (o *occupancy) add(from, to float64) {
	o.starts = append(o.starts, from)
	o.ends = append(o.ends, to)
}

// done sorts the intervals and finds the most held at once.
func (o *occupancy) done() {
	slices.Sort(o.starts)
	slices.Sort(o.ends)
	for k, s := range o.starts {
		o.max = max(o.max, k+1-o.endedBy(s))
	}
}

func (o *occupancy) endedBy(t float64) int {
	k, _ := slices.BinarySearch(o.ends, math.Nextafter(t, math.Inf(1)))
	return k
}

// at is how many it held at t.
func (o *occupancy) at(t float64) int {
	k, _ := slices.BinarySearch(o.starts, math.Nextafter(t, math.Inf(1)))
	return k - o.endedBy(t)
}

// full says the replica held, at t, nearly the most it ever held
// (fullShare of it, and more than one).
func (o *occupancy) full(t float64) bool {
	n := o.at(t)
	return n > 1 && float64(n) >= fullShare*float64(o.max)
}

// fullShare is the share of its most requests at once from which a
// replica counts as full.
const fullShare = 0.8
