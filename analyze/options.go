package analyze

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// Defaults shared by the library and the CLI flags.
const (
	// DefaultTailPercentile is the percentile above which a request is in
	// the tail.
	DefaultTailPercentile = 99.0
	// DefaultTailMetric is the metric that selects the tail.
	DefaultTailMetric = MetricE2E
	// DefaultITLExactLimit is how many pooled ITL values are kept exactly
	// before switching to a 0.1 % log histogram.
	DefaultITLExactLimit = 10_000_000
	// DefaultExactRows is how many result rows are analyzed exactly
	// (4 Mi, about 1.3 GB at the peak of Close); past it the analysis
	// streams (see Options.ExactRows).
	DefaultExactRows = 4 << 20
	// DefaultSeed seeds the bootstrap in Compare.
	DefaultSeed = 1
	// DefaultResamples is the number of bootstrap resamples in Compare.
	DefaultResamples = 1000
	// DefaultConfidence is the bootstrap confidence level in Compare.
	DefaultConfidence = 0.95
	// DefaultSessionIdle is how long after its last activity a session
	// ends (capture's session idle window).
	DefaultSessionIdle = time.Hour
)

// Tail metrics.
const (
	MetricE2E  = "e2e"
	MetricTTFT = "ttft"
)

// TailMetrics lists the valid Options.TailMetric values.
var TailMetrics = []string{MetricE2E, MetricTTFT}

// Group-by dimensions.
const (
	ByClass    = "class"
	ByCategory = "category"
	ByModel    = "model"
	// ByReplica groups by the replica that served each request (the
	// replica column).
	ByReplica = "replica"
)

// ByDimensions lists the valid Options.By values ("" = no grouping).
var ByDimensions = []string{ByClass, ByCategory, ByModel, ByReplica}

// ParsePercentile parses "p99", "99", "p99.9" or "99.9" into 99 or 99.9.
func ParsePercentile(s string) (float64, error) {
	t := strings.TrimPrefix(strings.ToLower(strings.TrimSpace(s)), "p")
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(f) || f <= 0 || f >= 100 {
		return 0, fmt.Errorf("percentile %q: want p50 … p99.99 (strictly between 0 and 100)", s)
	}
	return f, nil
}

// Options tunes an analysis.
type Options struct {
	// By groups the summary per "class", "category", "model" or
	// "replica" ("" = no groups). Defaults to "".
	By string
	// Class analyzes only the rows of this class (e.g. "interactive" beside
	// a --background batch load); the others are counted and left out.
	// Defaults to "" (every row).
	Class string
	// SLO enables goodput. Defaults to no SLO (goodput null).
	SLO traces.SLO
	// TailPercentile selects the tail: requests at or above this percentile
	// of the tail metric. Defaults to DefaultTailPercentile (99).
	TailPercentile float64
	// TailMetric is MetricE2E or MetricTTFT. Defaults to MetricE2E.
	TailMetric string
	// Window is the width of the timeline's windows (0 = about 30 windows
	// over the run). Defaults to 0.
	Window time.Duration
	// IgnoreServerTimings estimates every request's attribution even when
	// server timings exist (to check the estimator against them). Defaults
	// to false.
	IgnoreServerTimings bool
	// KeepRequests keeps request ids so Report.WriteRequests can name them.
	// Defaults to false.
	KeepRequests bool
	// ITLExactLimit bounds the pooled ITL values kept exactly. Defaults to
	// DefaultITLExactLimit.
	ITLExactLimit int
	// ExactRows is the memory budget of an analysis, in result rows
	// (about 300 bytes each at the peak of Close). Up to ExactRows rows
	// everything is exact. Past it the analysis streams with bounded
	// memory: counts, tokens, duration, throughput and goodput stay exact;
	// every latency distribution comes from a log-histogram sketch (exact
	// count, mean, std, min and max; percentiles within a relative error
	// of 2^-11, about 0.05 %; flagged Dist.Approx); the row-based sections
	// (tail attribution, timeline, in-flight load and peak concurrency,
	// charts, Compare's bootstrap samples, the vLLM latencies list) are
	// computed on a deterministic 1-in-2^k sample of at most ExactRows
	// rows, their counts scaled by 2^k (Report.Sampling says so); and the
	// per-request attribution (PerRequest, WriteRequests) is refused.
	// Defaults to DefaultExactRows (4 Mi rows).
	ExactRows int
	// ModelBytes is the model's weight size in bytes (--model-bytes); with
	// Bandwidth it enables the decode-floor check (capacity.go). Defaults to 0 (off).
	ModelBytes float64
	// Bandwidth is the memory bandwidth in bytes per second (--bandwidth).
	// Defaults to 0 (off).
	Bandwidth float64
	// CostPerHour is the deployment's price per hour (--cost-per-hour) for
	// the cost per million output and goodput tokens. Defaults to 0 (off).
	CostPerHour float64
	// KVBlocks is the capacity, in prefix blocks (BlockSize tokens each),
	// of the cache that gives the prefix-cache hit rate the trace implies
	// (PrefixCache): an LRU over the rows' prefix_blocks ids in send order.
	// 0 is an unbounded, ideal cache that never evicts (its memory follows
	// the distinct block ids, about 50 bytes each). Defaults to 0.
	KVBlocks int
	// BlockSize is the tokens per prefix_blocks entry. 0 takes the results'
	// metadata (Meta.BlockSize, which replay writes). Defaults to 0.
	BlockSize int
	// SessionIdle is how long after its last send or token a session ends
	// (its makespan is then final and its state dropped); a later call of
	// it starts a new part. Defaults to DefaultSessionIdle (1 h).
	SessionIdle time.Duration
	// Terms say the options and commands the report's sentences name (a
	// caller's flags and command lines); nil says them by the libraries'
	// names (traces.LibraryTerms). Defaults to nil.
	Terms traces.Terms
	// Read is how AnalyzeFiles reads its files (Strict, Salvage): the
	// rules every command shares (traces.OpenWith). Defaults to
	// traces.DefaultOpenOptions(): bad rows skipped and counted, a damaged
	// file an error.
	Read traces.OpenOptions
}

