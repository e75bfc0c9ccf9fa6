package analyze

import (
	"fmt"
	"iter"
	"math"
	"slices"

	"github.com/tokentrace/tokentrace/traces"
)

// Component indices of a request's latency. The fleet's components come
// last so that the first five keep their indices; reports show them in
// the order a request meets them (componentOrder).
const (
	cLateness = iota
	cQueue
	cPrefill
	cDecode
	cOther
	// cKVTransfer is the pull of a disaggregated request's prompt KV cache
	// from its prefill replica; cDecodeQueue its wait on the decode
	// replica (for blocks, and for a batch once the KV landed).
	cKVTransfer
	cDecodeQueue
	nComponents
)

// ComponentNames are the attribution components by index (Shares.Array's
// order). Reports show kv_transfer and decode_queue only where some
// request has them (Attribution.Components), between prefill and decode.
var ComponentNames = [nComponents]string{"lateness", "queue", "prefill", "decode", "other", "kv_transfer", "decode_queue"}

// componentOrder is the order in which a request meets the components,
// which reports follow.
var componentOrder = [nComponents]int{cLateness, cQueue, cPrefill, cKVTransfer, cDecodeQueue, cDecode, cOther}

// isFleetComponent says whether k is shown only where present.
func isFleetComponent(k int) bool { return k == cKVTransfer || k == cDecodeQueue }

// Attribution sources.
const (
	SourceServer    = "server"
	SourceEstimated = "estimated"
	SourceMixed     = "mixed"
)

// sourceOf is the Source of an attribution over n requests of which
// nServer had the server's own timings: all of them is SourceServer (so is
// an empty one), none SourceEstimated, some SourceMixed.
func sourceOf(nServer, n int) string {
	switch {
	case nServer == n:
		return SourceServer
	case nServer == 0:
		return SourceEstimated
	}
	return SourceMixed
}

// Shares splits latency between the components (fractions summing to 1, or
// milliseconds, depending on the field that holds it).
type Shares struct {
	Lateness float64 `json:"lateness"`
	Queue    float64 `json:"queue"`
	Prefill  float64 `json:"prefill"`
	Decode   float64 `json:"decode"`
	Other    float64 `json:"other"`
	// KVTransfer and DecodeQueue are a disaggregated fleet's (left out of
	// JSON when zero: a single engine has neither).
	KVTransfer  float64 `json:"kv_transfer,omitempty"`
	DecodeQueue float64 `json:"decode_queue,omitempty"`
}

func sharesOf(v [nComponents]float64) Shares {
	return Shares{Lateness: v[cLateness], Queue: v[cQueue], Prefill: v[cPrefill], Decode: v[cDecode], Other: v[cOther],
		KVTransfer: v[cKVTransfer], DecodeQueue: v[cDecodeQueue]}
}

// Array returns the shares in ComponentNames order.
func (s Shares) Array() [nComponents]float64 {
	return [nComponents]float64{s.Lateness, s.Queue, s.Prefill, s.Decode, s.Other, s.KVTransfer, s.DecodeQueue}
}

// TailTiming says when the tail requests were sent.
type TailTiming struct {
	// FirstS and LastS are the first and last tail send, seconds from the
	// run start.
	FirstS float64 `json:"first_s"`
	LastS  float64 `json:"last_s"`
	// BusiestStartS–BusiestEndS is the timeline window holding the most tail
	// requests, and BusiestShare the fraction of them it holds.
	BusiestStartS float64 `json:"busiest_start_s"`
	BusiestEndS   float64 `json:"busiest_end_s"`
	BusiestShare  float64 `json:"busiest_share"`
}

