package sim

import (
	"bufio"
	"bytes"
	"context"
	"iter"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/sim/engine"
	"github.com/tokentrace/tokentrace/traces"
)

// seqOf streams reqs.
func seqOf(reqs []Request) iter.Seq2[Request, error] {
	return func(yield func(Request, error) bool) {
		for _, q := range reqs {
			if !yield(q, nil) {
				return
			}
		}
	}
}

// simulate runs reqs through o and returns the truth rows by Seq.
func simulate(t *testing.T, o Options, reqs []Request) ([]traces.Record, *Result) {
	t.Helper()
	rows := make([]traces.Record, len(reqs))
	seen := make([]bool, len(reqs))
	res, err := Simulate(context.Background(), o, seqOf(reqs), func(r traces.Record) error {
		if seen[r.Seq] {
			t.Fatalf("row %d emitted twice", r.Seq)
		}
		rows[r.Seq], seen[r.Seq] = r, true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests != int64(len(reqs)) {
		t.Fatalf("emitted %d rows for %d requests", res.Requests, len(reqs))
	}
	return rows, res
}

func config(t *testing.T, spec string) Options {
	t.Helper()
	o := DefaultOptions()
	if err := ApplyConfig(&o, spec); err != nil {
		t.Fatal(err)
	}
	return o
}

// sharedPrefixes is a trace whose prompts share prefixes the way a chat
// service's do: groups of uses requests (a conversation, an agent's
// calls) start with the same prefixTokens tokens, then their own suffix;
// the uses of a group are spread over the trace. Arrivals are Poisson at
// rate per second.
func sharedPrefixes(seed uint64, groups, uses, prefixTokens int, rate float64) []Request {
	rng := rand.New(rand.NewPCG(seed, 1))
	order := make([]int, 0, groups*uses)
	for g := range groups {
		for range uses {
			order = append(order, g)
		}
	}
	rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	reqs := make([]Request, len(order))
	at := 0.0
	for i, g := range order {
		at += rng.ExpFloat64() / rate
		p := make([]int32, 0, prefixTokens+256)
		for j := range prefixTokens {
			p = append(p, int32(1000+(g*7919+j*31)%100000))
		}
		for range 64 + rng.IntN(192) {
			p = append(p, int32(1000+rng.IntN(100000)))
		}
		reqs[i] = Request{ID: "r" + strconv.Itoa(i), ArrivalNs: int64(at * 1e9), Prompt: p,
			MaxTokens: 32, MinTokens: 32, IgnoreEOS: true, Session: int64(g + 1)}
	}
	return reqs
}

// impliedHitRate is the share of prompt tokens an unbounded prefix cache
// that has seen every earlier prompt would serve, counted as vLLM counts
// hits (whole blocks, never the last prompt token).
func impliedHitRate(reqs []Request, blockSize int) float64 {
	seen := map[uint64]bool{}
	var hit, total int64
	o := DefaultOptions()
	for i, q := range reqs {
		x, err := engine.NewRequest(o.Options, q, int64(i))
		if err != nil {
			panic(err)
		}
		hs := x.BlockHashes()
		h := 0
		for h < len(hs) && seen[hs[h]] {
			h++
		}
		hit += int64(min(h, (len(q.Prompt)-1)/blockSize) * blockSize)
		total += int64(len(q.Prompt))
		for _, b := range hs {
			seen[b] = true
		}
	}
	return float64(hit) / float64(total)
}

// promCounter sums a counter's samples in an exposition by a label's value.
func promCounter(t *testing.T, text, name, label string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") {
			continue
		}
		labels, val, _ := strings.Cut(line[len(name)+1:], "} ")
		v, err := strconv.ParseFloat(val, 64)
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		for _, kv := range strings.Split(labels, ",") {
			if k, lv, _ := strings.Cut(kv, "="); k == label {
				out[strings.Trim(lv, `"`)] += v
			}
		}
	}
	return out
}

// hitRate is the fleet's prefix-cache hit rate from its replicas' own
// counters, read from its /metrics as Prometheus would.
func hitRate(t *testing.T, res *Result) float64 {
	t.Helper()
	var b bytes.Buffer
	if err := res.WriteMetrics(&b); err != nil {
		t.Fatal(err)
	}
	hits := promCounter(t, b.String(), "vllm:prefix_cache_hits_total", "pod")
	queries := promCounter(t, b.String(), "vllm:prefix_cache_queries_total", "pod")
	if len(hits) != len(res.Replicas) {
		t.Fatalf("hit counters of %d replicas, want %d:\n%s", len(hits), len(res.Replicas), b.String())
	}
	var h, q float64
	for pod, v := range hits {
		h += v
		q += queries[pod]
	}
	return h / q
}

