package synth

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/tokentrace/tokentrace/traces"
	"github.com/tokentrace/tokentrace/traces/formats"
	"gonum.org/v1/gonum/mathext"
	"gonum.org/v1/gonum/stat/distuv"
)

// Fit defaults, shared by the CLI flags and FitOptions.
const (
	DefaultBin                = 4 * time.Second
	DefaultLengthBins         = 256
	DefaultJointBins          = 16
	DefaultOutputBins         = 128
	DefaultGapBins            = 256
	DefaultGapLevels          = 8
	DefaultClusterGap         = 150 * time.Millisecond
	DefaultMinBinCount        = 5
	DefaultMinCategoryRecords = 5
	DefaultFitSeed            = 1
	DefaultReorderWindow      = 1 << 16
)

// FitOptions tunes Fit. Start from DefaultFitOptions: a field's zero is a
// value of its own, never its default.
type FitOptions struct {
	// Bin is the width of the arrival-rate bins: the time resolution at
	// which the rate over time (diurnal shape, bursts) is kept. On a
	// quantized trace it is rounded to a multiple of the quantum and spans
	// at least 5 quanta. Defaults to DefaultBin (4s).
	Bin time.Duration `json:"bin_ns"`
	// LengthBins is the maximum number of bins of each input-length and
	// prefix-length histogram. Defaults to DefaultLengthBins (256).
	LengthBins int `json:"length_bins"`
	// JointBins is the number of input-length ranges the output length (and
	// block reuse) is conditioned on. Defaults to DefaultJointBins (16).
	JointBins int `json:"joint_bins"`
	// OutputBins is the maximum number of bins of each conditional output
	// histogram. Defaults to DefaultOutputBins (128).
	OutputBins int `json:"output_bins"`
	// GapBins is the maximum number of bins of gap histograms. Defaults to
	// DefaultGapBins (256).
	GapBins int `json:"gap_bins"`
	// ClusterGap: arrivals of a bin closer than this form one cluster (a
	// batch sent at once); the gap model keeps cluster sizes and the gaps
	// inside and between clusters apart. 0 clusters only same-instant
	// arrivals. Defaults to DefaultClusterGap (150ms).
	ClusterGap time.Duration `json:"cluster_gap_ns"`
	// GapLevels is the number of load levels (bin-count quantiles) with
	// their own gap distribution. Defaults to DefaultGapLevels (8).
	GapLevels int `json:"gap_levels"`
	// MinBinCount is the fewest values a histogram bin may hold (unless the
	// whole histogram holds fewer), so no bin describes a single request.
	// Defaults to DefaultMinBinCount (5).
	MinBinCount int `json:"min_bin_count"`
	// MinCategoryRecords: categories with fewer records are pooled into one
	// "tail" group per class. Defaults to DefaultMinCategoryRecords (5).
	MinCategoryRecords int `json:"min_category_records"`
	// Quantum forces the arrival-time grid of a coarsened trace; 0 detects
	// it (most arrivals share instants and distinct instants sit on a grid),
	// negative disables detection. Defaults to 0 (detect).
	Quantum time.Duration `json:"quantum_ns"`
	// Seed drives the only randomness of fitting: spreading arrivals of a
	// quantized trace over their grid cell before fitting gaps. Defaults to
	// DefaultFitSeed (1).
	Seed uint64 `json:"seed"`

	// ReorderWindow is how many records FitSeq and FitReader hold to put a
	// trace that is not quite in (arrival_ns, seq) order back in order; a
	// record further out of place is an error (Fit sorts and takes any
	// order). 0 holds none. Not part of the model. Defaults to
	// DefaultReorderWindow (65,536).
	ReorderWindow int `json:"-"`
	// TempDir is where the fit's logs (each class's session starts and
	// per-row lengths, a few bytes a record) spill past 1 MiB each, removed
	// when the fit ends; "" is os.TempDir(). Defaults to "".
	TempDir string `json:"-"`

	// Meta is the fitted trace's metadata (source, block size, tokenizer);
	// FitReader takes the reader's when it is zero. Defaults to a zero
	// Meta.
	Meta traces.Meta `json:"-"`
	// File names the fitted file in the model's fitted_on. Defaults to "".
	File string `json:"-"`
}