// TailLoad compares the tail's requests with all successful ones: each
// Tail field is the mean over the tail, its All twin the mean over every
// successful request.
type TailLoad struct {
	// TailInFlight and AllInFlight are the other requests in flight when a
	// request was sent.
	TailInFlight float64 `json:"tail_in_flight"`
	AllInFlight  float64 `json:"all_in_flight"`
	// TailPromptTokensInFlight and AllPromptTokensInFlight are the prompt
	// tokens of those requests.
	TailPromptTokensInFlight float64 `json:"tail_prompt_tokens_in_flight"`
	AllPromptTokensInFlight  float64 `json:"all_prompt_tokens_in_flight"`
	// TailUncachedTokens and AllUncachedTokens are prompt − server-cached
	// tokens (prompt when unknown).
	TailUncachedTokens float64 `json:"tail_uncached_tokens"`
	AllUncachedTokens  float64 `json:"all_uncached_tokens"`
	// TailCachedFraction and AllCachedFraction are cached / prompt tokens
	// over the requests whose cached tokens are known (null when none is).
	TailCachedFraction *float64 `json:"tail_cached_fraction"`
	AllCachedFraction  *float64 `json:"all_cached_fraction"`
	TailOutputTokens   float64  `json:"tail_output_tokens"`
	AllOutputTokens    float64  `json:"all_output_tokens"`
	TailTPOTMs         float64  `json:"tail_tpot_ms"`
	AllTPOTMs          float64  `json:"all_tpot_ms"`
	TailLatenessMs     float64  `json:"tail_lateness_ms"`
	AllLatenessMs      float64  `json:"all_lateness_ms"`
}

// PrefillModel is the estimated prefill time, FixedMs + PerTokenUs·uncached
// tokens / 1000, fitted on the least-loaded requests' lower TTFT envelope.
type PrefillModel struct {
	FixedMs    float64 `json:"fixed_ms"`
	PerTokenUs float64 `json:"per_token_us"`
	// FittedOn is how many least-loaded requests the fit used, and
	// MaxInFlight the most other requests any of them saw in flight.
	FittedOn    int `json:"fitted_on"`
	MaxInFlight int `json:"max_in_flight"`
	// UnloadedTPOTMs is the median TPOT of those requests.
	UnloadedTPOTMs float64 `json:"unloaded_tpot_ms"`
}

// Attribution explains the tail: each component's share of the tail
// requests' latency, the dominant one, when and under what load the tail
// happened, and a diagnosis in words.
type Attribution struct {
	TailPercentile float64 `json:"tail_percentile"`
	// TailMetric is "e2e" or "ttft". The tail is selected on the metric
	// measured from the scheduled time (metric + client lateness), so a late
	// client shows up as lateness rather than hiding.
	TailMetric      string  `json:"tail_metric"`
	TailThresholdMs float64 `json:"tail_threshold_ms"`
	TailRequests    int     `json:"tail_requests"`
	// Source is "server" (exact server timings), "estimated" or "mixed".
	Source string `json:"source"`
	// Components are the components the report shows, in the order a
	// request meets them: lateness, queue, prefill, then kv_transfer and
	// decode_queue when some request was disaggregated (a prefill replica
	// named), decode and other. Under disaggregation queue is the wait on
	// the prefill side.
	Components []string `json:"components"`
	// Share is each component's share of the tail's total latency.
	Share    Shares `json:"share"`
	Dominant string `json:"dominant"`
	// DominantAgreement is the fraction of tail requests whose own largest
	// component is Dominant.
	DominantAgreement float64 `json:"dominant_agreement"`
	// MeanMs is the mean component per tail request, in milliseconds.
	MeanMs Shares `json:"mean_ms"`
	// ShareAll and MeanAllMs are the same over every successful request.
	ShareAll  Shares       `json:"share_all"`
	MeanAllMs Shares       `json:"mean_all_ms"`
	When      TailTiming   `json:"when"`
	Load      TailLoad     `json:"load"`
	Prefill   PrefillModel `json:"prefill_model"`
	// ServerLoad is the scraped server state around the tail (null
	// without a metrics series).
	ServerLoad *ServerLoad `json:"server_load"`
	Diagnosis  []string    `json:"diagnosis"`
}

// estModel is the fitted estimator for requests without server timings.
type estModel struct {
	a, b       float64 // prefill ns = a + b·uncached tokens
	unloadedTP float64 // ns
	fitted     int
	maxIn      int
}

