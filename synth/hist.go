package synth

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
)

// Hist is an empirical histogram: consecutive, non-overlapping value ranges
// [Lo, Hi] with the number of fitted values in each. Bins are cut at
// quantiles of the data but never split a repeated value, so an atom (a
// value many rows share, like a capped output length of 1000) keeps its own
// bin [v, v] and is reproduced exactly. Every bin holds at least
// FitOptions.MinBinCount values unless the whole histogram holds fewer, so a
// histogram never pins down one record.
//
// In JSON a bin is the array [lo, hi, count].
type Hist struct {
	// Integer says values are whole numbers (token counts); sampling then
	// draws integers in [Lo, Hi].
	Integer bool `json:"integer,omitempty"`
	// Bins in increasing value order.
	Bins []Bin `json:"bins"`
}

// Bin is one histogram range. When one value holds at least half of a
// range's count (an atom that had to share its bin with a few neighbours
// to keep MinBinCount), Mode and ModeCount say so and sampling returns it
// that often.
type Bin struct {
	Lo, Hi, Count   float64
	Mode, ModeCount float64
}

// MarshalJSON writes [lo, hi, count] or [lo, hi, count, mode, mode_count].
func (b Bin) MarshalJSON() ([]byte, error) {
	if b.ModeCount > 0 {
		return json.Marshal([5]float64{b.Lo, b.Hi, b.Count, b.Mode, b.ModeCount})
	}
	return json.Marshal([3]float64{b.Lo, b.Hi, b.Count})
}

// UnmarshalJSON reads [lo, hi, count] or [lo, hi, count, mode, mode_count].
func (b *Bin) UnmarshalJSON(p []byte) error {
	var a []float64
	if err := json.Unmarshal(p, &a); err != nil {
		return fmt.Errorf("a bin is [lo, hi, count] or [lo, hi, count, mode, mode_count]: %w", err)
	}
	switch len(a) {
	case 3:
		b.Lo, b.Hi, b.Count = a[0], a[1], a[2]
	case 5:
		b.Lo, b.Hi, b.Count, b.Mode, b.ModeCount = a[0], a[1], a[2], a[3], a[4]
	default:
		return fmt.Errorf("a bin is [lo, hi, count] or [lo, hi, count, mode, mode_count], got %d numbers", len(a))
	}
	return nil
}

// Total is the number of values in the histogram.
func (h *Hist) Total() float64 {
	s := 0.0
	for _, b := range h.Bins {
		s += b.Count
	}
	return s
}

// Mean is the histogram's mean, taking each bin's midpoint.
func (h *Hist) Mean() float64 {
	s, n := 0.0, 0.0
	for _, b := range h.Bins {
		s += (b.Lo + b.Hi) / 2 * b.Count
		n += b.Count
	}
	if n == 0 {
		return 0
	}
	return s / n
}

// validate checks the histogram's invariants; what names it in errors.
func (h *Hist) validate(what string) error {
	prev := math.Inf(-1)
	for i, b := range h.Bins {
		switch {
		case notFinite(b.Lo, b.Hi, b.Count, b.Mode, b.ModeCount):
			return fmt.Errorf("%s bin %d is not finite", what, i)
		case b.Count < 0:
			return fmt.Errorf("%s bin %d has a negative count (%g)", what, i, b.Count)
		case b.Lo > b.Hi:
			return fmt.Errorf("%s bin %d has lo %g > hi %g", what, i, b.Lo, b.Hi)
		case b.ModeCount < 0 || b.ModeCount > b.Count || (b.ModeCount > 0 && (b.Mode < b.Lo || b.Mode > b.Hi)):
			return fmt.Errorf("%s bin %d has a mode outside it or a mode count above its count", what, i)
		case b.Lo < prev:
			return fmt.Errorf("%s bin %d overlaps the bin before it (lo %g < %g)", what, i, b.Lo, prev)
		}
		prev = b.Hi
	}
	return nil
}

func notFinite(v ...float64) bool {
	for _, x := range v {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return true
		}
	}
	return false
}

// newHist builds a histogram of sorted values with at most maxBins bins of
// at least minCount values each (see Hist).
func newHist(sorted []float64, maxBins, minCount int, integer bool) Hist {
	return newHistRuns(runsOfSorted(sorted), maxBins, minCount, integer)
}

