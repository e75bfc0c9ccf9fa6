package twin

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tokentrace/tokentrace/sim"
	"github.com/tokentrace/tokentrace/sim/engine"
	"github.com/tokentrace/tokentrace/traces"
)

// Report says how a twin was fitted: from what data, what each parameter
// came from, what could not be identified, and how far the fitted twin
// reproduces the runs it was fitted on.
type Report struct {
	Inputs []InputReport
	// Params are the fitted configuration's keys, each with where its
	// value came from.
	Params []Param
	// Residuals compare the twin's simulation of the fitted rows with the
	// measurements, per metric (empty when none was simulated).
	Residuals []Residual
	// Notes say what the data lacked and what does not fit the model.
	Notes []string
}

// InputReport describes one input.
type InputReport struct {
	Name              string
	Rows, OK, Samples int64
	// RatePerSec is the successful requests' send rate; MeanInFlight the
	// mean number of requests in flight (the load the fit saw).
	RatePerSec, MeanInFlight float64

	first, last int64
	busy        float64
}

// Param is one key of the twin's configuration.
type Param struct {
	// Key is the configuration key (with its scope, "decode.step-fixed"),
	// Value its value as the configuration holds it.
	Key, Value string
	// Fitted says the data gave the value; else it is the prior's.
	Fitted bool
	// From says what data gave it, or why the prior was kept.
	From string
}

// Residual is one metric of the fitted rows, measured against simulated.
type Residual struct {
	Metric string
	// Measured and Predicted are the metric's p50, p90 and p99 (ns).
	Measured, Predicted [3]float64
}

// The engine parameters of the step model, by feature.
var featKeys = [nFeat]string{"step-fixed", "prefill-per-token", "decode-per-seq", "attn-per-context-token"}

// thetaOf is the prior's step model.
func thetaOf(o engine.Options) [nFeat]float64 {
	return [nFeat]float64{float64(o.StepFixed), float64(o.PrefillPerToken), float64(o.DecodePerSeq), float64(o.AttnPerContextToken)}
}

// setTheta sets the step model's costs, rounded to what the
// configuration keeps.
func setTheta(o *engine.Options, t [nFeat]float64) {
	o.StepFixed, o.PrefillPerToken, o.DecodePerSeq, o.AttnPerContextToken = dur(t[0]), dur(t[1]), dur(t[2]), dur(t[3])
}

// dur rounds ns to 3 significant digits (at least 1 ns): more than a fit
// can claim, few enough to read.
func dur(ns float64) time.Duration {
	if ns <= 0 || math.IsNaN(ns) {
		return 0
	}
	p := math.Pow(10, math.Floor(math.Log10(ns))-2)
	return time.Duration(max(math.Round(ns/p)*p, 1))
}

// pool is the fit of one pool's replicas together.
type pool struct {
	name   string // "", "prefill" or "decode"
	groups []*rowGroup
	est    estimate
	data   int64 // observations seen
	limit  limitEvidence
}

type limitEvidence struct {
	maxBatch int
	waited   int64 // steps that held maxBatch while a request waited
}

// estimate fits every pool and builds the twin's options and report.
func (f *fitter) estimate() (*Result, error) {
	prior := f.o.Prior
	res := &Result{Options: prior}
	res.Report.Inputs = f.inputs
	pools := f.pools()
	o := &res.Options
	f.shape(o, pools)
	var params []Param
	for _, p := range pools {
		params = append(params, f.fitPool(o, p, &prior)...)
	}
	params = append(params, f.kvTransfer(o)...)
	params = append(params, f.prefixCaching(o))
	res.Report.Params = params
	f.dataNotes()
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("twin: the fitted simulator is not valid: %w", err)
	}
	res.Report.Notes = f.notes
	return res, nil
}

