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
)

// Verdicts of a MetricChange.
const (
	VerdictBetter = "better"
	VerdictWorse  = "worse"
	VerdictSame   = "no significant change"
	VerdictNA     = "n/a"
)

// DefaultRelativeThreshold is the relative change below which a metric
// without a confidence interval is "no significant change".
const DefaultRelativeThreshold = 0.05

// DefaultMaxBootstrapSample caps the values per side in the bootstrap.
const DefaultMaxBootstrapSample = 10000

// CompareOptions tunes Compare.
type CompareOptions struct {
	// Seed seeds the bootstrap. Defaults to DefaultSeed.
	Seed uint64
	// Resamples is the number of bootstrap resamples. Defaults to
	// DefaultResamples (1000).
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
	// LabelA and LabelB name the two sides. Defaults to "A" and "B".
	LabelA, LabelB string
}

func (o CompareOptions) withDefaults() CompareOptions {
	if o.Seed == 0 {
		o.Seed = DefaultSeed
	}
	if o.Resamples <= 0 {
		o.Resamples = DefaultResamples
	}
	if o.Confidence <= 0 || o.Confidence >= 1 {
		o.Confidence = DefaultConfidence
	}
	if o.MaxSample <= 0 {
		o.MaxSample = DefaultMaxBootstrapSample
	}
	if o.Threshold <= 0 {
		o.Threshold = DefaultRelativeThreshold
	}
	if o.LabelA == "" {
		o.LabelA = "A"
	}
	if o.LabelB == "" {
		o.LabelB = "B"
	}
	return o
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
	LabelA     string         `json:"label_a"`
	LabelB     string         `json:"label_b"`
	Confidence float64        `json:"confidence"`
	MetaDiffs  []MetaDiff     `json:"meta_diffs,omitempty"`
	Metrics    []MetricChange `json:"metrics"`
	// Attribution of each side's tail.
	AttributionA Attribution `json:"attribution_a"`
	AttributionB Attribution `json:"attribution_b"`

	a, b *Report
}

// Compare compares report b against report a (the baseline): every summary
// metric side by side with its change, a seeded bootstrap confidence
// interval of the change of each latency's p50 and p99, a verdict per
// metric, the tails' attribution, and the metadata that differs.
func Compare(a, b *Report, o CompareOptions) *Comparison {
	o = o.withDefaults()
	c := &Comparison{LabelA: o.LabelA, LabelB: o.LabelB, Confidence: o.Confidence, AttributionA: a.Attribution, AttributionB: b.Attribution, a: a, b: b}
	c.MetaDiffs = metaDiffs(a, b)
	plain := func(name string, va, vb float64, lowerBetter bool) {
		m := MetricChange{Name: name, A: va, B: vb, Change: vb - va, LowerIsBetter: lowerBetter}
		if va != 0 {
			p := 100 * (vb - va) / math.Abs(va)
			m.ChangePct = &p
		}
		switch {
		case va == vb || (va != 0 && math.Abs(vb-va)/math.Abs(va) < o.Threshold):
			m.Verdict = VerdictSame
		case (vb < va) == lowerBetter:
			m.Verdict = VerdictBetter
		default:
			m.Verdict = VerdictWorse
		}
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
				switch {
				case l > 0:
					m.Verdict = VerdictWorse
				case h < 0:
					m.Verdict = VerdictBetter
				default:
					m.Verdict = VerdictSame
				}
			} else {
				m.Verdict = VerdictNA
			}
			c.Metrics = append(c.Metrics, m)
		}
		plain(d.name+".p90", d.da.P90, d.db.P90, true)
		plain(d.name+".max", d.da.Max, d.db.Max, true)
	}
	return c
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
	slices.SortFunc(keys, compareMetaKeys) // capacity.go: run records first
	var out []MetaDiff
	for _, k := range keys {
		if ma[k] != mb[k] {
			out = append(out, MetaDiff{Key: k, A: ma[k], B: mb[k]})
		}
	}
	return out
}

// WriteJSON writes the comparison as indented JSON.
func (c *Comparison) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(c)
}

// WriteText writes the comparison: differing metadata first, then every
// metric with its change, interval and verdict, then the tails'
// attribution side by side.
func (c *Comparison) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	p := func(format string, a ...any) { fmt.Fprintf(bw, format, a...) }
	if len(c.MetaDiffs) > 0 {
		p("Metadata differs (%s vs %s)\n", c.LabelA, c.LabelB)
		for _, d := range c.MetaDiffs {
			p("  %-24s %s | %s\n", d.Key, orDash(d.A), orDash(d.B))
		}
		p("\n")
	}
	p("%-34s %12s %12s %12s %9s  %-25s %s\n", "metric", trunc(c.LabelA, 12), trunc(c.LabelB, 12), "change", "change%",
		fmt.Sprintf("%.0f%% CI of change", 100*c.Confidence), "verdict")
	for _, m := range c.Metrics {
		pct, ci := "", ""
		if m.ChangePct != nil {
			pct = fmt.Sprintf("%+.1f%%", *m.ChangePct)
		}
		if m.CILow != nil {
			ci = fmt.Sprintf("[%+.2f, %+.2f]", *m.CILow, *m.CIHigh)
		}
		p("%-34s %12.3f %12.3f %+12.3f %9s  %-25s %s\n", m.Name, m.A, m.B, m.Change, pct, ci, m.Verdict)
	}
	a, b := c.AttributionA, c.AttributionB
	p("\nTail attribution (p%s %s): %s %d requests (%s), %s %d requests (%s)\n", fmtPct(a.TailPercentile), a.TailMetric,
		c.LabelA, a.TailRequests, orDash(a.Source), c.LabelB, b.TailRequests, orDash(b.Source))
	p("  %-10s %10s %10s\n", "component", trunc(c.LabelA, 10), trunc(c.LabelB, 10))
	sa, sb := a.Share.Array(), b.Share.Array()
	for k, n := range ComponentNames {
		p("  %-10s %9.1f%% %9.1f%%\n", n, 100*sa[k], 100*sb[k])
	}
	p("  %-10s %10s %10s\n", "dominant", orDash(a.Dominant), orDash(b.Dominant))
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
	return bw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
