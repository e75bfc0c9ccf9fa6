package sim

import (
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// pdEngine is an engine whose step terms differ by orders of magnitude
// (1 ms a step, 10 µs a prefill token, 100 µs a decoding sequence, 1 ns a
// context token), so a row's times can be computed by hand.
const pdEngine = "step-fixed=1ms,prefill-per-token=10us,decode-per-seq=100us,attn-per-context-token=1ns,block-size=4,max-model-len=256"

// stepNs is pdEngine's step model.
func stepNs(prefill, decode, ctx int) int64 {
	return int64(time.Millisecond + time.Duration(prefill)*10*time.Microsecond + time.Duration(decode)*100*time.Microsecond + time.Duration(ctx))
}

// TestPDRowByHand: one request through a prefill and a decode replica.
// The prefill replica computes the 20-token prompt in one step; the
// decode replica then takes blocks for it and pulls 19 tokens' KV (2 ms,
// then 4096 ns a token), computes the last prompt token when it lands,
// and decodes. The row adds the two sides up.
func TestPDRowByHand(t *testing.T) {
	o := config(t, "prefill-replicas=1,decode-replicas=1,kv-transfer-latency=2ms,kv-transfer-per-token=4096ns,"+pdEngine)
	rows, res := simulate(t, o, []Request{{ID: "a", Prompt: tokens(1, 20), MaxTokens: 3, IgnoreEOS: true}})
	r := rows[0]
	prefill := stepNs(20, 0, 20) // the prefill replica's step
	pull := int64(2*time.Millisecond) + 19*4096
	last := stepNs(1, 0, 20) // the last prompt token on the decode replica
	decode := stepNs(0, 1, 21) + stepNs(0, 1, 22)
	// queue, prefill, pull, decode queue, decode, first token, last token
	want := [7]int64{0, prefill + last, pull, 0, decode, prefill + pull + last, prefill + pull + last + decode}
	got := [7]int64{r.ServerQueueNs, r.ServerPrefillNs, r.ServerKVTransferNs, r.ServerDecodeQueueNs, r.ServerDecodeNs, r.FirstTokenNs, r.LastTokenNs}
	if got != want {
		t.Errorf("row times (queue, prefill, pull, decode queue, decode, first, last)\n got %v\nwant %v", got, want)
	}
	if r.Replica != "decode-0" || r.PrefillReplica != "prefill-0" || r.RouteReason != "round-robin/round-robin" || r.OutputTokens != 3 {
		t.Errorf("row: replica %q prefill %q reason %q tokens %d", r.Replica, r.PrefillReplica, r.RouteReason, r.OutputTokens)
	}
	if res.KVPulls != 1 || res.MaxConcurrentPulls != 1 {
		t.Errorf("%d pulls, %d at once; want 1 and 1", res.KVPulls, res.MaxConcurrentPulls)
	}
	for _, rep := range res.Replicas {
		wantPulls := int64(0)
		if rep.Role == RoleDecode {
			wantPulls = 1
		}
		if rep.Counters.KVPulls != wantPulls || rep.Counters.Finished != 1 {
			t.Errorf("%s: %d pulls, %d finished; want %d and 1", rep.Name, rep.Counters.KVPulls, rep.Counters.Finished, wantPulls)
		}
	}
}

// TestPDLinkSharing: pulls that move together share the link's bandwidth
// cap equally, and none moves faster than its own per-token rate. Two or
// three 20-token prompts arrive at once on as many prefill replicas, so
// their 19-token pulls start together on the one decode replica.
func TestPDLinkSharing(t *testing.T) {
	for _, tc := range []struct {
		why  string
		link string
		n    int
		// perToken is each pull's time a token.
		perToken int64
	}{
		{"One pull alone moves at its own rate.", "kv-transfer-per-token=4096ns", 1, 4096},
		{"Without a cap, two pulls move at their own rates side by side.", "kv-transfer-per-token=4096ns", 2, 4096},
		{"A 1 GB/s cap of 4096-byte tokens (a token every 4096 ns) shared by two: 8192 ns a token each.", "kv-transfer-per-token=0s,kv-transfer-bandwidth=1GB/s,kv-transfer-bytes-per-token=4096", 2, 8192},
		{"Shared by three: 12288 ns a token each.", "kv-transfer-per-token=0s,kv-transfer-bandwidth=1GB/s,kv-transfer-bytes-per-token=4096", 3, 12288},
		{"A cap above what two pulls take leaves each at its own rate.", "kv-transfer-per-token=4096ns,kv-transfer-bandwidth=4GB/s,kv-transfer-bytes-per-token=4096", 2, 4096},
	} {
		t.Run(tc.why, func(t *testing.T) {
			o := config(t, "prefill-replicas=3,decode-replicas=1,kv-transfer-latency=2ms,"+tc.link+","+pdEngine)
			var reqs []Request
			for i := range tc.n {
				reqs = append(reqs, Request{Prompt: tokens(uint64(10+i), 20), MaxTokens: 2, IgnoreEOS: true})
			}
			rows, res := simulate(t, o, reqs)
			want := int64(2*time.Millisecond) + 19*tc.perToken
			for i, r := range rows {
				if r.ServerKVTransferNs != want || r.ServerDecodeQueueNs != 0 {
					t.Errorf("request %d: pull %d ns, decode queue %d; want %d and 0", i, r.ServerKVTransferNs, r.ServerDecodeQueueNs, want)
				}
			}
			if res.MaxConcurrentPulls != tc.n {
				t.Errorf("%d pulls at once, want %d", res.MaxConcurrentPulls, tc.n)
			}
		})
	}
}

// TestPDPrefillFailure: a request the prefill side cannot serve (its
// prompt plus output past the context length) gets its error row at once
// and never reaches the decode pool.
func TestPDPrefillFailure(t *testing.T) {
	o := config(t, "prefill-replicas=1,decode-replicas=1,"+pdEngine)
	rows, res := simulate(t, o, []Request{{Prompt: tokens(1, 250), MaxTokens: 10}, {Prompt: tokens(2, 8), MaxTokens: 2, IgnoreEOS: true}})
	if rows[0].Status != traces.StatusHTTPError || rows[0].HTTPStatus != 400 || rows[1].Status != traces.StatusOK {
		t.Errorf("statuses %q %d and %q; want the over-long one refused with 400, the other served", rows[0].Status, rows[0].HTTPStatus, rows[1].Status)
	}
	if res.KVPulls != 1 {
		t.Errorf("%d pulls, want 1 (the served request's)", res.KVPulls)
	}
}

// tokens is n token ids of their own (seed apart, no block shared).
func tokens(seed uint64, n int) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = int32(1000 + (seed*7919+uint64(i)*31)%100000)
	}
	return p
}
