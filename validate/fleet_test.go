package validate

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/traces"
)

// TestFleetTargetsSimulateOffline: a fleet is a target like any other; its
// offline simulation gives a row for each of the workload's requests (as
// they finish) and names the replica and the router's reason in each, and
// a disaggregated fleet's rows carry the KV transfer.
func TestFleetTargetsSimulateOffline(t *testing.T) {
	w := loaded(t, workload("real", 200, 8, true, 3))
	ts := targets(t, "rr=sim:replicas=4,router=round-robin", "pd=sim:prefill-replicas=1,decode-replicas=2,router=prefix-aware")
	o := DefaultOptions()
	o.Targets = ts
	for _, tg := range ts {
		bySeq := map[int64]traces.Record{}
		_, err := simulate(context.Background(), w, tg, &o, "real-"+tg.Name, func(r *traces.Record) { bySeq[r.Seq] = *r })
		if err != nil {
			t.Fatal(err)
		}
		recs := records(w)
		if len(bySeq) != len(recs) {
			t.Fatalf("%s: %d rows for %d requests", tg.Name, len(bySeq), len(recs))
		}
		replicas := map[string]bool{}
		for i := range recs {
			r := bySeq[recs[i].Seq]
			if r.Seq != recs[i].Seq || r.Status != traces.StatusOK || r.Replica == "" || r.RouteReason == "" {
				t.Fatalf("%s row %d: seq %d status %s replica %q reason %q", tg.Name, i, r.Seq, r.Status, r.Replica, r.RouteReason)
			}
			replicas[r.Replica] = true
			if pd := strings.HasPrefix(r.Replica, "decode-"); pd != (r.ServerKVTransferNs >= 0) || pd != (r.PrefillReplica != "") {
				t.Fatalf("%s row %d: replica %s, prefill %q, KV transfer %d", tg.Name, i, r.Replica, r.PrefillReplica, r.ServerKVTransferNs)
			}
		}
		if want := map[string]int{"rr": 4, "pd": 2}[tg.Name]; len(replicas) != want {
			t.Errorf("%s: served by %v, want %d replicas", tg.Name, replicas, want)
		}
	}
}

// conversations makes n requests at rate per second whose prompts start
// with the 1024-token prefix of one of n/uses conversations (each used
// uses times, spread over the trace); with shared false the prompts have
// the same lengths and share nothing, like a benchmark matrix row.
func conversations(name string, n, uses int, rate float64, shared bool, seed uint64) Workload {
	rng := rand.New(rand.NewPCG(seed, 9))
	groups := make([]int, n)
	for i := range groups {
		groups[i] = i / uses
	}
	rng.Shuffle(n, func(i, j int) { groups[i], groups[j] = groups[j], groups[i] })
	return poisson(name, n, rate, rng, func(i int, r *traces.Record) {
		r.InputTokens = int32(1024 + 64 + rng.IntN(192))
		r.OutputTokens = int32(32 + rng.IntN(64))
		if shared {
			r.Category, r.PrefixTokens = fmt.Sprintf("conv-%d", groups[i]), 1024
		}
	})
}

// A routing conclusion measured on a matrix without prefix reuse does not
// carry over to traffic with it: on the matrix, prefix-aware routing does
// not change TTFT against round-robin; on conversations that share
// prefixes it cuts it (each conversation's replica keeps its prefix), and
// the reason named is prefix reuse.
func TestRoutingConclusionNeedsPrefixReuse(t *testing.T) {
	real := conversations("real", 800, 4, 16, true, 1)
	syn := conversations("synthetic", 800, 4, 16, false, 2)
	res := mustRun(t, real, syn, targeted(t,
		"rr=sim:replicas=4,router=round-robin", "pa=sim:replicas=4,router=prefix-aware"))
	var buf bytes.Buffer
	res.WriteText(&buf)
	t.Log("\n" + buf.String())
	if res.Holds() {
		t.Error("Holds() = true: the matrix cannot show what prefix-aware routing does")
	}
	if v := verdicts(res)["ttft_p50"]; v == VerdictHolds {
		t.Errorf("ttft_p50: verdict %q", v)
	}
	if len(res.Reasons) == 0 || res.Reasons[0].Property != "prefix reuse" {
		t.Errorf("first reason %+v, want prefix reuse", res.Reasons)
	}
}
