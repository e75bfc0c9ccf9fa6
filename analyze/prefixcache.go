package analyze

import (
	"fmt"
	"math"
	"slices"

	"github.com/tokentrace/tokentrace/internal/minheap"
	"github.com/tokentrace/tokentrace/traces"
)

// The prefix-cache hit rate a trace implies: every replayed request's
// PrefixBlocks go, in send order (rows are held back in a buffer of
// reorderRows to undo a results file's completion order), through a cache of Options.KVBlocks blocks (0 = unbounded) with
// vLLM's lookup and eviction rules: a request reuses the longest run of its
// leading blocks that are all cached (a block id stands for its whole
// prefix), never its last prompt token (the server computes at least one),
// and its blocks then become the most recently used, the first one last, so
// that eviction takes a prompt's tail blocks before its shared head (vLLM
// frees a finished request's blocks in reverse). Blocks held by running
// requests are not pinned: the cache is an LRU over block ids, not a
// schedule.

// PrefixCache compares the prefix-cache hit rate the trace implies with the
// one the server reports (null when no row carries prefix_blocks).
type PrefixCache struct {
	// KVBlocks is the capacity of the implied cache in blocks of BlockSize
	// tokens (Options.KVBlocks; 0 = unbounded, the ideal cache).
	KVBlocks int `json:"kv_blocks"`
	// BlockSize is the tokens per prefix_blocks entry (Meta.BlockSize, or
	// Options.BlockSize).
	BlockSize int `json:"block_size"`
	// Requests is the analyzed requests sent; PromptTokens their prompt
	// tokens (the server's count where it reported one).
	Requests     int64 `json:"requests"`
	PromptTokens int64 `json:"prompt_tokens"`
	// ImpliedTokens is the prompt tokens the implied cache holds when the
	// request arrives; ImpliedRate = ImpliedTokens / PromptTokens.
	ImpliedTokens int64   `json:"implied_cached_tokens"`
	ImpliedRate   float64 `json:"implied_rate"`
	// Evictions is how many blocks the implied cache evicted (0 when
	// unbounded).
	Evictions int64 `json:"evictions"`
	// ReportedRequests is the requests with the server's usage
	// (server_prompt_tokens ≥ 0) once it reported cached prompt tokens
	// (server_cached_tokens ≥ 0) on any request: vLLM leaves the cached
	// count out when it is 0, so a request with usage but without one
	// counts as 0 cached. Over them ReportedPromptTokens,
	// ReportedCachedTokens, RealisedRate (cached / prompt, the server's
	// rate) and ImpliedRateReported (the implied rate over the same
	// requests, which the gap compares with). All zero when no request
	// reported cached tokens.
	ReportedRequests     int64   `json:"reported_requests"`
	ReportedPromptTokens int64   `json:"reported_prompt_tokens"`
	ReportedCachedTokens int64   `json:"reported_cached_tokens"`
	RealisedRate         float64 `json:"realised_rate"`
	ImpliedRateReported  float64 `json:"implied_rate_reported"`
	// GapPoints is RealisedRate − ImpliedRateReported in percentage points
	// (negative: the server cached less than the trace implies).
	GapPoints float64 `json:"gap_points"`
	// Replicas is how many replicas computed the prompts (the rows'
	// replica, or prefill_replica under disaggregation). With two or
	// more, ReplicaImpliedRate is the implied rate with one such cache
	// per replica (each of Options.KVBlocks), fed only the requests
	// routed to it, and ReplicaImpliedRateReported the same over the
	// requests the server reported: what the routing left reachable, so
	// ImpliedRateReported − ReplicaImpliedRateReported is what it lost.
	Replicas                   int     `json:"replicas,omitempty"`
	ReplicaImpliedRate         float64 `json:"replica_implied_rate,omitempty"`
	ReplicaImpliedRateReported float64 `json:"replica_implied_rate_reported,omitempty"`
	// Explanation is the gap in one line.
	Explanation string `json:"explanation"`
}

// gapTolerancePoints is the gap (percentage points) below which the server
// is said to cache what the trace implies.
const gapTolerancePoints = 2.0

