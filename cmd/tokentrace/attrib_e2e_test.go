package main

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/analyze"
	"github.com/tokentrace/tokentrace/replay"
	"github.com/tokentrace/tokentrace/sim"
	"github.com/tokentrace/tokentrace/traces"
)

// The attribution accuracy tests: three workloads
// replayed in real time against the built-in simulator, each designed so a
// different cause dominates the tail, analyzed twice — with the simulator's
// per-request server timings (must equal the simulator's truth within 1 ms
// per request) and with them hidden (the estimator: tail shares within
// 10 percentage points of the truth's, the per-request dominant cause right
// for at least 90 % of the tail requests).
//
// The truth per request is the simulator's own queue/prefill/decode
// (joined on the X-Request-Id), the replay's client lateness
// (sent − scheduled), and other = client E2E − (queue + prefill + decode):
// the network and HTTP time between the client and the engine.

// Bars of the "Must show".
const (
	attribExactTolNs   = int64(time.Millisecond)
	attribShareTolPP   = 10.0
	attribDominantRate = 0.90
	attribTailPct      = 90 // p90: 9–10 tail requests per scenario
	// attribOtherMax is the share of the tail's latency spent between
	// client and engine (network, HTTP, request parsing) above which the
	// test process counts as CPU-starved: ~1 % on an idle machine, ~6 %
	// under -race.
	attribOtherMax = 0.08
	// attribLatenessMax is the same for client lateness (exactly known to
	// both sides, but a late client changes the scenario's arrivals).
	attribLatenessMax = 0.05
	// attribMaxSlowdown is how much slower than its model the simulator
	// may run (timer overshoot on a loaded machine, measured on the
	// warm-up requests) before the estimated half is not judged: the
	// scenario's dynamics are then no longer the designed ones.
	attribMaxSlowdown = 1.25
	attribWarmupN     = 24
)

// attribScenario is one workload and the cause that should dominate its tail.
type attribScenario struct {
	name string
	// what the scenario is, in a sentence.
	doc string
	// sim adjusts the simulator (on top of the default preset, 512-token budget).
	sim func(*sim.Options)
	// bursts follow the warm-up (attribWarmup).
	bursts       []attribBurst
	wantDominant string
}

// attribBurst is n requests after the warm-up, the i-th arriving at
// i·spacing plus a uniform draw from [0, jitter), with an input length
// drawn from in (log-uniformly with logIn, else uniformly) and an output
// length uniformly from out.
type attribBurst struct {
	n               int
	spacing, jitter time.Duration
	in, out         [2]int
	logIn           bool
}

// trace builds sc's records (arrival, input and output tokens only): the
// warm-up, then the bursts.
func (sc attribScenario) trace(rng *rand.Rand) []traces.Record {
	recs, t0 := attribWarmup(rng)
	for _, b := range sc.bursts {
		for i := range b.n {
			at := t0 + time.Duration(i)*b.spacing + time.Duration(rng.Int64N(int64(b.jitter)))
			in := uniform
			if b.logIn {
				in = logUniform
			}
			recs = append(recs, attribRequest(at, in(rng, b.in[0], b.in[1]), uniform(rng, b.out[0], b.out[1])))
		}
	}
	return recs
}

// logUniform draws an integer log-uniformly from [lo, hi].
func logUniform(rng *rand.Rand, lo, hi int) int32 {
	return int32(math.Round(math.Exp(math.Log(float64(lo)) + rng.Float64()*(math.Log(float64(hi))-math.Log(float64(lo))))))
}

// uniform draws an integer uniformly from [lo, hi].
func uniform(rng *rand.Rand, lo, hi int) int32 { return int32(lo + rng.IntN(hi-lo+1)) }

// attribRequest is a request arriving at at, with in prompt and out output
// tokens.
func attribRequest(at time.Duration, in, out int32) traces.Record {
	r := traces.NewRecord()
	r.ArrivalNs = int64(at)
	r.InputTokens, r.OutputTokens = in, out
	return r
}