// TestPrefixAwareRealisesImpliedHitRate: on a trace whose conversations
// share prefixes, a 4-replica fleet with unbounded caches realises the
// hit rate the trace implies when the router is prefix-aware, and
// markedly less with round-robin, which scatters each conversation.
func TestPrefixAwareRealisesImpliedHitRate(t *testing.T) {
	reqs := sharedPrefixes(1, 600, 5, 1024, 40)
	implied := impliedHitRate(reqs, 16)
	const fleet = "replicas=4,num-gpu-blocks=1000000,"
	_, aware := simulate(t, config(t, fleet+"router=prefix-aware"), reqs)
	_, rr := simulate(t, config(t, fleet+"router=round-robin"), reqs)
	awareRate, rrRate := hitRate(t, aware), hitRate(t, rr)
	t.Logf("implied %.3f, prefix-aware %.3f, round-robin %.3f", implied, awareRate, rrRate)
	if implied < 0.5 {
		t.Fatalf("the trace implies only %.3f: not a shared-prefix trace", implied)
	}
	if d := implied - awareRate; d > 0.05 || d < -0.005 {
		t.Errorf("prefix-aware realised %.3f, implied %.3f: more than 5 points apart", awareRate, implied)
	}
	if rrRate > implied-0.15 {
		t.Errorf("round-robin realised %.3f, implied %.3f: want markedly less (15 points)", rrRate, implied)
	}
	for _, r := range aware.Replicas {
		if r.Routed[ReasonPrefix] == 0 || r.Routed[ReasonPrefix]+r.Routed[ReasonLoad] < int64(len(reqs))/8 {
			t.Errorf("prefix-aware: %s got %v: every replica should get a share, most by prefix", r.Name, r.Routed)
		}
	}
}

// TestPlainOptionsMatchSimulate: without a fleet, Simulate runs the one
// engine exactly as engine.Simulate does, from a stream.
func TestPlainOptionsMatchSimulate(t *testing.T) {
	reqs := sharedPrefixes(2, 40, 5, 256, 30)
	o := config(t, "preset=tiny")
	want, err := engine.Simulate(context.Background(), o.Options, reqs)
	if err != nil {
		t.Fatal(err)
	}
	got, res := simulate(t, o, reqs)
	for i := range got {
		if !reflect.DeepEqual(got[i], want.Truth[i]) {
			t.Fatalf("row %d:\n got %+v\nwant %+v", i, got[i], want.Truth[i])
		}
	}
	if len(res.Replicas) != 1 || res.Replicas[0].Name != "" || got[0].Replica != "" {
		t.Errorf("plain options ran as a fleet: %+v", res.Replicas)
	}
}

// TestDisaggregatedTruthAddsUp: a prefill/decode fleet's rows name both
// replicas, and their components add up to the request's TTFT and E2E
// exactly; a lone pull costs its latency plus its tokens.
func TestDisaggregatedTruthAddsUp(t *testing.T) {
	reqs := sharedPrefixes(3, 100, 3, 512, 20)
	o := config(t, "prefill-replicas=2,decode-replicas=3,router=least-outstanding,kv-transfer-latency=2ms,kv-transfer-per-token=5us")
	rows, res := simulate(t, o, reqs)
	var lone int
	for i, r := range rows {
		if r.Status != traces.StatusOK {
			t.Fatalf("row %d: %s %s", i, r.Status, r.Error)
		}
		if !strings.HasPrefix(r.Replica, "decode-") || !strings.HasPrefix(r.PrefillReplica, "prefill-") || r.RouteReason != "least-outstanding/least-outstanding" {
			t.Fatalf("row %d: replica %q prefill %q reason %q", i, r.Replica, r.PrefillReplica, r.RouteReason)
		}
		ttft := r.ServerQueueNs + r.ServerPrefillNs + r.ServerKVTransferNs + r.ServerDecodeQueueNs
		if r.FirstTokenNs-r.ArrivalNs != ttft || r.LastTokenNs-r.ArrivalNs != ttft+r.ServerDecodeNs {
			t.Fatalf("row %d: first %d last %d arrival %d, components %d+%d+%d+%d (+%d decode)", i, r.FirstTokenNs, r.LastTokenNs, r.ArrivalNs,
				r.ServerQueueNs, r.ServerPrefillNs, r.ServerKVTransferNs, r.ServerDecodeQueueNs, r.ServerDecodeNs)
		}
		for _, v := range []int64{r.ServerQueueNs, r.ServerPrefillNs, r.ServerKVTransferNs, r.ServerDecodeQueueNs, r.ServerDecodeNs} {
			if v < 0 {
				t.Fatalf("row %d: a negative component: %+v", i, r)
			}
		}
		// Without a bandwidth cap a pull moves at its own rate: at least
		// the latency plus the tokens the decode side did not cache.
		minPull := int64(2*time.Millisecond) + int64(len(reqs[i].Prompt)-1-int(r.ServerCachedTokens))*int64(5*time.Microsecond)
		if r.ServerKVTransferNs < int64(2*time.Millisecond) {
			t.Fatalf("row %d: pull %d ns, shorter than the latency", i, r.ServerKVTransferNs)
		}
		if r.ServerKVTransferNs == minPull {
			lone++
		}
	}
	if lone == 0 {
		t.Error("no pull took exactly latency + tokens × per-token time")
	}
	if res.KVPulls != len(reqs) {
		t.Errorf("%d KV pulls for %d requests", res.KVPulls, len(reqs))
	}
	var pulls int64
	for _, r := range res.Replicas {
		pulls += r.Counters.KVPulls
		if r.Role == RoleDecode && r.Counters.Finished == 0 || r.Role == RolePrefill && r.Counters.KVPulls != 0 {
			t.Errorf("%s: %+v", r.Name, r.Counters)
		}
	}
	if pulls != int64(len(reqs)) {
		t.Errorf("decode replicas counted %d pulls, want %d", pulls, len(reqs))
	}
}