// newHistRuns is newHist of the values of runs (increasing values with
// their counts), as a multiset keeps them.
func newHistRuns(runs []run, maxBins, minCount int, integer bool) Hist {
	h := Hist{Integer: integer, Bins: []Bin{}}
	var total int64
	for _, r := range runs {
		total += r.n
	}
	n := float64(total)
	if total == 0 {
		return h
	}
	if maxBins < 1 {
		maxBins = 1
	}
	if minCount < 1 {
		minCount = 1
	}
	target := n / float64(maxBins)
	if target < float64(minCount) {
		target = float64(minCount)
	}
	cur := Bin{Lo: runs[0].v, Hi: runs[0].v}
	curTarget := target
	var modeV, modeN float64 // the open bin's most frequent value
	setMode := func(b *Bin) {
		if b.Lo != b.Hi && modeN >= b.Count/2 {
			b.Mode, b.ModeCount = modeV, modeN
		} else {
			b.Mode, b.ModeCount = 0, 0
		}
	}
	flush := func() {
		if cur.Count > 0 {
			setMode(&cur)
			h.Bins = append(h.Bins, cur)
		}
		cur = Bin{}
		modeV, modeN = 0, 0
	}
	// mergeIntoLast gives the open bin's values to the closed bin before.
	mergeIntoLast := func() {
		last := &h.Bins[len(h.Bins)-1]
		if last.ModeCount == 0 && last.Lo == last.Hi {
			last.Mode, last.ModeCount = last.Lo, last.Count
		}
		if modeN > last.ModeCount {
			last.Mode, last.ModeCount = modeV, modeN
		}
		last.Hi = cur.Hi
		last.Count += cur.Count
		if last.ModeCount < last.Count/2 {
			last.Mode, last.ModeCount = 0, 0
		}
		cur = Bin{}
		modeV, modeN = 0, 0
	}
	var done int64 // values before the current run
	for _, r := range runs {
		run := float64(r.n)
		v := r.v
		if run >= target && cur.Count > 0 {
			// An atom gets its own bin: close the open bin, or give its few
			// values to the bin before so the atom stays exact.
			if cur.Count >= float64(minCount) {
				flush()
			} else if len(h.Bins) > 0 {
				mergeIntoLast()
			}
		}
		if cur.Count == 0 {
			cur.Lo = v
			// Refine the upper tail: near the top a bin holds at most a
			// quarter of what is left, so the extreme tail gets its own
			// (small, but never below minCount) bins.
			curTarget = math.Max(float64(minCount), math.Min(target, float64(total-done)/4))
		}
		cur.Hi = v
		cur.Count += run
		if run > modeN {
			modeV, modeN = v, run
		}
		if cur.Count >= curTarget {
			flush()
		}
		done += r.n
	}
	if cur.Count > 0 {
		if cur.Count < float64(minCount) && len(h.Bins) > 0 {
			mergeIntoLast()
		} else {
			flush()
		}
	}
	return h
}

// sampler draws values from a Hist: a bin by its count, then a value
// uniformly inside it. For real-valued histograms a non-atom bin extends to
// the next bin's lo, so the sampled distribution has no holes.
type sampler struct {
	cum     []float64 // cumulative counts
	lo      []float64
	width   []float64
	mode    []float64
	modeP   []float64 // share of the bin that is its mode
	integer bool
	total   float64
}

func newSampler(h *Hist) *sampler {
	s := &sampler{integer: h.Integer}
	for i, b := range h.Bins {
		if b.Count <= 0 {
			continue
		}
		s.total += b.Count
		s.cum = append(s.cum, s.total)
		s.lo = append(s.lo, b.Lo)
		w := b.Hi - b.Lo
		if h.Integer {
			w++ // [lo, hi] inclusive
		} else if w > 0 && i+1 < len(h.Bins) {
			w = h.Bins[i+1].Lo - b.Lo
		}
		s.width = append(s.width, w)
		s.mode = append(s.mode, b.Mode)
		s.modeP = append(s.modeP, b.ModeCount/b.Count)
	}
	return s
}

func (s *sampler) empty() bool { return s == nil || s.total == 0 }

// sample returns a value and the index of its bin (among non-empty bins);
// an empty or nil sampler returns 0, 0 and draws nothing from r.
func (s *sampler) sample(r *rand.Rand) (float64, int) {
	if s.empty() {
		return 0, 0
	}
	u := r.Float64() * s.total
	i := upperBound(s.cum, u)
	prev := 0.0
	if i > 0 {
		prev = s.cum[i-1]
	}
	frac := (u - prev) / (s.cum[i] - prev) // reuse the draw inside the bin
	if frac < 0 {
		frac = 0
	} else if frac >= 1 {
		frac = math.Nextafter(1, 0)
	}
	if p := s.modeP[i]; p > 0 {
		if frac < p {
			return s.mode[i], i
		}
		frac = (frac - p) / (1 - p)
	}
	v := s.lo[i] + frac*s.width[i]
	if s.integer {
		v = math.Floor(v)
	}
	return v, i
}

// upperBound returns the first index with cum[i] > u (the last index if
// none): the bin a uniform draw u in [0, total) falls in.
func upperBound(cum []float64, u float64) int {
	lo, hi := 0, len(cum)-1
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if cum[mid] > u {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// binOf returns the index of the non-empty bin of h holding v (used at fit
// time to condition on the same bins the sampler draws).
func binOf(h *Hist, v float64) int {
	k := -1
	for _, b := range h.Bins {
		if b.Count <= 0 {
			continue
		}
		k++
		if v <= b.Hi {
			return k
		}
	}
	return k
}

// shares turns name→count into a Share list sorted by name.
func sharesOf(counts map[string]int64) []Share {
	var total int64
	for _, c := range counts {
		total += c
	}
	out := make([]Share, 0, len(counts))
	for n, c := range counts {
		out = append(out, Share{Name: n, Count: c, Share: float64(c) / float64(total)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// pickShare draws a name from a share list (cum holds cumulative shares).
func pickShare(r *rand.Rand, names []string, cum []float64) string {
	if len(names) == 0 {
		return ""
	}
	if len(names) == 1 {
		return names[0]
	}
	return names[pickIndex(r, cum)]
}

// pickIndex draws an index by cumulative weights (at least one).
func pickIndex(r *rand.Rand, cum []float64) int {
	if len(cum) <= 1 {
		return 0
	}
	return upperBound(cum, r.Float64()*cum[len(cum)-1])
}