// pools groups the replicas by pool, in a stable order.
func (f *fitter) pools() []*pool {
	by := map[string]*pool{}
	var out []*pool
	keys := slices.Clone(f.order)
	slices.Sort(keys)
	for _, k := range keys {
		g := f.groups[k]
		p := by[g.pool]
		if p == nil {
			p = &pool{name: g.pool}
			by[g.pool] = p
			out = append(out, p)
		}
		p.groups = append(p.groups, g)
	}
	return out
}

// shape sets the fleet the rows name: replicas, pools and the router.
func (f *fitter) shape(o *sim.Options, pools []*pool) {
	count := map[string]int{}
	for _, p := range pools {
		for _, g := range p.groups {
			if g.name != "" {
				count[p.name]++
			}
		}
	}
	switch {
	case count["prefill"] > 0 || count["decode"] > 0:
		o.Fleet.Replicas, o.Fleet.PrefillReplicas, o.Fleet.DecodeReplicas = 0, max(count["prefill"], 1), max(count["decode"], 1)
	case count[""] > 0:
		o.Fleet.Replicas, o.Fleet.PrefillReplicas, o.Fleet.DecodeReplicas = count[""], 0, 0
	}
	if r := routerOf(f.routes); r != "" && o.IsFleet() {
		o.Fleet.Router = r
	}
	o.Fleet.Overrides = nil
}

// routerOf is the router policy whose route reasons the rows carry (the
// decode side's under disaggregation), "" when they name none.
func routerOf(reasons map[string]int64) string {
	best, n := "", int64(0)
	for reason, c := range reasons {
		if _, d, ok := strings.Cut(reason, "/"); ok {
			reason = d
		}
		if r := sim.RouterOfReason(reason); r != "" && c > n {
			best, n = r, c
		}
	}
	return best
}

// fitPool fits one pool's step model and its batch limit, sets them on o
// (scoped to the pool under disaggregation) and says where each came from.
// Each replica is fitted on its own; the pool takes the median of its
// replicas' costs, and a replica whose own cost is clearly off it gets an
// override.
func (f *fitter) fitPool(o *sim.Options, p *pool, prior *sim.Options) []Param {
	var decode, idle, sched, whole int64
	base := thetaOf(prior.Options)
	ests := make([]estimate, len(p.groups))
	for i, g := range p.groups {
		ests[i] = regress(g.sample.obs, base)
		p.data += g.sample.seen
		decode += g.decodeSteps
		idle += g.idleSteps
		sched += g.schedSteps
		whole += g.wholeRequests
		if g.maxBatch > p.limit.maxBatch {
			p.limit = limitEvidence{maxBatch: g.maxBatch}
		}
		if g.maxBatch == p.limit.maxBatch {
			p.limit.waited += g.waited
		}
	}
	p.est = poolEstimate(ests, base)
	f.curvature(p)
	scope := ""
	if p.name != "" {
		scope = p.name + "."
	}
	from := f.stepSource(p, decode, idle, sched, whole)
	var params []Param
	var vals []string
	for j := range nFeat {
		v := fmtDur(dur(p.est.theta[j]))
		pr := Param{Key: scope + featKeys[j], Value: v, Fitted: p.est.fit[j]}
		if pr.Fitted {
			pr.From = fmt.Sprintf("%s (±%.1f %%)", from, 100*p.est.se[j]/max(p.est.theta[j], 1))
		} else {
			pr.From = "prior: " + orNone(p.est.why[j], "no step observed")
		}
		params = append(params, pr)
		vals = append(vals, scope+featKeys[j]+"="+v)
	}
	lim := f.limitParam(p, scope, prior)
	params = append(params, lim)
	vals = append(vals, lim.Key+"="+lim.Value)
	f.apply(o, p.name, vals)
	for i, g := range p.groups {
		for j := range nFeat {
			e := ests[i]
			if len(p.groups) < 2 || !e.fit[j] || !p.est.fit[j] || e.se[j] > 0.05*e.theta[j] ||
				math.Abs(e.theta[j]-p.est.theta[j]) <= 0.1*p.est.theta[j] {
				continue
			}
			key := g.name + "." + featKeys[j]
			v := fmtDur(dur(e.theta[j]))
			o.Fleet.Overrides = append(o.Fleet.Overrides, key+"="+v)
			params = append(params, Param{Key: key, Value: v, Fitted: true,
				From: fmt.Sprintf("%d steps of %s alone (±%.1f %%): off the pool's by over 10 %%", g.sample.seen, g.name, 100*e.se[j]/max(e.theta[j], 1))})
		}
	}
	return params
}