// DefaultFitOptions returns every FitOptions default, the values the
// field docs name: a fit starts from them and changes what it means.
func DefaultFitOptions() FitOptions {
	return FitOptions{
		Bin:                DefaultBin,
		LengthBins:         DefaultLengthBins,
		JointBins:          DefaultJointBins,
		OutputBins:         DefaultOutputBins,
		GapBins:            DefaultGapBins,
		ClusterGap:         DefaultClusterGap,
		GapLevels:          DefaultGapLevels,
		MinBinCount:        DefaultMinBinCount,
		MinCategoryRecords: DefaultMinCategoryRecords,
		Quantum:            0,
		Seed:               DefaultFitSeed,
		ReorderWindow:      DefaultReorderWindow,
		TempDir:            "",
	}
}

// Validate reports the first option that cannot be used as given (a zero
// is a value like any other, never the default), naming it in a
// *traces.OptionError.
func (o FitOptions) Validate() error {
	switch {
	case o.Bin <= 0:
		return traces.OptionErrorf("synth", "Options.Bin", "must be > 0, got %v", o.Bin)
	case o.LengthBins <= 0 || o.JointBins <= 0 || o.OutputBins <= 0 || o.GapBins <= 0 || o.GapLevels <= 0:
		return traces.OptionErrorf("synth", "Options.LengthBins, Options.JointBins, Options.OutputBins, Options.GapBins, Options.GapLevels", "must be > 0")
	case o.ClusterGap < 0:
		return traces.OptionErrorf("synth", "Options.ClusterGap", "must be >= 0 (0 clusters only same-instant arrivals), got %v", o.ClusterGap)
	case o.MinBinCount <= 0:
		return traces.OptionErrorf("synth", "Options.MinBinCount", "must be > 0, got %d", o.MinBinCount)
	case o.MinCategoryRecords <= 0:
		return traces.OptionErrorf("synth", "Options.MinCategoryRecords", "must be > 0, got %d", o.MinCategoryRecords)
	case o.ReorderWindow < 0:
		return traces.OptionErrorf("synth", "FitOptions.ReorderWindow", "must be >= 0 (0 holds none), got %d", o.ReorderWindow)
	}
	return nil
}

// FitReader fits the records of r as they stream (see FitSeq); opts.Meta
// defaults to r.Meta().
func FitReader(ctx context.Context, r traces.Reader, opts FitOptions) (*Model, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.Meta.SchemaVersion == "" && opts.Meta.Source == "" {
		opts.Meta = r.Meta()
	}
	// A file that promises arrival order needs no reorder window (copying
	// every row through it was a sixth of a fit's time); should it break
	// the promise, the error says so.
	if traces.IsSorted(r) {
		opts.ReorderWindow = 0
	}
	// Decoding runs a few batches ahead on another core.
	return FitSeq(ctx, traces.AllAhead(r), opts)
}

// FitSeq fits a Model to a stream of records in (arrival_ns, seq) order, as
// trace files normally are, holding neither the records nor per-record
// arrays: memory does not grow with the number of records (fitstream.go
// says what it does grow with). Records up to opts.ReorderWindow places
// out of order are put back in order exactly, as a stable sort of the
// whole stream would (ties keep stream order); a record further out of
// order is an error naming it. The model is the one Fit makes of the same
// records: exact, unless one of the fitter's memory limits is passed,
// which FittedOn.Approximations then reports.
func FitSeq(ctx context.Context, seq iter.Seq2[traces.Record, error], opts FitOptions) (*Model, error) {
	return withFitter(opts, func(f *fitter) (*Model, error) { return fitSeq(ctx, f, seq) })
}

