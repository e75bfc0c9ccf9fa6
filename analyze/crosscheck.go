package analyze

import (
	"fmt"
	"math"
	"strings"

	"github.com/tokentrace/tokentrace/internal/fleetseries"
	"github.com/tokentrace/tokentrace/traces"
)

// CrossCheck compares the attribution with the server's own histograms,
// per component of the metric the tail is explained on (TTFT: queue and
// prefill, and under prefill/decode disaggregation the KV transfer and
// the decode-side wait; E2E adds decode), as the relative error of each
// component's mean and as its share of the metric. One engine's
// histograms are vLLM's request_queue/prefill/decode_time_seconds as the
// pooled series' Δsum/Δcount means; a disaggregated fleet's come from its
// pools' instance rows: the prefill pool's queue and prefill, the decode
// pool's NIXL transfer histogram, its queue time past the transfers (vLLM
// counts the pull as queueing on the decode replica), its one-step
// prefill (counted with the prompt's, as the truth does) and its decode.
// Like is compared with like: the histograms cover every request that
// finished in each step, so their means are weighted by the requests
// finished in the step, and the attribution side is every successful
// request of the trace that finished in the same window, not only the
// tail.
type CrossCheck struct {
	// Source is the attribution's source over the compared requests:
	// "server" (exact timings), "estimated" or "mixed".
	Source string `json:"source"`
	// Requests is how many of the trace's requests finished in the
	// window (estimated from the sample past Options.ExactRows);
	// ServerRequests how many the server counted finishing in it
	// (requests_finished; more when other clients used the server too).
	Requests       int   `json:"requests"`
	ServerRequests int64 `json:"server_requests"`
	// StartS and EndS bound the window, seconds from the trace's start.
	StartS float64 `json:"start_s"`
	EndS   float64 `json:"end_s"`
	// Metric is the metric whose components are compared ("e2e" or
	// "ttft", the tail's); Pools says the server's side came from a
	// disaggregated fleet's pools.
	Metric string `json:"metric"`
	Pools  bool   `json:"pools,omitempty"`
	// Components are the metric's components side by side.
	Components []CrossComponent `json:"components"`
	// Attribution and Server are one engine's shares of queue, prefill
	// and decode (of E2E, whatever the metric); AttributionMeanMs and
	// ServerMeanMs the mean per request.
	Attribution       Split `json:"attribution"`
	Server            Split `json:"server"`
	AttributionMeanMs Split `json:"attribution_mean_ms"`
	ServerMeanMs      Split `json:"server_mean_ms"`
	// MaxDiffPoints is the largest difference of a component's share, in
	// percentage points, on the component Worst; Disagree is set when a
	// component disagrees (CrossComponent.Disagree).
	MaxDiffPoints float64 `json:"max_diff_points"`
	Worst         string  `json:"worst"`
	Disagree      bool    `json:"disagree"`
	// Missing lists the histogram columns the series does not have (the
	// check is then not made); SkippedSteps counts steps with finished
	// requests but a missing mean (gaps), left out of both sides' weights.
	Missing      []string `json:"missing,omitempty"`
	SkippedSteps int      `json:"skipped_steps,omitempty"`
	// Unchecked names the attribution's components that the series has
	// no histogram of (a fleet without NIXL series: kv_transfer).
	Unchecked []string `json:"unchecked,omitempty"`
}

// CrossComponent is one component of the metric as the attribution and
// as the servers' histograms have it.
type CrossComponent struct {
	Name string `json:"name"`
	// AttributionMeanMs and ServerMeanMs are the mean per request (ms);
	// the shares their part of all the metric's components.
	AttributionMeanMs float64 `json:"attribution_mean_ms"`
	ServerMeanMs      float64 `json:"server_mean_ms"`
	AttributionShare  float64 `json:"attribution_share"`
	ServerShare       float64 `json:"server_share"`
	// RelErr is |attribution − server| / server of the means (null when
	// the server's is 0); DiffPoints the shares' difference in points.
	RelErr     *float64 `json:"rel_err"`
	DiffPoints float64  `json:"diff_points"`
	// Disagree is set past CrossCheckTolerancePoints, or past
	// CrossCheckRelTolerance for a component that makes at least a tenth
	// of the metric on either side.
	Disagree bool `json:"disagree"`
}

