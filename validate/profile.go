package validate

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// profile is what a workload looks like to the server, measured on its
// requests as validate sends them: the figures an ablation's evidence
// compares between the synthetic workload, a counterfactual built from it
// and the real workload, so that a reason shows what its transplant
// changed.
type profile struct {
	requests        int
	meanIn, p90In   float64 // prompt tokens
	meanOut, p90Out float64 // output tokens
	rate            float64 // requests per second over the span
	cv              float64 // coefficient of variation of the inter-arrival gaps
	// peak is the rate of the busiest burstWindow (requests per second):
	// where the bursts that fill a queue are, which rate and CV average
	// away.
	peak float64
	// reuse is the share of prompt tokens an unbounded prefix cache fed
	// every earlier prompt would serve (leading blocks whose whole chain
	// came before; a category prefix without blocks as far as an earlier
	// prompt of the category reached).
	reuse float64
	// followUps is the share of requests that continue a session (not its
	// first); turns the requests per session (0 without sessions).
	followUps, turns float64
	// turnGapS is the median time from a session's request to its next
	// (what an offline run sends between turns), growthTokens the median
	// prompt tokens a follow-up adds to its predecessor's prompt, and
	// turnReuse the share of the follow-ups' prompt tokens their
	// predecessor's prompt held (their common leading blocks). NaN without
	// follow-ups.
	turnGapS, growthTokens, turnReuse float64
}

// profileOf measures a loaded workload's requests (in arrival order);
// blockSize is the tokens of a prefix block when the workload's metadata
// does not say.
func profileOf(w Workload, blockSize int) profile {
	p := profile{requests: len(w.reqs), turnGapS: math.NaN(), growthTokens: math.NaN(), turnReuse: math.NaN()}
	if len(w.reqs) == 0 {
		return p
	}
	bs := w.Meta.BlockSize
	if bs <= 0 {
		bs = blockSize
	}
	bs = max(bs, 1)
	in := make([]float64, len(w.reqs))
	out := make([]float64, len(w.reqs))
	for i := range w.reqs {
		in[i], out[i] = float64(w.reqs[i].in), float64(w.reqs[i].out)
	}
	p.meanIn, p.p90In = meanQ90(in)
	p.meanOut, p.p90Out = meanQ90(out)
	p.rate, p.cv = arrivalRate(w.reqs)
	p.peak = peakRate(w.reqs)
	p.reuse = prefixReuse(w.reqs, bs)
	sessionFigures(&p, w.reqs, bs)
	return p
}

// meanQ90 is the mean and the 0.9 quantile of x (sorted in place).
func meanQ90(x []float64) (mean, q90 float64) {
	if len(x) == 0 {
		return 0, 0
	}
	var sum float64
	for _, v := range x {
		sum += v
	}
	slices.Sort(x)
	return sum / float64(len(x)), x[min(len(x)-1, int(math.Ceil(0.9*float64(len(x))))-1)]
}

// arrivalRate is the rate over the span and the inter-arrival gaps' CV.
func arrivalRate(reqs []request) (rate, cv float64) {
	if len(reqs) < 2 {
		return 0, 0
	}
	span := float64(reqs[len(reqs)-1].arrival-reqs[0].arrival) / 1e9
	if span <= 0 {
		return 0, 0
	}
	n := float64(len(reqs) - 1)
	mean := span / n
	var ss float64
	for i := 1; i < len(reqs); i++ {
		d := float64(reqs[i].arrival-reqs[i-1].arrival)/1e9 - mean
		ss += d * d
	}
	return n / span, math.Sqrt(ss/n) / mean
}

// burstWindow is the window the busiest burst is measured over.
const burstWindow = 5e9

// peakRate is the most requests that arrive within burstWindow of each
// other, per second.
func peakRate(reqs []request) float64 {
	most, j := 0, 0
	for i := range reqs {
		for reqs[i].arrival-reqs[j].arrival >= burstWindow {
			j++
		}
		most = max(most, i-j+1)
	}
	return float64(most) / (burstWindow / 1e9)
}

