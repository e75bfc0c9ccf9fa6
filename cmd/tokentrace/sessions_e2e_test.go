package main

import (
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/analyze"
	"github.com/tokentrace/tokentrace/traces"
)

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
	dir := t.TempDir()
	trace, res := filepath.Join(dir, "trace.jsonl"), filepath.Join(dir, "res.jsonl")
	m := traces.NewMeta("test")
	m.BlockSize = 64
	writeTrace(t, trace, m, agenticCacheTrace(4, 4))
	runMain(t, "replay", "--quiet", "--max-lateness", "1m", "--out", res, trace)
	out, _ := runMain(t, "analyze", res)
	for _, want := range []string{"\nSessions      4 (16 calls; calls per session p50 4, p90 4, max 4;", "\n  4               4 ", "\n  makespan  p50 ", "\nPrefix cache  implied "} {
		if !strings.Contains(out, want) {
			t.Errorf("analyze text lacks %q:\n%s", want, out)
		}
	}
	js, _ := runMain(t, "analyze", "--json", res)
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
	js, _ = runMain(t, "analyze", "--json", "--kv-blocks", "1", res)
	if err := json.Unmarshal([]byte(js), &rep); err != nil {
		t.Fatal(err)
	}
	if pc := rep.PrefixCache; pc.ImpliedTokens != 15*64 || pc.GapPoints < 40 || !strings.Contains(pc.Explanation, "more than an LRU of 1 blocks") {
		t.Errorf("--kv-blocks 1: implied %.3f, gap %.1f: %s", pc.ImpliedRate, pc.GapPoints, pc.Explanation)
	}
}
