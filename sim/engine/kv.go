package engine

import "github.com/tokentrace/tokentrace/internal/u64map"

// kvCache is vLLM V1's block pool with prefix caching, reduced to its
// accounting: blocks have a reference count and, once a full block has been
// computed, the chained hash of its tokens (prompt and generated tokens alike,
// as vLLM hashes the whole sequence, so a follow-up whose prompt carries a
// finished request's output hits it too). Blocks with no references sit
// in a free queue in eviction order (LRU; a finished request's blocks go in
// tail first, so its last blocks are evicted first). Allocating takes blocks
// from the front of that queue and evicts their hashes; a prefix lookup walks
// a request's block hashes until the first miss.
type kvCache struct {
	blockSize int
	refcnt    []int32
	hash      []uint64 // 0 = not cached
	prev      []int32  // free-queue links, -1 = none
	next      []int32
	inFree    []bool
	head      int32
	tail      int32
	nfree     int
	// cached maps a block hash to the block holding it: u64map, as a fleet
	// of engines does tens of lookups per request on tables past the CPU's
	// caches.
	cached  *u64map.Map
	caching bool
}

func newKVCache(nblocks, blockSize int, caching bool) *kvCache {
	c := &kvCache{
		blockSize: blockSize,
		refcnt:    make([]int32, nblocks),
		hash:      make([]uint64, nblocks),
		prev:      make([]int32, nblocks),
		next:      make([]int32, nblocks),
		inFree:    make([]bool, nblocks),
		head:      -1,
		tail:      -1,
		cached:    u64map.New(min(nblocks, 1<<16)),
		caching:   caching,
	}
	for i := range nblocks {
		c.pushTail(int32(i))
	}
	return c
}

// usage is vLLM's kv_cache_usage_perc: 1 − free/total, where cached blocks
// with no references count as free.
func (c *kvCache) usage() float64 {
	return 1 - float64(c.nfree)/float64(len(c.refcnt))
}

func (c *kvCache) pushTail(b int32) {
	c.prev[b], c.next[b] = c.tail, -1
	if c.tail >= 0 {
		c.next[c.tail] = b
	} else {
		c.head = b
	}
	c.tail = b
	c.inFree[b] = true
	c.nfree++
}

func (c *kvCache) unlink(b int32) {
	p, n := c.prev[b], c.next[b]
	if p >= 0 {
		c.next[p] = n
	} else {
		c.head = n
	}
	if n >= 0 {
		c.prev[n] = p
	} else {
		c.tail = p
	}
	c.inFree[b] = false
	c.nfree--
}

// lookup returns the blocks of the longest cached prefix of hashes.
func (c *kvCache) lookup(hashes []uint64, dst []int32) []int32 {
	if !c.caching {
		return dst
	}
	for _, h := range hashes {
		b, ok := c.cached.Get(h)
		if !ok {
			break
		}
		dst = append(dst, b)
	}
	return dst
}

// canAllocate reports whether touching hit and allocating n new blocks fits.
func (c *kvCache) canAllocate(hit []int32, n int) bool {
	need := n
	for _, b := range hit {
		if c.inFree[b] {
			need++
		}
	}
	return need <= c.nfree
}

// touch takes a reference on each cached block.
func (c *kvCache) touch(bs []int32) {
	for _, b := range bs {
		if c.inFree[b] {
			c.unlink(b)
		}
		c.refcnt[b]++
	}
}

// allocate appends n fresh blocks to dst; the caller checked canAllocate.
func (c *kvCache) allocate(dst []int32, n int) []int32 {
	for range n {
		b := c.head
		c.unlink(b)
		if h := c.hash[b]; h != 0 {
			c.cached.DeleteIf(h, b)
			c.hash[b] = 0
		}
		c.refcnt[b] = 1
		dst = append(dst, b)
	}
	return dst
}

// commit records that block b holds the full block with hash h.
func (c *kvCache) commit(b int32, h uint64) {
	if !c.caching || c.hash[b] != 0 {
		return
	}
	v, existed := c.cached.Upsert(h)
	if existed {
		return // an equal block is already cached; keep the first
	}
	*v = b
	c.hash[b] = h
}

// free drops one reference on each block, tail first.
func (c *kvCache) free(bs []int32) {
	for i := len(bs) - 1; i >= 0; i-- {
		b := bs[i]
		c.refcnt[b]--
		if c.refcnt[b] == 0 {
			c.pushTail(b)
		}
	}
}

// blockHashes returns the chained hashes of the full blocks of tokens:
// h(i) = mix(h(i−1), tokens of block i), seeded by salt (cache_salt).
func blockHashes(tokens []int32, blockSize int, salt string) []uint64 {
	nb := len(tokens) / blockSize
	if nb == 0 {
		return nil
	}
	hs := make([]uint64, nb)
	h := hashSeed(salt)
	for i := range nb {
		h = hashBlock(h, tokens[i*blockSize:(i+1)*blockSize])
		hs[i] = h
	}
	return hs
}

// hashSeed is the chain's start: h(−1), from the cache salt.
func hashSeed(salt string) uint64 {
	h := uint64(0x9E3779B97F4A7C15)
	for i := 0; i < len(salt); i++ {
		h = mix64(h ^ uint64(salt[i]))
	}
	return h
}

// hashBlock chains one block's tokens onto prev (never 0, which marks an
// uncached block). Two tokens go into each mix: the mix is a bijection of
// 64 bits, so no pair is lost, and a fleet's engines and router hash every
// prompt block, where one mix per token was a tenth of their time.
func hashBlock(prev uint64, tokens []int32) uint64 {
	h := prev
	i := 0
	for ; i+1 < len(tokens); i += 2 {
		h = mix64(h ^ (uint64(uint32(tokens[i])) | uint64(uint32(tokens[i+1]))<<32))
	}
	if i < len(tokens) {
		h = mix64(h ^ uint64(uint32(tokens[i])))
	}
	if h == 0 {
		h = 1
	}
	return h
}

// mix64 is splitmix64's finalizer.
func mix64(x uint64) uint64 {
	x += 0x9E3779B97F4A7C15
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9
	x = (x ^ (x >> 27)) * 0x94D049BB133111EB
	return x ^ (x >> 31)
}
