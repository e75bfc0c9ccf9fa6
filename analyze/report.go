package analyze

import (
	"encoding/json"
	"io"

	"github.com/tokentrace/tokentrace/traces"
)

// Throughput is the run's rates over its duration.
type Throughput struct {
	// RequestsPerS is completed requests per second.
	RequestsPerS float64 `json:"requests_per_s"`
	// OutputTokensPerS is output tokens of completed requests per second.
	OutputTokensPerS float64 `json:"output_tokens_per_s"`
	// TotalTokensPerS is prompt plus output tokens per second.
	TotalTokensPerS float64 `json:"total_tokens_per_s"`
	// PeakOutputTokensPerS is the most output tokens streamed in one
	// second-aligned bin of the run (chunk token counts where known, else
	// one per chunk).
	PeakOutputTokensPerS float64 `json:"peak_output_tokens_per_s"`
}

// Summary is the headline statistics of a set of requests. Latencies are in
// milliseconds; failed requests are counted and excluded from them.
type Summary struct {
	Requests  int            `json:"requests"`
	Completed int            `json:"completed"`
	Failed    int            `json:"failed"`
	ByStatus  map[string]int `json:"by_status"`
	// DurationS is from the first send to the last token, in seconds.
	DurationS    float64 `json:"duration_s"`
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	// TTFT is first token − sent; TTFTScheduled is first token − scheduled
	// (includes client lateness: the coordinated-omission-safe view).
	TTFT          Dist `json:"ttft_ms"`
	TTFTScheduled Dist `json:"ttft_scheduled_ms"`
	TPOT          Dist `json:"tpot_ms"`
	// ITL is every chunk gap pooled over all requests (vLLM's ITL);
	// ITLPerToken divides each gap by the chunk's token count where known.
	ITL         Dist `json:"itl_ms"`
	ITLPerToken Dist `json:"itl_per_token_ms"`
	// ITLPerTokenEstimated counts the requests whose per-token ITL divides
	// by estimated chunk token counts (the server's output total spread
	// over its chunks, the first chunk one token) because the stream had no
	// per-chunk usage; 0 means every count was exact.
	ITLPerTokenEstimated int  `json:"itl_per_token_estimated,omitempty"`
	E2E                  Dist `json:"e2e_ms"`
	E2EScheduled         Dist `json:"e2e_scheduled_ms"`
	// Lateness is sent − scheduled over every request with both.
	Lateness   Dist       `json:"lateness_ms"`
	Throughput Throughput `json:"throughput"`
	// PeakConcurrency is the exact sweep-line maximum of overlapping
	// [sent, last token) intervals of successful requests.
	PeakConcurrency int `json:"peak_concurrency"`
	// Goodput is requests per second meeting every SLO (null without one).
	Goodput      *float64 `json:"goodput"`
	GoodRequests *int     `json:"good_requests,omitempty"`
	// GoodRatio is the good requests over all requests.
	GoodRatio *float64    `json:"goodput_ratio,omitempty"`
	SLO       *traces.SLO `json:"slo,omitempty"`
}

// Group is the Summary of one value of the --by dimension.
type Group struct {
	By    string `json:"by"`
	Value string `json:"value"`
	Summary
	// Attribution is the group's own tail attribution (AttributeGroups;
	// null when not computed).
	Attribution *Attribution `json:"attribution,omitempty"`
}

// label is the group's value as reports show it ("(none)" for the empty
// value).
func (g Group) label() string {
	if g.Value == "" {
		return "(none)"
	}
	return g.Value
}