func (m *estModel) prefill(u float64) float64 { return max(m.a+m.b*u, 0) }

// fitEstimator fits the prefill model on the least-loaded successful
// requests: those whose in-flight count at send is within the lowest
// tenth (at least 20 requests). Their uncached prompt lengths are put in
// up to 8 log-spaced bins and a line is fitted through each bin's 10th
// percentile TTFT (the lower envelope, robust to residual queueing).
func (rep *Report) fitEstimator() {
	var cand []int32
	for i := range rep.rows.n {
		r := rep.rows.at(int(i))
		if _, ok := r.ttft(); ok && r.ok && rep.load.inflight[i] >= 0 {
			cand = append(cand, int32(i))
		}
	}
	if len(cand) == 0 {
		return
	}
	// counting: q is the lowest in-flight level holding a tenth
	// (1/fitShareDiv) of the candidates (and at least 20 of them).
	maxF := int32(0)
	for _, i := range cand {
		maxF = max(maxF, rep.load.inflight[i])
	}
	hist := make([]int, maxF+1)
	for _, i := range cand {
		hist[rep.load.inflight[i]]++
	}
	need := max((len(cand)-1)/fitShareDiv+1, min(20, len(cand)))
	q, cum := int32(0), 0
	for v, c := range hist {
		cum += c
		if cum >= need {
			q = int32(v)
			break
		}
	}
	kept := cand[:0]
	for _, i := range cand {
		if rep.load.inflight[i] <= q {
			kept = append(kept, i)
		}
	}
	cand = kept
	k := len(cand)
	m := estModel{fitted: k, maxIn: int(q)}
	var tp []float64
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, i := range cand {
		r := rep.rows.at(int(i))
		if p, ok := r.tpot(); ok {
			tp = append(tp, p)
		}
		u := math.Log1p(r.uncached())
		lo, hi = min(lo, u), max(hi, u)
	}
	slices.Sort(tp)
	if len(tp) > 0 {
		m.unloadedTP = Quantile(tp, 0.5)
	} else if len(rep.samples.tpot) > 0 {
		m.unloadedTP = Quantile(rep.samples.tpot, 0.5)
	}
	const nb = 8
	type bin struct{ u, t []float64 }
	bins := make([]bin, nb)
	for _, i := range cand {
		r := rep.rows.at(int(i))
		u := r.uncached()
		b := 0
		if hi > lo {
			b = min(int((math.Log1p(u)-lo)/(hi-lo)*nb), nb-1)
		}
		t, _ := r.ttft()
		bins[b].u = append(bins[b].u, u)
		bins[b].t = append(bins[b].t, t)
	}
	var xs, ys []float64
	for _, b := range bins {
		if len(b.u) == 0 {
			continue
		}
		slices.Sort(b.u)
		slices.Sort(b.t)
		xs = append(xs, Quantile(b.u, 0.5))
		ys = append(ys, Quantile(b.t, fitEnvelope))
	}
	m.a, m.b = fitLine(xs, ys)
	rep.est = m
}

// fitLine is least squares y = a + b·x with a, b ≥ 0.
func fitLine(xs, ys []float64) (a, b float64) {
	n := float64(len(xs))
	if n == 0 {
		return 0, 0
	}
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
		sxx += xs[i] * xs[i]
		sxy += xs[i] * ys[i]
	}
	den := n*sxx - sx*sx
	if len(xs) < 2 || den <= 0 {
		return max(sy/n, 0), 0
	}
	b = (n*sxy - sx*sy) / den
	a = (sy - b*sx) / n
	switch {
	case b < 0:
		return max(sy/n, 0), 0
	case a < 0:
		if sxx > 0 {
			return 0, max(sxy/sxx, 0)
		}
		return 0, 0
	}
	return a, b
}

// metricNs is the tail metric of a successful row, without lateness.
func (rep *Report) metricNs(r *row) (float64, bool) {
	if rep.opts.TailMetric == MetricTTFT {
		return r.ttft()
	}
	return r.e2e()
}

