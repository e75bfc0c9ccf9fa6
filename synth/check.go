package synth

import (
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/tokentrace/tokentrace/traces"
	"gonum.org/v1/gonum/stat"
)

// Default fidelity thresholds (see Thresholds).
const (
	DefaultKSLengths       = 0.03
	DefaultKSGaps          = 0.05
	DefaultRateError       = 0.10
	DefaultDispersionError = 0.10
	DefaultCVError         = 0.10
	DefaultShareDiff       = 0.02
	DefaultPrefixReuseDiff = 0.03
	DefaultSessionsError   = 0.10
	DefaultTurnsError      = 0.10
)

// Thresholds are the pass/fail limits of Check. Start from
// DefaultThresholds: a zero field is a limit of zero, never its default;
// a negative one disables that check.
type Thresholds struct {
	// KSLengths bounds ks.input_tokens and ks.output_tokens. Defaults to 0.03.
	KSLengths float64 `json:"ks_lengths"`
	// KSGaps bounds ks.interarrival. Defaults to 0.05.
	KSGaps float64 `json:"ks_gaps"`
	// RateError bounds rate_error, the relative L1 error of per-minute
	// counts. Defaults to 0.10.
	RateError float64 `json:"rate_error"`
	// Dispersion bounds each dispersion.* (relative error of the index of
	// dispersion). Defaults to 0.10.
	Dispersion float64 `json:"dispersion"`
	// CV bounds cv (relative error of the inter-arrival CV). Defaults to 0.10.
	CV float64 `json:"cv"`
	// CategoryShare bounds category_share_max_diff (absolute). Defaults to 0.02.
	CategoryShare float64 `json:"category_share"`
	// PrefixReuse bounds prefix_reuse (absolute difference). Defaults to
	// 0.03 (on Mooncake the seed-to-seed spread alone is about ±0.015: the
	// ratio is weighted by blocks, so a few very long prompts move it).
	PrefixReuse float64 `json:"prefix_reuse"`
	// Sessions bounds sessions (relative error of the session count).
	// Defaults to 0.10.
	Sessions float64 `json:"sessions"`
	// Turns bounds turns (relative error of mean turns per session).
	// Defaults to 0.10.
	Turns float64 `json:"turns"`
	// ContextGrowth bounds context_growth (the largest relative error of
	// the median and p90 input length by turn index), checked when both
	// traces have at least two turn indexes to compare. Defaults to 0.25.
	ContextGrowth float64 `json:"context_growth"`
	// KSThink bounds ks.think (think times before follow-up turns),
	// checked when both traces have follow-ups. Defaults to 0.10.
	KSThink float64 `json:"ks_think"`
	// Confidence is the probability that a trace drawn like the real one
	// passes every check: each check's noise floor is the difference such
	// traces exceed with probability (1 − Confidence) / the number of
	// checks made. A check fails only beyond both its threshold and its
	// floor. Defaults to DefaultConfidence (0.95).
	Confidence float64 `json:"confidence"`
}

// DefaultThresholds returns the documented thresholds.
func DefaultThresholds() Thresholds {
	return Thresholds{
		KSLengths: DefaultKSLengths, KSGaps: DefaultKSGaps, RateError: DefaultRateError,
		Dispersion: DefaultDispersionError, CV: DefaultCVError, CategoryShare: DefaultShareDiff,
		PrefixReuse: DefaultPrefixReuseDiff, Sessions: DefaultSessionsError, Turns: DefaultTurnsError,
		ContextGrowth: DefaultContextGrowthError, KSThink: DefaultKSThink, Confidence: DefaultConfidence,
	}
}

// Validate reports the first threshold that cannot be used as given (a
// zero is a threshold of zero, never the default), naming it in a
// *traces.OptionError: a NaN bound, or a confidence outside (0, 1).
func (t Thresholds) Validate() error {
	for _, b := range []struct {
		name string
		v    float64
	}{{"KSLengths", t.KSLengths}, {"KSGaps", t.KSGaps}, {"RateError", t.RateError}, {"Dispersion", t.Dispersion},
		{"CV", t.CV}, {"CategoryShare", t.CategoryShare}, {"PrefixReuse", t.PrefixReuse}, {"Sessions", t.Sessions},
		{"Turns", t.Turns}, {"ContextGrowth", t.ContextGrowth}, {"KSThink", t.KSThink}} {
		if math.IsNaN(b.v) {
			return traces.OptionErrorf("synth", "Thresholds."+b.name, "NaN: want a bound, or a negative number to turn the check off")
		}
	}
	if !(t.Confidence > 0 && t.Confidence < 1) {
		return traces.OptionErrorf("synth", "Thresholds.Confidence", "want 0 < c < 1, got %g", t.Confidence)
	}
	return nil
}