// blockCache is the implied cache: an unbounded set, or an LRU of cap
// blocks (a map into a doubly linked list kept in a slice).
type blockCache struct {
	cap       int
	set       map[int64]struct{} // unbounded
	idx       map[int64]int32    // LRU: block id → node
	nodes     []lruNode
	head      int32 // most recently used (−1 = empty)
	tail      int32 // least recently used
	free      int32 // a node freed by an eviction (−1 = none)
	evictions int64
}

type lruNode struct {
	id         int64
	prev, next int32
}

func newBlockCache(capacity int) *blockCache {
	if capacity <= 0 {
		return &blockCache{set: map[int64]struct{}{}}
	}
	return &blockCache{cap: capacity, idx: map[int64]int32{}, head: -1, tail: -1, free: -1}
}

func (c *blockCache) has(id int64) bool {
	if c.set != nil {
		_, ok := c.set[id]
		return ok
	}
	_, ok := c.idx[id]
	return ok
}

// hits is how many leading blocks of ids are cached.
func (c *blockCache) hits(ids []int64) int {
	for i, id := range ids {
		if !c.has(id) {
			return i
		}
	}
	return len(ids)
}

// use makes ids the most recently used blocks, ids[0] the most recent,
// inserting the missing ones (evicting the least recently used).
func (c *blockCache) use(ids []int64) {
	if c.set != nil {
		for _, id := range ids {
			c.set[id] = struct{}{}
		}
		return
	}
	for i := len(ids) - 1; i >= 0; i-- {
		c.touch(ids[i])
	}
}

func (c *blockCache) unlink(n int32) {
	p, x := c.nodes[n].prev, c.nodes[n].next
	if p >= 0 {
		c.nodes[p].next = x
	} else {
		c.head = x
	}
	if x >= 0 {
		c.nodes[x].prev = p
	} else {
		c.tail = p
	}
}

func (c *blockCache) pushFront(n int32) {
	c.nodes[n].prev, c.nodes[n].next = -1, c.head
	if c.head >= 0 {
		c.nodes[c.head].prev = n
	}
	c.head = n
	if c.tail < 0 {
		c.tail = n
	}
}

func (c *blockCache) touch(id int64) {
	if n, ok := c.idx[id]; ok {
		if n != c.head {
			c.unlink(n)
			c.pushFront(n)
		}
		return
	}
	var n int32
	switch {
	case len(c.idx) >= c.cap:
		n = c.tail
		c.unlink(n)
		delete(c.idx, c.nodes[n].id)
		c.evictions++
	default:
		n = int32(len(c.nodes))
		c.nodes = append(c.nodes, lruNode{})
	}
	c.nodes[n].id = id
	c.idx[id] = n
	c.pushFront(n)
}

// prefixAcc accumulates the PrefixCache section row by row.
type prefixAcc struct {
	cache     *blockCache
	blockSize int
	any       bool  // some row had prefix blocks
	noSize    int64 // rows with blocks but no block size known
	lastSent  int64
	unordered int64        // rows with blocks fed after such a row sent later
	pending   []pendingRow // rows held back, a min-heap by sentFirst
	window    int          // rows held back (reorderRows)
	pc        PrefixCache
	repImpl   int64 // implied tokens over the rows with the server's usage
	anyCached bool  // some row reported cached tokens
	// perRep are the implied caches of the replicas by id (fleet.go),
	// with the tokens they implied over all rows and over the reported
	// ones.
	perRep              []*blockCache
	kvBlocks            int
	perImpl, perRepImpl int64
}

// reorderRows is how many rows the implied cache holds back to feed them
// in send order: a results file written from replay's journal is in
// completion order, at most the requests in flight out of send order.
const reorderRows = 1 << 16

// pendingRow is a row waiting in the reorder buffer.
type pendingRow struct {
	seq, sent            int64
	input                int32
	serverPrompt, cached int32
	rep                  int32 // the replica that computed the prompt (−1 = none)
	blocks               []int64
	count                bool
}

// sentFirst orders the reorder buffer, a min-heap (minheap): rows by send
// time, then seq.
func sentFirst(a, b *pendingRow) bool {
	return a.sent < b.sent || a.sent == b.sent && a.seq < b.seq
}