// Report is the analysis of one or more results files.
type Report struct {
	Summary
	Attribution Attribution `json:"attribution"`
	Groups      []Group     `json:"groups,omitempty"`
	Windows     []Window    `json:"windows"`
	Sources     []Source    `json:"sources,omitempty"`
	Warnings    []string    `json:"warnings,omitempty"`
	// ShardClocks is the clock agreement of pooled replay shards
	// (shardclock.go; null unless two or more files recorded one).
	ShardClocks *ShardClocks `json:"shard_clocks,omitempty"`
	// Capacity is the bandwidth and cost checks (capacity.go; null unless
	// asked for in the options).
	Capacity *Capacity `json:"capacity,omitempty"`
	// Sampling is set when the input passed Options.ExactRows: the
	// percentiles are approximate and the row-based sections come from a
	// sample (stream.go).
	Sampling *Sampling `json:"sampling,omitempty"`
	// ClientThrottling is set when the replayer's cgroup was throttled by
	// its CPU quota during the run (throttle.go).
	ClientThrottling *ClientThrottling `json:"client_throttling,omitempty"`
	// ClientSteal is set when the hypervisor took time from the
	// replayer's CPUs during the run (steal; throttle.go).
	ClientSteal *ClientSteal `json:"client_steal,omitempty"`
	// Sessions is latency by turn and per session (sessions.go; null when
	// no row has a session).
	Sessions *Sessions `json:"sessions,omitempty"`
	// PrefixCache is the prefix-cache hit rate the trace implies beside
	// the server's (prefixcache.go; null when no row has prefix blocks).
	PrefixCache *PrefixCache `json:"prefix_cache,omitempty"`
	// Instances is each server instance's state around the tail, when the
	// metrics series has per-instance rows (instances.go; null otherwise).
	Instances []InstanceLoad `json:"instances,omitempty"`
	// Pools is each pool of a fleet (the instances sharing a role) around
	// the tail, when the instances' rows carry roles (instances.go).
	Pools []PoolLoad `json:"pools,omitempty"`
	// CrossCheck compares the attribution of every request with the
	// server's own queue/prefill/decode histograms (crosscheck.go; null
	// without a metrics series).
	CrossCheck *CrossCheck `json:"cross_check,omitempty"`
	// MissingMetrics lists the metrics series columns with no value at
	// all (seriesmissing.go; also a warning).
	MissingMetrics []string `json:"missing_metrics,omitempty"`
	// Fleet is the run across the replicas that served it: each
	// replica's share of the tail and the routing and pool findings
	// (fleet.go; null when no row names a replica).
	Fleet *Fleet `json:"fleet,omitempty"`
	// PooledFleet is set when the rows name no replica but the series'
	// roles say the servers were a disaggregated fleet: every request
	// went through the prefill pool, then the decode pool (pd.go).
	PooledFleet *PooledFleet `json:"pooled_fleet,omitempty"`
	// SimLateness is how far the simulator the run went against ran
	// behind its model (the slowest, when results were pooled; null when
	// the results do not say: another target, or an offline simulation).
	SimLateness *traces.SimLateness `json:"sim_lateness,omitempty"`
	// Notes say what the report could not show and how to get it (a
	// missing server metrics series: evidence.go).
	Notes []string `json:"notes,omitempty"`
	// ReplayClock maps the run's times to the trace's when the replay
	// started at a --window start or ran at another speed (evidence.go;
	// null when run time is trace time).
	ReplayClock *ReplayClock `json:"replay_clock,omitempty"`

	opts    Options
	rows    rowStore
	reqIDs  []string
	samples samples
	load    load
	est     estModel
	tail    []int32 // row indices of the tail requests

	// The replicas the rows name (fleet.go): names by id, the requests
	// each served and prefilled, the rows naming a replica and the
	// disaggregated ones, and the per-row load at each send.
	replicas                    []string
	fleetServed, fleetPrefilled []int64
	fleetNamed, fleetPD         int64
	fleet                       *fleetState
	// pd is the disaggregated rows' estimated splits (pd.go; nil without
	// a prefill pool).
	pd []pdEst

	windowT0, windowW int64 // timeline origin and width (ns)

	series []traces.MetricsSample // the server metrics series, by time (the HTML incident timeline)
	cited  cited                  // the servers' findings a results-based finding gave as evidence (instances.go)

	// Streaming (Sampling set): the run's accumulators, the pooled ITL
	// sketch (nil while exact), and the sample's scale 2^k (1 when exact).
	acc   *acc
	itlSk *sketch
	scale int64
}

// Options returns the options the report was made with.
func (r *Report) Options() Options { return r.opts }

// WriteJSON writes the report as indented JSON with stable keys.
func (r *Report) WriteJSON(w io.Writer) error {
	r.CapacityCheck()
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// oneIn is the sample's scale: 1 when every row was kept, else 2^k.
func (rep *Report) oneIn() int64 { return max(rep.scale, 1) }

func (rep *Report) reqID(i int) string {
	if i < len(rep.reqIDs) {
		return rep.reqIDs[i]
	}
	return ""
}