// mustValid panics with th's option error: Check and CheckSeq return no
// error, and thresholds a caller did not validate are its bug.
func mustValid(th Thresholds) {
	if err := th.Validate(); err != nil {
		panic(err)
	}
}

// DispersionWindows are the windows of the index of dispersion.
var DispersionWindows = []time.Duration{time.Second, 10 * time.Second, time.Minute}

// Report is a fidelity report. Its JSON keys are stable:
// ks.{input_tokens,output_tokens,interarrival,rate_per_minute},
// wasserstein.{input_tokens,output_tokens,interarrival_s,rate_per_minute},
// rate_error, dispersion.{1s,10s,60s}, cv, category_share_max_diff,
// prefix_reuse, sessions, turns, confidence, check_confidence, pass; with
// sessions input_by_turn, context_growth, prefix_reuse_by_turn and
// prefix_reuse_by_category; plus real/synth summaries and the list of
// checks, each with its threshold, noise_floor and limit.
type Report struct {
	Real  Summary `json:"real"`
	Synth Summary `json:"synth"`
	// KS are two-sample Kolmogorov–Smirnov distances.
	KS Distances `json:"ks"`
	// Wasserstein are W1 distances in the values' units (tokens, seconds,
	// requests per minute).
	Wasserstein WDistances `json:"wasserstein"`
	// RateError is Σ|synth−real| / Σ real over the full minutes both
	// traces cover (the rate over time, aligned by offset).
	RateError float64 `json:"rate_error"`
	// Dispersion is |synth−real|/real of the index of dispersion per window.
	Dispersion map[string]float64 `json:"dispersion"`
	// CV is |synth−real|/real of the inter-arrival coefficient of variation.
	CV float64 `json:"cv"`
	// CategoryShareMaxDiff is the largest absolute difference of a
	// category's share of requests.
	CategoryShareMaxDiff float64 `json:"category_share_max_diff"`
	// CategoryShareMaxDiffName is the category it occurs at ("none" = "").
	CategoryShareMaxDiffName string `json:"category_share_max_diff_category"`
	// PrefixReuse is |synth−real| of the prefix reuse ratio.
	PrefixReuse float64 `json:"prefix_reuse"`
	// Sessions and Turns are relative errors of the session count and of
	// the mean turns per session.
	Sessions float64 `json:"sessions"`
	Turns    float64 `json:"turns"`
	// InputByTurn compares the input length by turn index (a session's
	// n-th row), turns 1 to 8 while both traces have at least 20 rows of
	// the turn: how context grows across turns. ContextGrowth is the
	// largest relative error of its medians and p90s. Absent without
	// sessions.
	InputByTurn   []TurnInput `json:"input_by_turn,omitempty"`
	ContextGrowth float64     `json:"context_growth,omitempty"`
	// ReuseByTurn and ReuseByCategory compare the prefix reuse by turn
	// index (single-shot rows, a session's n-th row) and by category, for
	// the parts both traces have at least 20 rows with blocks in (absent
	// with fewer than two).
	ReuseByTurn     []GroupReuse `json:"prefix_reuse_by_turn,omitempty"`
	ReuseByCategory []GroupReuse `json:"prefix_reuse_by_category,omitempty"`
	// Confidence is Thresholds.Confidence: a trace drawn like the real one
	// passes every check with at least this probability. CheckConfidence
	// is each check's share of it (1 − (1 − Confidence) / checks made).
	Confidence      float64 `json:"confidence"`
	CheckConfidence float64 `json:"check_confidence"`
	// SessionGaps, when set, says why ks.interarrival and cv compare the
	// gaps between a session's consecutive turns, not between consecutive
	// arrivals: the real trace's sessions all start at one instant (a
	// format that gives conversations, not when they began), so the
	// merged stream's gaps are conversations laid on top of each other
	// and coincidences on the format's time grid; what the trace records
	// is each session's own timing.
	SessionGaps string `json:"session_gaps,omitempty"`
	// Checks lists each thresholded figure.
	Checks []CheckResult `json:"checks"`
	// Unmeasured are the reported (not thresholded) figures that mean
	// nothing on these traces, with why (ks.rate_per_minute on a trace of
	// a few minutes).
	Unmeasured map[string]string `json:"unmeasured,omitempty"`
	// Pass is true when every check passes.
	Pass bool `json:"pass"`
	// Fixes, when set, are the option changes FindFixes tried by
	// generating from the model SYNTH came from and checking, kept when
	// they helped (set by the caller: synth check --model).
	Fixes *FixReport `json:"fixes,omitempty"`
}

