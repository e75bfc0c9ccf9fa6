package main

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/analyze"
	"github.com/tokentrace/tokentrace/replay"
	"github.com/tokentrace/tokentrace/sim"
	"github.com/tokentrace/tokentrace/traces"
)

// The fleet attribution tests: workloads simulated offline through a
// fleet (sim.Simulate, virtual time, so a scenario takes a fraction of a
// second and keeps its dynamics on any machine), each designed so one
// fleet cause makes the tail. The simulator's truth rows are the results
// (sent = arrival: no client in between) and carry every server timing,
// so the exact analysis must reproduce the truth per request; the
// estimated one sees what a replay sees (a single engine's timings hidden;
// under disaggregation only the decode replica's, which answers the
// client: asSeen) and must come within the bars of the single-engine
// tests: tail shares within 10 points of the truth's, the per-request
// dominant component right for ≥ 90 % of the tail; and each must name
// the cause.

// fleetScenario is a fleet, a workload and what the tail must be blamed on.
type fleetScenario struct {
	name, doc string
	// spec configures the fleet (sim.ApplyConfig keys).
	spec string
	// burst adds the scenario's requests to the background.
	burst func(rng *rand.Rand) []traces.Record
	// background is the steady load in requests per second (short
	// prompts and outputs).
	background float64
	// wantDominant is the truth's dominant tail component; wantFinding
	// the fleet finding both analyses must report.
	wantDominant, wantFinding string
	// check looks at the report further (nil = nothing more).
	check func(t *testing.T, rep *analyze.Report)
}

const (
	fleetTailPct     = 95
	fleetShareTolPP  = 10.0
	fleetDominantMin = 0.90
	fleetExactTolNs  = 1000 // the truth's own rounding: none offline
)

// fleetRecord is a request arriving at at with in prompt and out output
// tokens.
func fleetRecord(at time.Duration, in, out int) traces.Record {
	r := traces.NewRecord()
	r.ArrivalNs, r.InputTokens, r.OutputTokens = int64(at), int32(in), int32(out)
	return r
}

// evenRecords is n requests gap apart, numbered in order, of in prompt and
// out output tokens each.
func evenRecords(n int, gap time.Duration, in, out int) []traces.Record {
	recs := make([]traces.Record, n)
	for i := range recs {
		recs[i] = fleetRecord(time.Duration(i)*gap, in, out)
		recs[i].Seq = int64(i)
	}
	return recs
}

// poissonRecords is d of Poisson arrivals at rate a second, numbered in
// order, each request's prompt and output lengths drawn by size.
func poissonRecords(rng *rand.Rand, d time.Duration, rate float64, size func(*rand.Rand) (in, out int)) []traces.Record {
	var recs []traces.Record
	for at := time.Duration(0); at < d; at += time.Duration(rng.ExpFloat64() / rate * 1e9) {
		in, out := size(rng)
		r := fleetRecord(at, in, out)
		r.Seq = int64(len(recs))
		recs = append(recs, r)
	}
	return recs
}

// fleetBurst is n requests 25 ms apart from at, prompts of lo to
// lo+spread-1 tokens and answers of 20–59.
func fleetBurst(at time.Duration, n, lo, spread int) func(*rand.Rand) []traces.Record {
	return func(rng *rand.Rand) []traces.Record {
		var x []traces.Record
		for i := range n {
			x = append(x, fleetRecord(at+time.Duration(i)*25*time.Millisecond, lo+rng.IntN(spread), 20+rng.IntN(40)))
		}
		return x
	}
}

// trace is sc's requests in arrival order: 30 s of background, and the
// burst.
func (sc fleetScenario) trace() []traces.Record {
	rng := rand.New(rand.NewPCG(33, uint64(len(sc.name))))
	recs := poissonRecords(rng, 30*time.Second, sc.background, func(rng *rand.Rand) (int, int) { return 100 + rng.IntN(900), 20 + rng.IntN(60) })
	if sc.burst != nil {
		recs = append(recs, sc.burst(rng)...)
	}
	slices.SortStableFunc(recs, func(a, b traces.Record) int { return int(a.ArrivalNs - b.ArrivalNs) })
	for i := range recs {
		recs[i].Seq = int64(i)
	}
	return recs
}

