package validate

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/tokentrace/tokentrace/analyze"
	"github.com/tokentrace/tokentrace/traces"
)

// attributionRows bounds the result rows a cell's attribution analyzes
// exactly; past it analyze works on a sample of that many (the tail's
// dominant cause is all validate takes from it), so a cell's memory does
// not grow with the run's length.
const attributionRows = 1 << 18

// sampleBuilder reduces a cell's result rows, as they come and in any
// order, to its sample: every row's latencies for the point estimates
// (8 bytes per value), and for the bootstrap the rows whose seq a hash
// picks, the same in every cell of a workload so that pairs stay pairs.
type sampleBuilder struct {
	slo    traces.SLO
	oneIn  uint64 // bootstrap keeps a row when hash(seq) % oneIn == 0
	rows   []bootRow
	sorted [3][]float64
	goodN  int
	total  int
}

type bootRow struct {
	seq  int64
	n    int32 // arrival order among equal seqs (repeats)
	v    [3]float64
	good bool
}

var kinds = [3]string{traces.MetricTTFT, traces.MetricTPOT, traces.MetricE2E}

func newSampleBuilder(slo traces.SLO, expected int) *sampleBuilder {
	return &sampleBuilder{slo: slo, oneIn: uint64(max(1, (expected+maxBootstrap-1)/maxBootstrap))}
}

func (b *sampleBuilder) add(r *traces.Record) {
	b.total++
	l := r.Latencies()
	if r.OK() && !l.HasTPOT {
		l.HasTPOT = true // single-token output: TPOT 0, as vLLM counts it
	}
	good := !b.slo.IsZero() && r.OK() && b.slo.Met(l)
	if good {
		b.goodN++
	}
	var v [3]float64
	for k, kind := range kinds {
		v[k] = math.NaN()
		if x, ok := l.Get(kind); ok && r.OK() {
			v[k] = x / 1e6
			b.sorted[k] = append(b.sorted[k], v[k])
		}
	}
	if b.oneIn == 1 || mix64(uint64(r.Seq))%b.oneIn == 0 {
		b.rows = append(b.rows, bootRow{seq: r.Seq, n: int32(len(b.rows)), v: v, good: good})
	}
}

// sample orders the bootstrap rows by seq (then by arrival, for a
// request run more than once) and sorts the values.
func (b *sampleBuilder) sample() sample {
	s := sample{lat: map[string][]float64{}, order: map[string][]int32{}, sorted: map[string][]float64{}, goodN: b.goodN, total: b.total}
	slices.SortFunc(b.rows, func(x, y bootRow) int {
		if c := cmp.Compare(x.seq, y.seq); c != 0 {
			return c
		}
		return cmp.Compare(x.n, y.n)
	})
	s.seq = make([]int64, len(b.rows))
	s.good = make([]bool, len(b.rows))
	for i, row := range b.rows {
		s.seq[i], s.good[i] = row.seq, row.good
	}
	for k, kind := range kinds {
		vals := make([]float64, len(b.rows))
		var ord []int32
		for i, row := range b.rows {
			vals[i] = row.v[k]
			if !math.IsNaN(row.v[k]) {
				ord = append(ord, int32(i))
			}
		}
		slices.SortStableFunc(ord, func(a, c int32) int { return cmpFloat(vals[a], vals[c]) })
		s.lat[kind], s.order[kind] = vals, ord
		slices.Sort(b.sorted[k])
		s.sorted[kind] = b.sorted[k]
	}
	b.rows = nil
	return s
}

// cellAcc reduces one cell's result rows, as they come, to what the
// validation keeps of them: the sample, the counts, the prefix-cache share
// and the tail's cause; the rows themselves are not kept.
type cellAcc struct {
	sb             *sampleBuilder
	an             *analyze.Analyzer
	requests, fail int
	prompt, cached int64
}

func newCellAcc(o *Options, expected int) (*cellAcc, error) {
	ao := analyze.DefaultOptions()
	ao.SLO, ao.ExactRows = o.SLO, attributionRows
	an, err := analyze.New(ao)
	if err != nil {
		return nil, fmt.Errorf("analyze: %w", err)
	}
	return &cellAcc{sb: newSampleBuilder(o.SLO, expected), an: an}, nil
}

func (c *cellAcc) add(r *traces.Record) {
	c.requests++
	if !r.OK() {
		c.fail++
	}
	if r.ServerPromptTokens > 0 && r.ServerCachedTokens >= 0 {
		c.prompt += int64(r.ServerPromptTokens)
		c.cached += int64(r.ServerCachedTokens)
	}
	c.sb.add(r)
	c.an.Add(r)
}

// close fills cell with the figures and returns the sample.
func (c *cellAcc) close(ctx context.Context, cell *Cell, ms []Metric) (sample, error) {
	s := c.sb.sample()
	cell.Requests, cell.Failed = c.requests, c.fail
	cell.CachedShare = -1
	if c.prompt > 0 {
		cell.CachedShare = float64(c.cached) / float64(c.prompt)
	}
	cell.Values = map[string]float64{}
	for _, m := range ms {
		if v, ok := s.value(m); ok {
			cell.Values[m.Name] = v
		}
	}
	rep, err := c.an.Close(ctx)
	if err != nil {
		return s, fmt.Errorf("analyze: %w", err)
	}
	cell.TailCause, cell.TailShare = rep.Attribution.Dominant, dominantShare(rep.Attribution)
	return s, nil
}
