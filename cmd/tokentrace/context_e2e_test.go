package main

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/analyze"
	"github.com/tokentrace/tokentrace/traces"
)

// growingAgentTrace is sessions agent sessions of turns turns with blocks of
// bs tokens: every first prompt is a shared system prompt (sysBlocks
// blocks) and the session's own blocks; turn k's prompt is turn k−1's
// prompt, its output (40–80 tokens) and a tool result of 400–900 tokens,
// as an agent's context grows. prefix_blocks say what production's cache
// could reuse: turn k−1's full prompt blocks, then blocks of its own (a
// block holding turn k−1's output is new to the trace, which records
// prompts only). Think times are 5–20 ms; sessions start 40 ms apart.
func growingAgentTrace(sessions, turns, bs int, seed uint64) []traces.Record {
	const sysBlocks = 64
	rng := rand.New(rand.NewPCG(seed, 18))
	var recs []traces.Record
	next := int64(1_000_000) // block ids of the sessions' own content
	for s := 1; s <= sessions; s++ {
		var prev *traces.Record
		for k := 1; k <= turns; k++ {
			r := traces.NewRecord()
			r.Seq, r.Session, r.Turn = int64(len(recs)), int64(s), int32(k)
			r.API = traces.APICompletions
			r.ArrivalNs = int64(s) * int64(40*time.Millisecond)
			r.OutputTokens = int32(40 + rng.IntN(41))
			var reuse int
			if prev == nil {
				for b := range sysBlocks {
					r.PrefixBlocks = append(r.PrefixBlocks, int64(b+1))
				}
				r.InputTokens = int32(sysBlocks*bs + 100 + rng.IntN(400))
			} else {
				r.ThinkNs = int64(5+rng.IntN(16)) * int64(time.Millisecond)
				r.InputTokens = prev.InputTokens + prev.OutputTokens + int32(400+rng.IntN(501))
				reuse = int(prev.InputTokens) / bs
				r.PrefixBlocks = append(r.PrefixBlocks, prev.PrefixBlocks[:reuse]...)
			}
			for len(r.PrefixBlocks) < (int(r.InputTokens)+bs-1)/bs {
				r.PrefixBlocks = append(r.PrefixBlocks, next)
				next++
			}
			recs = append(recs, r)
			prev = &recs[len(recs)-1]
		}
	}
	return recs
}

// The must-show of context growth: a multi-turn agent trace replayed with
// --sessions closed against the built-in simulator (uncontended, prefix
// caching on). For ≥ 99 % of follow-up turns the simulator's cached tokens
// equal the reuse the trace implies (the previous turn's prompt + output,
// to a whole block) within one block, which needs the simulator to cache
// output blocks and the run to send back the ids it returned; and analyze
// prints implied and realised hit rates within 2 points. analyze's implied
// LRU sees prompt blocks only, so it misses the previous outputs' blocks:
// here about 1.3 points (outputs are small beside an agent's context).
func TestContextGrowthCachedTokensMatchImpliedReuse(t *testing.T) {
	t.Parallel() // mostly waits on the real-time replay; the CLI runs in child processes

	const bs = 16 // the simulator's block size
	dir := t.TempDir()
	trace, res := filepath.Join(dir, "trace.jsonl"), filepath.Join(dir, "res.jsonl")
	m := traces.NewMeta("test")
	m.BlockSize = bs
	recs := growingAgentTrace(20, 8, bs, 5)
	if err := traces.WriteAll(trace, m, recs); err != nil {
		t.Fatal(err)
	}
	runMainChild(t, "", "replay", "--quiet", "--sessions", "closed", "--max-lateness", "1m", "--out", res, trace)
	rows, _, err := traces.ReadAll(res)
	if err != nil {
		t.Fatal(err)
	}
	bySeq := map[int64]traces.Record{}
	for _, r := range rows {
		if !r.OK() {
			t.Fatalf("seq %d: %s %s", r.Seq, r.Status, r.Error)
		}
		bySeq[r.Seq] = r
	}
	if len(bySeq) != len(recs) {
		t.Fatalf("%d result rows, want %d", len(bySeq), len(recs))
	}
	match, n := 0, 0
	for _, r := range rows {
		if r.Turn == 1 {
			continue
		}
		p := bySeq[r.Seq-1] // a session's turns are consecutive seqs
		implied := int(p.InputTokens+p.ServerOutputTokens) / bs * bs
		n++
		if math.Abs(float64(int(r.ServerCachedTokens)-implied)) <= bs {
			match++
		} else if n-match <= 3 {
			t.Logf("seq %d: cached %d tokens, the trace implies %d (previous prompt %d + output %d)", r.Seq, r.ServerCachedTokens, implied, p.InputTokens, p.ServerOutputTokens)
		}
	}
	t.Logf("%d of %d follow-ups cached the implied reuse within a block", match, n)
	if n != 20*7 || match*100 < 99*n {
		t.Errorf("%d of %d follow-ups cached the previous prompt + output within a block, want ≥ 99 %% of 140", match, n)
	}
	out, _ := runMainChild(t, "", "analyze", res)
	if !strings.Contains(out, "\nPrefix cache  implied ") {
		t.Errorf("analyze prints no prefix-cache line:\n%s", out)
	}
	js, _ := runMainChild(t, "", "analyze", "--json", res)
	var rep struct {
		PrefixCache *analyze.PrefixCache `json:"prefix_cache"`
	}
	if err := json.Unmarshal([]byte(js), &rep); err != nil {
		t.Fatal(err)
	}
	pc := rep.PrefixCache
	if pc == nil || pc.ReportedRequests != int64(len(recs)) {
		t.Fatalf("prefix cache %+v: want the server's count on all %d requests", pc, len(recs))
	}
	t.Logf("implied %.2f%%, server %.2f%%: gap %+.2f points: %s", 100*pc.ImpliedRateReported, 100*pc.RealisedRate, pc.GapPoints, pc.Explanation)
	if math.Abs(pc.GapPoints) > 2 {
		t.Errorf("implied %.1f%% and realised %.1f%% differ by %.1f points, want ≤ 2", 100*pc.ImpliedRateReported, 100*pc.RealisedRate, pc.GapPoints)
	}
}

