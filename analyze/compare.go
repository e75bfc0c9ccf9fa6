package analyze

import (
	"bufio"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// Verdicts of a MetricChange. Change mode judges B against the baseline A
// (better, worse, no significant change); fidelity mode asks whether B (a
// synthetic workload's run) reproduces A (the real traffic's run): same
// within the interval, same within the practical threshold, or differs.
const (
	VerdictBetter     = "better"
	VerdictWorse      = "worse"
	VerdictSame       = "no significant change"
	VerdictSameWithin = "same within interval"
	VerdictClose      = "same within threshold"
	VerdictDiffers    = "differs"
	VerdictNA         = "n/a"
)

// Compare modes (CompareOptions.Mode).
const (
	ModeChange   = "change"
	ModeFidelity = "fidelity"
)

// DefaultPracticalDiff is the relative difference under which fidelity
// mode calls a metric the same even when the interval excludes zero.
const DefaultPracticalDiff = 0.10

// DefaultMinChangeMs is the latency difference (absolute) under which a
// metric counts as unchanged in either mode: sub-millisecond moves of a
// lateness or TTFT percentile are noise, not findings.
const DefaultMinChangeMs = 1.0

// DefaultRelativeThreshold is the relative change below which a metric
// without a confidence interval is "no significant change".
const DefaultRelativeThreshold = 0.05

// DefaultMaxBootstrapSample caps the values per side in the bootstrap.
const DefaultMaxBootstrapSample = 10000

// DefaultMaxLateness is the client lateness p99 above which a replayed run
// did not keep its recorded timing (replay's own default gate, its
// --max-lateness): its latencies then include the client's delay.
const DefaultMaxLateness = 5 * time.Millisecond

// CompareOptions tunes Compare. Start from DefaultCompareOptions: a
// field's zero is a value of its own, never its default.
type CompareOptions struct {
	// Seed seeds the bootstrap. Defaults to DefaultSeed.
	Seed uint64
	// Resamples is the number of bootstrap resamples, at least
	// MinResamples. Defaults to DefaultResamples (1000).
	Resamples int
	// Confidence is the confidence level of the intervals. Defaults to
	// DefaultConfidence (0.95).
	Confidence float64
	// MaxSample caps the values per side in the bootstrap; larger samples
	// are thinned to evenly spaced order statistics. Defaults to
	// DefaultMaxBootstrapSample.
	MaxSample int
	// Threshold is the relative change below which a metric without a
	// confidence interval counts as unchanged. Defaults to
	// DefaultRelativeThreshold (5 %).
	Threshold float64
	// LabelA and LabelB name the two sides. Default to "A" and "B".
	LabelA, LabelB string
	// Mode is ModeChange (B against the baseline A) or ModeFidelity (does
	// B, a synthetic run, reproduce A, the real one). Defaults to
	// ModeChange.
	Mode string
	// PracticalDiff is fidelity mode's relative threshold. Defaults to
	// DefaultPracticalDiff (10 %).
	PracticalDiff float64
	// MinChangeMs is the latency difference under which a metric counts as
	// unchanged. Defaults to DefaultMinChangeMs (1 ms).
	MinChangeMs float64
	// MaxLateness is the lateness p99 above which a run failed its timing
	// check: the comparison warns, since such a run measured the client as
	// well as the server. Defaults to DefaultMaxLateness (5 ms).
	MaxLateness time.Duration
	// Terms say the options the comparison's sentences name (a caller's
	// flags); nil says them by the libraries' names. Defaults to nil.
	Terms traces.Terms
}

// DefaultCompareOptions returns every CompareOptions default, the values
// the field docs name.
func DefaultCompareOptions() CompareOptions {
	return CompareOptions{
		Seed:          DefaultSeed,
		Resamples:     DefaultResamples,
		Confidence:    DefaultConfidence,
		MaxSample:     DefaultMaxBootstrapSample,
		Threshold:     DefaultRelativeThreshold,
		LabelA:        "A",
		LabelB:        "B",
		Mode:          ModeChange,
		PracticalDiff: DefaultPracticalDiff,
		MinChangeMs:   DefaultMinChangeMs,
		MaxLateness:   DefaultMaxLateness,
	}
}

// MinResamples is the fewest bootstrap resamples Compare takes.
const MinResamples = 10

// Validate reports the first option that cannot be used as given (a zero
// is a value like any other, never the default), naming it in a
// *traces.OptionError.
func (o CompareOptions) Validate() error {
	bad := func(option, format string, a ...any) error {
		return traces.OptionErrorf("analyze", "CompareOptions."+option, format, a...)
	}
	switch {
	case o.Resamples < MinResamples:
		return bad("Resamples", "%d: want at least %d", o.Resamples, MinResamples)
	case !(o.Confidence > 0 && o.Confidence < 1):
		return bad("Confidence", "%v: want a level strictly between 0 and 1, e.g. 0.95", o.Confidence)
	case o.MaxSample < 1:
		return bad("MaxSample", "%d: want at least 1 value per side", o.MaxSample)
	case !(o.Threshold >= 0) || math.IsInf(o.Threshold, 0):
		return bad("Threshold", "%v: want a relative change >= 0", o.Threshold)
	case o.Mode != ModeChange && o.Mode != ModeFidelity:
		return bad("Mode", "%q: want %s or %s", o.Mode, ModeChange, ModeFidelity)
	case !(o.PracticalDiff > 0) || math.IsInf(o.PracticalDiff, 0):
		return bad("PracticalDiff", "%v: want a positive relative difference", o.PracticalDiff)
	case !(o.MinChangeMs >= 0) || math.IsInf(o.MinChangeMs, 0):
		return bad("MinChangeMs", "%v: want a latency >= 0", o.MinChangeMs)
	case o.MaxLateness < 0:
		return bad("MaxLateness", "%v: want a duration >= 0", o.MaxLateness)
	}
	return nil
}

// MetricChange is one metric of two runs side by side.
type MetricChange struct {
	Name string  `json:"name"`
	A    float64 `json:"a"`
	B    float64 `json:"b"`
	// Change is B − A; ChangePct is it relative to A (null when A is 0).
	Change    float64  `json:"change"`
	ChangePct *float64 `json:"change_pct"`
	// CILow and CIHigh bound B − A (bootstrap; p50 and p99 only).
	CILow  *float64 `json:"ci_low,omitempty"`
	CIHigh *float64 `json:"ci_high,omitempty"`
	// LowerIsBetter says which direction is an improvement.
	LowerIsBetter bool   `json:"lower_is_better"`
	Verdict       string `json:"verdict"`
}

// MetaDiff is a metadata key whose value differs between the runs.
type MetaDiff struct {
	Key string `json:"key"`
	A   string `json:"a"`
	B   string `json:"b"`
}

// Comparison is two reports side by side.
type Comparison struct {
	LabelA     string  `json:"label_a"`
	LabelB     string  `json:"label_b"`
	Mode       string  `json:"mode"`
	Confidence float64 `json:"confidence"`
	// PracticalDiff is fidelity mode's relative threshold.
	PracticalDiff float64 `json:"practical_diff,omitempty"`
	// Conclusion is the comparison in one sentence, from the key metrics
	// (TTFT, TPOT and E2E p50/p99, failure rate, goodput) and the tails'
	// dominant causes.
	Conclusion string `json:"conclusion"`
	// Warnings say why the comparison may not hold: a run that failed its
	// lateness check (CompareOptions.MaxLateness), or whose simulator fell
	// behind its model (Report.SimLateness); the Conclusion then begins
	// "unreliable (…)".
	Warnings  []string       `json:"warnings,omitempty"`
	MetaDiffs []MetaDiff     `json:"meta_diffs,omitempty"`
	Metrics   []MetricChange `json:"metrics"`
	// Attribution of each side's tail.
	AttributionA Attribution `json:"attribution_a"`
	AttributionB Attribution `json:"attribution_b"`
	// ByClass compares each class's rows alone when the runs hold more
	// than one class (a --background run pools batch rows with the
	// interactive ones above); empty otherwise.
	ByClass []ClassComparison `json:"by_class,omitempty"`
	// SamplingA and SamplingB are set for a run that passed
	// Options.ExactRows: its percentiles are approximate and its bootstrap
	// intervals and attribution come from a sample (Report.Sampling).
	SamplingA *Sampling `json:"sampling_a,omitempty"`
	SamplingB *Sampling `json:"sampling_b,omitempty"`

	a, b *Report
	// terms say the options its text names (CompareOptions.Terms).
	terms traces.Terms
}

// ClassComparison is one class's rows of both runs compared alone.
type ClassComparison struct {
	Class string `json:"class"`
	// OnlyIn names the run that holds the class when the other has none of
	// it (no comparison then).
	OnlyIn string `json:"only_in,omitempty"`
	*Comparison
}

// classKeyMetrics are the rows of a class's comparison in the text and
// HTML reports: the conclusion's metrics and the throughput.
var classKeyMetrics = append([]string{"requests", "throughput.requests_per_s", "throughput.output_tokens_per_s"}, conclusionMetrics...)

// keyMetrics returns c's metrics named in classKeyMetrics, in that order.
func (c *Comparison) keyMetrics() []MetricChange {
	var out []MetricChange
	for _, n := range classKeyMetrics {
		for _, m := range c.Metrics {
			if m.Name == n {
				out = append(out, m)
			}
		}
	}
	return out
}

// Compare compares report b against report a (the baseline): every summary
// metric side by side with its change, a seeded bootstrap confidence
// interval of the change of each latency's p50 and p99, a verdict per
// metric, the tails' attribution, and the metadata that differs. An
// error is o's (Validate).
func Compare(a, b *Report, o CompareOptions) (*Comparison, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	c := &Comparison{LabelA: o.LabelA, LabelB: o.LabelB, Mode: o.Mode, Confidence: o.Confidence, AttributionA: a.Attribution, AttributionB: b.Attribution, a: a, b: b, terms: o.Terms,
		SamplingA: a.Sampling, SamplingB: b.Sampling}
	if o.Mode == ModeFidelity {
		c.PracticalDiff = o.PracticalDiff
	}
	c.MetaDiffs = metaDiffs(a, b)
	// What each run's analysis warned of (bad rows skipped and named, a
	// damaged file read up to its damage, rows out of order), as analyze
	// says it of one run, then the comparison's own.
	for _, w := range append(slices.Clone(a.Warnings), b.Warnings...) {
		if !slices.Contains(c.Warnings, w) {
			c.Warnings = append(c.Warnings, w)
		}
	}
	c.Warnings = append(c.Warnings, latenessWarnings(a, b, o)...)
	c.Warnings = append(c.Warnings, simWarnings(a, b, o)...)
	plain := func(name string, va, vb float64, lowerBetter bool) {
		m := MetricChange{Name: name, A: va, B: vb, Change: vb - va, LowerIsBetter: lowerBetter}
		if va != 0 {
			p := 100 * (vb - va) / math.Abs(va)
			m.ChangePct = &p
		}
		m.Verdict = o.verdict(&m, false)
		c.Metrics = append(c.Metrics, m)
	}
	info := func(name string, va, vb float64) {
		m := MetricChange{Name: name, A: va, B: vb, Change: vb - va, Verdict: VerdictNA}
		if va != 0 {
			p := 100 * (vb - va) / math.Abs(va)
			m.ChangePct = &p
		}
		c.Metrics = append(c.Metrics, m)
	}
	info("requests", float64(a.Requests), float64(b.Requests))
	plain("failure_rate", ratio(float64(a.Failed), float64(a.Requests)), ratio(float64(b.Failed), float64(b.Requests)), true)
	info("duration_s", a.DurationS, b.DurationS)
	plain("throughput.requests_per_s", a.Throughput.RequestsPerS, b.Throughput.RequestsPerS, false)
	plain("throughput.output_tokens_per_s", a.Throughput.OutputTokensPerS, b.Throughput.OutputTokensPerS, false)
	if a.Goodput != nil && b.Goodput != nil {
		plain("goodput", *a.Goodput, *b.Goodput, false)
		plain("goodput_ratio", *a.GoodRatio, *b.GoodRatio, false)
	}
	info("peak_concurrency", float64(a.PeakConcurrency), float64(b.PeakConcurrency))
	type dm struct {
		name   string
		da, db Dist
		sa, sb []float64
	}
	for _, d := range []dm{
		{"ttft_ms", a.TTFT, b.TTFT, a.samples.ttft, b.samples.ttft},
		{"ttft_scheduled_ms", a.TTFTScheduled, b.TTFTScheduled, a.samples.ttftSched, b.samples.ttftSched},
		{"tpot_ms", a.TPOT, b.TPOT, a.samples.tpot, b.samples.tpot},
		{"itl_ms", a.ITL, b.ITL, a.samples.itl, b.samples.itl},
		{"e2e_ms", a.E2E, b.E2E, a.samples.e2e, b.samples.e2e},
		{"e2e_scheduled_ms", a.E2EScheduled, b.E2EScheduled, a.samples.e2eSched, b.samples.e2eSched},
		{"lateness_ms", a.Lateness, b.Lateness, a.samples.lateness, b.samples.lateness},
	} {
		if d.da.Count == 0 || d.db.Count == 0 {
			continue
		}
		plain(d.name+".mean", d.da.Mean, d.db.Mean, true)
		lo, hi, ok := bootstrap(d.sa, d.sb, []float64{0.5, 0.99}, o, d.name)
		for k, p := range []struct {
			n      string
			va, vb float64
		}{{"p50", d.da.P50, d.db.P50}, {"p99", d.da.P99, d.db.P99}} {
			m := MetricChange{Name: d.name + "." + p.n, A: p.va, B: p.vb, Change: p.vb - p.va, LowerIsBetter: true}
			if p.va != 0 {
				pc := 100 * (p.vb - p.va) / math.Abs(p.va)
				m.ChangePct = &pc
			}
			if ok {
				l, h := lo[k]*msPerNs, hi[k]*msPerNs
				m.CILow, m.CIHigh = &l, &h
				m.Verdict = o.verdict(&m, true)
			} else {
				m.Verdict = VerdictNA
			}
			c.Metrics = append(c.Metrics, m)
		}
		plain(d.name+".p90", d.da.P90, d.db.P90, true)
		plain(d.name+".max", d.da.Max, d.db.Max, true)
	}
	if o.Mode == ModeFidelity {
		// Lateness is the replayer's, not the workload's: it says whether
		// each run is valid (see the run summaries), not whether B
		// reproduces A.
		for i := range c.Metrics {
			if strings.HasPrefix(c.Metrics[i].Name, "lateness_ms.") {
				c.Metrics[i].Verdict = VerdictNA
			}
		}
	}
	c.Conclusion = c.conclude(o)
	if why := unreliable(a, b, o); why != "" {
		// The warning that voids the conclusion is part of it.
		c.Conclusion = "unreliable (" + why + "); as measured: " + c.Conclusion
	}
	return c, nil
}

// verdict judges one metric; withCI says m carries a bootstrap interval.
func (o CompareOptions) verdict(m *MetricChange, withCI bool) string {
	rel := math.Inf(1)
	if m.A != 0 {
		rel = math.Abs(m.Change) / math.Abs(m.A)
	}
	noise := m.Change == 0 || (strings.Contains(m.Name, "_ms.") && math.Abs(m.Change) < o.MinChangeMs)
	if o.Mode == ModeFidelity {
		switch {
		case withCI && *m.CILow <= 0 && *m.CIHigh >= 0:
			return VerdictSameWithin
		case noise || rel <= o.PracticalDiff:
			return VerdictClose
		}
		return VerdictDiffers
	}
	switch {
	case noise:
		return VerdictSame
	case withCI && *m.CILow > 0:
		return VerdictWorse
	case withCI && *m.CIHigh < 0:
		return VerdictBetter
	case withCI:
		return VerdictSame
	case rel < o.Threshold:
		return VerdictSame
	case (m.B < m.A) == m.LowerIsBetter:
		return VerdictBetter
	}
	return VerdictWorse
}

// conclusionMetrics are the metrics the one-line conclusion rests on.
var conclusionMetrics = []string{"ttft_ms.p50", "ttft_ms.p99", "tpot_ms.p50", "tpot_ms.p99", "e2e_ms.p50", "e2e_ms.p99", "failure_rate", "goodput_ratio"}

// conclude says in one sentence what the comparison finds.
func (c *Comparison) conclude(o CompareOptions) string {
	var hit []string
	var worse, better []string
	for _, name := range conclusionMetrics {
		for _, m := range c.Metrics {
			if m.Name != name {
				continue
			}
			d := fmt.Sprintf("%s %+.3g", m.Name, m.Change)
			if m.ChangePct != nil {
				d = fmt.Sprintf("%s %+.0f%%", m.Name, *m.ChangePct)
			}
			switch m.Verdict {
			case VerdictDiffers:
				hit = append(hit, d)
			case VerdictWorse:
				worse = append(worse, d)
			case VerdictBetter:
				better = append(better, d)
			}
		}
	}
	da, db := orDash(c.AttributionA.Dominant), orDash(c.AttributionB.Dominant)
	if o.Mode == ModeFidelity {
		switch {
		case da != db:
			s := fmt.Sprintf("%s does not reach %s's conclusion: it blames the tail on %s, %s on %s", c.LabelB, c.LabelA, db, c.LabelA, da)
			if len(hit) > 0 {
				s += "; it also differs on " + strings.Join(hit, ", ")
			}
			return s + "."
		case len(hit) > 0:
			return fmt.Sprintf("%s finds the same tail cause as %s (%s) but differs on %s (beyond the interval and %.0f%%).",
				c.LabelB, c.LabelA, da, strings.Join(hit, ", "), 100*o.PracticalDiff)
		}
		return fmt.Sprintf("%s reproduces %s: the same tail cause (%s), and every key latency percentile, the failure rate and goodput the same within the interval or %.0f%%.",
			c.LabelB, c.LabelA, da, 100*o.PracticalDiff)
	}
	var parts []string
	if len(worse) > 0 {
		parts = append(parts, "worse on "+strings.Join(worse, ", "))
	}
	if len(better) > 0 {
		parts = append(parts, "better on "+strings.Join(better, ", "))
	}
	s := fmt.Sprintf("%s against %s: no significant change on the key metrics", c.LabelB, c.LabelA)
	if len(parts) > 0 {
		s = fmt.Sprintf("%s against %s: %s", c.LabelB, c.LabelA, strings.Join(parts, "; "))
	}
	if da != db {
		s += fmt.Sprintf("; the tail's dominant cause moved from %s to %s", da, db)
	}
	return s + "."
}

// thin keeps at most m evenly spaced order statistics of sorted x.
func thin(x []float64, m int) []float64 {
	if len(x) <= m {
		return x
	}
	out := make([]float64, m)
	for i := range out {
		out[i] = x[int(float64(i)*float64(len(x)-1)/float64(m-1))]
	}
	return out
}

// resampleQuantiles draws a bootstrap resample of sorted x (as counts, no
// sorting needed) and returns its numpy-linear quantiles at ps.
func resampleQuantiles(rng *rand.Rand, x []float64, counts []int32, ps []float64, out []float64) {
	clear(counts)
	for range len(x) {
		counts[rng.IntN(len(x))]++
	}
	for k, p := range ps {
		out[k] = countsQuantile(x, counts, p)
	}
}

// countsQuantile is Quantile of the multiset holding counts[i] copies of the
// sorted x[i] (len(x) values in all).
func countsQuantile(x []float64, counts []int32, p float64) float64 {
	n := 0
	for _, c := range counts {
		n += int(c)
	}
	h := float64(n-1) * p
	lo := int(math.Floor(h))
	a, b := math.NaN(), math.NaN()
	cum := 0
	for i, c := range counts {
		cum += int(c)
		if math.IsNaN(a) && cum > lo {
			a = x[i]
		}
		if cum > lo+1 {
			b = x[i]
			break
		}
	}
	if math.IsNaN(b) { // lo is the last rank
		b = a
	}
	return lerp(a, b, h-float64(lo))
}

// bootstrap is the percentile bootstrap CI of quantile(b) − quantile(a).
func bootstrap(a, b []float64, ps []float64, o CompareOptions, name string) (lo, hi []float64, ok bool) {
	if len(a) == 0 || len(b) == 0 {
		return nil, nil, false
	}
	a, b = thin(a, o.MaxSample), thin(b, o.MaxSample)
	h := fnv.New64a()
	h.Write([]byte(name))
	rng := rand.New(rand.NewPCG(o.Seed, h.Sum64()))
	ca, cb := make([]int32, len(a)), make([]int32, len(b))
	qa, qb := make([]float64, len(ps)), make([]float64, len(ps))
	diffs := make([][]float64, len(ps))
	for range o.Resamples {
		resampleQuantiles(rng, a, ca, ps, qa)
		resampleQuantiles(rng, b, cb, ps, qb)
		for k := range ps {
			diffs[k] = append(diffs[k], qb[k]-qa[k])
		}
	}
	lo, hi = make([]float64, len(ps)), make([]float64, len(ps))
	alpha := (1 - o.Confidence) / 2
	for k := range ps {
		slices.Sort(diffs[k])
		lo[k], hi[k] = Quantile(diffs[k], alpha), Quantile(diffs[k], 1-alpha)
	}
	return lo, hi, true
}

// metaDiffs lists metadata keys whose values differ (first file of each).
func metaDiffs(a, b *Report) []MetaDiff {
	kv := func(r *Report) map[string]string {
		m := map[string]string{}
		for _, s := range r.Sources {
			for _, p := range s.Meta.KeyValues() {
				k := strings.TrimPrefix(p[0], "tokentrace.")
				if _, dup := m[k]; !dup {
					m[k] = p[1]
				}
			}
		}
		return m
	}
	ma, mb := kv(a), kv(b)
	var keys []string
	for k := range ma {
		keys = append(keys, k)
	}
	for k := range mb {
		if _, ok := ma[k]; !ok {
			keys = append(keys, k)
		}
	}
	// Run records first (capacity.go), per-run bookkeeping (clock, ports,
	// counters) last: what differs by design leads.
	slices.SortStableFunc(keys, func(x, y string) int {
		if bx, by := bookkeeping(x), bookkeeping(y); bx != by {
			if bx {
				return 1
			}
			return -1
		}
		return compareMetaKeys(x, y)
	})
	var out []MetaDiff
	for _, k := range keys {
		if ma[k] != mb[k] {
			out = append(out, MetaDiff{Key: k, A: ma[k], B: mb[k]})
		}
	}
	return out
}

// bookkeeping says a metadata key differs between any two runs (when and
// where it ran, what it counted, how far a simulator fell behind) rather
// than by what was asked.
func bookkeeping(k string) bool {
	k = strings.TrimPrefix(k, "extra.")
	if k == traces.MetaSimLateness {
		return true
	}
	for _, s := range []string{"started_at", "replay.target", "metrics_url", "metrics_scrapes", "lateness_p99_ns", "server_timing_", "command", "created", "server.models", "server.version"} {
		if strings.Contains(k, s) {
			return true
		}
	}
	return false
}

// WriteJSON writes the comparison as indented JSON.
func (c *Comparison) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(c)
}