// attribWarmup is the light-load start every scenario shares (a run that is
// not overloaded from its first second): 24 requests 100 ms apart with
// prompts of 16–1024 tokens and short outputs. The estimator fits its
// prefill model on the least-loaded requests, which these mostly are.
func attribWarmup(rng *rand.Rand) (recs []traces.Record, end time.Duration) {
	const n, gap = attribWarmupN, 100 * time.Millisecond
	for i := range n {
		recs = append(recs, attribRequest(time.Duration(i)*gap, logUniform(rng, 16, 1024), uniform(rng, 4, 12)))
	}
	return recs, n * gap
}

// The scenarios run on the simulator's default step-time model
// (llama3-8b-h100: 6 ms per step, 40 µs per prefill token, 45 µs per
// decoding sequence, 45 ns per context token read) with a 512-token step
// budget (chunked prefill) and the sequence cap changed per scenario.
// Engine steps of several milliseconds keep the CPU jitter of a busy test
// machine (-race, other tests), which lands in "other" (client ↔ engine
// time, invisible to a client-side estimator), small against the modelled
// times.
func attribScenarios() []attribScenario {
	return []attribScenario{{
		name:         "queueing-burst",
		doc:          "64 requests within 150 ms on a 16-sequence engine: the last waves wait for a free slot",
		sim:          func(o *sim.Options) { o.MaxNumSeqs = 16 },
		bursts:       []attribBurst{{n: 64, jitter: 150 * time.Millisecond, in: [2]int{64, 512}, logIn: true, out: [2]int{16, 32}}},
		wantDominant: "queue",
	}, {
		name: "long-prompt-prefill",
		doc: "8 prompts of 1500–1800 tokens among 60 short ones over 3 s, chunked prefill with a " +
			"256-token budget at 80 µs per prompt token: the long prompts' prefill dominates the tail",
		sim: func(o *sim.Options) {
			o.MaxNumSeqs, o.MaxNumBatchedTokens = 64, 256
			o.PrefillPerToken = 80 * time.Microsecond
		},
		bursts: []attribBurst{
			{n: 60, jitter: 3 * time.Second, in: [2]int{32, 256}, logIn: true, out: [2]int{2, 6}},
			{n: 8, spacing: 375 * time.Millisecond, jitter: 20 * time.Millisecond, in: [2]int{1500, 1800}, out: [2]int{2, 6}},
		},
		wantDominant: "prefill",
	}, {
		name: "decode-saturation",
		doc: "64 requests with 150–250 output tokens within 300 ms on a 128-sequence engine: " +
			"the batch's per-sequence cost and attention reads inflate every step (TPOT)",
		sim:          func(o *sim.Options) { o.MaxNumSeqs = 128 },
		bursts:       []attribBurst{{n: 64, jitter: 300 * time.Millisecond, in: [2]int{128, 512}, logIn: true, out: [2]int{150, 250}}},
		wantDominant: "decode",
	}}
}

// attribResult is one scenario's measured accuracy.
type attribResult struct {
	requests, tail       int
	exactMaxErrMs        float64
	truthShare, estShare [5]float64
	shareErrPP           float64
	truthDominant        string
	estDominant          string
	agree                int
	prefillModel         analyze.PrefillModel
	// The same with the truth's "other" (client ↔ engine time: network,
	// HTTP, request parsing) counted as queueing, which is where a
	// client-side estimator necessarily puts it (queue = TTFT − prefill).
	foldedErrPP float64
	foldedAgree int
}

// componentIdx maps analyze.ComponentNames to indices.
func componentIdx(name string) int { return slices.Index(analyze.ComponentNames[:], name) }

// attribEstimate is ra's split in the order of analyze.ComponentNames,
// negative parts as 0 (as the truth has none).
func attribEstimate(ra analyze.RequestAttribution) [5]float64 {
	ec := [5]float64{float64(ra.Lateness), float64(ra.Queue), float64(ra.Prefill), float64(ra.Decode), float64(ra.Other)}
	for k := range ec {
		ec[k] = max(ec[k], 0)
	}
	return ec
}

// components is a request's time split by component: the five of a single
// engine, or the seven of a fleet (analyze.ComponentNames).
type components interface{ [5]float64 | [7]float64 }

// attribArgmax is the index of c's largest component (the first of equals).
func attribArgmax[C components](c C) int {
	best := 0
	for i := 1; i < len(c); i++ {
		if c[i] > c[best] {
			best = i
		}
	}
	return best
}