// agenticCacheTrace is sessions sessions of turns turns, every prompt a
// shared system block (id 1) then its session's blocks up to its turn
// (turn k extends turn k−1 by one block), each block 64 tokens. Calls
// are 150 ms apart, one at a time: an uncontended server.
func agenticCacheTrace(sessions, turns int) []traces.Record {
	var recs []traces.Record
	for k := 1; k <= turns; k++ {
		for s := 1; s <= sessions; s++ {
			r := traces.NewRecord()
			r.Seq = int64(len(recs))
			r.ArrivalNs = int64(len(recs)) * int64(150*time.Millisecond)
			r.Session, r.Turn = int64(s), int32(k)
			r.PrefixBlocks = []int64{1}
			for j := 1; j <= k; j++ {
				r.PrefixBlocks = append(r.PrefixBlocks, int64(1000*s+j))
			}
			r.InputTokens, r.OutputTokens = int32(64*len(r.PrefixBlocks)), 4
			recs = append(recs, r)
		}
	}
	return recs
}

// TestAnalyzeSessionsAgainstSim replays a small agentic trace against the
// built-in simulator (prefix caching on, a cache far larger than the
// trace) and checks that analyze reports its sessions and that the
// prefix-cache hit rate the trace implies and the one the simulator
// reports agree within 3 points.
func TestAnalyzeSessionsAgainstSim(t *testing.T) {
	t.Parallel() // mostly waits on the real-time replay; the CLI runs in child processes
	dir := t.TempDir()
	trace, res := filepath.Join(dir, "trace.jsonl"), filepath.Join(dir, "res.jsonl")
	m := traces.NewMeta("test")
	m.BlockSize = 64
	writeTrace(t, trace, m, agenticCacheTrace(4, 4))
	runMainChild(t, "", "replay", "--quiet", "--max-lateness", "1m", "--out", res, trace)
	out, _ := runMainChild(t, "", "analyze", res)
	for _, want := range []string{"\nSessions      4 (16 calls; calls per session p50 4, p90 4, max 4;", "\n  4               4 ", "\n  makespan  p50 ", "\nPrefix cache  implied "} {
		if !strings.Contains(out, want) {
			t.Errorf("analyze text lacks %q:\n%s", want, out)
		}
	}
	js, _ := runMainChild(t, "", "analyze", "--json", res)
	var rep struct {
		Sessions    *analyze.Sessions    `json:"sessions"`
		PrefixCache *analyze.PrefixCache `json:"prefix_cache"`
	}
	if err := json.Unmarshal([]byte(js), &rep); err != nil {
		t.Fatal(err)
	}
	pc := rep.PrefixCache
	if pc == nil || rep.Sessions == nil {
		t.Fatalf("no sessions or prefix cache in the JSON:\n%s", js)
	}
	// 16 calls of 2–5 blocks (56 blocks), each with one block never seen
	// before (its turn's) and the first call the system block too: 39
	// blocks, 2496 of 3584 tokens (69.6 %), are implied hits.
	t.Logf("implied %.3f (%d of %d tokens), server %.3f (%d of %d on %d requests), gap %.2f points: %s",
		pc.ImpliedRate, pc.ImpliedTokens, pc.PromptTokens, pc.RealisedRate, pc.ReportedCachedTokens, pc.ReportedPromptTokens, pc.ReportedRequests, pc.GapPoints, pc.Explanation)
	if pc.ReportedRequests != 16 || pc.ImpliedTokens != 39*64 || pc.PromptTokens != 56*64 {
		t.Errorf("reported on %d of 16 requests, implied %d of %d tokens: want all, and %d of %d", pc.ReportedRequests, pc.ImpliedTokens, pc.PromptTokens, 39*64, 56*64)
	}
	if math.Abs(pc.GapPoints) > 3 || !strings.HasPrefix(pc.Explanation, "the server cached what") {
		t.Errorf("implied %.1f%% and the simulator's %.1f%% differ by %.1f points: %s", 100*pc.ImpliedRateReported, 100*pc.RealisedRate, pc.GapPoints, pc.Explanation)
	}
	// A cache of one block holds only the system block (a prompt's first
	// block is its most recently used): 15 calls reuse 64 tokens, 960 of
	// 3584 (26.8 %), and the line says the server cached more.
	js, _ = runMainChild(t, "", "analyze", "--json", "--kv-blocks", "1", res)
	if err := json.Unmarshal([]byte(js), &rep); err != nil {
		t.Fatal(err)
	}
	if pc := rep.PrefixCache; pc.ImpliedTokens != 15*64 || pc.GapPoints < 40 || !strings.Contains(pc.Explanation, "more than an LRU of 1 blocks") {
		t.Errorf("--kv-blocks 1: implied %.3f, gap %.1f: %s", pc.ImpliedRate, pc.GapPoints, pc.Explanation)
	}
}