// Distances are the KS distances.
type Distances struct {
	InputTokens   float64 `json:"input_tokens"`
	OutputTokens  float64 `json:"output_tokens"`
	Interarrival  float64 `json:"interarrival"`
	RatePerMinute float64 `json:"rate_per_minute"`
	// Think is between the think times before follow-up turns (absent
	// without them).
	Think float64 `json:"think,omitempty"`
}

// WDistances are the Wasserstein distances.
type WDistances struct {
	InputTokens   float64 `json:"input_tokens"`
	OutputTokens  float64 `json:"output_tokens"`
	InterarrivalS float64 `json:"interarrival_s"`
	RatePerMinute float64 `json:"rate_per_minute"`
	ThinkS        float64 `json:"think_s,omitempty"`
}

// CheckResult is one thresholded figure.
type CheckResult struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	// At names the part of a check of several that it reports (the turn
	// and quantile, the category): the one furthest beyond its limit.
	At string `json:"at,omitempty"`
	// Threshold is the difference that matters (Thresholds), NoiseFloor
	// the difference two traces drawn alike exceed by chance with
	// probability 1 − Report.CheckConfidence, Limit the larger: the check
	// passes when Value ≤ Limit.
	Threshold  float64 `json:"threshold"`
	NoiseFloor float64 `json:"noise_floor"`
	Limit      float64 `json:"limit"`
	Pass       bool    `json:"pass"`
	// Skipped says why the figure means nothing on these traces (too
	// short for its window); a skipped check passes.
	Skipped string `json:"skipped,omitempty"`
	// Affects says which conclusions a miss can change, Fix what to change
	// in the synthetic trace (set on failed checks).
	Affects string `json:"affects,omitempty"`
	Fix     string `json:"fix,omitempty"`
}

// MinWindows is the fewest full windows both traces must share for a
// windowed figure (the index of dispersion per window, the per-minute
// rate's distribution) to be checked: the index of dispersion from k
// windows has a relative sampling error of about √(2/(k−1)), 47 % at 10
// windows and 100 % at 3, so with fewer it measures noise.
const MinWindows = 10

// Summary describes one trace.
type Summary struct {
	Records    int64              `json:"records"`
	DurationS  float64            `json:"duration_s"`
	RatePerS   float64            `json:"rate_per_s"`
	MeanInput  float64            `json:"mean_input_tokens"`
	MeanOutput float64            `json:"mean_output_tokens"`
	CV         float64            `json:"cv"`
	Dispersion map[string]float64 `json:"dispersion"`
	// PrefixReuse is the share of PrefixBlocks already seen in an earlier
	// row when the trace has blocks; otherwise the share of input tokens
	// that are a category prefix already used by an earlier row.
	PrefixReuse    float64            `json:"prefix_reuse"`
	Sessions       int64              `json:"sessions"`
	TurnsPerSess   float64            `json:"turns_per_session"`
	CategoryShares map[string]float64 `json:"category_shares,omitempty"`
	Categories     int                `json:"categories"`
	// FollowUps are the rows after a session's first; MedianThinkS the
	// median think time before them (think_ns, else arrival − the previous
	// row's finish_ns, else the arrival gap).
	FollowUps    int64   `json:"follow_ups,omitempty"`
	MedianThinkS float64 `json:"median_think_s,omitempty"`
}

type traceStats struct {
	sum      Summary
	input    []float64
	output   []float64
	gaps     []float64 // seconds
	arrivals []int64   // sorted
	shares   map[string]float64
	turns    turnStats
	// The independent units (sessions, single-shot rows) and how many
	// times more the length distributions vary than independent rows'.
	units           unitAcc
	deffIn, deffOut float64
}

func windowLabel(w time.Duration) string { return fmt.Sprintf("%ds", int(w.Seconds())) }

// maxShareCategories bounds the category shares listed in a Summary.
const maxShareCategories = 20

func statsOf(recs []traces.Record) traceStats {
	order := make([]int, len(recs))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		if recs[order[a]].ArrivalNs != recs[order[b]].ArrivalNs {
			return recs[order[a]].ArrivalNs < recs[order[b]].ArrivalNs
		}
		return recs[order[a]].Seq < recs[order[b]].Seq
	})
	return statsOfSeq(func(yield func(*traces.Record) bool) {
		for _, i := range order {
			if !yield(&recs[i]) {
				return
			}
		}
	})
}

