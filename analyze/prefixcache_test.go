package analyze

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// cacheRow is a successful row sent at i seconds with prompt tokens in,
// prefix blocks ids and the server's cached tokens (−1 = not reported).
func cacheRow(i int, in int32, cached int32, ids ...int64) traces.Record {
	r := rec(int64(i), time.Duration(i)*time.Second, 0, 100*ms, 500*ms, in, 10, 1)
	r.PrefixBlocks, r.ServerCachedTokens = ids, cached
	return r
}

// cacheRows are five rows over blocks of 10 tokens. Through an LRU of 3
// blocks (a row's first block the most recently used):
//
//	[1 2]   25 tok: miss                    → 0;  cache 1 2
//	[1 2 3] 30 tok: hits 1 2                → 20; cache 1 2 3
//	[4 5]   20 tok: miss, evicts 3 then 2   → 0;  cache 4 5 1
//	[1 2 3] 30 tok: hits 1 (2 was evicted)  → 10; evicts 1 5 4 → cache 1 2 3
//	[4 5]   20 tok: miss (4 was evicted)    → 0;  evicts 3 2 → cache 4 5 1
//
// 30 of 125 prompt tokens (24 %), 7 evictions. An unbounded cache: 0, 20,
// 0, 29 (a prompt made only of cached blocks still computes its last
// token), 19: 68 of 125 (54.4 %). The server reports 0 (by leaving the
// count out), 16, 0, 16 and no usage on the last row: 32 of 105 (30.5 %), where the LRU implies 30 of
// 105 (28.6 %) and the unbounded cache 49 of 105 (46.7 %).
func cacheRows() []traces.Record {
	rs := []traces.Record{
		cacheRow(0, 25, -1, 1, 2), // no cached count beside usage: vLLM's way of saying 0
		cacheRow(1, 30, 16, 1, 2, 3),
		cacheRow(2, 20, 0, 4, 5),
		cacheRow(3, 30, 16, 1, 2, 3),
		cacheRow(4, 20, -1, 4, 5),
	}
	rs[4].ServerPromptTokens = -1 // no usage at all
	return rs
}