// withFitter runs fit on a new fitter of the validated opts and closes the
// fitter whatever fit returns; a close error fails a fit that succeeded.
func withFitter(opts FitOptions, fit func(*fitter) (*Model, error)) (*Model, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	f := newFitter(opts, defaultFitLimits)
	m, err := fit(f)
	if cerr := f.close(); err == nil && cerr != nil {
		return nil, fmt.Errorf("fit: %w", cerr)
	}
	return m, err
}

func fitSeq(ctx context.Context, f *fitter, seq iter.Seq2[traces.Record, error]) (*Model, error) {
	w := newReorder(f.opts.ReorderWindow)
	var n int64
	for rec, err := range seq {
		if err != nil {
			return nil, fmt.Errorf("read trace: %w", err)
		}
		if err := checkRecord(&rec); err != nil {
			return nil, err
		}
		if err := w.push(&rec, f.add); err != nil {
			return nil, err
		}
		if n++; n%(1<<16) == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
	}
	if err := w.drain(f.add); err != nil {
		return nil, err
	}
	return f.model(ctx)
}

// Fit fits a Model to recs (any order; only request columns are used). It
// is deterministic: the same records and options give the same model. It
// is FitSeq's streaming fitter fed the records in sorted order.
func Fit(ctx context.Context, recs []traces.Record, opts FitOptions) (*Model, error) {
	return withFitter(opts, func(f *fitter) (*Model, error) { return fitSorted(ctx, f, recs) })
}

func fitSorted(ctx context.Context, f *fitter, recs []traces.Record) (*Model, error) {
	if len(recs) == 0 {
		return nil, errors.New("fit: the trace has no records")
	}
	for i := range recs {
		if err := checkRecord(&recs[i]); err != nil {
			return nil, err
		}
	}
	order := make([]int, len(recs))
	sorted := true
	for i := range order {
		order[i] = i
		sorted = sorted && (i == 0 || compareArrival(&recs[i-1], &recs[i]) <= 0)
	}
	if !sorted {
		slices.SortStableFunc(order, func(a, b int) int { return compareArrival(&recs[a], &recs[b]) })
	}
	var row fitRow
	for n, k := range order {
		if n%(1<<16) == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		row.set(&recs[k])
		if err := f.add(&row); err != nil {
			return nil, err
		}
	}
	return f.model(ctx)
}

// compareArrival orders records by (arrival_ns, seq).
func compareArrival(a, b *traces.Record) int {
	return cmp.Or(cmp.Compare(a.ArrivalNs, b.ArrivalNs), cmp.Compare(a.Seq, b.Seq))
}

// minQuantaPerBin is the fewest grid cells of a quantized trace per bin.
const minQuantaPerBin = 5

// blockCategoryPrefix is the label prefix of categories derived from
// blocks, as the Mooncake importer writes them.
const blockCategoryPrefix = formats.MooncakeCategoryPrefix

// minLevelGaps is the fewest gaps a gap level is fitted on.
const minLevelGaps = 200

// fitGaps fits sorted gaps (seconds): histogram plus MLE of three
// families on the positive ones.
func fitGaps(sorted []float64, opts FitOptions) GapModel {
	return fitGapsRuns(runsOfSorted(sorted), opts)
}

