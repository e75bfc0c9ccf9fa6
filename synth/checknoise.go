package synth

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"gonum.org/v1/gonum/stat/distuv"
)

// Noise floors. Two traces drawn the same way differ by chance: by more
// the shorter they are and the fewer independent units (sessions, not
// requests) they hold. Each check's noise floor is the difference such
// traces exceed with probability α, from the sizes of the two traces
// compared (two-sample critical values, the variance of each estimate
// over its units); Check calls a difference a miss only beyond both the
// floor and the check's threshold (the difference that matters). α is
// Thresholds.Confidence's complement shared among the checks made
// (Bonferroni): a trace drawn like the real one passes every check with at
// least that confidence.

// DefaultConfidence is Thresholds.Confidence's default.
const DefaultConfidence = 0.95

// zTwoSided is the two-sided normal critical value at α.
func zTwoSided(alpha float64) float64 {
	return distuv.UnitNormal.Quantile(1 - alpha/2)
}

// ksCritical is c(α) of the two-sample KS test: the distance two samples
// of effective sizes n and m exceed with probability α is c(α)·√(1/n+1/m).
func ksCritical(alpha float64) float64 { return math.Sqrt(-math.Log(alpha/2) / 2) }

// ksFloor is the KS noise floor of samples of n and m values whose CDFs
// vary deffN and deffM times as much as independent values would.
func ksFloor(alpha float64, n, m int, deffN, deffM float64) float64 {
	if n == 0 || m == 0 {
		return 0
	}
	return ksCritical(alpha) * math.Sqrt(deffN/float64(n)+deffM/float64(m))
}

// part is one figure of a check made of several (a turn's median, a
// category's share): its difference, the standard deviation of that
// difference by chance, and its name.
type part struct {
	value, sd float64
	at        string
}

// worstPart is the part whose difference is largest against its limit,
// max(threshold, z·sd) with z two-sided at α shared among the parts: the
// value, floor and name a multi-part check reports.
func worstPart(parts []part, alpha, threshold float64) (value, floor float64, at string) {
	if len(parts) == 0 {
		return 0, 0, ""
	}
	z := zTwoSided(alpha / float64(len(parts)))
	worst := -1.0
	for _, p := range parts {
		f := z * p.sd
		ratio := p.value / max(threshold, f, 1e-12)
		if ratio > worst {
			worst, value, floor, at = ratio, p.value, f, p.at
		}
	}
	return value, floor, at
}

// rateFloor is the noise floor of rate_error: Σ|s_i−r_i| / Σr_i over
// windows whose counts vary as Poisson counts times each trace's cluster
// index (a session's rows come together). The sum of k half-normal
// terms is taken as normal.
func rateFloor(alpha float64, real []float64, dReal, dSynth float64) float64 {
	var mu, v, den float64
	for _, l := range real {
		sd := math.Sqrt(l * (dReal + dSynth))
		mu += sd * math.Sqrt(2/math.Pi)
		v += sd * sd * (1 - 2/math.Pi)
		den += l
	}
	if den == 0 {
		return 0
	}
	if len(real) == 1 {
		return zTwoSided(alpha) * math.Sqrt(v/(1-2/math.Pi)) / den
	}
	return (mu + distuv.UnitNormal.Quantile(1-alpha)*math.Sqrt(v)) / den
}

// dispersionVar is the sampling variance of the index of dispersion of
// sorted arrivals in full windows of w: the variance of a sample variance
// from the counts' fourth central moment, over the mean².
func dispersionVar(sorted []int64, w int64) float64 {
	n, c := traceCounts(sorted, w)
	if n < 4 {
		return 0
	}
	k := float64(n)
	var s1, s2, s3, s4 float64
	for _, x := range c {
		s1, s2, s3, s4 = s1+x, s2+x*x, s3+x*x*x, s4+x*x*x*x
	}
	m := s1 / k
	if m == 0 {
		return 0
	}
	mu2 := s2/k - m*m
	mu4 := s4/k - 4*m*s3/k + 6*m*m*s2/k - 3*m*m*m*m
	vs2 := max(mu4-mu2*mu2*(k-3)/(k-1), 0) / k
	return vs2 / (m * m)
}

