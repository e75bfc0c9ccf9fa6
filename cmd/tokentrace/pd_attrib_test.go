package main

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/analyze"
	"github.com/tokentrace/tokentrace/traces"
)

// The prefill/decode attribution tests: workloads simulated offline
// through a prefill/decode fleet (sim.Simulate), whose truth splits every
// request's TTFT into the prefill side's queue and prefill, the KV
// transfer and the wait on the decode replica. The results are given to
// analyze as a replay against such a fleet sees them: the client's
// timings, the replica and prefill-replica columns, and per request only
// what the decode replica reports (vLLM's per-request metrics come from
// the engine that streams the answer: its queue time, which holds the KV
// pull, and its decode time; otlp.DecodeSide), or nothing at all; with the
// fleet's scraped per-pod series (built from the truth as vLLM's
// histograms and gauges would count it: pdSeries) or without.

// pdWorkload is a fleet and its requests.
type pdWorkload struct {
	name, doc string
	spec      string
	recs      func(t *testing.T) []traces.Record
	// blockSize is the block size of the records' prefix blocks (0: 16).
	blockSize int
	// kvLargest says the truth's transfer share of the TTFT tail is the
	// largest: the diagnosis must name the KV transfer then, and only
	// then.
	kvLargest bool
}

// pdView is what the results carry per request.
type pdView int

const (
	pdDecodeSide pdView = iota // the decode replica's per-request metrics
	pdNoTimings                // no server timings
	pdJittered                 // decode side, client times 0–2 ms late (a network)
)

func (v pdView) String() string {
	return [...]string{"decode-side timings", "no server timings", "decode side, jittered"}[v]
}

// asSeen is truth row t as a replay sees it under view v (rng jitters).
func asSeen(t traces.Record, v pdView, rng *rand.Rand) traces.Record {
	r := t
	if v == pdJittered {
		// The network between client and fleet, and between its pools:
		// every time the client reads is up to 2 ms late.
		d := rng.Int64N(int64(2 * time.Millisecond))
		r.FirstTokenNs += d
		r.LastTokenNs += d + rng.Int64N(int64(time.Millisecond))
		v = pdDecodeSide
	}
	// The decode replica does not know the prefill side's cache hits.
	r.ServerCachedTokens = traces.NotReported
	r.ServerQueueNs, r.ServerPrefillNs, r.ServerKVTransferNs = traces.NotReported, traces.NotReported, traces.NotReported
	r.ServerPreemptions = traces.NotReported
	if v == pdDecodeSide && t.PrefillReplica != "" && t.ServerDecodeQueueNs >= 0 && t.ServerKVTransferNs >= 0 {
		// vLLM's queue time on the decode replica: from its arrival there
		// to its first scheduling, the pull included.
		r.ServerDecodeQueueNs = t.ServerDecodeQueueNs + t.ServerKVTransferNs
	} else {
		r.ServerDecodeQueueNs, r.ServerDecodeNs = traces.NotReported, traces.NotReported
	}
	return r
}

// pdTTFTTruth is the truth's split of row r's TTFT in the order of
// analyze.ComponentNames.
func pdTTFTTruth(r *traces.Record) [7]float64 {
	c := fleetTruth(r)
	c[componentIdx("decode")] = 0
	return c
}

// pdDecodeStep is the decode replica's step that computes a
// disaggregated request's last prompt token and samples its first token,
// taken as its mean decode step (the truth's prefill holds it, and the
// series' prefill side does not).
func pdDecodeStep(r *traces.Record) int64 {
	if r.OutputTokens > 1 && r.ServerDecodeNs > 0 {
		return r.ServerDecodeNs / int64(r.OutputTokens-1)
	}
	return int64(8 * time.Millisecond)
}