// curvature says when the pool's step times do not grow with the batch
// as the model has them: the model fitted on the steps of all but the
// largest batches is extrapolated to the largest (the top 5 % of steps),
// as a twin is to a higher load; a mean error beyond 3 % is reported.
func (f *fitter) curvature(p *pool) {
	var data []obs
	for _, g := range p.groups {
		for _, o := range g.sample.obs {
			if o.x[featDecode] > 0 && o.y > 0 {
				data = append(data, o)
			}
		}
	}
	if len(data) < 100 {
		return
	}
	slices.SortStableFunc(data, func(a, b obs) int { return cmp.Compare(a.x[featDecode], b.x[featDecode]) })
	cut := len(data) * 19 / 20
	for cut > 0 && data[cut-1].x[featDecode] == data[cut].x[featDecode] {
		cut--
	}
	if cut < 50 || len(data)-cut < 10 {
		return
	}
	low := regress(data[:cut], p.est.theta)
	var rel, b float64
	for _, o := range data[cut:] {
		rel += (o.y - dot(low.theta, o.x)) / o.y
		b += o.x[featDecode]
	}
	n := float64(len(data) - cut)
	rel, b = rel/n, b/n
	name := "the server's"
	if p.name != "" {
		name = "the " + p.name + " pool's"
	}
	switch {
	case rel > 0.03:
		f.notes = append(f.notes, fmt.Sprintf("%s step time grows faster than the model with the batch: fitted on the smaller batches, it says the largest seen (%.0f sequences on average) take %.0f %% less than they did; at higher loads the twin will predict too low (check it there)", name, b, 100*rel))
	case rel < -0.03:
		f.notes = append(f.notes, fmt.Sprintf("%s step time grows slower than the model with the batch: fitted on the smaller batches, it says the largest ones seen (%.0f sequences on average) take %.0f %% more than they did; at higher loads the twin will predict too high (check it there)", name, b, -100*rel))
	}
}

// poolEstimate is the pool's step model from its replicas' own: each cost
// the median of the replicas that identified it (with its standard
// error), else the prior.
func poolEstimate(ests []estimate, base [nFeat]float64) estimate {
	if len(ests) == 1 {
		return ests[0]
	}
	var e estimate
	e.theta = base
	for j := range nFeat {
		var vals, ses []float64
		for _, g := range ests {
			if g.fit[j] {
				vals = append(vals, g.theta[j])
				ses = append(ses, g.se[j])
			}
			if e.why[j] == "" {
				e.why[j] = g.why[j]
			}
		}
		if len(vals) == 0 {
			continue
		}
		e.theta[j], e.se[j], e.fit[j] = median(vals), median(ses), true
	}
	return e
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}

// stepSource says what a pool's step observations were.
func (f *fitter) stepSource(p *pool, decode, idle, sched, whole int64) string {
	var parts []string
	if decode > 0 {
		parts = append(parts, fmt.Sprintf("%d steps between chunks", decode))
	}
	if idle > 0 {
		parts = append(parts, fmt.Sprintf("%d first steps after idle", idle))
	}
	if whole > 0 {
		parts = append(parts, fmt.Sprintf("%d requests' decodes (first to last token) beside the requests decoding with them", whole))
	}
	if sched > 0 {
		parts = append(parts, fmt.Sprintf("%d steps between scheduled prompts (server queue times)", sched))
	}
	who := "the server"
	if n := len(p.groups); n > 1 || p.groups[0].name != "" {
		who = fmt.Sprintf("%d replica(s)", n)
		if p.name != "" {
			who += " of the " + p.name + " pool"
		}
	}
	return strings.Join(parts, " and ") + " of " + who
}