func TestPrefixCache(t *testing.T) {
	cases := []struct {
		doc      string
		recs     []traces.Record
		kv       int
		implied  int64 // tokens
		rate     float64
		evict    int64
		realised float64
		implRep  float64
		gap      float64
		explain  string
	}{
		{
			doc:  "An LRU of 3 blocks, smaller than the 5-block working set, evicts: 24 % implied; the server's 30.5 % is within 2 points of the 28.6 % implied on its rows.",
			recs: cacheRows(), kv: 3, implied: 30, rate: 30.0 / 125, evict: 7,
			realised: 32.0 / 105, implRep: 30.0 / 105, gap: 100 * (32.0 - 30.0) / 105,
			explain: "the server cached what an LRU of 3 blocks (Options.KVBlocks) implies",
		},
		{
			doc:  "An unbounded cache never evicts: 54.4 % implied; the server cached 16.2 points less than it would.",
			recs: cacheRows(), kv: 0, implied: 68, rate: 68.0 / 125, evict: 0,
			realised: 32.0 / 105, implRep: 49.0 / 105, gap: 100 * (32.0 - 49.0) / 105,
			explain: "the server cached 16.2 points less than an unbounded cache (Options.KVBlocks 0) would",
		},
		{
			doc:  "An LRU as large as the working set (5 blocks) implies what the unbounded cache does.",
			recs: cacheRows(), kv: 5, implied: 68, rate: 68.0 / 125, evict: 0,
			realised: 32.0 / 105, implRep: 49.0 / 105, gap: 100 * (32.0 - 49.0) / 105,
			explain: "the server cached 16.2 points less than an LRU of 5 blocks (Options.KVBlocks) implies",
		},
		{
			doc:  "Rows without blocks, first in the file but sent last, add their prompts to the sums and nothing to the cache: 30 of 200 tokens implied, and on the rows with usage the server's 42 of 180 against 30 implied.",
			recs: append([]traces.Record{cacheRow(10, 40, 10), cacheRow(11, 35, -1)}, cacheRows()...),
			kv:   3, implied: 30, rate: 30.0 / 200, evict: 7,
			realised: 42.0 / 180, implRep: 30.0 / 180, gap: 100 * (42.0 - 30.0) / 180,
			explain: "the server cached 6.7 points more than an LRU of 3 blocks (Options.KVBlocks) implies",
		},
		{
			doc: "A server that cached more than the trace implies (a shared system prompt outside the blocks) is told apart.",
			recs: []traces.Record{
				cacheRow(0, 100, 50, 1),
				cacheRow(1, 100, 50, 2),
			},
			kv: 0, implied: 0, rate: 0, realised: 0.5, implRep: 0, gap: 50,
			explain: "the server cached 50.0 points more than an unbounded cache (Options.KVBlocks 0) implies: prompts not rebuilt",
		},
		{
			doc: "A server that reports no cached tokens has no realised rate, and the line says so.",
			recs: []traces.Record{
				cacheRow(0, 100, -1, 1),
				cacheRow(1, 100, -1, 1),
			},
			kv: 0, implied: 10, rate: 0.05, explain: "the server reported no cached prompt tokens",
		},
	}
	for _, c := range cases {
		t.Run(c.doc, func(t *testing.T) {
			o := DefaultOptions()
			o.KVBlocks, o.BlockSize = c.kv, 10
			rep := mustAnalyze(t, c.recs, o)
			pc := rep.PrefixCache
			if pc == nil {
				t.Fatal("no PrefixCache section")
			}
			if pc.ImpliedTokens != c.implied || !near(pc.ImpliedRate, c.rate) || pc.Evictions != c.evict {
				t.Errorf("implied %d tokens (%.4f), %d evictions; want %d (%.4f), %d", pc.ImpliedTokens, pc.ImpliedRate, pc.Evictions, c.implied, c.rate, c.evict)
			}
			if !near(pc.RealisedRate, c.realised) || !near(pc.ImpliedRateReported, c.implRep) || !near(pc.GapPoints, c.gap) {
				t.Errorf("realised %.4f, implied on reported rows %.4f, gap %.2f; want %.4f, %.4f, %.2f", pc.RealisedRate, pc.ImpliedRateReported, pc.GapPoints, c.realised, c.implRep, c.gap)
			}
			if !strings.HasPrefix(pc.Explanation, c.explain) {
				t.Errorf("explanation %q, want it to start %q", pc.Explanation, c.explain)
			}
		})
	}
}

// TestPrefixCacheCountsOtherClasses: rows left out by Options.Class still
// fill the cache (the server saw them) but not the rates.
func TestPrefixCacheCountsOtherClasses(t *testing.T) {
	recs := []traces.Record{cacheRow(0, 30, -1, 1, 2), cacheRow(1, 30, -1, 1, 2)}
	recs[0].Class, recs[1].Class = "batch", "interactive"
	o := DefaultOptions()
	o.BlockSize, o.Class = 10, "interactive"
	rep := mustAnalyze(t, recs, o)
	if pc := rep.PrefixCache; pc.Requests != 1 || pc.ImpliedTokens != 20 || pc.PromptTokens != 30 {
		t.Errorf("got %d request(s), %d of %d tokens implied; want 1, 20 of 30", pc.Requests, pc.ImpliedTokens, pc.PromptTokens)
	}
}

// TestPrefixCacheBlockSize: without a block size there is no implied
// rate, only a warning; a results file's metadata gives it.
func TestPrefixCacheBlockSize(t *testing.T) {
	rep := mustAnalyze(t, cacheRows(), DefaultOptions())
	if rep.PrefixCache != nil || !strings.Contains(strings.Join(rep.Warnings, "\n"), "no block size") {
		t.Errorf("without a block size: section %+v, warnings %q", rep.PrefixCache, rep.Warnings)
	}
	path := t.TempDir() + "/res.jsonl"
	m := traces.NewMeta("test")
	m.BlockSize = 10
	if err := traces.WriteAll(path, m, cacheRows()); err != nil {
		t.Fatal(err)
	}
	o := DefaultOptions()
	o.KVBlocks = 3
	rep = mustAnalyzeFiles(t, []string{path}, o)
	if pc := rep.PrefixCache; pc == nil || pc.BlockSize != 10 || pc.ImpliedTokens != 30 {
		t.Errorf("block size from the metadata: %+v", pc)
	}
}