// pdSeries is the fleet's /metrics as a replay's scraper would have read
// it every interval, per pod with its role, from the truth: each pod's
// waiting and running gauges, its requests' queue, prefill and decode
// time means as vLLM's histograms count them (the prefill pod's queue and
// prompt prefill; the decode pod's queue, which holds the pull, and its
// one-step prefill), and the decode pods' NIXL transfer means.
func pdSeries(rows []traces.Record, interval time.Duration) []traces.MetricsSample {
	type side struct {
		pod, role                string
		arrive, sched, end, done int64 // arrival, first scheduled, first token, last token
		queue, prefill, decode   int64
		xfer                     int64 // NIXL transfer (decode side), −1 none
	}
	var sides []side
	var last int64
	for i := range rows {
		r := &rows[i]
		if r.Status != traces.StatusOK || r.PrefillReplica == "" {
			continue
		}
		step := pdDecodeStep(r)
		pEnd := r.ArrivalNs + r.ServerQueueNs + max(r.ServerPrefillNs-step, 0)
		sides = append(sides, side{pod: r.PrefillReplica, role: "prefill", arrive: r.ArrivalNs, sched: r.ArrivalNs + r.ServerQueueNs, end: pEnd, done: pEnd,
			queue: r.ServerQueueNs, prefill: pEnd - r.ArrivalNs - r.ServerQueueNs, xfer: -1})
		sched := r.FirstTokenNs - step
		sides = append(sides, side{pod: r.Replica, role: "decode", arrive: pEnd, sched: sched, end: r.FirstTokenNs, done: r.LastTokenNs,
			queue: sched - pEnd, prefill: step, decode: r.ServerDecodeNs, xfer: r.ServerKVTransferNs})
		last = max(last, r.LastTokenNs)
	}
	pods := map[string]string{}
	for _, s := range sides {
		pods[s.pod] = s.role
	}
	names := make([]string, 0, len(pods))
	for p := range pods {
		names = append(names, p)
	}
	slices.Sort(names)
	var out []traces.MetricsSample
	iv := int64(interval)
	for at := iv; at < last+2*iv; at += iv {
		pooled := traces.NewMetricsSample(at)
		pooled.IntervalNs = iv
		pooled.Waiting, pooled.Running = 0, 0
		var per []traces.MetricsSample
		for _, p := range names {
			s := traces.NewMetricsSample(at)
			s.IntervalNs, s.Instance, s.Role = iv, p, pods[p]
			s.Waiting, s.Running, s.RequestsFinished = 0, 0, 0
			var q, pf, dc, xf, nx int64
			for _, x := range sides {
				if x.pod != p {
					continue
				}
				if x.arrive <= at && at < x.sched {
					s.Waiting++
				}
				if x.sched <= at && at < x.done {
					s.Running++
				}
				if x.done > at-iv && x.done <= at {
					s.RequestsFinished++
					q, pf, dc = q+x.queue, pf+x.prefill, dc+x.decode
				}
				if x.xfer >= 0 && x.end-x.prefill > at-iv && x.end-x.prefill <= at {
					xf += x.xfer
					nx++
				}
			}
			if n := s.RequestsFinished; n > 0 {
				s.QueueTimeMeanNs, s.PrefillTimeMeanNs, s.DecodeTimeMeanNs = q/n, pf/n, dc/n
			}
			if pods[p] == "decode" {
				s.KVTransfers = nx
				if nx > 0 {
					s.KVTransferTimeMeanNs = xf / nx
				}
			}
			pooled.Waiting += s.Waiting
			pooled.Running += s.Running
			per = append(per, s)
		}
		out = append(out, pooled)
		out = append(out, per...)
	}
	return out
}

// pdShares is the TTFT tail's shares per component, estimated and true,
// over the requests the report puts in its tail.
type pdShares struct {
	n                 int
	truth, est        [7]float64
	worstPP           float64
	worst             string
	estDom, truthDom  string
	diagnosis         string
	namesKV, crossDis bool
}