// add queues r for the implied cache; count says whether r is one of the
// analyzed rows (Options.Class) whose tokens the rates count. Every
// replayed row uses the cache, whatever its class: the server saw it.
func (p *prefixAcc) add(r *traces.Record, count bool, rep int32) {
	if r.SentNs < 0 {
		return // never reached the server
	}
	if len(r.PrefixBlocks) == 0 {
		// A row without blocks leaves the cache alone and only adds to
		// sums, which do not depend on the order: holding it back in the
		// heap cost a third of the whole analysis of block-less results.
		p.tally(pendingRow{input: r.InputTokens, serverPrompt: r.ServerPromptTokens, cached: r.ServerCachedTokens, count: count}, 0)
		return
	}
	p.any = true
	row := pendingRow{seq: r.Seq, sent: r.SentNs, input: r.InputTokens, serverPrompt: r.ServerPromptTokens,
		cached: r.ServerCachedTokens, rep: rep, count: count}
	if len(p.pending) < p.window {
		row.blocks = slices.Clone(r.PrefixBlocks)
		minheap.Push(&p.pending, row, sentFirst)
		return
	}
	// The buffer is full: the earliest row goes through the cache and r
	// takes its place, reusing its block list.
	top := p.pending[0]
	p.process(top)
	row.blocks = append(top.blocks[:0], r.PrefixBlocks...)
	p.pending[0] = row
	minheap.Down(p.pending, 0, sentFirst)
}

// process runs one row with blocks, in send order, through the implied
// cache.
func (p *prefixAcc) process(r pendingRow) {
	if r.sent < p.lastSent {
		p.unordered++
	}
	p.lastSent = max(p.lastSent, r.sent)
	if p.blockSize <= 0 {
		p.noSize++
		return
	}
	h := p.cache.hits(r.blocks)
	p.tally(r, max(min(int64(h)*int64(p.blockSize), r.prompt()-1), 0))
	p.cache.use(r.blocks)
	if r.rep >= 0 {
		for int(r.rep) >= len(p.perRep) {
			p.perRep = append(p.perRep, nil)
		}
		c := p.perRep[r.rep]
		if c == nil {
			c = newBlockCache(p.kvBlocks)
			p.perRep[r.rep] = c
		}
		if r.count {
			implied := max(min(int64(c.hits(r.blocks))*int64(p.blockSize), r.prompt()-1), 0)
			p.perImpl += implied
			if r.serverPrompt >= 0 {
				p.perRepImpl += implied
			}
		}
		c.use(r.blocks)
	}
}

// prompt is the row's prompt length: the server's count where it gave one.
func (r *pendingRow) prompt() int64 {
	if r.serverPrompt >= 0 {
		return int64(r.serverPrompt)
	}
	return int64(r.input)
}

// tally adds a row that the rates count, with the tokens the implied cache
// gave it, to the sums.
func (p *prefixAcc) tally(r pendingRow, implied int64) {
	if !r.count {
		return
	}
	prompt := r.prompt()
	p.pc.Requests++
	p.pc.PromptTokens += prompt
	p.pc.ImpliedTokens += implied
	if r.serverPrompt >= 0 {
		p.pc.ReportedRequests++
		p.pc.ReportedPromptTokens += int64(r.serverPrompt)
		p.pc.ReportedCachedTokens += int64(max(r.cached, 0))
		p.repImpl += implied
		p.anyCached = p.anyCached || r.cached >= 0
	}
}

// result is the PrefixCache section (nil without prefix blocks) and the
// warnings it comes with.
func (p *prefixAcc) result(kvBlocks int, terms traces.Terms) (*PrefixCache, []string) {
	for len(p.pending) > 0 {
		p.process(minheap.Pop(&p.pending, sentFirst))
	}
	if !p.any {
		return nil, nil
	}
	var warn []string
	if p.noSize > 0 {
		return nil, []string{fmt.Sprintf("%d row(s) carry prefix_blocks but the results have no block size (metadata block_size): no implied prefix-cache hit rate", p.noSize)}
	}
	if p.unordered > 0 {
		warn = append(warn, fmt.Sprintf("%d row(s) came more than %d rows after rows sent later: the implied prefix-cache hit rate took them late", p.unordered, p.window))
	}
	pc := p.pc
	if !p.anyCached {
		pc.ReportedRequests, pc.ReportedPromptTokens, pc.ReportedCachedTokens, p.repImpl = 0, 0, 0, 0
	}
	pc.KVBlocks, pc.BlockSize, pc.Evictions = kvBlocks, p.blockSize, p.cache.evictions
	pc.ImpliedRate = tokRatio(pc.ImpliedTokens, pc.PromptTokens)
	pc.RealisedRate = tokRatio(pc.ReportedCachedTokens, pc.ReportedPromptTokens)
	pc.ImpliedRateReported = tokRatio(p.repImpl, pc.ReportedPromptTokens)
	if pc.ReportedRequests > 0 {
		pc.GapPoints = 100 * (pc.RealisedRate - pc.ImpliedRateReported)
	}
	for _, c := range p.perRep {
		if c != nil {
			pc.Replicas++
		}
	}
	if pc.Replicas >= 2 {
		pc.ReplicaImpliedRate = tokRatio(p.perImpl, pc.PromptTokens)
		if p.anyCached {
			pc.ReplicaImpliedRateReported = tokRatio(p.perRepImpl, pc.ReportedPromptTokens)
		}
	} else {
		pc.Replicas = 0
	}
	pc.Explanation = pc.explain(terms)
	return &pc, warn
}