// components splits row r's (row index i's) latency (scheduled view) into its components in
// nanoseconds. server says whether server timings were used. ok is false for
// failed rows and rows without the metric.
//
// A disaggregated request (a prefill replica named) without the server's
// whole split takes its estimate (pd.go): the prefill side's queue and
// prefill, the KV transfer and the decode-side wait, from what the decode
// side reported and the prefill replicas' scheduling.
func (rep *Report) components(i int, r *row) (c [nComponents]float64, server, ok bool) {
	if !r.ok {
		return c, false, false
	}
	ttft, okT := r.ttft()
	total, okM := rep.metricNs(r)
	if !okT || !okM {
		return c, false, false
	}
	c[cLateness] = r.latenessOr0()
	isTTFT := rep.opts.TailMetric == MetricTTFT
	server = !rep.opts.IgnoreServerTimings && r.sq >= 0 && r.sp >= 0 && (isTTFT || r.sd >= 0)
	if server {
		c[cQueue], c[cPrefill] = float64(r.sq), float64(r.sp)
		c[cKVTransfer], c[cDecodeQueue] = float64(max(r.skv, 0)), float64(max(r.sdq, 0))
		if !isTTFT {
			c[cDecode] = float64(r.sd)
		}
		c[cOther] = total - c[cQueue] - c[cPrefill] - c[cKVTransfer] - c[cDecodeQueue] - c[cDecode]
		return c, true, true
	}
	if !isTTFT {
		c[cDecode] = max(total-ttft, 0)
	}
	if e, ok := rep.pdSplit(i); ok {
		c[cQueue], c[cPrefill], c[cKVTransfer], c[cDecodeQueue] = float64(e.queue), float64(e.prefill), float64(e.kv), float64(e.dq)
		c[cOther] = ttft - c[cQueue] - c[cPrefill] - c[cKVTransfer] - c[cDecodeQueue]
		return c, false, true
	}
	pre := min(rep.est.prefill(r.uncached()), max(ttft, 0))
	c[cPrefill] = pre
	c[cQueue] = max(ttft-pre, 0)
	return c, false, true
}

// argmax returns the index of the largest positive component.
func argmax(c [nComponents]float64) int {
	best := 0
	for i := 1; i < nComponents; i++ {
		if c[i] > c[best] {
			best = i
		}
	}
	return best
}

func clampPos(c [nComponents]float64) [nComponents]float64 {
	for i := range c {
		c[i] = max(c[i], 0)
	}
	return c
}

// attribute fits the estimator, selects the tail and fills Attribution;
// byInstance is the series' rows per instance (a fleet's evidence).
func (rep *Report) attribute(byInstance map[string][]traces.MetricsSample) {
	at := &rep.Attribution
	at.TailPercentile, at.TailMetric = rep.opts.TailPercentile, rep.opts.TailMetric
	at.Share, at.ShareAll = Shares{}, Shares{}
	rep.fitEstimator()
	rep.estimatePD(byInstance) // pd.go
	at.Components = rep.shownComponents()
	at.Prefill = PrefillModel{FixedMs: rep.est.a * msPerNs, PerTokenUs: rep.est.b * 1e-3, FittedOn: rep.est.fitted,
		MaxInFlight: rep.est.maxIn, UnloadedTPOTMs: rep.est.unloadedTP * msPerNs}
	var vals []float64
	for i := range rep.rows.n {
		r := rep.rows.at(int(i))
		if m, ok := rep.metricNs(r); ok && r.ok {
			vals = append(vals, m+r.latenessOr0())
		}
	}
	if len(vals) == 0 {
		return
	}
	slices.Sort(vals)
	thr := Quantile(vals, rep.opts.TailPercentile/100)
	at.TailThresholdMs = thr * msPerNs
	var sumT, sumA [nComponents]float64
	var nA, nServer, agree int
	own := make([]int, 0)
	for i := range rep.rows.n {
		r := rep.rows.at(int(i))
		c, server, ok := rep.components(int(i), r)
		if !ok {
			continue
		}
		cp := clampPos(c)
		for k := range cp {
			sumA[k] += cp[k]
		}
		nA++
		m, _ := rep.metricNs(r)
		if m+r.latenessOr0() < thr {
			continue
		}
		rep.tail = append(rep.tail, int32(i))
		if server {
			nServer++
		}
		for k := range cp {
			sumT[k] += cp[k]
		}
		own = append(own, argmax(cp))
	}
	at.TailRequests = len(rep.tail) * int(rep.oneIn()) // estimated on a sample
	at.Source = sourceOf(nServer, len(rep.tail))
	at.Share, at.MeanMs = normalize(sumT, len(rep.tail))
	at.ShareAll, at.MeanAllMs = normalize(sumA, nA)
	d := argmax(sumT)
	at.Dominant = ComponentNames[d]
	for _, o := range own {
		if o == d {
			agree++
		}
	}
	if len(own) > 0 {
		at.DominantAgreement = float64(agree) / float64(len(own))
	}
	rep.loadCompare()
}