// prefixReuse is the share of prompt tokens an unbounded prefix cache
// serves, the requests sent in arrival order: a leading block hits when
// the chain of blocks up to it was sent before (the cache hashes a block
// with all before it); a category prefix without blocks hits as far as an
// earlier prompt of the category reached.
func prefixReuse(reqs []request, bs int) float64 {
	seen := map[uint64]bool{}
	reach := map[string]int32{}
	var hit, total float64
	for i := range reqs {
		r := &reqs[i]
		total += float64(r.in)
		if len(r.blocks) > 0 {
			var h uint64 = 1469598103934665603
			n, miss := 0, false
			for _, b := range r.blocks {
				h = mix64(h ^ uint64(b))
				if !miss && seen[h] {
					n++
				} else {
					miss = true
				}
				seen[h] = true
			}
			hit += float64(min(n*bs, int(r.in)))
			continue
		}
		if r.category != "" && r.prefix > 0 {
			hit += float64(min(r.prefix, reach[r.category], r.in))
			reach[r.category] = max(reach[r.category], r.prefix)
		}
	}
	if total == 0 {
		return 0
	}
	return hit / total
}

// sessionFigures measures the sessions: each request after a session's
// first against the session's request before it.
func sessionFigures(p *profile, reqs []request, bs int) {
	last := map[int64]int{}
	sessions, follow := 0, 0
	var gaps, growth []float64
	var shared, prompt float64
	for i := range reqs {
		r := &reqs[i]
		if r.session == 0 {
			continue
		}
		j, ok := last[r.session]
		last[r.session] = i
		if !ok {
			sessions++
			continue
		}
		follow++
		prev := &reqs[j]
		gaps = append(gaps, float64(r.arrival-prev.arrival)/1e9)
		growth = append(growth, float64(r.in)-float64(prev.in))
		prompt += float64(r.in)
		shared += float64(sharedTokens(prev, r, bs))
	}
	if sessions == 0 {
		return
	}
	p.followUps = float64(follow) / float64(len(reqs))
	p.turns = float64(sessions+follow) / float64(sessions)
	if follow > 0 {
		p.turnGapS, p.growthTokens = median(gaps), median(growth)
		p.turnReuse = shared / prompt
	}
}

// sharedTokens is how much of r's prompt its predecessor's prompt held:
// their common leading blocks, or without blocks their common category
// prefix.
func sharedTokens(prev, r *request, bs int) int {
	if len(r.blocks) > 0 || len(prev.blocks) > 0 {
		n := 0
		for n < len(r.blocks) && n < len(prev.blocks) && r.blocks[n] == prev.blocks[n] {
			n++
		}
		return min(n*bs, int(r.in), int(prev.in))
	}
	if r.category != "" && r.category == prev.category {
		return int(min(r.prefix, prev.prefix, r.in))
	}
	return 0
}

// figure is one measurement of a profile, as evidence shows it.
type figure struct {
	// prop is the property the figure belongs to.
	prop string
	name string
	get  func(*profile) float64
	// say formats a value; moved reports whether two values differ enough
	// to show.
	say   func(float64) string
	moved func(a, b float64) bool
}

// figures are the measurements of a profile, by property in Properties
// order.
var figures = []figure{
	{PropPromptLengths, "mean prompt", func(p *profile) float64 { return p.meanIn }, tokens, relMoved(0.05)},
	{PropPromptLengths, "p90 prompt", func(p *profile) float64 { return p.p90In }, tokens, relMoved(0.05)},
	{PropOutputLengths, "mean output", func(p *profile) float64 { return p.meanOut }, tokens, relMoved(0.05)},
	{PropOutputLengths, "p90 output", func(p *profile) float64 { return p.p90Out }, tokens, relMoved(0.05)},
	{PropArrivals, "rate", func(p *profile) float64 { return p.rate }, func(v float64) string { return fmt.Sprintf("%.2f req/s", v) }, relMoved(0.05)},
	{PropArrivals, "inter-arrival CV", func(p *profile) float64 { return p.cv }, func(v float64) string { return fmt.Sprintf("%.2f", v) }, relMoved(0.05)},
	{PropArrivals, "busiest 5 s", func(p *profile) float64 { return p.peak }, func(v float64) string { return fmt.Sprintf("%.1f req/s", v) }, relMoved(0.10)},
	{PropPrefixReuse, "prompt tokens a prefix cache serves", func(p *profile) float64 { return p.reuse }, percent, absMoved(0.02)},
	{PropSessions, "follow-up share", func(p *profile) float64 { return p.followUps }, percent, absMoved(0.02)},
	{PropSessions, "turns per session", func(p *profile) float64 { return p.turns }, func(v float64) string { return fmt.Sprintf("%.2f", v) }, relMoved(0.03)},
	{PropSessions, "median time between turns", func(p *profile) float64 { return p.turnGapS }, func(v float64) string { return fmt.Sprintf("%.2f s", v) }, relMoved(0.10)},
	{PropSessions, "median context growth per turn", func(p *profile) float64 { return p.growthTokens }, func(v float64) string { return fmt.Sprintf("%+.0f tokens", v) }, relMoved(0.10)},
	{PropSessions, "share of a follow-up's prompt its previous turn held", func(p *profile) float64 { return p.turnReuse }, percent, absMoved(0.03)},
}