// TestPrefixCacheSendOrder: a results file in completion order (here the
// rows reversed) is fed to the cache in send order; past the reorder
// buffer the rows are taken late and a warning says so.
func TestPrefixCacheSendOrder(t *testing.T) {
	cases := []struct {
		doc     string
		window  int
		implied int64
		warn    bool
	}{
		{"Within the reorder buffer the reversed rows give the in-order answer (30 tokens through an LRU of 3).", reorderRows, 30, false},
		{"With a buffer of one row the rows are taken out of send order, and a warning says so.", 1, -1, true},
	}
	for _, c := range cases {
		t.Run(c.doc, func(t *testing.T) {
			recs := cacheRows()
			slices.Reverse(recs)
			o := DefaultOptions()
			o.KVBlocks, o.BlockSize = 3, 10
			a := mustNew(t, o)
			a.pfx.window = c.window
			for i := range recs {
				a.Add(&recs[i])
			}
			rep := mustClose(t, a)
			warned := strings.Contains(strings.Join(rep.Warnings, "\n"), "took them late")
			if c.implied >= 0 && rep.PrefixCache.ImpliedTokens != c.implied || warned != c.warn {
				t.Errorf("implied %d tokens, warned %v (%q); want %d, %v", rep.PrefixCache.ImpliedTokens, warned, rep.Warnings, c.implied, c.warn)
			}
		})
	}
}

// TestPrefixCacheBlocklessRowsAllocateNothing: a row without prefix blocks
// leaves the cache alone, so it only adds to the sums and is not held in
// the reorder heap (holding it cost a third of the analysis of results
// without blocks).
func TestPrefixCacheBlocklessRowsAllocateNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	p := prefixAcc{cache: newBlockCache(0), blockSize: 10, window: reorderRows}
	r := cacheRow(0, 100, 10)
	if n := testing.AllocsPerRun(100, func() { p.add(&r, true, -1) }); n != 0 {
		t.Errorf("%.1f allocations per row without blocks, want 0", n)
	}
	if len(p.pending) != 0 || p.pc.Requests != 101 || p.pc.PromptTokens != 101*100 {
		t.Errorf("%d rows held back, %d requests of %d prompt tokens counted; want 0, 101 of 10100", len(p.pending), p.pc.Requests, p.pc.PromptTokens)
	}
}

// TestPrefixCacheReorderWindow: rows with blocks that come less than the
// buffer's length out of send order go through the cache in send order,
// once the buffer is full as much as while it fills: the same implied
// tokens and evictions as the rows fed in order, and none counted late.
func TestPrefixCacheReorderWindow(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var recs []traces.Record
	for i := range 2000 {
		recs = append(recs, cacheRow(i, 40, -1, int64(rng.IntN(6)), int64(rng.IntN(6))))
	}
	feed := func(rows []traces.Record) prefixAcc {
		p := prefixAcc{cache: newBlockCache(4), blockSize: 10, window: 8}
		for i := range rows {
			p.add(&rows[i], true, -1)
		}
		p.result(4, nil)
		return p
	}
	want := feed(recs)
	if want.pc.ImpliedTokens == 0 || want.cache.evictions == 0 {
		t.Fatalf("in order: %d implied tokens, %d evictions; the test needs both", want.pc.ImpliedTokens, want.cache.evictions)
	}
	shuffled := slices.Clone(recs)
	for s := 0; s+8 <= len(shuffled); s += 8 { // each row at most 7 places from its own
		rng.Shuffle(8, func(i, j int) { shuffled[s+i], shuffled[s+j] = shuffled[s+j], shuffled[s+i] })
	}
	got := feed(shuffled)
	if got.unordered != 0 || got.pc.ImpliedTokens != want.pc.ImpliedTokens || got.cache.evictions != want.cache.evictions {
		t.Errorf("shuffled: %d late, %d implied tokens, %d evictions; in order: %d implied tokens, %d evictions",
			got.unordered, got.pc.ImpliedTokens, got.cache.evictions, want.pc.ImpliedTokens, want.cache.evictions)
	}
}