// Split is queue, prefill and decode (shares or milliseconds).
type Split struct {
	Queue   float64 `json:"queue"`
	Prefill float64 `json:"prefill"`
	Decode  float64 `json:"decode"`
}

func splitOf(v [3]float64) Split { return Split{Queue: v[0], Prefill: v[1], Decode: v[2]} }

// CrossCheckTolerancePoints is how far (percentage points) a share of the
// attribution may be from the server's before the two are said to
// disagree; CrossCheckRelTolerance how far a component's mean may be,
// relative to the server's, when the component is material (at least
// crossCheckMaterial of the metric on either side).
const (
	CrossCheckTolerancePoints = 10.0
	CrossCheckRelTolerance    = 0.5
	crossCheckMaterial        = 0.10
)

// crossSide is one side's sums per component (ns) and its requests.
type crossSide struct {
	sum [nComponents]float64
	n   float64
}

// crossCheck fills rep.CrossCheck from the metrics rows: a disaggregated
// fleet's instance rows, else the pooled ones.
func (rep *Report) crossCheck(pooled []traces.MetricsSample, byInstance map[string][]traces.MetricsSample) {
	if rep.Completed == 0 || len(pooled) == 0 && len(byInstance) == 0 {
		return
	}
	cc := &CrossCheck{Metric: rep.opts.TailMetric}
	var srv [nComponents]float64
	var has [nComponents]bool
	var win window
	if (rep.fleet != nil && rep.fleet.nPrefill > 0 || rep.PooledFleet != nil) && hasRoles(byInstance) {
		cc.Pools = true
		srv, has, win = rep.poolHistograms(cc, byInstance)
	} else {
		if len(pooled) == 0 {
			return
		}
		srv, has, win = rep.pooledHistograms(cc, pooled)
	}
	rep.CrossCheck = cc
	if len(cc.Missing) > 0 || cc.ServerRequests == 0 {
		return
	}
	cc.StartS, cc.EndS = float64(win.lo)/1e9, float64(win.hi)/1e9
	att, old, nServer := rep.attributionSide(win)
	cc.Source = sourceOf(nServer, int(att.n))
	if att.n == 0 {
		return
	}
	cc.Requests = int(att.n) * int(rep.oneIn()) // a sample's count, scaled to the run
	if !cc.Pools {
		rep.oldSplits(cc, old, att.n)
	}
	cc.compare(rep.metricComponents(cc.Pools), att, srv, has)
}

// window is the series' span compared, and the steps left out of it.
type window struct {
	lo, hi  int64
	skipped [][2]int64 // (from, to] of steps left out
}

func (w *window) holds(e int64) bool {
	if e <= w.lo || e > w.hi {
		return false
	}
	for _, sk := range w.skipped {
		if e > sk[0] && e <= sk[1] {
			return false
		}
	}
	return true
}

func hasRoles(byInstance map[string][]traces.MetricsSample) bool {
	for _, ss := range byInstance {
		if len(ss) > 0 && ss[0].Role != "" {
			return true
		}
	}
	return false
}

// metricComponents are the components of the metric compared, in the
// order a request meets them.
func (rep *Report) metricComponents(pools bool) []int {
	ks := []int{cQueue, cPrefill}
	if pools {
		ks = append(ks, cKVTransfer, cDecodeQueue)
	}
	if rep.opts.TailMetric != MetricTTFT {
		ks = append(ks, cDecode)
	}
	return ks
}

