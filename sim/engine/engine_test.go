package engine

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// randomPrompt returns n token ids that share no block with other seeds.
func randomPrompt(seed uint64, n int) []int32 {
	p := make([]int32, n)
	x := seed
	for i := range p {
		x = mix64(x + uint64(i))
		p[i] = int32(FirstWordID + x%uint64(DefaultVocabSize-FirstWordID))
	}
	return p
}

func simulate(t *testing.T, o Options, reqs []Arrival) *Result {
	t.Helper()
	res, err := Simulate(context.Background(), o, reqs)
	if err != nil {
		t.Fatalf("Simulate: %v", err)
	}
	for i, r := range res.Truth {
		if r.Status != traces.StatusOK {
			t.Fatalf("request %d: status %q (%s)", i, r.Status, r.Error)
		}
		// The three phases tile arrival → first token → last token.
		if got, want := r.ServerQueueNs+r.ServerPrefillNs, r.FirstTokenNs-r.ArrivalNs; got != want {
			t.Fatalf("request %d: queue+prefill = %d, want TTFT %d", i, got, want)
		}
		if got, want := r.ServerQueueNs+r.ServerPrefillNs+r.ServerDecodeNs, r.LastTokenNs-r.ArrivalNs; got != want {
			t.Fatalf("request %d: queue+prefill+decode = %d, want E2E %d", i, got, want)
		}
	}
	return res
}

func within(got, want, tol float64) bool { return math.Abs(got-want) <= tol*math.Abs(want) }

// Under light load (one request at a time) TTFT is the prefill model and
// TPOT the decode model.
func TestLightLoadMatchesStepModel(t *testing.T) {
	o := DefaultOptions()
	const prompt, out = 1000, 100
	var reqs []Arrival
	for i := range 5 {
		reqs = append(reqs, Arrival{ArrivalNs: int64(i) * int64(10*time.Second), Prompt: randomPrompt(uint64(i+1)*1000, prompt),
			MaxTokens: out, IgnoreEOS: true})
	}
	res := simulate(t, o, reqs)
	wantPrefill := o.StepFixed + prompt*o.PrefillPerToken + prompt*o.AttnPerContextToken
	wantTPOT := o.StepFixed + o.DecodePerSeq + time.Duration(prompt+out/2)*o.AttnPerContextToken
	for i, r := range res.Truth {
		if r.ServerQueueNs != 0 {
			t.Errorf("request %d: queue %v, want 0 under light load", i, time.Duration(r.ServerQueueNs))
		}
		ttft := r.ServerQueueNs + r.ServerPrefillNs
		if !within(float64(ttft), float64(wantPrefill), 0.10) {
			t.Errorf("request %d: TTFT %v, want ≈ %v (prefill model)", i, time.Duration(ttft), wantPrefill)
		}
		tpot := r.ServerDecodeNs / int64(r.OutputTokens-1)
		if !within(float64(tpot), float64(wantTPOT), 0.10) {
			t.Errorf("request %d: TPOT %v, want ≈ %v (decode model)", i, time.Duration(tpot), wantTPOT)
		}
		if r.OutputTokens != out {
			t.Errorf("request %d: %d output tokens, want exactly %d (ignore_eos)", i, r.OutputTokens, out)
		}
	}
}

// Above capacity the waiting queue grows and so does queue time.
func TestOverloadGrowsQueue(t *testing.T) {
	o := DefaultOptions()
	ApplyPreset(&o, "tiny")
	var reqs []Arrival
	for i := range 300 {
		reqs = append(reqs, Arrival{ArrivalNs: int64(i) * int64(time.Millisecond), Prompt: randomPrompt(uint64(i+1)<<20, 100),
			MaxTokens: 50, IgnoreEOS: true})
	}
	res := simulate(t, o, reqs)
	mean := func(rs []traces.Record) float64 {
		s := 0.0
		for _, r := range rs {
			s += float64(r.ServerQueueNs)
		}
		return s / float64(len(rs))
	}
	first, last := mean(res.Truth[:16]), mean(res.Truth[250:])
	t.Logf("mean queue: first 16 %v, last 50 %v", time.Duration(first), time.Duration(last))
	if last < 10*first+float64(100*time.Millisecond) {
		t.Errorf("mean queue time: first 16 %v, last 50 %v; want the queue to grow", time.Duration(first), time.Duration(last))
	}
	maxWaiting, waitingAt := 0, func(ns int64) int {
		w := 0
		for _, s := range res.Steps {
			if s.StartNs <= ns {
				w = s.Waiting
			}
		}
		return w
	}
	for _, s := range res.Steps {
		maxWaiting = max(maxWaiting, s.Waiting)
	}
	if maxWaiting < 150 {
		t.Errorf("max num_requests_waiting %d, want ≥ 150 with 300 requests at 1000/s", maxWaiting)
	}
	if a, b := waitingAt(int64(50*time.Millisecond)), waitingAt(int64(250*time.Millisecond)); b <= a {
		t.Errorf("waiting at 50ms = %d, at 250ms = %d; want it rising during the burst", a, b)
	}
}