// statsOfSeq reads a trace in arrival order, once: categories, prefix
// reuse and sessions count what came before each row.
func statsOfSeq(recs iter.Seq[*traces.Record]) traceStats {
	var s traceStats
	counts := map[string]int{}
	seenBlock := map[int64]bool{}
	seenCat := map[string]bool{}
	var blocks, reusedBlocks, tokens, reusedTokens int64
	sess := map[int64]int{}
	var turns turnAcc
	n := 0
	for r := range recs {
		n++
		s.input = append(s.input, float64(r.InputTokens))
		s.output = append(s.output, float64(r.OutputTokens))
		s.arrivals = append(s.arrivals, r.ArrivalNs)
		counts[r.Category]++
		tokens += int64(r.InputTokens)
		reused := 0
		for _, b := range r.PrefixBlocks {
			blocks++
			if seenBlock[b] {
				reused++
			}
		}
		reusedBlocks += int64(reused)
		for _, b := range r.PrefixBlocks {
			seenBlock[b] = true
		}
		if r.Category != "" {
			if seenCat[r.Category] {
				reusedTokens += int64(r.PrefixTokens)
			}
			seenCat[r.Category] = true
		}
		if r.Session != 0 {
			sess[r.Session]++
		}
		turns.add(r, s.units.add(r, reused))
	}
	s.units.finish()
	s.deffIn = designEffect(s.input, s.units.rowOf, s.units.n)
	s.deffOut = designEffect(s.output, s.units.rowOf, s.units.n)
	s.units.rowOf = nil
	s.sum.Records = int64(n)
	slices.Sort(s.input)
	slices.Sort(s.output)
	slices.Sort(s.arrivals)
	s.sum.MeanInput = mean(s.input)
	s.sum.MeanOutput = mean(s.output)
	for i := 1; i < n; i++ {
		s.gaps = append(s.gaps, float64(s.arrivals[i]-s.arrivals[i-1])/1e9)
	}
	if n > 0 {
		s.sum.DurationS = float64(s.arrivals[n-1]+1) / 1e9
		s.sum.RatePerS = float64(n) / s.sum.DurationS
	}
	if len(s.gaps) > 1 {
		m, sd := stat.MeanStdDev(s.gaps, nil)
		if m > 0 {
			s.sum.CV = sd / m
		}
	}
	slices.Sort(s.gaps)
	s.sum.Dispersion = map[string]float64{}
	for _, w := range DispersionWindows {
		s.sum.Dispersion[windowLabel(w)] = dispersion(s.arrivals, int64(w))
	}
	if blocks > 0 {
		s.sum.PrefixReuse = float64(reusedBlocks) / float64(blocks)
	} else if tokens > 0 {
		s.sum.PrefixReuse = float64(reusedTokens) / float64(tokens)
	}
	s.turns = turns.finish()
	s.sum.Sessions = int64(len(sess))
	if len(sess) > 0 {
		t := 0
		for _, c := range sess {
			t += c
		}
		s.sum.TurnsPerSess = float64(t) / float64(len(sess))
	}
	s.shares = map[string]float64{}
	for k, c := range counts {
		s.shares[k] = float64(c) / float64(max(n, 1))
	}
	s.sum.Categories = len(counts)
	// List the biggest categories only (a tail of thousands says nothing).
	type kv struct {
		k string
		v float64
	}
	var l []kv
	for k, v := range s.shares {
		l = append(l, kv{k, v})
	}
	sort.Slice(l, func(i, j int) bool {
		if l[i].v != l[j].v {
			return l[i].v > l[j].v
		}
		return l[i].k < l[j].k
	})
	s.sum.CategoryShares = map[string]float64{}
	for i, e := range l {
		if i == maxShareCategories {
			break
		}
		s.sum.CategoryShares[groupName(e.k)] = e.v
	}
	return s
}

func mean(x []float64) float64 {
	if len(x) == 0 {
		return 0
	}
	return stat.Mean(x, nil)
}

// countsPer returns arrival counts in full windows of w from 0 up to end.
func countsPer(sorted []int64, w, end int64) []float64 {
	n := int(end / w)
	c := make([]float64, n)
	for _, t := range sorted {
		if i := int(t / w); i < n {
			c[i]++
		}
	}
	return c
}

// maxDenseWindows bounds the windows counted one by one. A longer span
// (years of sparse traffic) is counted by its non-empty windows only:
// the same figures, in memory that follows the arrivals, not the span.
const maxDenseWindows = 1 << 20

// sparseCounts returns the number of full windows of w from 0 up to end,
// and the arrival counts of the non-empty ones.
func sparseCounts(sorted []int64, w, end int64) (n int64, counts []float64) {
	n = end / w
	cur := int64(-1)
	for _, t := range sorted {
		i := t / w
		if i >= n {
			break
		}
		if i != cur {
			counts = append(counts, 0)
			cur = i
		}
		counts[len(counts)-1]++
	}
	return n, counts
}