// attribRun is one scenario replayed: the results and the simulator's truth.
type attribRun struct {
	sc    attribScenario
	n     int
	res   *replay.Result
	truth map[string]traces.Record
	sent  map[string]traces.Record
	// slowdown is the simulator's real step time against its model on the
	// warm-up requests (median of truth/model prefill and decode times).
	slowdown float64
}

// replayAttribScenario replays sc in real time against a fresh simulator
// with per-request metrics on.
func replayAttribScenario(t *testing.T, sc attribScenario) *attribRun {
	t.Helper()
	ctx := context.Background()
	recs := sc.trace(rand.New(rand.NewPCG(8, uint64(len(sc.name)))))
	slices.SortStableFunc(recs, func(a, b traces.Record) int { return int(a.ArrivalNs - b.ArrivalNs) })
	for i := range recs {
		recs[i].Seq = int64(i)
	}
	so := sim.DefaultOptions()
	so.MaxNumBatchedTokens = 512 // chunked prefill with a small budget
	so.PerRequestMetrics = true
	sc.sim(&so)
	srv, err := sim.Start(ctx, so)
	if err != nil {
		t.Fatalf("start sim: %v", err)
	}
	defer srv.Close()
	ro := replay.DefaultOptions()
	ro.NoPreflight = true // the server's truth maps one to one onto the trace
	ro.URL = srv.URL
	ro.Run = sc.name
	res, err := replay.Run(ctx, recs, traces.NewMeta("attrib-test"), ro)
	if err != nil {
		t.Fatalf("replay: %v", err)
	}
	srv.Close()
	run := &attribRun{sc: sc, n: len(recs), res: res, truth: map[string]traces.Record{}, sent: map[string]traces.Record{}}
	for _, tr := range srv.Truth() {
		run.truth[tr.RequestID] = tr
	}
	for _, r := range res.Records {
		if r.Status != traces.StatusOK {
			t.Fatalf("request %s: status %s (%s)", r.RequestID, r.Status, r.Error)
		}
		run.sent[r.RequestID] = r
	}
	if len(res.Records) != len(recs) || len(run.truth) != len(recs) {
		t.Fatalf("sent %d, server saw %d, want %d", len(res.Records), len(run.truth), len(recs))
	}
	// Modelled light-load times: prefill = chunks·StepFixed + tokens·PrefillPerToken,
	// decode = (n−1)·(StepFixed + DecodePerSeq); attention reads are ignored (< 5 %).
	var ratios []float64
	for _, tr := range srv.Truth() {
		if tr.Seq >= attribWarmupN {
			continue
		}
		u := int64(tr.InputTokens)
		chunks := (u + int64(so.MaxNumBatchedTokens) - 1) / int64(so.MaxNumBatchedTokens)
		pm := float64(chunks*int64(so.StepFixed) + u*int64(so.PrefillPerToken))
		ratios = append(ratios, float64(tr.ServerPrefillNs)/pm)
		if tr.OutputTokens > 1 {
			dm := float64(int64(tr.OutputTokens-1) * int64(so.StepFixed+so.DecodePerSeq))
			ratios = append(ratios, float64(tr.ServerDecodeNs)/dm)
		}
	}
	slices.Sort(ratios)
	run.slowdown = ratios[len(ratios)/2]
	return run
}

// starved says why the run is not the designed scenario (the simulator
// running much slower than its model, the replay client sending late, or
// the HTTP path between them taking a large share of the time: signs of a
// CPU-starved test process), or "" when it is.
func (run *attribRun) starved(r attribResult) string {
	switch {
	case r.truthShare[componentIdx("other")] > attribOtherMax:
		return fmt.Sprintf("client ↔ engine time was %.1f%% of the tail's latency (> %.0f%%; ~1%% on an idle machine)",
			r.truthShare[componentIdx("other")]*100, attribOtherMax*100)
	case run.slowdown > attribMaxSlowdown:
		return fmt.Sprintf("the simulator ran %.2f× slower than its model (> %.2f×)", run.slowdown, attribMaxSlowdown)
	case r.truthShare[componentIdx("lateness")] > attribLatenessMax:
		return fmt.Sprintf("the replay client sent late: lateness was %.1f%% of the tail's latency (> %.0f%%)",
			r.truthShare[componentIdx("lateness")]*100, attribLatenessMax*100)
	}
	return ""
}