func tokens(v float64) string  { return fmt.Sprintf("%.0f tokens", v) }
func percent(v float64) string { return fmt.Sprintf("%.0f%%", 100*v) }

// relMoved: the values differ by at least frac of the larger one (a value
// that appears or disappears, NaN on one side, moved).
func relMoved(frac float64) func(a, b float64) bool {
	return func(a, b float64) bool {
		if math.IsNaN(a) || math.IsNaN(b) {
			return math.IsNaN(a) != math.IsNaN(b)
		}
		return math.Abs(a-b) >= frac*max(math.Abs(a), math.Abs(b)) && a != b
	}
}

// absMoved: the values differ by at least d (shares: d points).
func absMoved(d float64) func(a, b float64) bool {
	return func(a, b float64) bool {
		if math.IsNaN(a) || math.IsNaN(b) {
			return math.IsNaN(a) != math.IsNaN(b)
		}
		return math.Abs(a-b) >= d
	}
}

// sayValue formats v, "none" where the workload has no such figure.
func (f figure) sayValue(v float64) string {
	if math.IsNaN(v) {
		return "none"
	}
	return f.say(v)
}

// maxEvidence bounds the figures a reason's evidence lists.
const maxEvidence = 4

// moved lists, as evidence, the figures a counterfactual changed from the
// workload it was built from, each beside the workload that lent the
// properties (a transplanted property's figure that moved further from
// the lender's says so): the figures of the transplanted properties first, then
// the others it moved along (a follow-up that resends its context also
// lengthens prompts), at most maxEvidence. Each reads "NAME FROM → TO
// (LENDER's VALUE)". When nothing moved it says so and gives the figure
// of the properties that moved most, so that evidence never reads as two
// equal summaries.
func moved(props []string, from, to, lender profile, fromName, lenderName string) string {
	var own, along []string
	bestRel, best := 0.0, ""
	for _, f := range figures {
		a, b, l := f.get(&from), f.get(&to), f.get(&lender)
		mine := slices.Contains(props, f.prop)
		away := ""
		if mine && f.moved(a, b) && math.Abs(b-l) > math.Abs(a-l) {
			// The transplant did not carry this figure over: say so
			// where its reason is read.
			away = ", further from it"
		}
		line := fmt.Sprintf("%s %s → %s (%s %s%s)", f.name, f.sayValue(a), f.sayValue(b), lenderName, f.sayValue(l), away)
		if !f.moved(a, b) {
			if rel := relChange(a, b); mine && rel > bestRel {
				bestRel, best = rel, line
			}
			continue
		}
		if mine {
			own = append(own, line)
		} else {
			along = append(along, line)
		}
	}
	if len(own)+len(along) == 0 {
		if best == "" {
			return fmt.Sprintf("the counterfactual measures as the %s workload does on every figure validate measures", fromName)
		}
		return fmt.Sprintf("no figure validate measures moved much from the %s workload's; the most: %s", fromName, best)
	}
	all := append(own, along...)
	if len(all) > maxEvidence {
		all = all[:maxEvidence]
	}
	return strings.Join(all, "; ")
}

// movedAway reports whether a counterfactual did not carry its
// properties: of their figures, some moved further from the lender's and
// none towards it. Its effects then say nothing about those properties.
func movedAway(props []string, from, to, lender profile) bool {
	away, toward := false, false
	for _, f := range figures {
		if !slices.Contains(props, f.prop) {
			continue
		}
		a, b, l := f.get(&from), f.get(&to), f.get(&lender)
		if !f.moved(a, b) || math.IsNaN(a) || math.IsNaN(b) || math.IsNaN(l) {
			continue
		}
		if math.Abs(b-l) > math.Abs(a-l) {
			away = true
		} else {
			toward = true
		}
	}
	return away && !toward
}

// relChange is |a − b| over the larger magnitude (0 when both are 0 or
// either is NaN).
func relChange(a, b float64) float64 {
	if math.IsNaN(a) || math.IsNaN(b) || max(math.Abs(a), math.Abs(b)) == 0 {
		return 0
	}
	return math.Abs(a-b) / max(math.Abs(a), math.Abs(b))
}