// traceCounts is sparseCounts over the trace's own span: the windows of
// w up to its last arrival (none without arrivals).
func traceCounts(sorted []int64, w int64) (n int64, counts []float64) {
	if len(sorted) == 0 {
		return 0, nil
	}
	return sparseCounts(sorted, w, sorted[len(sorted)-1]+1)
}

// dispersion is the index of dispersion (variance/mean) of counts in full
// windows of w over the trace. It sums the non-empty windows, so a long
// span costs nothing more.
func dispersion(sorted []int64, w int64) float64 {
	n, c := traceCounts(sorted, w)
	if n < 2 {
		return 0
	}
	var sum, sumsq float64
	for _, x := range c {
		sum, sumsq = sum+x, sumsq+x*x
	}
	m := sum / float64(n)
	if m == 0 {
		return 0
	}
	return (sumsq - sum*m) / float64(n-1) / m
}

// ks is the two-sample KS distance of sorted samples (0 if both empty).
func ks(a, b []float64) float64 {
	if len(a) == 0 && len(b) == 0 {
		return 0
	}
	return stat.KolmogorovSmirnov(a, nil, b, nil)
}

// wasserstein1 is the W1 distance of two sorted samples: ∫|F−G|.
func wasserstein1(a, b []float64) float64 {
	return wasserstein1w(a, nil, b, nil)
}

func relErr(synth, real float64) float64 {
	if real == 0 {
		if synth == 0 {
			return 0
		}
		return 1
	}
	return math.Abs(synth-real) / math.Abs(real)
}

// Check compares a synthetic trace with a real one (see Report for the
// figures and Thresholds for pass/fail). th must pass Thresholds.Validate,
// as DefaultThresholds does: Check panics with the option error otherwise.
func Check(real, synth []traces.Record, th Thresholds) Report {
	mustValid(th)
	return compare(statsOf(real), statsOf(synth), th)
}

// CheckSeq is Check for traces read as streams, each once and in arrival
// order (arrival, then seq; rows out of that order count their prefix
// reuse and session turns as they come). It keeps a few numbers per
// request (lengths, arrival) and the distinct prefix blocks, categories
// and sessions, not the rows.
func CheckSeq(real, synth iter.Seq[*traces.Record], th Thresholds) Report {
	mustValid(th)
	return compare(statsOfSeq(real), statsOfSeq(synth), th)
}

func compare(rs, ss traceStats, th Thresholds) Report {
	rep := Report{Real: rs.sum, Synth: ss.sum, Dispersion: map[string]float64{}}
	rep.KS.InputTokens = ks(rs.input, ss.input)
	rep.KS.OutputTokens = ks(rs.output, ss.output)
	g := rep.arrivalGaps(&rs, &ss)
	rep.KS.Interarrival = ks(g.real, g.synth)
	rep.Wasserstein.InputTokens = wasserstein1(rs.input, ss.input)
	rep.Wasserstein.OutputTokens = wasserstein1(rs.output, ss.output)
	rep.Wasserstein.InterarrivalS = wasserstein1(g.real, g.synth)

	// Per-minute rate over the full minutes both traces cover.
	var end int64
	if len(rs.arrivals) > 0 && len(ss.arrivals) > 0 {
		end = min(rs.arrivals[len(rs.arrivals)-1], ss.arrivals[len(ss.arrivals)-1]) + 1
	}
	minute := int64(time.Minute)
	if end/minute > maxDenseWindows {
		rep.rateSparse(rs.arrivals, ss.arrivals, end)
	} else {
		rep.rateDense(rs.arrivals, ss.arrivals, end)
	}

	for _, w := range DispersionWindows {
		k := windowLabel(w)
		rep.Dispersion[k] = relErr(ss.sum.Dispersion[k], rs.sum.Dispersion[k])
	}
	rep.CV = relErr(g.cvS, g.cvR)
	for k, v := range rs.shares {
		if d := math.Abs(v - ss.shares[k]); d > rep.CategoryShareMaxDiff || (d == rep.CategoryShareMaxDiff && groupName(k) < rep.CategoryShareMaxDiffName) {
			rep.CategoryShareMaxDiff, rep.CategoryShareMaxDiffName = d, groupName(k)
		}
	}
	for k, v := range ss.shares {
		if _, ok := rs.shares[k]; !ok && v > rep.CategoryShareMaxDiff {
			rep.CategoryShareMaxDiff, rep.CategoryShareMaxDiffName = v, groupName(k)
		}
	}
	rep.PrefixReuse = math.Abs(ss.sum.PrefixReuse - rs.sum.PrefixReuse)
	rep.Sessions = relErr(float64(ss.sum.Sessions), float64(rs.sum.Sessions))
	rep.Turns = relErr(ss.sum.TurnsPerSess, rs.sum.TurnsPerSess)
	rep.evaluate(rep.checkSpecs(&rs, &ss, &g, th, end), th.Confidence)
	if why := shortWindows(end, time.Minute); why != "" {
		rep.Unmeasured = map[string]string{"ks.rate_per_minute": why, "wasserstein.rate_per_minute": why}
	}
	rep.Pass = true
	for _, c := range rep.Checks {
		if !c.Pass {
			rep.Pass = false
		}
	}
	return rep
}

