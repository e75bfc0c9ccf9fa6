package capture

// kAnon is the k-anonymity stage: it counts the requests of each prefix
// category and prefix block, and keeps only those shared by at least k.
// Its state is per distinct category and block, not per request: a count
// (and a category's prefix length) for each keyed digest seen, at most
// Options.MaxKAnonEntries of them. When that fills, the digests seen only
// once are forgotten: one seen again starts counting anew, so the cap can
// only drop a category or block that would have reached k, never keep one
// that did not. Forgotten counts are reported (Stats.KAnonForgotten).
type kAnon struct {
	k         int32
	max       int
	cats      map[[32]byte]*category
	blocks    map[uint64]int32
	forgotten int64
	// dropped counts categories seen by fewer than k that were forgotten.
	droppedForgotten int
}

// category is one prefix category: how many requests share it, and its
// prefix length as the first of them (in input order) saw it.
type category struct {
	count        int32
	prefixTokens int32
}

func newKAnon(k, maxEntries int) *kAnon {
	return &kAnon{k: int32(k), max: maxEntries, cats: map[[32]byte]*category{}, blocks: map[uint64]int32{}}
}

// add counts e's category and blocks; call it in input order.
func (ka *kAnon) add(e *redacted) {
	if e.hasCat {
		c := ka.cats[e.cat]
		if c == nil {
			if len(ka.cats) >= ka.max && ka.k > 1 {
				ka.forgetCats()
			}
			c = &category{prefixTokens: e.prefixTokens}
			ka.cats[e.cat] = c
		}
		c.count++
	}
	if ka.k <= 1 {
		return // every block is kept: nothing to count
	}
	for _, b := range e.blocks {
		n, ok := ka.blocks[b]
		if !ok && len(ka.blocks) >= ka.max {
			ka.forgetBlocks()
		}
		ka.blocks[b] = n + 1
	}
}

func (ka *kAnon) forgetBlocks() {
	for b, n := range ka.blocks {
		if n < 2 {
			delete(ka.blocks, b)
			ka.forgotten++
		}
	}
}

func (ka *kAnon) forgetCats() {
	for d, c := range ka.cats {
		if c.count < 2 {
			delete(ka.cats, d)
			ka.forgotten++
			ka.droppedForgotten++
		}
	}
}

// category returns e's category if at least k requests share it.
func (ka *kAnon) category(e *redacted) (*category, bool) {
	if !e.hasCat {
		return nil, false
	}
	c := ka.cats[e.cat]
	return c, c != nil && c.count >= ka.k
}

// block reports whether at least k requests share block b.
func (ka *kAnon) block(b uint64) bool { return ka.k <= 1 || ka.blocks[b] >= ka.k }

// dropped is the number of categories shared by fewer than k requests
// (forgotten ones count once per time they were forgotten).
func (ka *kAnon) dropped() int {
	n := ka.droppedForgotten
	for _, c := range ka.cats {
		if c.count < ka.k {
			n++
		}
	}
	return n
}