// limitParam is the pool's max-num-seqs: the most requests one step held,
// where steps held that many while a request waited at the server; else
// the prior, with the most seen as a bound.
func (f *fitter) limitParam(p *pool, scope string, prior *sim.Options) Param {
	pr := Param{Key: scope + "max-num-seqs"}
	b := p.limit.maxBatch
	decoding := 0
	for _, g := range p.groups {
		decoding = max(decoding, g.maxDecoding)
	}
	running, held := metricsLimit(f.samples, p.name)
	switch {
	case b > 0 && p.limit.waited >= 3:
		pr.Value, pr.Fitted = strconv.Itoa(b), true
		pr.From = fmt.Sprintf("%d steps held %d requests while another waited at the server", p.limit.waited, b)
	case running > 0 && held >= 2:
		pr.Value, pr.Fitted = strconv.Itoa(running), true
		pr.From = fmt.Sprintf("the server's metrics: %d samples had %d requests running while others waited", held, running)
	default:
		seen := max(b, decoding, running)
		pr.Value = strconv.Itoa(max(prior.MaxNumSeqs, seen))
		pr.From = fmt.Sprintf("prior: the batch was never seen full while requests waited (at most %d requests at once)", seen)
		if p.name == "prefill" {
			pr.From = "prior: a prefill replica's batch is not seen in chunks"
		}
	}
	return pr
}

// metricsPreemptions is the preemptions the pooled metrics series counted.
func metricsPreemptions(samples []traces.MetricsSample) int64 {
	n := int64(0)
	for i := range samples {
		if s := &samples[i]; s.Instance == "" && s.Preemptions > 0 {
			n += s.Preemptions
		}
	}
	return n
}

// metricsLimit reads the batch limit from the server's metrics series: the
// most requests running in any sample (of the pool's instances, or the
// pooled rows), and how many samples held that many while requests
// waited and the KV cache had room (a full cache holds the batch below
// its limit).
func metricsLimit(samples []traces.MetricsSample, pool string) (running int, held int64) {
	perInstance := slices.ContainsFunc(samples, func(s traces.MetricsSample) bool { return s.Instance != "" })
	use := func(s *traces.MetricsSample) bool {
		if s.ScrapeError != "" || s.Running < 0 {
			return false
		}
		if !perInstance {
			return true
		}
		return s.Instance != "" && (pool == "" || s.Role == pool || s.Role == "")
	}
	for i := range samples {
		if use(&samples[i]) {
			running = max(running, int(samples[i].Running))
		}
	}
	for i := range samples {
		s := &samples[i]
		if use(s) && int(s.Running) == running && s.Waiting > 0 && s.KVCacheUsage < 0.9 {
			held++
		}
	}
	return running, held
}

// apply sets configuration keys on o, scoped keys as fleet overrides.
func (f *fitter) apply(o *sim.Options, pool string, vals []string) {
	if pool == "" {
		if err := sim.ApplyConfig(o, strings.Join(vals, ",")); err != nil {
			f.notes = append(f.notes, "could not set "+strings.Join(vals, ",")+": "+err.Error())
		}
		return
	}
	o.Fleet.Overrides = append(o.Fleet.Overrides, vals...)
}