// cvVar is the sampling variance of the coefficient of variation of
// gaps (delta method on the mean and variance).
func cvVar(gaps []float64) float64 {
	n := float64(len(gaps))
	if n < 3 {
		return 0
	}
	var s1 float64
	for _, g := range gaps {
		s1 += g
	}
	m := s1 / n
	var m2, m3, m4 float64
	for _, g := range gaps {
		d := g - m
		m2, m3, m4 = m2+d*d, m3+d*d*d, m4+d*d*d*d
	}
	m2, m3, m4 = m2/n, m3/n, m4/n
	if m <= 0 || m2 <= 0 {
		return 0
	}
	v := (m4-m2*m2)/(4*m2*m*m) + m2*m2/(m*m*m*m) - m3/(m*m*m)
	return max(v, 0) / n
}

// meanVar is the mean of x and the variance of that mean.
func meanVar(x []float64) (mean, v float64) {
	n := float64(len(x))
	if n == 0 {
		return 0, 0
	}
	for _, a := range x {
		mean += a
	}
	mean /= n
	if n < 2 {
		return mean, 0
	}
	for _, a := range x {
		v += (a - mean) * (a - mean)
	}
	return mean, v / (n - 1) / n
}

// quantileSD is the standard deviation of the q-quantile of sorted
// values: the spread of the order statistics one standard deviation of
// the binomial rank either side.
func quantileSD(sorted []float64, q float64) float64 {
	n := float64(len(sorted))
	if n < 2 {
		return 0
	}
	d := math.Sqrt(n * q * (1 - q))
	lo := int(math.Floor(q*n - d))
	hi := int(math.Ceil(q*n + d))
	lo, hi = min(max(lo, 0), len(sorted)-1), min(max(hi, 0), len(sorted)-1)
	return (sorted[hi] - sorted[lo]) / 2
}

// shareParts are the category shares' differences, each with the
// standard deviation of the difference over the traces' units.
func shareParts(real, synth *unitAcc) []part {
	names := map[string]bool{}
	for k := range real.shares {
		names[k] = true
	}
	for k := range synth.shares {
		names[k] = true
	}
	keys := make([]string, 0, len(names))
	for k := range names {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]part, 0, len(keys))
	for _, k := range keys {
		var rv, sv, rs, ss float64
		if a := real.shares[k]; a != nil {
			rv, rs = a.ratio(), a.variance()
		}
		if a := synth.shares[k]; a != nil {
			sv, ss = a.ratio(), a.variance()
		}
		parts = append(parts, part{value: math.Abs(sv - rv), sd: math.Sqrt(rs + ss), at: groupName(k)})
	}
	return parts
}

// GroupReuse is the prefix reuse of one part of the traces: a turn index
// or a category.
type GroupReuse struct {
	Name      string  `json:"name"`
	RealRows  int     `json:"real_rows"`
	SynthRows int     `json:"synth_rows"`
	Real      float64 `json:"real"`
	Synth     float64 `json:"synth"`
}

// reuseParts compares the prefix reuse of the groups both traces have at
// least minTurnRows rows with blocks in, in the order of names.
func reuseParts(real, synth map[string]*ratioAcc, names []string) ([]GroupReuse, []part) {
	var groups []GroupReuse
	var parts []part
	for _, k := range names {
		r, s := real[k], synth[k]
		if r == nil || s == nil || r.rows < minTurnRows || s.rows < minTurnRows {
			continue
		}
		groups = append(groups, GroupReuse{Name: groupName(k), RealRows: r.rows, SynthRows: s.rows, Real: r.ratio(), Synth: s.ratio()})
		parts = append(parts, part{value: math.Abs(s.ratio() - r.ratio()), sd: math.Sqrt(r.variance() + s.variance()), at: groupName(k)})
	}
	return groups, parts
}

// turnName names a turn bucket of unitAcc.byTurn.
func turnName(t int) string {
	switch {
	case t == 0:
		return "single-shot"
	case t > maxTurnIndex:
		return fmt.Sprintf("turn %d+", maxTurnIndex+1)
	}
	return fmt.Sprintf("turn %d", t)
}

// byTurnNames keys unitAcc.byTurn by turnName, in turn order.
func byTurnNames(a *unitAcc) (map[string]*ratioAcc, []string) {
	out := map[string]*ratioAcc{}
	var names []string
	for t := 0; t <= maxTurnIndex+1; t++ {
		if v := a.byTurn[t]; v != nil {
			out[turnName(t)] = v
		}
		names = append(names, turnName(t))
	}
	return out, names
}

// categoryNames are the categories of both traces' reuse, sorted.
func categoryNames(real, synth map[string]*ratioAcc) []string {
	var names []string
	for k := range real {
		if synth[k] != nil {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	return names
}