// WriteText writes the comparison: the conclusion and any warning, every
// metric with its change, interval and verdict, the tails' attribution
// side by side, and last the metadata that differs, shortened.
func (c *Comparison) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	p := func(format string, a ...any) { fmt.Fprintf(bw, format, a...) }
	if len(c.ByClass) > 0 {
		p("Conclusion (all classes pooled; by class below): %s\n\n", c.Conclusion)
	} else {
		p("Conclusion: %s\n\n", c.Conclusion)
	}
	for _, s := range []struct {
		label string
		s     *Sampling
	}{{c.LabelA, c.SamplingA}, {c.LabelB, c.SamplingB}} {
		if s.s != nil {
			p("Approximate %s: %s\n\n", s.label, s.s.Note())
		}
	}
	for _, w := range c.Warnings {
		p("Warning: %s\n\n", w)
	}
	lw := max(12, len(c.LabelA), len(c.LabelB)) // labels whole, never cut
	p("%-34s %*s %*s %12s %9s  %-25s %s\n", "metric", lw, c.LabelA, lw, c.LabelB, "change", "change%",
		fmt.Sprintf("%.0f%% CI of change", 100*c.Confidence), "verdict")
	row := func(indent string, m MetricChange) {
		pct, ci := "", ""
		if m.ChangePct != nil {
			pct = fmt.Sprintf("%+.1f%%", *m.ChangePct)
		}
		if m.CILow != nil {
			ci = fmt.Sprintf("[%+.2f, %+.2f]", *m.CILow, *m.CIHigh)
		}
		p("%s%-34s %*.3f %*.3f %+12.3f %9s  %-25s %s\n", indent, m.Name, lw, m.A, lw, m.B, m.Change, pct, ci, m.Verdict)
	}
	for _, m := range c.Metrics {
		row("", m)
	}
	a, b := c.AttributionA, c.AttributionB
	p("\nTail attribution (p%s %s): %s %d requests (%s), %s %d requests (%s)\n", fmtPct(a.TailPercentile), a.TailMetric,
		c.LabelA, a.TailRequests, orDash(a.Source), c.LabelB, b.TailRequests, orDash(b.Source))
	ks := unionShown(&a, &b)
	nw := nameWidth(ks)
	p("  %-*s %*s %*s\n", nw, "component", lw, c.LabelA, lw, c.LabelB)
	sa, sb := a.Share.Array(), b.Share.Array()
	for _, k := range ks {
		p("  %-*s %*.1f%% %*.1f%%\n", nw, ComponentNames[k], lw-1, 100*sa[k], lw-1, 100*sb[k])
	}
	p("  %-*s %*s %*s\n", nw, "dominant", lw, orDash(a.Dominant), lw, orDash(b.Dominant))
	for _, s := range []struct {
		l string
		d []string
	}{{c.LabelA, a.Diagnosis}, {c.LabelB, b.Diagnosis}} {
		if len(s.d) > 0 {
			p("\nDiagnosis %s\n", s.l)
			for _, x := range s.d {
				p("  - %s\n", x)
			}
		}
	}
	if len(c.ByClass) > 0 {
		p("\nBy class (each class's rows of both runs compared alone; everything above pools the classes)\n")
		for _, k := range c.ByClass {
			if k.Comparison == nil {
				p("\n%s: only in %s, nothing to compare\n", k.Class, k.OnlyIn)
				continue
			}
			p("\n%s: %s\n", k.Class, k.Conclusion)
			for _, m := range k.keyMetrics() {
				row("  ", m)
			}
			p("  %-34s %*s %*s\n", "tail dominant", lw, orDash(k.AttributionA.Dominant), lw, orDash(k.AttributionB.Dominant))
		}
	}
	c.writeMetaDiffsText(p) // compare_meta.go
	return bw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// KeyMetrics are the metrics a per-class comparison shows (the
// conclusion's metrics and the throughput).
func (c *Comparison) KeyMetrics() []MetricChange { return c.keyMetrics() }