// DefaultOptions returns every option's default, the values the field
// docs name: the options an analysis starts from before a caller changes
// what it means.
func DefaultOptions() Options {
	return Options{
		By:             "",
		TailPercentile: DefaultTailPercentile,
		TailMetric:     DefaultTailMetric,
		ITLExactLimit:  DefaultITLExactLimit,
		ExactRows:      DefaultExactRows,
		SessionIdle:    DefaultSessionIdle,
		Read:           traces.DefaultOpenOptions(),
	}
}

// Validate checks the options as given (a zero is a value like any other,
// never the default); each error is a *traces.OptionError naming the
// option.
func (o Options) Validate() error {
	if o.By != "" && !slices.Contains(ByDimensions, o.By) {
		return traces.OptionErrorf("analyze", "Options.By", "%q: want one of %s", o.By, strings.Join(ByDimensions, ", "))
	}
	if !slices.Contains(TailMetrics, o.TailMetric) {
		return traces.OptionErrorf("analyze", "Options.TailMetric", "%q: want one of %s", o.TailMetric, strings.Join(TailMetrics, ", "))
	}
	if o.TailPercentile <= 0 || o.TailPercentile >= 100 || math.IsNaN(o.TailPercentile) {
		return traces.OptionErrorf("analyze", "Options.TailPercentile", "%v: want a percentile strictly between 0 and 100, e.g. p99", o.TailPercentile)
	}
	if o.ExactRows <= 0 {
		return traces.OptionErrorf("analyze", "Options.ExactRows", "%d: want a positive number of rows", o.ExactRows)
	}
	if o.ITLExactLimit <= 0 {
		return traces.OptionErrorf("analyze", "Options.ITLExactLimit", "%d: want a positive number of values", o.ITLExactLimit)
	}
	if o.KVBlocks < 0 {
		return traces.OptionErrorf("analyze", "Options.KVBlocks", "%d: want a number of blocks, or 0 for an unbounded cache", o.KVBlocks)
	}
	if o.BlockSize < 0 {
		return traces.OptionErrorf("analyze", "Options.BlockSize", "%d: want tokens per block, or 0 for the results' metadata", o.BlockSize)
	}
	if o.SessionIdle <= 0 {
		return traces.OptionErrorf("analyze", "Options.SessionIdle", "%v: want a positive duration such as 30m", o.SessionIdle)
	}
	if o.Window < 0 {
		return traces.OptionErrorf("analyze", "Options.Window", "%v: want a positive duration such as 10s", o.Window)
	}
	if o.ModelBytes < 0 || o.Bandwidth < 0 || (o.ModelBytes > 0) != (o.Bandwidth > 0) {
		return traces.OptionErrorf("analyze", "Options.ModelBytes, Options.Bandwidth", "give both, positive (e.g. 16 GB and 3.35 TB/s)")
	}
	if o.CostPerHour < 0 || math.IsNaN(o.CostPerHour) || math.IsInf(o.CostPerHour, 0) {
		return traces.OptionErrorf("analyze", "Options.CostPerHour", "%v: want a positive price", o.CostPerHour)
	}
	if o.SLO.TTFT < 0 || o.SLO.TPOT < 0 || o.SLO.E2E < 0 {
		return traces.OptionErrorf("analyze", "Options.SLO", "%s: bounds must be positive", o.SLO)
	}
	return nil
}