// normalize turns component sums into shares and per-request means (ms).
func normalize(sum [nComponents]float64, n int) (share, mean Shares) {
	var tot float64
	for _, v := range sum {
		tot += v
	}
	var s, m [nComponents]float64
	for k, v := range sum {
		if tot > 0 {
			s[k] = v / tot
		}
		if n > 0 {
			m[k] = v / float64(n) * msPerNs
		}
	}
	return sharesOf(s), sharesOf(m)
}

// callSums sums what the tail's load and the replica table both report
// of calls: TPOT over the calls that have one, and the cached share of the
// prompt over those whose server reported its cache hits.
type callSums struct {
	nTP, nCk               int
	tpot, cached, promptCk float64
}

func (s *callSums) add(r *row) {
	if p, ok := r.tpot(); ok {
		s.nTP++
		s.tpot += p
	}
	if r.cached >= 0 && r.in > 0 {
		s.nCk++
		s.cached += float64(r.cached)
		s.promptCk += float64(r.in)
	}
}

// tpotMs is the mean TPOT in milliseconds (0 without TPOTs).
func (s *callSums) tpotMs() float64 { return ratio(s.tpot, float64(s.nTP)) * msPerNs }

// cachedFraction is the cached share of the prompt tokens (nil when no
// server reported its cache hits).
func (s *callSums) cachedFraction() *float64 {
	if s.nCk == 0 {
		return nil
	}
	f := s.cached / s.promptCk
	return &f
}

// loadCompare fills Attribution.Load.
func (rep *Report) loadCompare() {
	type acc struct {
		n, nIn                     int
		in, prompt, unc, out, late float64
		calls                      callSums
	}
	add := func(a *acc, i int32) {
		r := rep.rows.at(int(i))
		a.n++
		if f := rep.load.inflight[i]; f >= 0 {
			a.nIn++
			a.in += float64(f)
			a.prompt += rep.load.prompt[i]
		}
		a.unc += r.uncached()
		a.out += float64(r.out)
		a.late += r.latenessOr0()
		a.calls.add(r)
	}
	var t, all acc
	for _, i := range rep.tail {
		add(&t, i)
	}
	for i := range rep.rows.n {
		if rep.rows.at(int(i)).ok {
			add(&all, int32(i))
		}
	}
	rep.Attribution.Load = TailLoad{
		TailInFlight: ratio(t.in, float64(t.nIn)), AllInFlight: ratio(all.in, float64(all.nIn)),
		TailPromptTokensInFlight: ratio(t.prompt, float64(t.nIn)), AllPromptTokensInFlight: ratio(all.prompt, float64(all.nIn)),
		TailUncachedTokens: ratio(t.unc, float64(t.n)), AllUncachedTokens: ratio(all.unc, float64(all.n)),
		TailCachedFraction: t.calls.cachedFraction(), AllCachedFraction: all.calls.cachedFraction(),
		TailOutputTokens: ratio(t.out, float64(t.n)), AllOutputTokens: ratio(all.out, float64(all.n)),
		TailTPOTMs: t.calls.tpotMs(), AllTPOTMs: all.calls.tpotMs(),
		TailLatenessMs: ratio(t.late, float64(t.n)) * msPerNs, AllLatenessMs: ratio(all.late, float64(all.n)) * msPerNs,
	}
}

