package capture

// kAnon is the k-anonymity stage: it counts the requests of each prefix
// category and prefix block, and keeps only those shared by at least k.
// Its state is per distinct category and block, not per request: a count
// (and a category's prefix length) for each keyed digest seen.
type kAnon struct {
	k      int32
	cats   map[[32]byte]*category
	blocks map[uint64]int32
}

// category is one prefix category: how many requests share it, and its
// prefix length as the first of them (in input order) saw it.
type category struct {
	count        int32
	prefixTokens int32
}

func newKAnon(k int) *kAnon {
	return &kAnon{k: int32(k), cats: map[[32]byte]*category{}, blocks: map[uint64]int32{}}
}

// add counts e's category and blocks; call it in input order.
func (ka *kAnon) add(e *redacted) {
	if e.hasCat {
		c := ka.cats[e.cat]
		if c == nil {
			c = &category{prefixTokens: e.prefixTokens}
			ka.cats[e.cat] = c
		}
		c.count++
	}
	for _, b := range e.blocks {
		ka.blocks[b]++
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
func (ka *kAnon) block(b uint64) bool { return ka.blocks[b] >= ka.k }

// dropped is the number of categories shared by fewer than k requests.
func (ka *kAnon) dropped() int {
	n := 0
	for _, c := range ka.cats {
		if c.count < ka.k {
			n++
		}
	}
	return n
}