// shortWindows says why a windowed figure means nothing when both traces
// share fewer than MinWindows full windows of w before end ("" = it does).
func shortWindows(end int64, w time.Duration) string {
	if n := end / int64(w); n < MinWindows {
		return fmt.Sprintf("needs %d full %v windows in both traces, they share %d (%.0f s)", MinWindows, w, n, float64(end)/1e9)
	}
	return ""
}

// checkSpec is a thresholded figure before its noise floor is known: eval
// gives its value, its floor at α and, for a check of several parts, the
// part it reports.
type checkSpec struct {
	name      string
	threshold float64
	skipped   string
	eval      func(alpha float64) (value, floor float64, at string)
}

// fixed is the eval of a one-part check: value against floor(α).
func fixed(value float64, floor func(alpha float64) float64) func(float64) (float64, float64, string) {
	return func(alpha float64) (float64, float64, string) { return value, floor(alpha), "" }
}

// evaluate runs the checks at the confidence shared among those made
// (Bonferroni): each check's limit is the larger of its threshold and its
// noise floor.
func (rep *Report) evaluate(specs []checkSpec, confidence float64) {
	made := 0
	for _, c := range specs {
		if c.threshold >= 0 && c.skipped == "" {
			made++
		}
	}
	alpha := (1 - confidence) / float64(max(made, 1))
	rep.Confidence, rep.CheckConfidence = confidence, 1-alpha
	for _, sp := range specs {
		if sp.threshold < 0 {
			continue
		}
		c := CheckResult{Name: sp.name, Threshold: sp.threshold, Skipped: sp.skipped, Pass: true}
		if sp.skipped == "" {
			c.Value, c.NoiseFloor, c.At = sp.eval(alpha)
			c.Limit = max(sp.threshold, c.NoiseFloor)
			c.Pass = c.Value <= c.Limit
		}
		if !c.Pass {
			affects, fix := rep.advice(c.Name, "", "")
			c.Affects, c.Fix = affects.String(), fix.String()
		}
		rep.Checks = append(rep.Checks, c)
	}
}

// checkSpecs lists the checks of rs against ss.
func (rep *Report) checkSpecs(rs, ss *traceStats, g *gapPair, th Thresholds, end int64) []checkSpec {
	nr, ns := len(rs.input), len(ss.input)
	specs := []checkSpec{
		{name: "ks.input_tokens", threshold: th.KSLengths, eval: fixed(rep.KS.InputTokens, func(a float64) float64 { return ksFloor(a, nr, ns, rs.deffIn, ss.deffIn) })},
		{name: "ks.output_tokens", threshold: th.KSLengths, eval: fixed(rep.KS.OutputTokens, func(a float64) float64 { return ksFloor(a, nr, ns, rs.deffOut, ss.deffOut) })},
		{name: "ks.interarrival", threshold: th.KSGaps, eval: func(a float64) (float64, float64, string) {
			return rep.KS.Interarrival, ksFloor(a, len(g.real), len(g.synth), g.deffR, g.deffS), g.at
		}},
		{name: "rate_error", threshold: th.RateError, eval: fixed(rep.RateError, func(a float64) float64 {
			return rateFloor(a, rateWindows(rs.arrivals, end), rs.units.clusterIndex(), ss.units.clusterIndex())
		})},
	}
	for _, w := range DispersionWindows {
		k := windowLabel(w)
		vr, vs, dr := dispersionVar(rs.arrivals, int64(w)), dispersionVar(ss.arrivals, int64(w)), rs.sum.Dispersion[k]
		specs = append(specs, checkSpec{name: "dispersion." + k, threshold: th.Dispersion, skipped: shortWindows(end, w), eval: fixed(rep.Dispersion[k], func(a float64) float64 {
			if dr == 0 {
				return 0
			}
			return zTwoSided(a) * math.Sqrt(vr+vs) / dr
		})})
	}
	specs = append(specs,
		checkSpec{name: "cv", threshold: th.CV, eval: func(a float64) (float64, float64, string) {
			if g.cvR == 0 {
				return rep.CV, 0, g.at
			}
			return rep.CV, zTwoSided(a) * math.Sqrt(g.deffR*cvVar(g.real)+g.deffS*cvVar(g.synth)) / g.cvR, g.at
		}},
		checkSpec{name: "category_share_max_diff", threshold: th.CategoryShare, eval: func(a float64) (float64, float64, string) {
			// The largest difference against the floor of the category whose
			// share varies most: conservative, and one number.
			parts := shareParts(&rs.units, &ss.units)
			sd := 0.0
			for _, p := range parts {
				sd = max(sd, p.sd)
			}
			return rep.CategoryShareMaxDiff, zTwoSided(a/float64(max(len(parts), 1))) * sd, rep.CategoryShareMaxDiffName
		}},
		checkSpec{name: "prefix_reuse", threshold: th.PrefixReuse, eval: fixed(rep.PrefixReuse, func(a float64) float64 {
			return zTwoSided(a) * math.Sqrt(rs.units.reuse.variance()+ss.units.reuse.variance())
		})},
	)
	specs = append(specs, rep.reuseSpecs(rs, ss, th)...)
	specs = append(specs, rep.sessionSpecs(rs, ss, th)...)
	return specs
}