func pdCompare(t *testing.T, rep *analyze.Report, byID map[string]*traces.Record) pdShares {
	t.Helper()
	var tally tailTally[[7]float64]
	var s pdShares
	err := eachRequest(rep, func(ra analyze.RequestAttribution) error {
		if !ra.Tail {
			return nil
		}
		tr := byID[ra.RequestID]
		if tr == nil {
			return fmt.Errorf("request %s: no truth", ra.RequestID)
		}
		ec := fleetSplit(ra)
		ec[componentIdx("decode")] = 0
		tally.add(pdTTFTTruth(tr), ec)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	s.n = tally.n
	s.truth, s.est = toShares(tally.truth), toShares(tally.est)
	for k := range s.est {
		if d := 100 * math.Abs(s.est[k]-s.truth[k]); d > s.worstPP {
			s.worstPP, s.worst = d, analyze.ComponentNames[k]
		}
	}
	s.truthDom, s.estDom = analyze.ComponentNames[attribArgmax(tally.truth)], rep.Attribution.Dominant
	s.diagnosis = strings.Join(rep.Attribution.Diagnosis, " | ")
	s.namesKV = rep.Fleet != nil && slices.Contains(rep.Fleet.Findings, analyze.FindingKVTransferSlow)
	s.crossDis = rep.CrossCheck != nil && rep.CrossCheck.Disagree
	return s
}

// pdWorkloads are the fleets the estimate is held to.
func pdWorkloads() []pdWorkload {
	return []pdWorkload{{
		name:      "gateway-log-speed2-1p3d",
		doc:       "capture's sample gateway log (prompts ~100–4,000 tokens, shared system prompts, a burst) replayed at speed 2 against 1 prefill and 3 decode replicas",
		spec:      "prefill-replicas=1,decode-replicas=3",
		recs:      func(t *testing.T) []traces.Record { return pdGatewayTrace(t, 50*time.Second, 3, 2) },
		blockSize: 512,
	}, {
		name: "kv-link-saturated-8p4d",
		doc: "8 prefill and 4 decode replicas sharing a 13 GB/s link; a burst of 200 prompts of 2–4 k tokens over 5 s " +
			"that the prefill pool computes but the link cannot move",
		spec:      "prefill-replicas=8,decode-replicas=4,kv-transfer-latency=2ms,kv-transfer-per-token=1us,kv-transfer-bandwidth=13GB/s",
		recs:      func(*testing.T) []traces.Record { return fleetScenarios()[1].trace() },
		kvLargest: true,
	}, {
		name: "gateway-log-burst-1p2d",
		doc: "capture's sample gateway log with more conversations (its 3× burst for 6 s included) replayed at speed 2 " +
			"against 1 prefill and 2 decode replicas of 24 sequences each: the tail waits for the prefill replica, in its " +
			"batches, and for a decode replica's slot",
		spec:      "prefill-replicas=1,decode-replicas=2,decode.max-num-seqs=24",
		recs:      func(t *testing.T) []traces.Record { return pdGatewayTrace(t, 40*time.Second, 4, 2) },
		blockSize: 512,
	}, {
		name: "steady-decode-bound-2p2d",
		doc: "a steady 12 req/s (Poisson) of 200–2,000-token prompts with 100–400-token outputs on 2 prefill and 2 " +
			"decode replicas of 16 sequences each: the decode replicas are nearly full",
		spec: "prefill-replicas=2,decode-replicas=2,decode.max-num-seqs=16",
		recs: func(*testing.T) []traces.Record {
			return poissonRecords(rand.New(rand.NewPCG(45, 3)), 30*time.Second, 12, func(rng *rand.Rand) (int, int) {
				return int(logUniform(rng, 200, 2000)), 100 + rng.IntN(300)
			})
		},
	}}
}

// pdGatewayTrace is capture's sample gateway logs over d at rate new
// conversations a second, captured, at speed (arrivals divided by it).
func pdGatewayTrace(t *testing.T, d time.Duration, rate, speed float64) []traces.Record {
	t.Helper()
	dir := t.TempDir()
	logs := dir + "/gateway.jsonl"
	writeTestFile(t, logs, sampleLogs(t, d, rate))
	runMainChild(t, "", "capture", "--new-key-file", dir+"/k", "--out", dir+"/trace.parquet", logs)
	recs, _, err := traces.ReadAll(dir + "/trace.parquet")
	if err != nil {
		t.Fatal(err)
	}
	for i := range recs {
		recs[i].ArrivalNs = int64(float64(recs[i].ArrivalNs) / speed)
		recs[i].Seq = int64(i)
		if recs[i].OutputTokens < 1 {
			recs[i].OutputTokens = 1
		}
	}
	return recs
}

// TestPDAttributionAgainstTruth: on each workload, the TTFT tail's
// shares at p90 and p99, estimated from what a replay sees (the decode
// replica's per-request timings, exact or up to 2 ms late), come within
// 10 points of the truth's per component, with the fleet's scraped series
// and without; the diagnosis names the KV transfer only where the truth's
// transfer share is the largest. Without any server timings the estimate
// is logged beside the truth, and never names the KV transfer without the
// servers' transfer histogram.
func TestPDAttributionAgainstTruth(t *testing.T) {
	for _, w := range pdWorkloads() {
		t.Run(w.name, func(t *testing.T) {
			t.Parallel()
			truth := simulateFleet(t, w.spec, w.recs(t), cmp.Or(w.blockSize, 16))
			byID := map[string]*traces.Record{}
			for i := range truth {
				byID[truth[i].RequestID] = &truth[i]
			}
			series := pdSeries(truth, time.Second)
			for _, pct := range []float64{90, 99} {
				for _, v := range []pdView{pdDecodeSide, pdJittered, pdNoTimings} {
					for _, withSeries := range []bool{false, true} {
						rows := make([]traces.Record, len(truth))
						rng := rand.New(rand.NewPCG(45, 7))
						for i := range truth {
							rows[i] = asSeen(truth[i], v, rng)
						}
						o := analyze.DefaultOptions()
						o.TailMetric, o.TailPercentile, o.KeepRequests = analyze.MetricTTFT, pct, true
						a, err := analyze.New(o)
						if err != nil {
							t.Fatal(err)
						}
						for i := range rows {
							a.Add(&rows[i])
						}
						if withSeries {
							a.AddSamples(series)
						}
						rep, err := a.Close(context.Background())
						if err != nil {
							t.Fatal(err)
						}
						s := pdCompare(t, rep, byID)
						label := fmt.Sprintf("%s: p%g, %s, series %v", w.name, pct, v, withSeries)
						t.Logf("%s: %d tail requests\n  truth     [%s] dominant %s\n  estimated [%s] dominant %s; worst %s %.1f points\n  diagnosis: %s",
							label, s.n, fmtShares7(s.truth), s.truthDom, fmtShares7(s.est), s.estDom, s.worst, s.worstPP, s.diagnosis)
						if v != pdNoTimings && s.worstPP > fleetShareTolPP {
							t.Errorf("%s: %s off by %.1f points (> %.0f)", label, s.worst, s.worstPP, fleetShareTolPP)
						}
						// Named only where the truth's transfer share is the
						// largest, and, with the decode side's timings,
						// wherever it is; without any server evidence of
						// the transfer, never.
						if s.namesKV && !w.kvLargest || v != pdNoTimings && s.namesKV != w.kvLargest || v == pdNoTimings && !withSeries && s.namesKV {
							t.Errorf("%s: the diagnosis names the KV transfer: %v (truth's largest: %s)", label, s.namesKV, s.truthDom)
						}
					}
				}
			}
		})
	}
}

// pdAnalyze analyzes rows (with series, unless nil) with o.
func pdAnalyze(t *testing.T, rows []traces.Record, series []traces.MetricsSample, o analyze.Options) *analyze.Report {
	t.Helper()
	a, err := analyze.New(o)
	if err != nil {
		t.Fatal(err)
	}
	for i := range rows {
		a.Add(&rows[i])
	}
	a.AddSamples(series)
	rep, err := a.Close(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestPDCrossCheckCanFail: the gateway log at speed 2 against 1 prefill
// and 3 decode replicas, as a replay sees it (up to 2 ms of network on
// the client's times) with the fleet's scraped series. The cross-check compares the TTFT's components with the pools'
// histograms: the estimate of earlier versions (each prefill replica
// working through its prompts one at a time, the rest the KV transfer)
// disagrees, and the diagnosis says so first, naming the estimate as the
// weaker evidence; the batched estimate agrees.
func TestPDCrossCheckCanFail(t *testing.T) {
	w := pdWorkloads()[0]
	truth := simulateFleet(t, w.spec, w.recs(t), w.blockSize)
	series := pdSeries(truth, time.Second)
	rng := rand.New(rand.NewPCG(45, 9))
	rows := make([]traces.Record, len(truth))
	for i := range truth {
		rows[i] = asSeen(truth[i], pdJittered, rng) // the client's times as a network makes them
	}
	for _, tc := range []struct {
		model    string
		disagree bool
	}{{analyze.PrefillSendOrder, true}, {analyze.PrefillBatched, false}} {
		o := analyze.DefaultOptions()
		o.TailMetric, o.TailPercentile, o.PrefillSide = analyze.MetricTTFT, 99, tc.model
		rep := pdAnalyze(t, rows, series, o)
		cc := rep.CrossCheck
		if cc == nil || !cc.Pools || len(cc.Missing) > 0 {
			t.Fatalf("%s: cross-check %+v: want the pools compared", tc.model, cc)
		}
		var b strings.Builder
		for _, c := range cc.Components {
			e := math.NaN()
			if c.RelErr != nil {
				e = *c.RelErr
			}
			fmt.Fprintf(&b, "\n  %-12s estimated %7.1f ms (%4.1f%%)  servers %7.1f ms (%4.1f%%)  rel.err %5.2f  disagree %v",
				c.Name, c.AttributionMeanMs, 100*c.AttributionShare, c.ServerMeanMs, 100*c.ServerShare, e, c.Disagree)
		}
		t.Logf("%s estimate, %d requests against %d finished:%s", tc.model, cc.Requests, cc.ServerRequests, b.String())
		names := []string{}
		for _, c := range cc.Components {
			names = append(names, c.Name)
		}
		if !slices.Equal(names, []string{"queue", "prefill", "kv_transfer", "decode_queue"}) {
			t.Errorf("%s: components %q, want TTFT's four", tc.model, names)
		}
		first := rep.Attribution.Diagnosis[0]
		if cc.Disagree != tc.disagree || strings.HasPrefix(first, "The attribution disagrees with the servers' own histograms") != tc.disagree {
			t.Errorf("%s: disagree %v, want %v; first sentence: %s", tc.model, cc.Disagree, tc.disagree, first)
		}
		if tc.disagree && !strings.Contains(first, "The estimate is the weaker evidence") {
			t.Errorf("%s: the disagreement does not name the weaker evidence: %s", tc.model, first)
		}
	}
}
