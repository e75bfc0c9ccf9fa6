package twin

import (
	"math"
	"slices"
)

// reservoir keeps a uniform sample of at most cap observations of a
// stream (Vitter's algorithm R), drawn from an explicit seed.
type reservoir struct {
	cap  int
	seen int64
	rng  uint64
	obs  []obs
}

func newReservoir(cap int, seed uint64) *reservoir {
	return &reservoir{cap: cap, rng: seed}
}

func (r *reservoir) add(o obs) {
	r.seen++
	if len(r.obs) < r.cap {
		r.obs = append(r.obs, o)
		return
	}
	r.rng = splitmix(r.rng)
	if j := int64(r.rng % uint64(r.seen)); j < int64(r.cap) {
		r.obs[j] = o
	}
}

// estimate is a least-squares fit of the step model.
type estimate struct {
	theta [nFeat]float64 // ns per unit of each feature
	se    [nFeat]float64 // standard error (0 where not estimated)
	fit   [nFeat]bool    // estimated from the data (else the prior)
	why   [nFeat]string  // why a parameter kept its prior
	n     int            // observations used
	// rmse and mean are the residuals' root mean square and the
	// observations' mean (ns).
	rmse, mean float64
	trimmed    int
}

// regress fits y = θ·x to the observations by least squares. A feature
// that does not vary, or is a combination of the others, or whose
// estimate is negative or not significant (standard error over half of
// it), keeps the prior's value; the rest are refitted without it. Outliers
// (a residual beyond 6 robust standard deviations: a pause of the client
// or the server) are dropped once.
func regress(data []obs, prior [nFeat]float64) estimate {
	var e estimate
	var why [nFeat]string
	free := [nFeat]bool{true, true, true, true}
	for j := range nFeat {
		lo, hi := math.Inf(1), math.Inf(-1)
		for i := range data {
			lo, hi = min(lo, data[i].x[j]), max(hi, data[i].x[j])
		}
		if len(data) == 0 || hi <= 0 || (j != featFixed && hi == lo && hasFixed(data)) {
			free[j], why[j] = false, "never varied in the data"
		}
	}
	use := data
	for pass := 0; pass < 2; pass++ {
		for round := 0; round < nFeat; round++ {
			e = solve(use, prior, free)
			drop := -1
			for j := range nFeat {
				if !free[j] {
					continue
				}
				switch {
				case !e.fit[j]:
					why[j] = "not separable from the other terms in the data"
				case e.theta[j] < 0:
					why[j] = "estimated below zero"
				case e.se[j] > 0.5*e.theta[j]:
					why[j] = "not significant in the data"
				default:
					continue
				}
				if drop < 0 || !e.fit[j] {
					drop = j
				}
			}
			if drop < 0 {
				break
			}
			free[drop] = false
		}
		if pass == 1 || e.n < 8 {
			break
		}
		kept := trim(use, e.theta)
		if len(kept) == len(use) {
			break
		}
		e.trimmed = len(use) - len(kept)
		use = kept
	}
	t := e.trimmed
	e = solve(use, prior, free)
	e.trimmed = t
	for j := range nFeat {
		if !e.fit[j] && e.why[j] == "" {
			e.why[j] = why[j]
		}
	}
	return e
}

func hasFixed(data []obs) bool {
	for i := range data {
		if data[i].x[featFixed] != 0 {
			return true
		}
	}
	return false
}

// trim drops the observations whose residual under theta is beyond 6
// robust standard deviations (1.4826 × the median absolute residual) and
// beyond 2 % of the observation.
func trim(data []obs, theta [nFeat]float64) []obs {
	res := make([]float64, len(data))
	for i := range data {
		res[i] = math.Abs(data[i].y - dot(theta, data[i].x))
	}
	s := slices.Clone(res)
	slices.Sort(s)
	bound := 6 * 1.4826 * s[len(s)/2]
	var kept []obs
	for i := range data {
		if res[i] <= bound || res[i] <= 0.02*math.Abs(data[i].y) {
			kept = append(kept, data[i])
		}
	}
	return kept
}