// truthOf is the true split of request id's scheduled latency (E2E, or
// TTFT when ttft is set: no decode, and other = TTFT − queue − prefill).
func (run *attribRun) truthOf(t *testing.T, id string, ttft bool) [5]float64 {
	tr, ok := run.truth[id]
	r := run.sent[id]
	if !ok || tr.ServerQueueNs < 0 || tr.ServerPrefillNs < 0 || tr.ServerDecodeNs < 0 {
		t.Fatalf("request %s: no truth row", id)
	}
	var c [5]float64
	c[componentIdx("lateness")] = float64(r.SentNs - r.ScheduledNs)
	c[componentIdx("queue")] = float64(tr.ServerQueueNs)
	c[componentIdx("prefill")] = float64(tr.ServerPrefillNs)
	if ttft {
		c[componentIdx("other")] = float64(r.FirstTokenNs-r.SentNs) - float64(tr.ServerQueueNs+tr.ServerPrefillNs)
	} else {
		c[componentIdx("decode")] = float64(tr.ServerDecodeNs)
		c[componentIdx("other")] = float64(r.LastTokenNs-r.SentNs) - float64(tr.ServerQueueNs+tr.ServerPrefillNs+tr.ServerDecodeNs)
	}
	for k := range c {
		c[k] = max(c[k], 0)
	}
	return c
}

// analyze analyzes the run's results with ao and wants its attribution
// from source (server timings, or estimated without them).
func (run *attribRun) analyze(t *testing.T, ao analyze.Options, source string) *analyze.Report {
	t.Helper()
	rep, err := analyze.Analyze(context.Background(), run.res.Records, ao)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Attribution.Source != source {
		t.Errorf("%s analysis: attribution source %q", source, rep.Attribution.Source)
	}
	return rep
}