// kvTransfer fits a disaggregated fleet's KV pull: a fixed latency plus a
// time per token, from the server's transfer times.
func (f *fitter) kvTransfer(o *sim.Options) []Param {
	if !o.Disaggregated() {
		return nil
	}
	prior := [nFeat]float64{featFixed: float64(o.Fleet.KVTransferLatency), featPrefill: float64(o.Fleet.KVTransferPerToken)}
	est := regress(f.kv.obs, prior)
	from := func(j int) string {
		if est.fit[j] {
			return fmt.Sprintf("%d KV pulls' server times (±%.1f %%)", f.kv.seen, 100*est.se[j]/max(est.theta[j], 1))
		}
		return "prior: " + orNone(est.why[j], "no KV pull time reported")
	}
	o.Fleet.KVTransferLatency, o.Fleet.KVTransferPerToken = dur(est.theta[featFixed]), dur(est.theta[featPrefill])
	return []Param{
		{Key: "kv-transfer-latency", Value: fmtDur(o.Fleet.KVTransferLatency), Fitted: est.fit[featFixed], From: from(featFixed)},
		{Key: "kv-transfer-per-token", Value: fmtDur(o.Fleet.KVTransferPerToken), Fitted: est.fit[featPrefill], From: from(featPrefill)},
	}
}

// prefixCaching is whether the server caches prefixes: requests that
// share a prefix with others had cached prompt tokens, or never did.
func (f *fitter) prefixCaching(o *sim.Options) Param {
	c := f.counts
	pr := Param{Key: "prefix-caching"}
	switch {
	case c.sharedHits > 0:
		o.DisablePrefixCaching, pr.Fitted = false, true
		pr.From = fmt.Sprintf("%d of %d requests sharing a prefix had cached prompt tokens", c.sharedHits, c.shared)
	case c.shared >= 20:
		o.DisablePrefixCaching, pr.Fitted = true, true
		pr.From = fmt.Sprintf("none of %d requests sharing a prefix had a cached prompt token", c.shared)
	case c.sharing == 0:
		pr.From = "prior: no request shared a prefix with others"
	default:
		pr.From = "prior: the server reported no cached tokens for requests sharing a prefix"
	}
	pr.Value = strconv.FormatBool(!o.DisablePrefixCaching)
	return pr
}

// dataNotes says what the rows lacked.
func (f *fitter) dataNotes() {
	c := f.counts
	if c.ok == 0 {
		f.notes = append(f.notes, "no successful request with a first token: nothing was fitted, every parameter is the prior's")
		return
	}
	if c.chunked == 0 {
		f.notes = append(f.notes, "no row has per-chunk times (a results file of a streaming replay has them): no engine step was observed between chunks")
		if c.whole > 0 {
			f.notes = append(f.notes, "the step costs come from whole requests' decodes, each request assumed to advance at a steady pace: coarser than chunk times")
		}
	}
	if c.coarse > 0 {
		f.notes = append(f.notes, fmt.Sprintf("%d rows stream several tokens per chunk (a stream interval over 1): their chunks were not used as steps", c.coarse))
	}
	if c.cached == 0 && c.chunked > 0 {
		f.notes = append(f.notes, "the server reported no cached prompt tokens: every prompt token was counted as computed")
	}
	if c.timed == 0 {
		f.notes = append(f.notes, "no per-request server timings (vLLM's --enable-per-request-metrics): a prefill pool's steps were not observed")
	}
	if pre := metricsPreemptions(f.samples); pre > 0 || c.preempted > 0 {
		f.notes = append(f.notes, fmt.Sprintf("the server preempted requests (%d in its metrics, %d rows say so): the KV cache filled, and a preempted request's recomputation is not in the step observations, so the step costs may come out high", pre, c.preempted))
	}
	if c.late > 0 {
		f.notes = append(f.notes, fmt.Sprintf("%d rows came further out of send order than the reorder window and were left out", c.late))
	}
	if len(f.inputs) == 1 {
		f.notes = append(f.notes, "one load level: the batch-size terms rest on the batches this run happened to form; a second run at another load identifies them better")
	}
}

func orNone(s, none string) string {
	if s == "" {
		return none
	}
	return s
}

// fmtDur says a duration as the configuration keys take it ("40us").
func fmtDur(d time.Duration) string { return strings.Replace(d.String(), "µs", "us", 1) }
