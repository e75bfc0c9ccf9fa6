package synth

import (
	"iter"
	"math"
	"math/bits"
	"slices"

	"gonum.org/v1/gonum/floats"
)

// Fitting streams, so the values a histogram is cut from are kept as
// value → count (a multiset), not one entry per record. A multiset is exact
// while it holds at most its limit of distinct values; past it, values are
// truncated to fewer significant binary digits (truncLadder: 24, 20, 16,
// 14, 12, 11, 10, … bits after the leading one) until they fit. Truncation composes
// (truncating to 16 bits then to 10 is truncating to 10), so a coarsened
// multiset is exactly the multiset of the values truncated to its final
// precision, whatever the order they came in: the histogram cut from it is
// the exact histogram of values each lowered by less than a relative
// 2^-bits (FittedOn.Approximations reports the coarsest bits). Whole
// numbers stay whole, and those below 2^(bits+1) are unchanged.

// Default distinct-value limits of a multiset (see fitLimits): of gaps
// (seconds; continuous, so a long trace passes any limit), 1 MiB of table
// at the limit; of lengths and counts (token counts are bounded by the
// context length), 4 MiB.
const (
	defaultValueLimit  = 1 << 15
	defaultLengthLimit = 1 << 17
)

// truncLadder is the sequence of significant bits a multiset coarsens
// through; 0 (exact) comes before it.
var truncLadder = []int{24, 20, 16, 14, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1}

// finer reports whether precision a keeps more digits than b (0 = exact).
func finer(a, b int) bool { return b != 0 && (a == 0 || a > b) }

// nextBits is the precision after sig on the ladder.
func nextBits(sig int) int {
	for _, b := range truncLadder {
		if sig == 0 || b < sig {
			return b
		}
	}
	return truncLadder[len(truncLadder)-1]
}

// truncFloat keeps sig bits of a non-negative float64's significand after
// the leading one, so it lowers v by less than a relative 2^-sig; sig 0
// keeps all.
func truncFloat(v float64, sig int) float64 {
	if sig == 0 || sig >= 52 || v == 0 {
		return v
	}
	return math.Float64frombits(math.Float64bits(v) &^ (1<<(52-sig) - 1))
}

// truncUint keeps sig bits of x after its leading one, as truncFloat does
// for float64(x); sig 0 keeps all.
func truncUint(x uint64, sig int) uint64 {
	if sig == 0 {
		return x
	}
	if l := bits.Len64(x); l > sig+1 {
		x &^= 1<<(l-sig-1) - 1
	}
	return x
}

// multiset counts uint64 keys — a float64's bits (floatKey) or an integer —
// in an open-addressing table (linear probing, at most half full; a slot
// with count 0 is empty): a fit adds a few values per record, and this is
// several times faster than a Go map. trunc truncates a key to a precision.
type multiset struct {
	slots []mslot
	used  int
	shift uint // 64 - log2(len(slots))
	sig   int  // bits kept after the leading one; 0 = exact
	limit int
	trunc func(uint64, int) uint64
}

// mslot is a key and its count, side by side: one cache line per probe.
type mslot struct {
	k uint64
	n int64
}

func newMultiset(limit int, trunc func(uint64, int) uint64) multiset {
	return multiset{limit: limit, trunc: trunc}
}

// len is the number of distinct values.
func (s *multiset) len() int { return s.used }

// each calls fn with every value and its count, in no particular order.
func (s *multiset) each(fn func(k uint64, n int64)) {
	for _, e := range s.slots {
		if e.n != 0 {
			fn(e.k, e.n)
		}
	}
}

// slot is where key k is or would go.
func (s *multiset) slot(k uint64) *mslot {
	mask := len(s.slots) - 1
	i := int((k * 0x9E3779B97F4A7C15) >> s.shift)
	for {
		e := &s.slots[i]
		if e.n == 0 || e.k == k {
			return e
		}
		i = (i + 1) & mask
	}
}

// add counts k n times (n > 0).
func (s *multiset) add(k uint64, n int64) {
	if s.sig != 0 {
		k = s.trunc(k, s.sig)
	}
	if s.slots == nil {
		s.resize(16)
	}
	e := s.slot(k)
	if e.n != 0 {
		e.n += n
		return
	}
	e.k, e.n = k, n
	s.used++
	if s.used > s.limit {
		s.coarsen(nextBits(s.sig))
	} else if 2*s.used > len(s.slots) {
		s.resize(2 * len(s.slots))
	}
}

// resize rehashes into size slots (a power of two).
func (s *multiset) resize(size int) {
	old := s.slots
	s.slots = make([]mslot, size)
	s.shift = uint(64 - bits.TrailingZeros(uint(size)))
	for _, e := range old {
		if e.n != 0 {
			*s.slot(e.k) = e
		}
	}
}

// coarsen truncates every value to sig bits (or fewer, until the multiset
// fits its limit).
func (s *multiset) coarsen(sig int) {
	for {
		old := *s
		*s = multiset{limit: old.limit, trunc: old.trunc, sig: sig}
		s.resize(max(16, len(old.slots)))
		old.each(func(k uint64, n int64) {
			k = s.trunc(k, sig)
			e := s.slot(k)
			if e.n == 0 {
				e.k = k
				s.used++
			}
			e.n += n
		})
		if s.used <= s.limit || sig == truncLadder[len(truncLadder)-1] {
			return
		}
		sig = nextBits(sig)
	}
}