// rateWindows are the real trace's counts in the windows rate_error
// compares: full minutes before end, else the span before end.
func rateWindows(sorted []int64, end int64) []float64 {
	minute := int64(time.Minute)
	if end/minute > maxDenseWindows {
		_, c := sparseCounts(sorted, minute, end)
		return c
	}
	c := countsPer(sorted, minute, end)
	if len(c) == 0 && end > 0 {
		c = []float64{float64(countBefore(sorted, end))}
	}
	return c
}

// reuseSpecs are the prefix reuse by turn index and by category, when
// there are at least two of either to compare.
func (rep *Report) reuseSpecs(rs, ss *traceStats, th Thresholds) []checkSpec {
	var specs []checkSpec
	rt, names := byTurnNames(&rs.units)
	st, _ := byTurnNames(&ss.units)
	groups, parts := reuseParts(rt, st, names)
	if len(groups) >= 2 && rs.sum.Sessions > 0 {
		rep.ReuseByTurn = groups
		specs = append(specs, checkSpec{name: "prefix_reuse_by_turn", threshold: th.PrefixReuse, eval: func(a float64) (float64, float64, string) {
			return worstPart(parts, a, th.PrefixReuse)
		}})
	}
	groups, cparts := reuseParts(rs.units.byCat, ss.units.byCat, categoryNames(rs.units.byCat, ss.units.byCat))
	if len(groups) >= 2 {
		rep.ReuseByCategory = groups
		specs = append(specs, checkSpec{name: "prefix_reuse_by_category", threshold: th.PrefixReuse, eval: func(a float64) (float64, float64, string) {
			return worstPart(cparts, a, th.PrefixReuse)
		}})
	}
	return specs
}

// sessionSpecs are the checks of sessions, turns, context growth and
// think time.
func (rep *Report) sessionSpecs(rs, ss *traceStats, th Thresholds) []checkSpec {
	sr, sn := float64(rs.sum.Sessions), float64(ss.sum.Sessions)
	_, vr := meanVar(rs.units.turns)
	_, vs := meanVar(ss.units.turns)
	specs := []checkSpec{
		{name: "sessions", threshold: th.Sessions, eval: fixed(rep.Sessions, func(a float64) float64 {
			if sr == 0 {
				return 0
			}
			return zTwoSided(a) * math.Sqrt(sr+sn) / sr
		})},
		{name: "turns", threshold: th.Turns, eval: fixed(rep.Turns, func(a float64) float64 {
			if rs.sum.TurnsPerSess == 0 {
				return 0
			}
			return zTwoSided(a) * math.Sqrt(vr+vs) / rs.sum.TurnsPerSess
		})},
	}
	growth, think := rep.compareTurns(rs.turns, ss.turns)
	if growth {
		parts := growthParts(rs.turns, ss.turns, len(rep.InputByTurn))
		specs = append(specs, checkSpec{name: "context_growth", threshold: th.ContextGrowth, eval: func(a float64) (float64, float64, string) {
			return worstPart(parts, a, th.ContextGrowth)
		}})
	}
	if think {
		specs = append(specs, checkSpec{name: "ks.think", threshold: th.KSThink, eval: fixed(rep.KS.Think, func(a float64) float64 {
			return ksFloor(a, len(rs.turns.think), len(ss.turns.think), rs.turns.thinkDeff, ss.turns.thinkDeff)
		})})
	}
	return specs
}