// simulateFleet runs recs through the fleet spec offline and returns the
// truth rows as results, by seq: sent at their arrival, prompts built as
// replay builds them (so prefix blocks share tokens).
func simulateFleet(t *testing.T, spec string, recs []traces.Record, blockSize int) []traces.Record {
	t.Helper()
	so := sim.DefaultOptions()
	if err := sim.ApplyConfig(&so, spec); err != nil {
		t.Fatal(err)
	}
	ro := replay.DefaultOptions()
	reqs := func(yield func(sim.Request, error) bool) {
		for i := range recs {
			r := &recs[i]
			q := sim.Request{ID: fmt.Sprintf("r%d", r.Seq), ArrivalNs: r.ArrivalNs, Prompt: replay.PromptTokens(r, ro, blockSize),
				MaxTokens: int(r.OutputTokens), MinTokens: int(r.OutputTokens), IgnoreEOS: true, Session: r.Session}
			if !yield(q, nil) {
				return
			}
		}
	}
	out := make([]traces.Record, len(recs))
	_, err := sim.Simulate(context.Background(), so, reqs, func(r traces.Record) error {
		src := &recs[r.Seq]
		r.ScheduledNs, r.SentNs = r.ArrivalNs, r.ArrivalNs
		r.PrefixBlocks, r.Session = src.PrefixBlocks, src.Session
		out[r.Seq] = r
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range out {
		if r.Status != traces.StatusOK {
			t.Fatalf("request %d: %s %s", i, r.Status, r.Error)
		}
	}
	return out
}

// fleetTruth is the truth's split of row r's E2E in the order of
// analyze.ComponentNames.
func fleetTruth(r *traces.Record) [7]float64 {
	var c [7]float64
	set := func(name string, v int64) { c[componentIdx(name)] = float64(max(v, 0)) }
	set("queue", r.ServerQueueNs)
	set("prefill", r.ServerPrefillNs)
	set("kv_transfer", r.ServerKVTransferNs)
	set("decode_queue", r.ServerDecodeQueueNs)
	set("decode", r.ServerDecodeNs)
	return c
}

// fleetSplit is ra's split in the order of analyze.ComponentNames,
// negative parts as 0.
func fleetSplit(ra analyze.RequestAttribution) [7]float64 {
	c := [7]float64{float64(ra.Lateness), float64(ra.Queue), float64(ra.Prefill), float64(ra.Decode), float64(ra.Other),
		float64(ra.KVTransfer), float64(ra.DecodeQueue)}
	for k := range c {
		c[k] = max(c[k], 0)
	}
	return c
}

func fmtShares7(s [7]float64) string {
	var parts []string
	for k, v := range s {
		if v > 0.0005 {
			parts = append(parts, fmt.Sprintf("%s %.1f", analyze.ComponentNames[k], 100*v))
		}
	}
	return strings.Join(parts, ", ")
}

// fleetScenarios are the three "must show" fleets.
func fleetScenarios() []fleetScenario {
	return []fleetScenario{{
		name: "prefill-pool-overloaded",
		doc: "2 prefill and 4 decode replicas at 8 req/s of short prompts; at 15 s, 40 prompts of 6–8 k tokens within a second: " +
			"the prefill pool (~25 k prompt tokens/s each) needs 12 s of work, so the tail waits on the prefill side",
		spec:         "prefill-replicas=2,decode-replicas=4",
		background:   8,
		burst:        fleetBurst(15*time.Second, 40, 6000, 2000),
		wantDominant: "queue",
		wantFinding:  analyze.FindingPrefillPoolSaturated,
		check: func(t *testing.T, rep *analyze.Report) {
			d := strings.Join(rep.Attribution.Diagnosis, " ")
			if !strings.Contains(d, "Prefill pool saturated") || !strings.Contains(d, "prefill pool") {
				t.Errorf("the diagnosis does not name the prefill pool: %s", d)
			}
			if pl := rep.Fleet.PrefillPool; pl == nil || !pl.Saturated || pl.Replicas != 2 {
				t.Errorf("prefill pool %+v: want both replicas, saturated", pl)
			}
		},
	}, {
		name: "kv-transfer-slow",
		doc: "8 prefill and 4 decode replicas sharing a 13 GB/s link (~100 k tokens/s of 128 KiB each); at 12 s, 200 prompts of 2–4 k tokens over 5 s: " +
			"130 k tokens/s that the prefill pool computes but the link cannot move, so the pulls queue on it",
		spec:         "prefill-replicas=8,decode-replicas=4,kv-transfer-latency=2ms,kv-transfer-per-token=1us,kv-transfer-bandwidth=13GB/s",
		background:   8,
		burst:        fleetBurst(12*time.Second, 200, 2000, 2000),
		wantDominant: "kv_transfer",
		wantFinding:  analyze.FindingKVTransferSlow,
		check: func(t *testing.T, rep *analyze.Report) {
			if d := strings.Join(rep.Attribution.Diagnosis, " "); !strings.Contains(d, "KV transfer slow") {
				t.Errorf("the diagnosis does not name the KV transfer: %s", d)
			}
		},
	}, {
		name: "round-robin-slow-replica",
		doc: "4 replicas behind round-robin at 12 req/s, replica-2 with a 30 ms step (the others 6 ms): it gets a quarter of " +
			"the requests and holds them five times as long, while the others idle",
		spec:         "replicas=4,router=round-robin,replica-2.step-fixed=30ms",
		background:   12,
		wantDominant: "decode",
		wantFinding:  analyze.FindingRoutingImbalance,
		check: func(t *testing.T, rep *analyze.Report) {
			var im *analyze.Imbalance
			for i := range rep.Fleet.Imbalance {
				if rep.Fleet.Imbalance[i].Pool == "serving" {
					im = &rep.Fleet.Imbalance[i]
				}
			}
			if im == nil || !im.Found || !slices.Equal(im.Hot, []string{"replica-2"}) {
				t.Fatalf("routing imbalance %+v: want found, replica-2 hot", im)
			}
			if im.TailInFlight < 2*im.TailOthersInFlight || im.HotTailShare < 0.9 || im.HotRequestShare > 0.3 {
				t.Errorf("evidence %+v: want the tail's replica twice as busy as the others, and nearly all the tail on a quarter of the requests", im)
			}
			d := strings.Join(rep.Attribution.Diagnosis, " ")
			for _, want := range []string{"Routing imbalance", "replica-2", "in flight", "slow per request"} {
				if !strings.Contains(d, want) {
					t.Errorf("diagnosis lacks %q: %s", want, d)
				}
			}
		},
	}}
}

// TestFleetAttributionAgainstTruth analyzes the three fleets' truth rows
// exactly (server timings) and estimated (hidden), also past
// Options.ExactRows (the streaming path on a sample), against the truth.
func TestFleetAttributionAgainstTruth(t *testing.T) {
	for _, sc := range fleetScenarios() {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			rows := simulateFleet(t, sc.spec, sc.trace(), 16)
			byID := map[string]*traces.Record{}
			for i := range rows {
				byID[rows[i].RequestID] = &rows[i]
			}
			ao := analyze.DefaultOptions()
			ao.TailPercentile = fleetTailPct
			ao.KeepRequests = true
			analyzeWith := func(rows []traces.Record, o analyze.Options) *analyze.Report {
				rep, err := analyze.Analyze(context.Background(), rows, o)
				if err != nil {
					t.Fatal(err)
				}
				if rep.Fleet == nil || !slices.Contains(rep.Fleet.Findings, sc.wantFinding) {
					var f []string
					if rep.Fleet != nil {
						f = rep.Fleet.Findings
					}
					var b strings.Builder
					rep.WriteText(&b)
					t.Errorf("%s analysis: findings %q, want %q\n%s", rep.Attribution.Source, f, sc.wantFinding, b.String())
				}
				if sc.check != nil {
					sc.check(t, rep)
				}
				return rep
			}

			// Exact: every component of every request is the truth's.
			exact := analyzeWith(rows, ao)
			var sumT [7]float64
			tail := map[string]bool{}
			err := eachRequest(exact, func(ra analyze.RequestAttribution) error {
				tr := byID[ra.RequestID]
				want, got := fleetTruth(tr), fleetSplit(ra)
				for k := range want {
					if math.Abs(want[k]-got[k]) > fleetExactTolNs {
						return fmt.Errorf("request %s: %s %v, truth %v", ra.RequestID, analyze.ComponentNames[k], time.Duration(got[k]), time.Duration(want[k]))
					}
				}
				if ra.Replica != tr.Replica || ra.PrefillReplica != tr.PrefillReplica {
					return fmt.Errorf("request %s: replicas %q/%q, truth %q/%q", ra.RequestID, ra.Replica, ra.PrefillReplica, tr.Replica, tr.PrefillReplica)
				}
				if ra.Tail {
					tail[ra.RequestID] = true
					for k := range want {
						sumT[k] += want[k]
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			truthShare := toShares(sumT)
			if got := analyze.ComponentNames[attribArgmax(sumT)]; got != sc.wantDominant || exact.Attribution.Dominant != sc.wantDominant {
				t.Errorf("scenario design: the truth's dominant tail component is %s (report: %s), want %s", got, exact.Attribution.Dominant, sc.wantDominant)
			}

			// Estimated: the same requests as a replay sees them, the server
			// timings hidden but a decode replica's own.
			eo := ao
			seen := slices.Clone(rows)
			for i := range seen {
				if seen[i].PrefillReplica == "" {
					eo.IgnoreServerTimings = true
				}
				seen[i] = asSeen(seen[i], pdDecodeSide, nil)
			}
			est := analyzeWith(seen, eo)
			var tally tailTally[[7]float64]
			err = eachRequest(est, func(ra analyze.RequestAttribution) error {
				if !ra.Tail {
					return nil
				}
				if !tail[ra.RequestID] {
					return fmt.Errorf("request %s: in the estimated tail only", ra.RequestID)
				}
				tally.add(fleetTruth(byID[ra.RequestID]), fleetSplit(ra))
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			n, agree := tally.n, tally.agree
			estShare := toShares(tally.est)
			worst := 0.0
			for k := range estShare {
				worst = max(worst, 100*math.Abs(estShare[k]-truthShare[k]))
			}
			t.Logf("%s: %s\n  %d requests, %d in the p%d tail; truth [%s]; estimated [%s], max error %.1f points; per-request dominant right %d/%d\n  estimated diagnosis: %s",
				sc.name, sc.doc, len(rows), n, fleetTailPct, fmtShares7(truthShare), fmtShares7(estShare), worst, agree, n, strings.Join(est.Attribution.Diagnosis, " | "))
			if worst > fleetShareTolPP {
				t.Errorf("estimated tail shares off by %.1f points (> %.0f)", worst, fleetShareTolPP)
			}
			if n < 10 || float64(agree) < fleetDominantMin*float64(n) {
				t.Errorf("per-request dominant component right for %d of %d tail requests (want ≥ %.0f%%)", agree, n, 100*fleetDominantMin)
			}
			if est.Attribution.Dominant != sc.wantDominant {
				t.Errorf("estimated dominant %s, want %s", est.Attribution.Dominant, sc.wantDominant)
			}

			// Streaming: past ExactRows the row-based sections come from a
			// 1-in-2^k sample, scaled; the finding must survive it.
			so := eo
			so.KeepRequests = false
			so.ExactRows = len(rows) / 3
			st := analyzeWith(seen, so)
			if st.Sampling == nil {
				t.Fatalf("%d rows past ExactRows %d: no sampling", len(rows), so.ExactRows)
			}
			var served int64
			for _, r := range st.Fleet.Replicas {
				if r.Role != analyze.RolePrefill {
					served += r.Requests
				}
			}
			if served != int64(len(rows)) {
				t.Errorf("streaming: the replicas served %d requests, want all %d counted exactly", served, len(rows))
			}
		})
	}
}

// TestCacheUnawareRouting: conversations sharing 1024-token prefixes on 4
// replicas with room for every prefix. Round-robin scatters each
// conversation, so the replicas cache far less than the trace implies,
// and what one replica was sent implies about as little: the loss is the
// routing's, and analyze says so. Prefix-aware routing keeps them
// together and draws no such finding.
func TestCacheUnawareRouting(t *testing.T) {
	const groups, uses, prefixBlocks, bs = 300, 5, 64, 16
	rng := rand.New(rand.NewPCG(33, 5))
	var recs []traces.Record
	at := 0.0
	order := make([]int, 0, groups*uses)
	for g := range groups {
		for range uses {
			order = append(order, g)
		}
	}
	rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	for i, g := range order {
		at += rng.ExpFloat64() / 30
		r := fleetRecord(time.Duration(at*1e9), prefixBlocks*bs+64+rng.IntN(192), 16)
		r.Seq, r.Session = int64(i), int64(g+1)
		for b := range prefixBlocks {
			r.PrefixBlocks = append(r.PrefixBlocks, int64(g*1000+b+1))
		}
		recs = append(recs, r)
	}
	ao := analyze.DefaultOptions()
	ao.BlockSize = bs
	for _, tc := range []struct {
		router string
		want   bool
	}{{sim.RouterRoundRobin, true}, {sim.RouterPrefixAware, false}} {
		t.Run(tc.router, func(t *testing.T) {
			rows := simulateFleet(t, "replicas=4,num-gpu-blocks=1000000,router="+tc.router, recs, bs)
			rep, err := analyze.Analyze(context.Background(), rows, ao)
			if err != nil {
				t.Fatal(err)
			}
			pc := rep.PrefixCache
			if pc == nil || pc.Replicas != 4 {
				t.Fatalf("prefix cache %+v: want 4 replicas", pc)
			}
			found := slices.Contains(rep.Fleet.Findings, analyze.FindingCacheUnawareRouting)
			d := strings.Join(rep.Attribution.Diagnosis, " ")
			t.Logf("%s: implied %.3f, realised %.3f, one cache per replica %.3f; findings %q", tc.router, pc.ImpliedRateReported, pc.RealisedRate, pc.ReplicaImpliedRateReported, rep.Fleet.Findings)
			if found != tc.want || strings.Contains(d, "Cache-unaware routing") != tc.want {
				t.Errorf("cache-unaware routing found %v, want %v: %s", found, tc.want, d)
			}
			if tc.want && pc.ImpliedRateReported-pc.ReplicaImpliedRateReported < 0.15 {
				t.Errorf("round-robin: one cache per replica implies %.3f, all together %.3f: want the routing's loss evident", pc.ReplicaImpliedRateReported, pc.ImpliedRateReported)
			}
			var b strings.Builder
			if err := rep.WriteText(&b); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(b.String(), "\nReplicas (") || !strings.Contains(b.String(), "replica-3") {
				t.Errorf("no per-replica table in the text report:\n%s", b.String())
			}
		})
	}
}

// TestReplayNamesFleetReplicas: tokentrace sim's fleet behind its one
// endpoint (a real HTTP server on loopback) names the replicas in
// response headers; replay --replica-header and --prefill-replica-header
// keep them in the results, and analyze shows the per-replica table.
func TestReplayNamesFleetReplicas(t *testing.T) {
	srv := startSimServer(t, "prefill-replicas=2,decode-replicas=3,router=round-robin", nil)
	dir := t.TempDir()
	recs := evenRecords(30, 20*time.Millisecond, 200, 4)
	trace := writeTrace(t, dir+"/trace.jsonl", traces.NewMeta("test"), recs)
	out := dir + "/results.jsonl"
	runMain(t, "replay", "--url", srv.URL, "--model", sim.DefaultModel, "--quiet", "--no-preflight", "--max-lateness", "10s",
		"--replica-header", traces.ReplicaHeader, "--prefill-replica-header", traces.PrefillReplicaHeader, "--out", out, trace)
	res, _, err := traces.ReadAll(out)
	if err != nil {
		t.Fatal(err)
	}
	decode := map[string]int{}
	for _, r := range res {
		if !strings.HasPrefix(r.PrefillReplica, "prefill-") {
			t.Errorf("request %d: prefill replica %q", r.Seq, r.PrefillReplica)
		}
		decode[r.Replica]++
	}
	if len(decode) != 3 || decode["decode-0"] != 10 {
		t.Errorf("served by %v: want round-robin over decode-0..2", decode)
	}
	stdout, _ := runMain(t, "analyze", out)
	for _, want := range []string{"\nReplicas (", "decode-2 ", "prefill-1 ", "kv_transfer"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("analyze output lacks %q:\n%s", want, stdout)
		}
	}
}