// TestOneSlowReplica: "replica-2.step-fixed" makes one replica of a
// round-robin fleet slow, and its requests wait longer than the others'.
func TestOneSlowReplica(t *testing.T) {
	reqs := sharedPrefixes(4, 200, 2, 256, 60)
	rows, _ := simulate(t, config(t, "replicas=4,router=round-robin,replica-2.step-fixed=30ms"), reqs)
	e2e := map[string][]int64{}
	for _, r := range rows {
		e2e[r.Replica] = append(e2e[r.Replica], r.LastTokenNs-r.ArrivalNs)
	}
	med := func(v []int64) int64 { slices.Sort(v); return v[len(v)/2] }
	slow := med(e2e["replica-2"])
	for _, name := range []string{"replica-0", "replica-1", "replica-3"} {
		if len(e2e[name]) != len(reqs)/4 {
			t.Errorf("%s served %d requests, want %d (round-robin)", name, len(e2e[name]), len(reqs)/4)
		}
		if m := med(e2e[name]); slow < 3*m {
			t.Errorf("replica-2's median E2E %v, %s's %v: want the slow one at least 3x", time.Duration(slow), name, time.Duration(m))
		}
	}
}

// TestSessionAffinity keeps a session on one replica.
func TestSessionAffinity(t *testing.T) {
	reqs := sharedPrefixes(5, 50, 4, 64, 20)
	rows, res := simulate(t, config(t, "replicas=3,router=session-affinity"), reqs)
	where := map[int64]string{}
	for i, r := range rows {
		s := reqs[i].Session
		if w, ok := where[s]; ok && w != r.Replica {
			t.Fatalf("session %d on %s and %s", s, w, r.Replica)
		}
		where[s] = r.Replica
	}
	var news, sticky int64
	for _, r := range res.Replicas {
		news += r.Routed[ReasonSessionNew]
		sticky += r.Routed[ReasonSession]
	}
	if news != 50 || sticky != 150 {
		t.Errorf("%d new sessions and %d sticky requests, want 50 and 150", news, sticky)
	}
}

// TestStreamErrors: out-of-order arrivals and a failing source stop the
// simulation with an error naming the request; an emit error stops it too.
func TestStreamErrors(t *testing.T) {
	o := config(t, "replicas=2")
	reqs := []Request{{ID: "a", ArrivalNs: 5, Prompt: []int32{1, 2, 3}, MaxTokens: 2}, {ID: "b", ArrivalNs: 4, Prompt: []int32{1, 2}, MaxTokens: 2}}
	_, err := Simulate(context.Background(), o, seqOf(reqs), func(traces.Record) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "request 1 (b)") || !strings.Contains(err.Error(), "arrival order") {
		t.Errorf("out of order: %v", err)
	}
	boom := func(yield func(Request, error) bool) {
		if yield(reqs[0], nil) {
			yield(Request{}, errBoom)
		}
	}
	if _, err := Simulate(context.Background(), o, boom, func(traces.Record) error { return nil }); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("source error: %v", err)
	}
	n := 0
	_, err = Simulate(context.Background(), o, seqOf(sharedPrefixes(6, 10, 2, 32, 100)), func(traces.Record) error {
		n++
		return errBoom
	})
	if err == nil || n != 1 {
		t.Errorf("emit error: %v after %d rows", err, n)
	}
}