// RequestAttribution is one request's latency split, in nanoseconds.
type RequestAttribution struct {
	Seq       int64  `json:"seq"`
	RequestID string `json:"request_id"`
	Lateness  int64  `json:"lateness_ns"`
	Queue     int64  `json:"queue_ns"`
	Prefill   int64  `json:"prefill_ns"`
	Decode    int64  `json:"decode_ns"`
	Other     int64  `json:"other_ns"`
	// KVTransfer and DecodeQueue are a disaggregated request's (0, and
	// left out of JSON, otherwise).
	KVTransfer  int64 `json:"kv_transfer_ns,omitempty"`
	DecodeQueue int64 `json:"decode_queue_ns,omitempty"`
	// Replica and PrefillReplica name the replicas that served the
	// request (its replica and prefill_replica columns).
	Replica        string `json:"replica,omitempty"`
	PrefillReplica string `json:"prefill_replica,omitempty"`
	// Source is "server" or "estimated".
	Source string `json:"source"`
	// Tail says whether the request is in the tail.
	Tail bool `json:"tail"`
}

// PerRequest yields the attribution of every successful request, in input
// order. Request ids are empty unless Options.KeepRequests was set. Past
// Options.ExactRows (Sampling set) only a sample of the rows is kept, so it
// yields nothing but one *traces.OptionError naming Options.ExactRows.
func (rep *Report) PerRequest() iter.Seq2[RequestAttribution, error] {
	return func(yield func(RequestAttribution, error) bool) {
		if s := rep.Sampling; s != nil {
			yield(RequestAttribution{}, traces.OptionErrorf("analyze", "Options.ExactRows",
				"per-request attribution needs every row, but the input has %d rows, more than the %d kept exactly, so only a 1-in-%d sample was kept; raise it to at least %d (about 300 bytes of memory per row)",
				s.Rows, s.ExactRows, s.OneIn, s.Rows))
			return
		}
		tail := map[int32]bool{}
		for _, i := range rep.tail {
			tail[i] = true
		}
		for i := range rep.rows.n {
			r := rep.rows.at(int(i))
			c, server, ok := rep.components(int(i), r)
			if !ok {
				continue
			}
			src := SourceEstimated
			if server {
				src = SourceServer
			}
			ra := RequestAttribution{Seq: r.seq, RequestID: rep.reqID(i), Lateness: int64(math.Round(c[cLateness])),
				Queue: int64(math.Round(c[cQueue])), Prefill: int64(math.Round(c[cPrefill])), Decode: int64(math.Round(c[cDecode])),
				Other: int64(math.Round(c[cOther])), KVTransfer: int64(math.Round(c[cKVTransfer])), DecodeQueue: int64(math.Round(c[cDecodeQueue])),
				Replica: rep.replicaName(r.rep), PrefillReplica: rep.replicaName(r.pre), Source: src, Tail: tail[int32(i)]}
			if !yield(ra, nil) {
				return
			}
		}
	}
}

func fmtMs(ms float64) string {
	switch {
	case ms >= 10000:
		return fmt.Sprintf("%.1f s", ms/1000)
	case ms >= 100:
		return fmt.Sprintf("%.0f ms", ms)
	case ms >= 10:
		return fmt.Sprintf("%.1f ms", ms)
	default:
		return fmt.Sprintf("%.2f ms", ms)
	}
}

// Estimator knobs: the least-loaded 1/fitShareDiv of the requests (at
// least 20) are fitted, through each prompt-length bin's fitEnvelope
// quantile of TTFT.
const (
	fitShareDiv = 10
	fitEnvelope = 0.10
)