// merge adds o's values, first truncating s to o's precision if o's is
// coarser. o is unchanged.
func (s *multiset) merge(o *multiset) {
	if finer(s.sig, o.sig) {
		s.coarsen(o.sig)
	}
	o.each(func(k uint64, n int64) { s.add(k, n) })
}

// total is the number of values counted.
func (s *multiset) total() int64 {
	var n int64
	s.each(func(_ uint64, c int64) { n += c })
	return n
}

// floatKey is a non-negative float64 as a multiset key: the order of the
// bits is the order of the values.
type floatKey = uint64

func truncFloatKey(k floatKey, sig int) floatKey {
	return math.Float64bits(truncFloat(math.Float64frombits(k), sig))
}

// newValues is a multiset of non-negative float64 values.
func newValues(limit int) multiset { return newMultiset(limit, truncFloatKey) }

// addFloat counts v once.
func addFloat(s *multiset, v float64) { s.add(math.Float64bits(v), 1) }

// run is a value and how many times it occurs.
type run struct {
	v float64
	n int64
}

// runsOf returns the values of a value multiset in increasing order, and
// their total count.
func runsOf(s *multiset) ([]run, int64) {
	out := make([]run, 0, s.used)
	var n int64
	s.each(func(k uint64, c int64) {
		out = append(out, run{math.Float64frombits(k), c})
		n += c
	})
	// Non-negative floats order as their bits.
	slices.SortFunc(out, func(a, b run) int { return cmpBits(a.v, b.v) })
	return out, n
}

func cmpBits(a, b float64) int {
	x, y := math.Float64bits(a), math.Float64bits(b)
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// runsOfSorted groups sorted values into runs.
func runsOfSorted(sorted []float64) []run {
	var out []run
	for i := 0; i < len(sorted); {
		j := i + 1
		for j < len(sorted) && sorted[j] == sorted[i] {
			j++
		}
		out = append(out, run{sorted[i], int64(j - i)})
		i = j
	}
	return out
}

// sumLanes says floats.Sum adds in eight interleaved lanes (gonum's amd64
// assembly) rather than left to right; meanStdDevRuns follows whichever it
// does, so a level's gap CV is bit-identical to that of the slice the
// in-memory fitter summed.
var sumLanes = func() bool {
	// Left to right, 1e16 absorbs every 1; in lanes the ones add up first.
	probe := make([]float64, 16)
	probe[0] = 1e16
	for i := 1; i < len(probe); i++ {
		probe[i] = 1
	}
	return floats.Sum(probe) == laneSum(slices.Values(probe), len(probe))
}()

// laneSum adds the n values of vals as gonum's amd64 Sum adds a 16-byte
// aligned slice: value i into lane i%8 for the first n&^7, then the lanes
// folded pairwise with the tail. (Go aligns every []float64 of two or more
// values to 16 bytes but those of three, where both orders agree.)
func laneSum(vals iter.Seq[float64], n int) float64 {
	var lane [8]float64
	var tail []float64
	body := n &^ 7
	i := 0
	for v := range vals {
		if i < body {
			lane[i&7] += v
		} else {
			tail = append(tail, v)
		}
		i++
	}
	s0, s1 := lane[0]+lane[6], lane[1]+lane[7]
	t0, t1 := lane[2]+lane[4], lane[3]+lane[5]
	k := 0
	if n&4 != 0 {
		s0, s1 = s0+tail[0], s1+tail[1]
		t0, t1 = t0+tail[2], t1+tail[3]
		k = 4
	}
	s0, s1 = s0+t0, s1+t1
	if n&2 != 0 {
		s0, s1 = s0+tail[k], s1+tail[k+1]
		k += 2
	}
	s := s0 + s1
	if n&1 != 0 {
		s += tail[k]
	}
	return s
}

// eachValue yields the values of runs laid end to end.
func eachValue(parts ...[]run) iter.Seq[float64] {
	return func(yield func(float64) bool) {
		for _, p := range parts {
			for _, r := range p {
				for range r.n {
					if !yield(r.v) {
						return
					}
				}
			}
		}
	}
}

// meanStdDevRuns is stat.MeanStdDev of the values of parts laid end to end,
// computed in the same order, so bit-identical.
func meanStdDevRuns(parts ...[]run) (mean, std float64) {
	var n int64
	for _, p := range parts {
		for _, r := range p {
			n += r.n
		}
	}
	var sum float64
	if sumLanes {
		sum = laneSum(eachValue(parts...), int(n))
	} else {
		for v := range eachValue(parts...) {
			sum += v
		}
	}
	mean = sum / float64(n)
	var ss, comp float64
	for v := range eachValue(parts...) {
		d := v - mean
		ss += d * d
		comp += d
	}
	variance := (ss - comp*comp/float64(n)) / float64(n-1)
	return mean, math.Sqrt(variance)
}
