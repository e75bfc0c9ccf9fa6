package sweep

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/tokentrace/tokentrace/internal/commalist"
	"github.com/tokentrace/tokentrace/traces"
)

// Defaults of a speed search.
const (
	// DefaultSearchLow and DefaultSearchHigh bound the binary search of the
	// highest speed that meets the SLOs.
	DefaultSearchLow  = 0.25
	DefaultSearchHigh = 8.0
	// DefaultSearchTolerance stops the search when high/low is within 1+tol.
	DefaultSearchTolerance = 0.05
)

// ParseSpeeds parses "0.5,1,1.5,2,3" (positive, finite; sorted and
// deduplicated). An error is a *traces.OptionError naming Options.Speeds.
func ParseSpeeds(s string) ([]float64, error) {
	var out []float64
	err := commalist.Each(s, func(p string) error {
		p = strings.TrimSpace(strings.TrimSuffix(p, "x"))
		if p == "" {
			return nil
		}
		v, err := strconv.ParseFloat(p, 64)
		if err != nil || !(v > 0) || math.IsInf(v, 0) {
			return traces.OptionErrorf("sweep", "Options.Speeds", "%q: want positive numbers such as 0.5,1,2", p)
		}
		out = append(out, v)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, traces.OptionErrorf("sweep", "Options.Speeds", "want at least one speed, e.g. 0.5,1,2")
	}
	sort.Float64s(out)
	k := 0
	for i, v := range out {
		if i == 0 || v != out[k-1] {
			out[k] = v
			k++
		}
	}
	return out[:k], nil
}

// SearchStep is one evaluated speed.
type SearchStep struct {
	Speed float64
	OK    bool
}

// Search finds the highest speed in [lo, hi] for which eval reports ok,
// assuming ok is monotone (true below a knee, false above). It first
// evaluates lo (when it fails, the answer is 0) and hi (when it passes,
// the answer is hi), then bisects geometrically until hi/lo ≤ 1+tol.
// eval runs one replay at a speed and judges it; Search owns no replay
// logic, so any orchestration (simulator, real server, analysis) plugs in.
func Search(ctx context.Context, lo, hi, tol float64, eval func(ctx context.Context, speed float64) (ok bool, err error)) (best float64, steps []SearchStep, err error) {
	if !(lo > 0) || !(hi > lo) || !(tol > 0) {
		return 0, nil, fmt.Errorf("search: want 0 < low < high and tolerance > 0, got %g, %g, %g", lo, hi, tol)
	}
	try := func(s float64) (bool, error) {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		ok, err := eval(ctx, s)
		if err != nil {
			return false, fmt.Errorf("speed %g: %w", s, err)
		}
		steps = append(steps, SearchStep{Speed: s, OK: ok})
		return ok, nil
	}
	ok, err := try(lo)
	if err != nil || !ok {
		return 0, steps, err
	}
	if ok, err = try(hi); err != nil || ok {
		if ok {
			return hi, steps, nil
		}
		return lo, steps, err
	}
	for hi/lo > 1+tol {
		mid := math.Sqrt(lo * hi)
		ok, err := try(mid)
		if err != nil {
			return lo, steps, err
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo, steps, nil
}

// maxSearchSteps bounds the speeds Search evaluates on [lo, hi] down to
// tol: lo, hi, then one per halving of log(hi/lo) until it is within
// log(1+tol). Used for the progress counter.
func maxSearchSteps(lo, hi, tol float64) int {
	if !(lo > 0) || !(hi > lo) || !(tol > 0) {
		return 2
	}
	return 2 + max(0, int(math.Ceil(math.Log2(math.Log(hi/lo)/math.Log1p(tol)))))
}