func tokRatio(a, b int64) float64 { return ratio(float64(a), float64(b)) }

// explain says in one line why the server's rate differs from the
// trace's, its options in terms.
func (pc *PrefixCache) explain(terms traces.Terms) string {
	kvBlocks := traces.OptionRef("Options.KVBlocks").Say(terms)
	cache := "an unbounded cache (" + kvBlocks + " 0)"
	if pc.KVBlocks > 0 {
		cache = fmt.Sprintf("an LRU of %d blocks (%s)", pc.KVBlocks, kvBlocks)
	}
	g := pc.GapPoints
	switch {
	case pc.ReportedRequests == 0:
		return "the server reported no cached prompt tokens (vLLM: --enable-prompt-tokens-details), so there is no realised rate to compare"
	case math.Abs(g) <= gapTolerancePoints:
		return fmt.Sprintf("the server cached what %s implies (within %.0f points)", cache, gapTolerancePoints)
	case g < 0 && pc.KVBlocks == 0:
		return fmt.Sprintf("the server cached %.1f points less than %s would: its KV cache is finite (evictions; give %s its capacity), blocks were held by running requests, or prompts were not rebuilt from the trace's blocks", -g, cache, kvBlocks)
	case g < 0:
		return fmt.Sprintf("the server cached %.1f points less than %s implies: evictions in a cache smaller than %s, blocks held by running requests, or prompts not rebuilt from the trace's blocks", -g, cache, kvBlocks)
	}
	larger := "a cache larger than " + kvBlocks + ", "
	if pc.KVBlocks == 0 {
		larger = ""
	}
	return fmt.Sprintf("the server cached %.1f points more than %s implies: %sprompts not rebuilt from the trace's blocks or sharing tokens beyond them (a common system prompt), or prefixes cached before the run", g, cache, larger)
}

// cacheName names the implied cache.
func (pc *PrefixCache) cacheName() string {
	if pc.KVBlocks > 0 {
		return fmt.Sprintf("an LRU of %d blocks", pc.KVBlocks)
	}
	return "an unbounded cache"
}

// Summary is the prefix-cache comparison in one line (text and HTML).
func (pc *PrefixCache) Summary() string {
	s := fmt.Sprintf("implied %.1f%% of prompt tokens (%s, %d-token blocks, %d evictions)", 100*pc.ImpliedRate, pc.cacheName(), pc.BlockSize, pc.Evictions)
	if pc.ReportedRequests == 0 {
		return s + "; server: not reported"
	}
	s += fmt.Sprintf("; server %.1f%% (on the %d of %d requests it reported, where the trace implies %.1f%%): gap %+.1f points",
		100*pc.RealisedRate, pc.ReportedRequests, pc.Requests, 100*pc.ImpliedRateReported, pc.GapPoints)
	if pc.Replicas >= 2 {
		s += fmt.Sprintf("; one such cache per replica, fed the requests routed to it, implies %.1f%% on its %d replicas", 100*pc.ReplicaImpliedRateReported, pc.Replicas)
	}
	return s
}

// writePrefixCacheText writes the Prefix cache block of the text report.
func (rep *Report) writePrefixCacheText(p func(string, ...any)) {
	if pc := rep.PrefixCache; pc != nil {
		p("\nPrefix cache  %s\n  %s\n", pc.Summary(), pc.Explanation)
	}
}