// A repeated prefix hits the cache: cached tokens reported, prefill shorter.
func TestPrefixCacheHits(t *testing.T) {
	o := DefaultOptions()
	prefix := randomPrompt(42, 2000)
	mk := func(seed uint64) []int32 { return append(append([]int32(nil), prefix...), randomPrompt(seed, 100)...) }
	reqs := []Arrival{
		{ArrivalNs: 0, Prompt: mk(1), MaxTokens: 10, IgnoreEOS: true},
		{ArrivalNs: int64(time.Second), Prompt: mk(2), MaxTokens: 10, IgnoreEOS: true},
		{ArrivalNs: 2 * int64(time.Second), Prompt: randomPrompt(3, 2100), MaxTokens: 10, IgnoreEOS: true},
	}
	res := simulate(t, o, reqs)
	a, b, c := res.Truth[0], res.Truth[1], res.Truth[2]
	if a.ServerCachedTokens != 0 || c.ServerCachedTokens != 0 {
		t.Errorf("cold requests cached %d and %d tokens, want 0", a.ServerCachedTokens, c.ServerCachedTokens)
	}
	if want := int32(2000 / o.BlockSize * o.BlockSize); b.ServerCachedTokens != want {
		t.Errorf("repeat cached %d tokens, want %d (the prefix's full blocks)", b.ServerCachedTokens, want)
	}
	if b.ServerPrefillNs*2 > a.ServerPrefillNs {
		t.Errorf("prefill with cache %v, without %v; want less than half", time.Duration(b.ServerPrefillNs), time.Duration(a.ServerPrefillNs))
	}
	last := res.Steps[len(res.Steps)-1]
	if last.PrefixHitTokensSoFar != int64(b.ServerCachedTokens) {
		t.Errorf("prefix_cache_hits = %d, want %d", last.PrefixHitTokensSoFar, b.ServerCachedTokens)
	}
	// With caching off nothing hits.
	o.DisablePrefixCaching = true
	res = simulate(t, o, reqs)
	if got := res.Truth[1].ServerCachedTokens; got != 0 {
		t.Errorf("caching disabled: cached %d tokens, want 0", got)
	}
}

// A burst of long prompts slows the decode steps of running requests
// (prefill interference through the shared step).
func TestLongPromptBurstRaisesITL(t *testing.T) {
	o := DefaultOptions()
	run := func(burst bool) time.Duration {
		var reqs []Arrival
		for i := range 8 {
			reqs = append(reqs, Arrival{ArrivalNs: 0, Prompt: randomPrompt(uint64(i+1)<<30, 200), MaxTokens: 200, IgnoreEOS: true})
		}
		if burst {
			for i := range 6 {
				reqs = append(reqs, Arrival{ArrivalNs: int64(300 * time.Millisecond), Prompt: randomPrompt(uint64(i+100)<<30, 6000),
					MaxTokens: 5, IgnoreEOS: true})
			}
		}
		res := simulate(t, o, reqs)
		var sum time.Duration
		for _, r := range res.Truth[:8] {
			sum += time.Duration(r.ServerDecodeNs / int64(r.OutputTokens-1))
		}
		return sum / 8
	}
	quiet, loud := run(false), run(true)
	t.Logf("mean TPOT of running requests: quiet %v, burst %v", quiet, loud)
	if loud < quiet*3/2 {
		t.Errorf("running requests' mean TPOT: %v quiet, %v with a long-prompt burst; want ≥ 1.5×", quiet, loud)
	}
}

// A full KV cache preempts (recompute) and every request still finishes
// with its exact output length.
func TestFullKVPreempts(t *testing.T) {
	o := DefaultOptions()
	ApplyPreset(&o, "tiny")
	o.NumGPUBlocks, o.MaxModelLen = 64, 1024
	var reqs []Arrival
	for i := range 8 {
		reqs = append(reqs, Arrival{Prompt: randomPrompt(uint64(i+1)<<40, 100), MaxTokens: 400, IgnoreEOS: true})
	}
	res := simulate(t, o, reqs)
	pre := 0
	for i, r := range res.Truth {
		pre += int(r.ServerPreemptions)
		if r.OutputTokens != 400 {
			t.Errorf("request %d: %d output tokens, want 400", i, r.OutputTokens)
		}
	}
	last := res.Steps[len(res.Steps)-1]
	t.Logf("%d preemptions", pre)
	if pre == 0 || last.PreemptionsSoFar != int64(pre) {
		t.Errorf("preemptions: truth %d, counter %d; want equal and > 0", pre, last.PreemptionsSoFar)
	}
	for _, s := range res.Steps {
		if s.KVUsage > 1 {
			t.Fatalf("KV usage %g > 1", s.KVUsage)
		}
	}
}