// pooledHistograms is one engine's histogram sums from the pooled rows:
// queue, prefill and decode weighted by the requests finished per step.
func (rep *Report) pooledHistograms(cc *CrossCheck, s []traces.MetricsSample) (srv [nComponents]float64, has [nComponents]bool, w window) {
	var col [4]bool
	for _, x := range s {
		col[0] = col[0] || x.QueueTimeMeanNs >= 0
		col[1] = col[1] || x.PrefillTimeMeanNs >= 0
		col[2] = col[2] || x.DecodeTimeMeanNs >= 0
		col[3] = col[3] || x.RequestsFinished >= 0
	}
	for k, name := range []string{"queue_time_mean_ns", "prefill_time_mean_ns", "decode_time_mean_ns", "requests_finished"} {
		if !col[k] {
			cc.Missing = append(cc.Missing, name)
		}
	}
	if len(cc.Missing) > 0 {
		return srv, has, w
	}
	w.lo, w.hi = math.MaxInt64, math.MinInt64
	for _, x := range s {
		if x.RequestsFinished <= 0 {
			continue
		}
		if x.QueueTimeMeanNs < 0 || x.PrefillTimeMeanNs < 0 || x.DecodeTimeMeanNs < 0 {
			cc.SkippedSteps++
			w.skipped = append(w.skipped, [2]int64{x.TimeNs - x.IntervalNs, x.TimeNs})
			continue
		}
		f := float64(x.RequestsFinished)
		srv[cQueue] += f * float64(x.QueueTimeMeanNs)
		srv[cPrefill] += f * float64(x.PrefillTimeMeanNs)
		srv[cDecode] += f * float64(x.DecodeTimeMeanNs)
		cc.ServerRequests += x.RequestsFinished
		w.lo, w.hi = min(w.lo, x.TimeNs-x.IntervalNs), max(w.hi, x.TimeNs)
	}
	n := float64(cc.ServerRequests)
	for _, k := range []int{cQueue, cPrefill, cDecode} {
		srv[k] = ratio(srv[k], n)
		has[k] = true
	}
	return srv, has, w
}

// poolHistograms is a disaggregated fleet's histogram means from its
// instances' rows: the prefill pool's queue and prefill, the decode
// pool's transfers (NIXL), queue past them, one-step prefill and decode,
// each weighted by the requests finished in the steps that have its mean
// (a scrape reads a replica's families one after another, so a step may
// count a finished request in one and not yet in another). The window is
// the decode pool's steps, where requests end.
func (rep *Report) poolHistograms(cc *CrossCheck, byInstance map[string][]traces.MetricsSample) (srv [nComponents]float64, has [nComponents]bool, w window) {
	type mean struct{ sum, n float64 }
	add := func(m *mean, f float64, v int64) {
		if v >= 0 {
			m.sum, m.n = m.sum+f*float64(v), m.n+f
		}
	}
	var pq, pp, dq, dp, dd, kv mean
	w.lo, w.hi = math.MaxInt64, math.MinInt64
	for _, ss := range byInstance {
		for _, x := range ss {
			if x.KVTransfers > 0 {
				add(&kv, float64(x.KVTransfers), x.KVTransferTimeMeanNs)
			}
			if x.RequestsFinished <= 0 || x.Role == "" {
				continue
			}
			f := float64(x.RequestsFinished)
			if fleetseries.IsPrefill(x.Role) {
				add(&pq, f, x.QueueTimeMeanNs)
				add(&pp, f, x.PrefillTimeMeanNs)
				continue
			}
			add(&dq, f, x.QueueTimeMeanNs)
			add(&dp, f, x.PrefillTimeMeanNs)
			add(&dd, f, x.DecodeTimeMeanNs)
			cc.ServerRequests += x.RequestsFinished
			w.lo, w.hi = min(w.lo, x.TimeNs-x.IntervalNs), max(w.hi, x.TimeNs)
		}
	}
	if pq.n == 0 || pp.n == 0 {
		cc.Missing = append(cc.Missing, "queue_time_mean_ns and prefill_time_mean_ns on the prefill pool")
	}
	if dq.n == 0 || dp.n == 0 || dd.n == 0 {
		cc.Missing = append(cc.Missing, "queue_time_mean_ns, prefill_time_mean_ns and decode_time_mean_ns on the decode pool")
	}
	if len(cc.Missing) > 0 {
		return srv, has, w
	}
	srv[cQueue] = pq.sum / pq.n
	srv[cPrefill] = pp.sum/pp.n + dp.sum/dp.n
	srv[cDecode] = dd.sum / dd.n
	has[cQueue], has[cPrefill], has[cDecode] = true, true, true
	if kv.n > 0 {
		srv[cKVTransfer] = kv.sum / kv.n
		srv[cDecodeQueue] = max(dq.sum/dq.n-srv[cKVTransfer], 0)
		has[cKVTransfer], has[cDecodeQueue] = true, true
	} else {
		cc.Unchecked = append(cc.Unchecked, ComponentNames[cKVTransfer], ComponentNames[cDecodeQueue])
	}
	return srv, has, w
}