var errBoom = errorString("boom")

type errorString string

func (e errorString) Error() string { return string(e) }

// TestMetricsExposition: one scrape reads every replica, each family
// declared once, with pod and role labels, and the router's decisions.
func TestMetricsExposition(t *testing.T) {
	_, res := simulate(t, config(t, "prefill-replicas=1,decode-replicas=2,router=prefix-aware"), sharedPrefixes(7, 20, 3, 128, 20))
	var b bytes.Buffer
	if err := res.WriteMetrics(&b); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	types := map[string]int{}
	for _, l := range strings.Split(text, "\n") {
		if name, ok := strings.CutPrefix(l, "# TYPE "); ok {
			types[strings.Fields(name)[0]]++
		}
	}
	for name, n := range types {
		if n != 1 {
			t.Errorf("%s declared %d times", name, n)
		}
	}
	for _, want := range []string{
		`vllm:num_requests_running{engine="0",model_name="sim-llama3-8b",pod="prefill-0",role="prefill"} `,
		`vllm:nixl_xfer_time_seconds_count{engine="0",model_name="sim-llama3-8b",pod="decode-1",role="decode"} `,
		`tokentrace_router_decisions_total{pod="decode-0",role="decode",reason="prefix"} `,
		`tokentrace_kv_transfer_tokens_total `,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q in\n%s", want, text)
		}
	}
	if strings.Contains(text, `vllm:nixl_xfer_time_seconds_count{engine="0",model_name="sim-llama3-8b",pod="prefill-0"`) {
		t.Error("a prefill replica reports KV pulls")
	}
	routed := promCounter(t, text, "tokentrace_router_decisions_total", "role")
	if routed["prefill"] != 60 || routed["decode"] != 60 {
		t.Errorf("routed %v, want 60 per pool", routed)
	}
}

// TestPrefixIndexEvicts: each replica's share of the router's index is an
// LRU of its capacity, and a block stays known while any replica holds it.
func TestPrefixIndexEvicts(t *testing.T) {
	x := newPrefixIndex([]int{2, 3})
	x.add(0, 11)
	x.add(0, 12)
	x.add(1, 11)
	x.add(0, 11) // 11 is now member 0's most recent: 12 goes next
	x.add(0, 13)
	if n := x.leading([]uint64{11, 13}); n != 2 || x.match[0] != 2 || x.match[1] != 1 {
		t.Fatalf("leading 11,13: %d, match %v; want 2, [2 1]", n, x.match)
	}
	if n := x.leading([]uint64{12}); n != 0 {
		t.Fatalf("12 still known (%d, %v) after its eviction", n, x.match)
	}
	x.add(0, 14) // evicts 11 from member 0; member 1 still holds it
	if n := x.leading([]uint64{11}); n != 1 || x.match[0] != 0 || x.match[1] != 1 {
		t.Fatalf("leading 11: %d, match %v; want 1, [0 1]", n, x.match)
	}
	if x.ents.Len() != 3 {
		t.Errorf("%d entries, want 3 (11, 13, 14)", x.ents.Len())
	}
}

// TestMemoryFollowsInFlight: Simulate holds the requests in flight, not
// the stream: requests far apart are held one at a time, a burst as many
// as it has.
func TestMemoryFollowsInFlight(t *testing.T) {
	for _, tc := range []struct {
		why      string
		gap      time.Duration
		n, burst int
		want     int
	}{
		{"2000 requests a second apart: one at a time.", time.Second, 2000, 1, 1},
		{"Bursts of 25 a minute apart: 25 at most.", time.Minute, 200, 25, 25},
	} {
		var reqs []Request
		for i := range tc.n {
			at := int64(i/tc.burst) * int64(tc.gap)
			reqs = append(reqs, Request{ArrivalNs: at, Prompt: tokens(uint64(i), 64), MaxTokens: 4, IgnoreEOS: true})
		}
		_, res := simulate(t, config(t, "replicas=2,router=least-outstanding"), reqs)
		if res.MaxInFlight != tc.want {
			t.Errorf("%s held %d at most, want %d", tc.why, res.MaxInFlight, tc.want)
		}
	}
}

// TestSimulateCancels: a cancelled context stops the run with its error.
func TestSimulateCancels(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Simulate(ctx, config(t, "replicas=2"), seqOf(sharedPrefixes(8, 10, 2, 32, 100)), func(traces.Record) error { return nil })
	if err != context.Canceled {
		t.Errorf("Simulate after cancel: %v, want context.Canceled", err)
	}
}