// fitGapsRuns is fitGaps of the values of runs. Sums run over every value
// in increasing order, as over the sorted slice, so the fits are
// bit-identical to it.
func fitGapsRuns(runs []run, opts FitOptions) GapModel {
	n := countOf(runs)
	g := GapModel{Samples: n, Empirical: newHistRuns(runs, opts.GapBins, opts.MinBinCount, false), Fits: []ParamFit{}}
	pos := runs
	for len(pos) > 0 && pos[0].v <= 0 {
		pos = pos[1:]
	}
	npos := countOf(pos)
	if n > 0 {
		g.ZeroShare = float64(n-npos) / float64(n)
	}
	if npos < 2 {
		return g
	}
	var sum, sumLog float64
	for _, r := range pos {
		l := math.Log(r.v)
		for range r.n {
			sum += r.v
			sumLog += l
		}
	}
	mean, meanLog := sum/float64(npos), sumLog/float64(npos)
	ll := func(lp func(float64) float64) float64 {
		s := 0.0
		for _, r := range pos {
			l := lp(r.v)
			for range r.n {
				s += l
			}
		}
		return s
	}
	exp := distuv.Exponential{Rate: 1 / mean}
	g.Fits = append(g.Fits, ParamFit{Family: "exponential", Params: map[string]float64{"rate": exp.Rate}, LogLikelihood: ll(exp.LogProb)})
	if k := gammaShapeMLE(math.Log(mean) - meanLog); k > 0 && !math.IsInf(k, 0) {
		gm := distuv.Gamma{Alpha: k, Beta: k / mean}
		g.Fits = append(g.Fits, ParamFit{Family: "gamma", Params: map[string]float64{"shape": k, "rate": k / mean}, LogLikelihood: ll(gm.LogProb)})
	}
	if k, lam := weibullMLE(pos, npos, meanLog); k > 0 && lam > 0 && !math.IsInf(lam, 0) {
		w := distuv.Weibull{K: k, Lambda: lam}
		g.Fits = append(g.Fits, ParamFit{Family: "weibull", Params: map[string]float64{"shape": k, "scale": lam}, LogLikelihood: ll(w.LogProb)})
	}
	best := math.Inf(-1)
	for _, f := range g.Fits {
		if f.LogLikelihood > best && !math.IsNaN(f.LogLikelihood) {
			best, g.Best = f.LogLikelihood, f.Family
		}
	}
	return g
}

// gammaShapeMLE solves log k − ψ(k) = s (s = log mean − mean log > 0).
func gammaShapeMLE(s float64) float64 {
	if !(s > 0) {
		return 0
	}
	k := (3 - s + math.Sqrt((s-3)*(s-3)+24*s)) / (12 * s)
	for range 50 {
		f := math.Log(k) - mathext.Digamma(k) - s
		h := k * 1e-6
		df := (math.Log(k+h) - mathext.Digamma(k+h) - math.Log(k-h) + mathext.Digamma(k-h)) / (2 * h)
		if df == 0 || math.IsNaN(df) {
			break
		}
		nk := k - f/df
		if nk <= 0 {
			nk = k / 2
		}
		if math.Abs(nk-k) < 1e-10*k {
			k = nk
			break
		}
		k = nk
	}
	return k
}

// weibullMLE returns shape and scale of the n positive values of runs: the
// shape solves Σx^k ln x / Σx^k − 1/k − mean(ln x) = 0 (increasing in k;
// bisection).
func weibullMLE(runs []run, n int64, meanLog float64) (float64, float64) {
	f := func(k float64) float64 {
		var a, b float64
		for _, r := range runs {
			p := math.Pow(r.v, k)
			pl := p * math.Log(r.v)
			for range r.n {
				a += pl
				b += p
			}
		}
		return a/b - 1/k - meanLog
	}
	lo, hi := 0.02, 20.0
	if f(lo) > 0 || f(hi) < 0 {
		return 0, 0
	}
	for range 60 {
		mid := (lo + hi) / 2
		if f(mid) < 0 {
			lo = mid
		} else {
			hi = mid
		}
	}
	k := (lo + hi) / 2
	s := 0.0
	for _, r := range runs {
		p := math.Pow(r.v, k)
		for range r.n {
			s += p
		}
	}
	return k, math.Pow(s/float64(n), 1/k)
}

// groupName labels a group for messages ("none" for the empty category).
func groupName(n string) string {
	if n == "" {
		return "none"
	}
	return strings.TrimSpace(n)
}