// attributionSide sums every successful request that finished in the
// window, per component of the tail's metric (and, for one engine's
// E2E split, queue, prefill and decode: old); nServer counts those split
// by the server's timings.
func (rep *Report) attributionSide(w window) (att crossSide, old [3]float64, nServer int) {
	for i := range rep.rows.n {
		r := rep.rows.at(i)
		if !r.ok || !w.holds(r.end()) {
			continue
		}
		c, server, ok := rep.components(i, r)
		if !ok {
			continue
		}
		c = clampPos(c)
		for k := range c {
			att.sum[k] += c[k]
		}
		att.n++
		if server {
			nServer++
		}
		if s, _, ok := rep.splitAll(r); ok {
			for k := range s {
				old[k] += s[k]
			}
		}
	}
	return att, old, nServer
}

// oldSplits fills one engine's E2E shares and means of queue, prefill
// and decode on the attribution's side (compare fills the server's).
func (rep *Report) oldSplits(cc *CrossCheck, att [3]float64, n float64) {
	at := att[0] + att[1] + att[2]
	var sh, ms [3]float64
	for k := range att {
		sh[k], ms[k] = ratio(att[k], at), att[k]/n*msPerNs
	}
	cc.Attribution, cc.AttributionMeanMs = splitOf(sh), splitOf(ms)
}

// compare fills the components' comparison: means, shares of the
// metric's components together, and the verdict. Worst is the component
// that disagrees by the most points (by the largest relative error when
// none does in points), else the one that differs by the most points.
func (cc *CrossCheck) compare(ks []int, att crossSide, srv [nComponents]float64, has [nComponents]bool) {
	var ta, ts float64
	for _, k := range ks {
		if has[k] {
			ta += att.sum[k] / att.n
			ts += srv[k]
		}
	}
	worst := -1
	worse := func(c, w CrossComponent) bool {
		if c.Disagree != w.Disagree {
			return c.Disagree
		}
		if c.DiffPoints != w.DiffPoints {
			return c.DiffPoints > w.DiffPoints
		}
		return c.RelErr != nil && (w.RelErr == nil || *c.RelErr > *w.RelErr)
	}
	for _, k := range ks {
		if !has[k] {
			continue
		}
		a := att.sum[k] / att.n
		c := CrossComponent{Name: ComponentNames[k], AttributionMeanMs: a * msPerNs, ServerMeanMs: srv[k] * msPerNs,
			AttributionShare: ratio(a, ta), ServerShare: ratio(srv[k], ts)}
		if srv[k] > 0 {
			e := math.Abs(a-srv[k]) / srv[k]
			c.RelErr = &e
		}
		c.DiffPoints = 100 * math.Abs(c.AttributionShare-c.ServerShare)
		material := max(c.AttributionShare, c.ServerShare) >= crossCheckMaterial
		c.Disagree = c.DiffPoints > CrossCheckTolerancePoints || material && c.RelErr != nil && *c.RelErr > CrossCheckRelTolerance
		cc.Disagree = cc.Disagree || c.Disagree
		cc.MaxDiffPoints = max(cc.MaxDiffPoints, c.DiffPoints)
		cc.Components = append(cc.Components, c)
		if worst < 0 || worse(c, cc.Components[worst]) {
			worst = len(cc.Components) - 1
		}
	}
	if worst >= 0 {
		cc.Worst = cc.Components[worst].Name
	}
	if !cc.Pools {
		t := srv[cQueue] + srv[cPrefill] + srv[cDecode]
		cc.Server = splitOf([3]float64{ratio(srv[cQueue], t), ratio(srv[cPrefill], t), ratio(srv[cDecode], t)})
		cc.ServerMeanMs = splitOf([3]float64{srv[cQueue] * msPerNs, srv[cPrefill] * msPerNs, srv[cDecode] * msPerNs})
	}
}

// splitAll is a successful row's queue, prefill and decode (ns): the
// server's timings where the row has all three (unless ignored), else the
// estimate (queue = TTFT − estimated prefill, decode = E2E − TTFT).
func (rep *Report) splitAll(r *row) (c [3]float64, server, ok bool) {
	ttft, okT := r.ttft()
	e2e, okE := r.e2e()
	if !okT || !okE {
		return c, false, false
	}
	if !rep.opts.IgnoreServerTimings && r.sq >= 0 && r.sp >= 0 && r.sd >= 0 {
		return [3]float64{float64(r.sq), float64(r.sp), float64(r.sd)}, true, true
	}
	pre := min(rep.est.prefill(r.uncached()), max(ttft, 0))
	return [3]float64{max(ttft-pre, 0), pre, max(e2e-ttft, 0)}, false, true
}