func dot(a, b [nFeat]float64) float64 {
	s := 0.0
	for j := range nFeat {
		s += a[j] * b[j]
	}
	return s
}

// solve is the least-squares fit of the free features, the others held at
// the prior. A free feature whose pivot vanishes (a combination of the
// others) is left at the prior with fit false.
func solve(data []obs, prior [nFeat]float64, free [nFeat]bool) estimate {
	var e estimate
	e.theta = prior
	var idx []int
	for j := range nFeat {
		if free[j] {
			idx = append(idx, j)
		}
	}
	e.n = len(data)
	m := len(idx)
	// Columns are scaled to unit root mean square so the normal equations
	// stay well conditioned (context tokens are 1e5 times a step count).
	scale := make([]float64, m)
	for a, j := range idx {
		s := 0.0
		for i := range data {
			s += data[i].x[j] * data[i].x[j]
		}
		scale[a] = math.Sqrt(s / float64(max(len(data), 1)))
		if scale[a] == 0 {
			scale[a] = 1
		}
	}
	ata := make([][]float64, m)
	for a := range ata {
		ata[a] = make([]float64, m+1)
	}
	sumY := 0.0
	for i := range data {
		y := data[i].y
		for j := range nFeat {
			if !free[j] {
				y -= prior[j] * data[i].x[j]
			}
		}
		sumY += data[i].y
		for a, ja := range idx {
			xa := data[i].x[ja] / scale[a]
			for b, jb := range idx {
				ata[a][b] += xa * data[i].x[jb] / scale[b]
			}
			ata[a][m] += xa * y
		}
	}
	if len(data) > 0 {
		e.mean = sumY / float64(len(data))
	}
	inv, ok := invert(ata, m)
	for a, j := range idx {
		if !ok[a] {
			continue
		}
		e.fit[j] = true
		v := 0.0
		for b := range m {
			if ok[b] {
				v += inv[a][b] * ata[b][m]
			}
		}
		e.theta[j] = v / scale[a]
	}
	// Residuals, then the standard errors: σ²·(XᵀX)⁻¹.
	ss := 0.0
	for i := range data {
		d := data[i].y - dot(e.theta, data[i].x)
		ss += d * d
	}
	if len(data) > 0 {
		e.rmse = math.Sqrt(ss / float64(len(data)))
	}
	dof := len(data) - m
	if dof > 0 {
		s2 := ss / float64(dof)
		for a, j := range idx {
			if ok[a] {
				e.se[j] = math.Sqrt(max(s2*inv[a][a], 0)) / scale[a]
			}
		}
	}
	return e
}

// invert inverts the m×m block of a, the normal equations' symmetric
// positive semi-definite matrix, by Gauss-Jordan elimination on the
// diagonal. A column whose pivot vanishes (its feature is a combination of
// the ones before it) is left out: ok is false for it, and the inverse is
// that of the matrix without it.
func invert(a [][]float64, m int) ([][]float64, []bool) {
	w := make([][]float64, m)
	for i := range m {
		w[i] = make([]float64, 2*m)
		copy(w[i], a[i][:m])
		w[i][m+i] = 1
	}
	ok := make([]bool, m)
	for c := range m {
		pv := w[c][c]
		if pv <= 1e-9*max(a[c][c], 1e-300) {
			clear(w[c]) // x_c is held at the prior: its equation goes
			continue
		}
		ok[c] = true
		for k := range 2 * m {
			w[c][k] /= pv
		}
		for r := range m {
			if f := w[r][c]; r != c && f != 0 {
				for k := range 2 * m {
					w[r][k] -= f * w[c][k]
				}
			}
		}
	}
	inv := make([][]float64, m)
	for r := range m {
		inv[r] = make([]float64, m)
		if ok[r] {
			for k := range m {
				if ok[k] {
					inv[r][k] = w[r][m+k]
				}
			}
		}
	}
	return inv, ok
}