// evaluate measures the exact and the estimated attribution of the tail
// (pct, metric) against the truth. It reports per-request mismatches of the
// exact analysis with t.Errorf; the estimator's accuracy is returned.
func (run *attribRun) evaluate(t *testing.T, pct float64, metric string, verbose bool) attribResult {
	t.Helper()
	isTTFT := metric == analyze.MetricTTFT
	var out attribResult
	out.requests = run.n
	ao := analyze.DefaultOptions()
	ao.TailPercentile = pct
	ao.TailMetric = metric
	ao.KeepRequests = true

	// (a) exact: server timings.
	exact := run.analyze(t, ao, analyze.SourceServer)
	exactTail := map[string]bool{}
	n := 0
	err := eachRequest(exact, func(ra analyze.RequestAttribution) error {
		n++
		tr, ok := run.truth[ra.RequestID]
		if !ok {
			return fmt.Errorf("request %q: not in the truth", ra.RequestID)
		}
		if ra.Source != analyze.SourceServer {
			return fmt.Errorf("request %s: source %q, want server", ra.RequestID, ra.Source)
		}
		r := run.sent[ra.RequestID]
		checks := []struct {
			what      string
			got, want int64
		}{
			{"queue", ra.Queue, tr.ServerQueueNs},
			{"prefill", ra.Prefill, tr.ServerPrefillNs},
			{"lateness", ra.Lateness, max(r.SentNs-r.ScheduledNs, 0)},
		}
		if !isTTFT {
			checks = append(checks, struct {
				what      string
				got, want int64
			}{"decode", ra.Decode, tr.ServerDecodeNs})
		}
		for _, d := range checks {
			e := d.got - d.want
			if e < 0 {
				e = -e
			}
			out.exactMaxErrMs = max(out.exactMaxErrMs, float64(e)/1e6)
			if e > attribExactTolNs {
				t.Errorf("request %s: %s %v, truth %v", ra.RequestID, d.what, time.Duration(d.got), time.Duration(d.want))
			}
		}
		if ra.Tail {
			exactTail[ra.RequestID] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n != run.n {
		t.Errorf("exact analysis attributed %d requests, want %d", n, run.n)
	}

	// (b) estimated: server timings hidden.
	ao.IgnoreServerTimings = true
	est := run.analyze(t, ao, analyze.SourceEstimated)
	out.prefillModel = est.Attribution.Prefill
	var tally tailTally[[5]float64]
	var lines []string
	err = eachRequest(est, func(ra analyze.RequestAttribution) error {
		if ra.Tail != exactTail[ra.RequestID] {
			return fmt.Errorf("request %s: in the tail of one analysis but not the other", ra.RequestID)
		}
		if !ra.Tail {
			return nil
		}
		tc := run.truthOf(t, ra.RequestID, isTTFT)
		ec := attribEstimate(ra)
		ok := tally.add(tc, ec)
		if attribArgmax(foldOther(tc)) == attribArgmax(foldOther(ec)) {
			out.foldedAgree++
		}
		r := run.sent[ra.RequestID]
		lines = append(lines, fmt.Sprintf("  %-24s in=%4d out=%3d truth[%s] est[%s] %v", ra.RequestID, r.InputTokens, r.OutputTokens,
			fmtComponents(tc), fmtComponents(ec), ok))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sumT, sumE := tally.truth, tally.est
	out.tail, out.agree = tally.n, tally.agree
	out.truthShare, out.estShare = toShares(sumT), toShares(sumE)
	for k := range out.truthShare {
		out.shareErrPP = max(out.shareErrPP, math.Abs(out.truthShare[k]-out.estShare[k])*100)
	}
	ft, fe := toShares(foldOther(sumT)), toShares(foldOther(sumE))
	for k := range ft {
		out.foldedErrPP = max(out.foldedErrPP, math.Abs(ft[k]-fe[k])*100)
	}
	out.truthDominant = analyze.ComponentNames[attribArgmax(sumT)]
	out.estDominant = est.Attribution.Dominant
	// The report's own tail shares must be the ones summed here.
	rs := est.Attribution.Share.Array()
	for k := range out.estShare { // a single engine: the fleet's components are 0
		if math.Abs(rs[k]-out.estShare[k]) > 1e-6 {
			t.Errorf("report's %s share %.4f, per-request sum %.4f", analyze.ComponentNames[k], rs[k], out.estShare[k])
		}
	}
	if verbose {
		t.Logf("%s: %s\n  prefill model %.2f ms + %.2f µs/token (fitted on %d, max in flight %d), unloaded TPOT %.2f ms\n  tail requests (p%g %s; components in ms):\n%s",
			run.sc.name, run.sc.doc, out.prefillModel.FixedMs, out.prefillModel.PerTokenUs, out.prefillModel.FittedOn,
			out.prefillModel.MaxInFlight, out.prefillModel.UnloadedTPOTMs, pct, metric, strings.Join(lines, "\n"))
	}
	rate := float64(out.agree) / float64(max(out.tail, 1))
	t.Logf("%s, p%g %s tail: %d requests, %d in the tail; exact: max error %.6f ms; estimated: truth shares [%s], estimated [%s], max error %.1f pp; dominant truth %s, estimated %s; per-request dominant right %d/%d (%.0f%%); with other as queue: max error %.1f pp, dominant right %d/%d",
		run.sc.name, pct, metric, out.requests, out.tail, out.exactMaxErrMs, fmtShares(out.truthShare), fmtShares(out.estShare),
		out.shareErrPP, out.truthDominant, out.estDominant, out.agree, out.tail, rate*100, out.foldedErrPP, out.foldedAgree, out.tail)
	return out
}

// foldOther moves the "other" component into "queue".
func foldOther(c [5]float64) [5]float64 {
	c[componentIdx("queue")] += c[componentIdx("other")]
	c[componentIdx("other")] = 0
	return c
}

// toShares is each component's share of sum's total (none of a zero total).
func toShares[C components](sum C) (s C) {
	var tot float64
	for k := 0; k < len(sum); k++ {
		tot += sum[k]
	}
	for k := 0; k < len(sum); k++ {
		if tot > 0 {
			s[k] = sum[k] / tot
		}
	}
	return s
}

// tailTally sums tail requests' truth and estimate component by component
// and counts those whose dominant component the estimate names.
type tailTally[C components] struct {
	truth, est C
	n, agree   int
}

// add tallies one tail request, truth tc and estimate ec; it reports
// whether the estimate's dominant component is the truth's.
func (s *tailTally[C]) add(tc, ec C) bool {
	s.n++
	for k := 0; k < len(tc); k++ {
		s.truth[k] += tc[k]
		s.est[k] += ec[k]
	}
	ok := attribArgmax(tc) == attribArgmax(ec)
	if ok {
		s.agree++
	}
	return ok
}

func fmtComponents(c [5]float64) string {
	parts := make([]string, len(c))
	for k, v := range c {
		parts[k] = fmt.Sprintf("%s=%.1f", analyze.ComponentNames[k][:1], v/1e6)
	}
	return strings.Join(parts, " ")
}

func fmtShares(s [5]float64) string {
	parts := make([]string, len(s))
	for k, v := range s {
		parts[k] = fmt.Sprintf("%s %.1f", analyze.ComponentNames[k], v*100)
	}
	return strings.Join(parts, ", ")
}

// TestAttributionAccuracyAgainstSimTruth replays the three scenarios in real
// time and checks the analyzer's attribution against the simulator's truth.
// Asserted on the p90 E2E tail (about ten requests per scenario): exact
// components within 1 ms for every request; estimated tail shares within
// 10 pp and the per-request dominant cause right for ≥ 90 % of the tail,
// both against the raw truth and with "other" counted as queueing. The p90
// TTFT and p99 E2E tails are measured and logged (go test -v).
//
// A real-time scenario keeps its designed dynamics only if the test process
// gets the CPU: when the run looks starved (see starved) it is replayed
// once more, and if it is starved again the estimated half is logged but
// not judged (t.Skip, saying why); the exact half is always judged.
func TestAttributionAccuracyAgainstSimTruth(t *testing.T) {
	if testing.Short() {
		t.Skip("real-time replays against the simulator (~15 s); skipped with -short")
	}
	for _, sc := range attribScenarios() {
		t.Run(sc.name, func(t *testing.T) {
			run := replayAttribScenario(t, sc)
			// The exact half is asserted inside evaluate, whatever the load.
			r := run.evaluate(t, attribTailPct, analyze.MetricE2E, true)
			if why := run.starved(r); why != "" {
				t.Logf("%s: replaying again", why)
				run = replayAttribScenario(t, sc)
				r = run.evaluate(t, attribTailPct, analyze.MetricE2E, true)
			}
			// Other views, measured and logged.
			run.evaluate(t, attribTailPct, analyze.MetricTTFT, testing.Verbose())
			run.evaluate(t, 99, analyze.MetricE2E, false)
			if why := run.starved(r); why != "" {
				t.Skipf("exact attribution checked; estimated accuracy measured (logged above) but NOT judged: %s, twice: "+
					"this machine is too loaded for a real-time scenario to keep its designed dynamics", why)
			}
			t.Logf("simulator speed: %.2f× its model's time on the warm-up requests; replay lateness p99 %v",
				run.slowdown, run.res.Summary.LatenessP99)
			if r.tail < 5 {
				t.Fatalf("only %d tail requests", r.tail)
			}
			if r.truthDominant != sc.wantDominant {
				t.Errorf("scenario design: the truth's dominant tail cause is %s, want %s", r.truthDominant, sc.wantDominant)
			}
			// The report's dominant cause must be the truth's unless the
			// estimate cannot tell them apart: when the truth's dominant
			// component is within half the share tolerance of the
			// estimate's top one, the call is a tie at the estimator's
			// resolution (seen: queue 38.6 % vs prefill 38.0 % with truth
			// prefill 43.9 %, every share within 6.1 pp and every tail
			// request's own dominant cause right). The shares and the
			// per-request verdicts below are asserted either way.
			if r.estDominant != r.truthDominant {
				gap := 100 * (r.estShare[componentIdx(r.estDominant)] - r.estShare[componentIdx(r.truthDominant)])
				if gap > attribShareTolPP/2 {
					t.Errorf("estimated dominant cause %s, truth %s (%.1f pp apart in the estimate)", r.estDominant, r.truthDominant, gap)
				} else {
					t.Logf("estimated dominant cause %s, truth %s: a tie within %.1f pp in the estimate", r.estDominant, r.truthDominant, gap)
				}
			}
			// The estimator has no view of the client ↔ engine time
			// ("other": network, HTTP, request parsing before the engine
			// stamps the arrival); by its definition that time is part of
			// queue = TTFT − prefill. Both views are checked: against the
			// raw truth, and with "other" counted as queueing.
			checkBars := func(what string, errPP float64, agree int) {
				rate := float64(agree) / float64(r.tail)
				if errPP > attribShareTolPP {
					t.Errorf("%s: estimated tail shares off by %.1f pp (> %.0f)", what, errPP, attribShareTolPP)
				}
				if rate < attribDominantRate {
					t.Errorf("%s: per-request dominant cause right for %d/%d tail requests (%.0f%% < %.0f%%)",
						what, agree, r.tail, rate*100, attribDominantRate*100)
				}
			}
			checkBars("raw truth", r.shareErrPP, r.agree)
			checkBars("other counted as queue", r.foldedErrPP, r.foldedAgree)
		})
	}
}

// TestITLPerTokenAgainstSimTruth replays one request at a time against the
// simulator at stream intervals 1, 4 and 16, without continuous usage
// stats, so the client sees chunks of several tokens and only the usage
// total. analyze's per-token ITL (estimated from that total) must match
// the simulator's own per-token decode time within 1 ms, and say it is an
// estimate where chunks carry several tokens.
func TestITLPerTokenAgainstSimTruth(t *testing.T) {
	for _, n := range []int{1, 4, 16} {
		t.Run(fmt.Sprintf("stream-interval-%d", n), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			srv := startSimServer(t, "stream-interval="+strconv.Itoa(n), nil)
			// One request in flight at a time: 33 output tokens take about
			// 0.2 s on the default step model; arrivals 300 ms apart.
			recs := evenRecords(12, 300*time.Millisecond, 64, 33)
			ro := replay.DefaultOptions()
			ro.URL = srv.URL
			ro.Run = "itl"
			res, err := replay.Run(ctx, recs, traces.NewMeta("itl-test"), ro)
			if err != nil {
				t.Fatal(err)
			}
			srv.Close()

			// Truth: the engine's decode time spread over the tokens after
			// the first.
			var truth []float64
			for _, tr := range srv.Truth() {
				if tr.ServerDecodeNs > 0 && tr.ServerOutputTokens > 1 {
					truth = append(truth, float64(tr.ServerDecodeNs)/float64(tr.ServerOutputTokens-1)/1e6)
				}
			}
			if len(truth) != len(recs) {
				t.Fatalf("simulator truth for %d of %d requests", len(truth), len(recs))
			}
			slices.Sort(truth)
			want := traces.Quantile(truth, 0.5)

			// Without per-request metrics the results carry the client's
			// view only: chunk arrival times and the usage total.
			for i := range res.Records {
				r := &res.Records[i]
				if r.Status != traces.StatusOK {
					t.Fatalf("request %d: %s (%s)", r.Seq, r.Status, r.Error)
				}
				if n > 1 && len(r.ChunkTokens) > 0 {
					t.Fatalf("request %d: chunk token counts reported without continuous usage", r.Seq)
				}
			}
			rep, err := analyze.Analyze(ctx, res.Records, analyze.DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			got := rep.ITLPerToken.P50
			t.Logf("stream interval %d: per-token ITL p50 %.3f ms (estimated for %d requests), truth %.3f ms; per-chunk ITL p50 %.3f ms",
				n, got, rep.ITLPerTokenEstimated, want, rep.ITL.P50)
			if rep.ITLPerToken.Count == 0 || math.Abs(got-want) > 1 {
				t.Errorf("per-token ITL p50 %.3f ms, simulator truth %.3f ms: off by more than 1 ms", got, want)
			}
			if n > 1 && rep.ITLPerTokenEstimated != len(recs) {
				t.Errorf("%d of %d requests marked estimated", rep.ITLPerTokenEstimated, len(recs))
			}
			if th := rep.Throughput; th.PeakOutputTokensPerS < th.OutputTokensPerS {
				t.Errorf("peak %.1f tok/s below the mean %.1f", th.PeakOutputTokensPerS, th.OutputTokensPerS)
			}
		})
	}
}

// eachRequest calls fn with every request of rep.PerRequest, stopping at
// the first error (the stream's or fn's).
func eachRequest(rep *analyze.Report, fn func(analyze.RequestAttribution) error) error {
	for ra, err := range rep.PerRequest() {
		if err == nil {
			err = fn(ra)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