// crossCheckSentence states why the check was not made, or which of
// the components the diagnosis names the series could not check ("" when
// there is nothing to say, or the two disagree: crossCheckDisagreement).
func (rep *Report) crossCheckSentence() string {
	cc := rep.CrossCheck
	switch {
	case cc == nil:
		return ""
	case len(cc.Missing) > 0:
		return fmt.Sprintf("No cross-check against the server's own histograms: the metrics series has no %s (not reported).", strings.Join(cc.Missing, ", "))
	}
	var named []string
	sh := rep.Attribution.Share.Array()
	for _, n := range cc.Unchecked {
		if k := indexOf(n); n == rep.Attribution.Dominant || sh[k] >= 0.25 {
			named = append(named, componentLabel(k))
		}
	}
	if len(named) == 0 {
		return ""
	}
	return fmt.Sprintf("The servers' series has no histogram of the %s named above (vLLM's NIXL connector exports vllm:nixl_xfer_time_seconds on the decode replicas), so the cross-check could not test it.",
		strings.Join(named, " and "))
}

// crossCheckDisagreement is the diagnosis' first sentence when the
// attribution and the servers' histograms disagree: on which components,
// by how much, and which side is the weaker evidence ("" when they agree).
func (rep *Report) crossCheckDisagreement() string {
	cc := rep.CrossCheck
	if cc == nil || !cc.Disagree {
		return ""
	}
	metric := strings.ToUpper(cc.Metric)
	var parts []string
	for _, c := range cc.Components {
		if !c.Disagree {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %s per request (%.0f%% of %s) against the servers' %s (%.0f%%)",
			componentLabel(indexOf(c.Name)), fmtMs(c.AttributionMeanMs), 100*c.AttributionShare, metric, fmtMs(c.ServerMeanMs), 100*c.ServerShare))
	}
	s := fmt.Sprintf("The attribution disagrees with the servers' own histograms over the %d requests that finished in %.1f–%.1f s: %s.",
		cc.Requests, cc.StartS, cc.EndS, strings.Join(parts, "; "))
	if cc.Source == SourceServer {
		return s + " The histograms are the weaker evidence here: the split comes from the servers' per-request timings, and the histograms count every request the servers finished (other clients' too) with their own phase definitions; check that nothing else used the servers before trusting either."
	}
	return s + " The estimate is the weaker evidence: it models what the servers did not time per request, and their histograms measured it; read the split from the histograms, and treat the estimated attribution below with caution."
}

// writeCrossCheckText prints both sides per component.
func (rep *Report) writeCrossCheckText(p func(string, ...any)) {
	cc := rep.CrossCheck
	if cc == nil || len(cc.Missing) > 0 || cc.Requests == 0 {
		return
	}
	of := "the server's histograms"
	if cc.Pools {
		of = "the pools' histograms"
	}
	p("\nCross-check: all requests finished in %.1f–%.1f s, %s attribution (%d requests) against %s (%d finished), components of %s\n",
		cc.StartS, cc.EndS, cc.Source, cc.Requests, of, cc.ServerRequests, strings.ToUpper(cc.Metric))
	p("  %-12s %12s %12s   %12s %12s %9s\n", "component", "attribution", "mean", "server", "mean", "rel.err")
	for _, c := range cc.Components {
		e := "-"
		if c.RelErr != nil {
			e = fmt.Sprintf("%.0f%%", 100**c.RelErr)
		}
		mark := ""
		if c.Disagree {
			mark = "  ✗"
		}
		p("  %-12s %11.1f%% %12s   %11.1f%% %12s %9s%s\n", c.Name, 100*c.AttributionShare, fmtMs(c.AttributionMeanMs), 100*c.ServerShare, fmtMs(c.ServerMeanMs), e, mark)
	}
	for _, n := range cc.Unchecked {
		p("  %-12s %12s %12s   %12s (no histogram)\n", n, "", "", "")
	}
	verdict := "agree"
	if cc.Disagree {
		verdict = "DISAGREE"
	}
	p("  %s: largest difference %.1f points (%s; tolerance %.0f points, or %.0f%% of a component's mean)\n", verdict, cc.MaxDiffPoints, cc.Worst, CrossCheckTolerancePoints, 100*CrossCheckRelTolerance)
}