func countBefore(sorted []int64, end int64) int {
	return sort.Search(len(sorted), func(i int) bool { return sorted[i] >= end })
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes the report as a readable table.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%-28s %14s %14s\n", "", "real", "synth")
	fmt.Fprintf(&b, "%-28s %14d %14d\n", "records", r.Real.Records, r.Synth.Records)
	fmt.Fprintf(&b, "%-28s %14.1f %14.1f\n", "duration_s", r.Real.DurationS, r.Synth.DurationS)
	fmt.Fprintf(&b, "%-28s %14.3f %14.3f\n", "rate_per_s", r.Real.RatePerS, r.Synth.RatePerS)
	fmt.Fprintf(&b, "%-28s %14.1f %14.1f\n", "mean_input_tokens", r.Real.MeanInput, r.Synth.MeanInput)
	fmt.Fprintf(&b, "%-28s %14.1f %14.1f\n", "mean_output_tokens", r.Real.MeanOutput, r.Synth.MeanOutput)
	fmt.Fprintf(&b, "%-28s %14.3f %14.3f\n", "cv", r.Real.CV, r.Synth.CV)
	for _, wd := range DispersionWindows {
		k := windowLabel(wd)
		fmt.Fprintf(&b, "%-28s %14.3f %14.3f\n", "dispersion_"+k, r.Real.Dispersion[k], r.Synth.Dispersion[k])
	}
	fmt.Fprintf(&b, "%-28s %14.3f %14.3f\n", "prefix_reuse", r.Real.PrefixReuse, r.Synth.PrefixReuse)
	fmt.Fprintf(&b, "%-28s %14d %14d\n", "sessions", r.Real.Sessions, r.Synth.Sessions)
	fmt.Fprintf(&b, "%-28s %14d %14d\n", "categories", r.Real.Categories, r.Synth.Categories)
	r.writeTurns(&b)
	r.writeReuse(&b)
	fmt.Fprintf(&b, "\nA check fails only beyond its threshold and its noise floor: the difference two traces drawn alike exceed by chance, at %.1f %% confidence each (%.0f %% that such a trace passes every check).\n",
		100*r.CheckConfidence, 100*r.Confidence)
	if r.SessionGaps != "" {
		fmt.Fprintf(&b, "ks.interarrival and cv: %s.\n", r.SessionGaps)
	}
	fmt.Fprintf(&b, "%-28s %10s %10s %10s  %s\n", "check", "value", "threshold", "noise", "result")
	var failed []CheckResult
	for _, c := range r.Checks {
		at := ""
		if c.At != "" {
			at = " (" + c.At + ")"
		}
		switch {
		case c.Skipped != "":
			fmt.Fprintf(&b, "%-28s %10s %10.4f %10s  skipped: %s\n", c.Name, "-", c.Threshold, "-", c.Skipped)
		case c.Pass:
			fmt.Fprintf(&b, "%-28s %10.4f %10.4f %10.4f  ok%s\n", c.Name, c.Value, c.Threshold, c.NoiseFloor, at)
		default:
			fmt.Fprintf(&b, "%-28s %10.4f %10.4f %10.4f  FAIL%s\n", c.Name, c.Value, c.Threshold, c.NoiseFloor, at)
			failed = append(failed, c)
		}
	}
	reported := func(name, format string, v float64) {
		if why := r.Unmeasured[name]; why != "" {
			fmt.Fprintf(&b, "%-28s %10s  not measured: %s\n", name, "-", why)
			return
		}
		fmt.Fprintf(&b, "%-28s "+format+"\n", name, v)
	}
	reported("ks.rate_per_minute", "%10.4f", r.KS.RatePerMinute)
	reported("wasserstein.input_tokens", "%10.2f", r.Wasserstein.InputTokens)
	reported("wasserstein.output_tokens", "%10.2f", r.Wasserstein.OutputTokens)
	reported("wasserstein.interarrival_s", "%10.4f", r.Wasserstein.InterarrivalS)
	reported("wasserstein.rate_per_minute", "%10.2f", r.Wasserstein.RatePerMinute)
	if len(failed) > 0 {
		fmt.Fprintf(&b, "\nWhat the misses mean and what to change:\n")
		for _, c := range failed {
			fmt.Fprintf(&b, "  %s: affects %s.\n    change: %s\n", c.Name, c.Affects, c.Fix)
		}
	}
	r.writeFixes(&b)
	verdict := "PASS"
	if !r.Pass {
		verdict = "FAIL"
	}
	fmt.Fprintf(&b, "\n%s\n", verdict)
	_, err := io.WriteString(w, b.String())
	return err
}