// The engine returns every block once all requests finish, and cached
// blocks are evicted LRU.
func TestKVCacheAccounting(t *testing.T) {
	c := newKVCache(4, 2, true)
	a := c.allocate(nil, 2)
	c.commit(a[0], 11)
	c.commit(a[1], 12)
	c.free(a)
	if c.nfree != 4 || c.cached.Len() != 2 {
		t.Fatalf("after free: nfree %d cached %d, want 4 and 2", c.nfree, c.cached.Len())
	}
	if hit := c.lookup([]uint64{11, 12, 13}, nil); len(hit) != 2 {
		t.Fatalf("lookup hit %d blocks, want 2", len(hit))
	}
	// Allocating 3 blocks takes the 2 never-used ones first, then evicts the
	// freed request's tail block (12) before its head (11).
	b := c.allocate(nil, 3)
	if _, ok := c.cached.Get(12); ok {
		t.Errorf("block hash 12 still cached after eviction")
	}
	if _, ok := c.cached.Get(11); !ok {
		t.Errorf("block hash 11 evicted before 12")
	}
	c.free(b)
	if c.nfree != 4 {
		t.Errorf("nfree %d, want 4", c.nfree)
	}
}

// Priority policy: a lower priority value is served first.
func TestPriorityPolicy(t *testing.T) {
	o := DefaultOptions()
	ApplyPreset(&o, "tiny")
	o.MaxNumSeqs = 1
	o.Policy = "priority"
	reqs := []Arrival{
		{ArrivalNs: 0, Prompt: randomPrompt(1, 50), MaxTokens: 20, IgnoreEOS: true},
		{ArrivalNs: 1, Prompt: randomPrompt(2, 50), MaxTokens: 20, IgnoreEOS: true, Priority: 5},
		{ArrivalNs: 2, Prompt: randomPrompt(3, 50), MaxTokens: 20, IgnoreEOS: true, Priority: -5},
	}
	res := simulate(t, o, reqs)
	if res.Truth[2].ServerQueueNs >= res.Truth[1].ServerQueueNs {
		t.Errorf("priority -5 queued %v, priority 5 queued %v; want -5 first", time.Duration(res.Truth[2].ServerQueueNs), time.Duration(res.Truth[1].ServerQueueNs))
	}
}

// Output lengths: exact with ignore_eos, seeded and within [min_tokens,
// max_tokens] without, and deterministic.
func TestOutputLengths(t *testing.T) {
	o := DefaultOptions()
	o.MeanOutputTokens = 20
	var reqs []Arrival
	for i := range 200 {
		reqs = append(reqs, Arrival{ArrivalNs: int64(i) * int64(time.Second), Prompt: randomPrompt(uint64(i), 10), MaxTokens: 50, MinTokens: 5})
	}
	a := simulate(t, o, reqs)
	b := simulate(t, o, reqs)
	sum, capped := 0, 0
	for i, r := range a.Truth {
		n := int(r.OutputTokens)
		if n < 5 || n > 50 {
			t.Errorf("request %d: %d tokens outside [5,50]", i, n)
		}
		if n != int(b.Truth[i].OutputTokens) {
			t.Errorf("request %d: %d then %d tokens; want deterministic", i, n, b.Truth[i].OutputTokens)
		}
		sum += n
		if n == 50 {
			capped++
		}
	}
	if m := float64(sum) / 200; m < 12 || m > 28 {
		t.Errorf("mean output %g tokens, want ≈ 20", m)
	}
	if capped == 0 {
		t.Errorf("no request reached max_tokens; want some")
	}
}

// Over-long requests are refused as the server would.
func TestSimulateRejectsOverLong(t *testing.T) {
	o := DefaultOptions()
	res, err := Simulate(context.Background(), o, []Arrival{{Prompt: randomPrompt(1, o.MaxModelLen), MaxTokens: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Truth[0]; r.Status != traces.StatusHTTPError || r.HTTPStatus != 400 {
		t.Errorf("status %q %d, want http_error 400", r.Status, r.HTTPStatus)
	}
}
