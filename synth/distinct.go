package synth

import (
	"math"
	"math/bits"
)

// distinct counts distinct strings (categories a class does not track):
// exactly, by 64-bit hash, up to limit of them; past that it keeps a
// HyperLogLog sketch (2^14 registers, 16 KiB; standard error 0.8%) and the
// count is an estimate. The hash is fixed, so the estimate is the same on
// every run.
type distinct struct {
	limit int
	set   map[uint64]struct{}
	regs  []uint8 // the sketch, once past limit
}

const hllBits = 14

// add counts s.
func (d *distinct) add(s string) { d.addHash(hashString(s)) }

func (d *distinct) addHash(h uint64) {
	if d.regs != nil {
		d.sketch(h)
		return
	}
	if d.set == nil {
		d.set = map[uint64]struct{}{}
	}
	d.set[h] = struct{}{}
	if len(d.set) > d.limit {
		d.regs = make([]uint8, 1<<hllBits)
		for h := range d.set {
			d.sketch(h)
		}
		d.set = nil
	}
}

func (d *distinct) sketch(h uint64) {
	i := h >> (64 - hllBits)
	rho := uint8(bits.LeadingZeros64(h<<hllBits|1<<(hllBits-1))) + 1
	if rho > d.regs[i] {
		d.regs[i] = rho
	}
}

// estimated says whether count is an estimate.
func (d *distinct) estimated() bool { return d.regs != nil }

// count is the number of distinct strings added.
func (d *distinct) count() int64 {
	if d.regs == nil {
		return int64(len(d.set))
	}
	return hllEstimate(d.regs)
}

// hllEstimate is the HyperLogLog estimate of registers, with linear
// counting for small counts.
func hllEstimate(regs []uint8) int64 {
	m := float64(len(regs))
	sum, zeros := 0.0, 0
	for _, r := range regs {
		sum += math.Ldexp(1, -int(r))
		if r == 0 {
			zeros++
		}
	}
	e := 0.7213 / (1 + 1.079/m) * m * m / sum
	if e <= 2.5*m && zeros > 0 {
		e = m * math.Log(m/float64(zeros))
	}
	return int64(math.Round(e))
}

// hashString is FNV-1a with a final mix, so that every bit depends on
// every byte (HyperLogLog reads the top bits).
func hashString(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	// splitmix64's finalizer.
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}

// unionCount counts the distinct strings of names and of every counter in
// ds, exactly unless a counter is a sketch.
func unionCount(names []string, ds []*distinct) (int64, bool) {
	est := false
	for _, d := range ds {
		est = est || d.estimated()
	}
	if !est {
		untracked := 0
		for _, d := range ds {
			untracked += len(d.set)
		}
		if untracked == 0 {
			seen := map[string]struct{}{}
			for _, n := range names {
				seen[n] = struct{}{}
			}
			return int64(len(seen)), false
		}
		seen := map[uint64]struct{}{}
		for _, n := range names {
			seen[hashString(n)] = struct{}{}
		}
		for _, d := range ds {
			for h := range d.set {
				seen[h] = struct{}{}
			}
		}
		return int64(len(seen)), false
	}
	u := distinct{regs: make([]uint8, 1<<hllBits)}
	for _, n := range names {
		u.sketch(hashString(n))
	}
	for _, d := range ds {
		for i, r := range d.regs {
			u.regs[i] = max(u.regs[i], r)
		}
		for h := range d.set {
			u.sketch(h)
		}
	}
	return u.count(), true
}
