// Package engine is one simulated vLLM engine behind vLLM's
// OpenAI-compatible API: the replica that package sim runs alone or in a
// fleet behind a router (sim.Start and sim.Simulate run it).
//
// The engine simulates, it does not compute. One goroutine runs vLLM V1's
// scheduling loop (FCFS or priority waiting queue, --max-num-seqs, a token
// budget per step, chunked prefill, KV blocks with prefix caching and LRU
// eviction, preemption by recompute) and charges each step a modelled
// duration:
//
//	step = StepFixed + PrefillPerToken·(prefill tokens in the step)
//	     + DecodePerSeq·(decoding sequences) + AttnPerContextToken·(context tokens read)
//
// In real-time mode (the default) the engine sleeps until the step's end and
// then publishes its tokens to the waiting HTTP streams in one batch, so a
// stream costs one wakeup per step it takes part in, never a goroutine per
// token. In Virtual mode it never sleeps: the clock jumps by each step's
// modelled duration. Server is the engine behind its HTTP API (its Handler,
// which the caller serves); Replica is the same engine stepped on a
// caller's clock, and a request may come with its prompt already computed
// elsewhere (a decode replica pulls its KV cache first). Simulate runs one
// engine offline on a list of arrivals, fully deterministic: the reference
// that sim.Simulate's one-engine run is checked against.
//
// Every finished request leaves a truth row (traces.Record) with the
// engine's own timestamps:
//
//	queue   = first scheduled − arrival   (ServerQueueNs,   metrics.queue_time_ms)
//	prefill = first token − first scheduled (ServerPrefillNs, metrics.time_to_first_token_ms)
//	decode  = last token − first token      (ServerDecodeNs,  metrics.generation_time_ms)
//
// The per-request metrics object (vLLM --enable-per-request-metrics) and
// the optional OTLP "llm_request" spans are computed from the very same
// timestamps, so a client recovers the truth exactly (to the float64
// rounding of milliseconds).
//
// Text prompts are tokenized with a built-in deterministic rule (see
// Tokenize, also behind POST /tokenize); token-id prompts are used as they
// are. Output text is deterministic filler, one word per token.
package engine

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// DefaultModel is the served model name.
const DefaultModel = "sim-llama3-8b"

// DefaultPreset is the step-time and capacity preset applied by DefaultOptions.
const DefaultPreset = "llama3-8b-h100"

// Default values of Options fields that no preset sets.
const (
	DefaultStreamInterval   = 1
	DefaultSeed             = 1
	DefaultMeanOutputTokens = 128
	DefaultFailStatus       = 503
	DefaultStallDuration    = 2 * time.Second
	DefaultPolicy           = "fcfs"
	DefaultVocabSize        = 128256
)

// Options configures one engine. Start from DefaultOptions: a field's zero
// is a value of its own, never its default (a preset is a named set of
// values applied onto them, ApplyPreset).
type Options struct {
	// Model is the served model name; requests naming another model get
	// vLLM's 404 unless AnyModel is set. Defaults to DefaultModel
	// ("sim-llama3-8b").
	Model string
	// AnyModel serves a request whatever model it names, as if it named
	// Model (responses, metrics and truth rows say Model): a trace
	// captured with production model names then replays against the
	// simulator without a model mapping. /v1/models still lists Model.
	// Defaults to false (vLLM's behaviour).
	AnyModel bool
	// Preset names the deployment the capacity and step-time fields were
	// taken from (see Presets); informational once applied. Defaults to
	// "llama3-8b-h100".
	Preset string

	// MaxNumSeqs caps running sequences (vLLM --max-num-seqs). Defaults to the preset's (256).
	MaxNumSeqs int
	// MaxNumBatchedTokens is the token budget of one step (vLLM
	// --max-num-batched-tokens); prefills are chunked to fit. Defaults to the preset's (8192).
	MaxNumBatchedTokens int
	// NumGPUBlocks is the KV cache capacity in blocks (vLLM --num-gpu-blocks-override).
	// Defaults to the preset's (26000).
	NumGPUBlocks int
	// BlockSize is the tokens per KV block (vLLM --block-size). Defaults to 16.
	BlockSize int
	// MaxModelLen is the context length; longer prompts get vLLM's 400 (vLLM
	// --max-model-len). Defaults to the preset's (8192).
	MaxModelLen int
	// DisablePrefixCaching turns prefix caching off (vLLM
	// --no-enable-prefix-caching). Defaults to false.
	DisablePrefixCaching bool
	// Policy is the scheduling policy, "fcfs" or "priority" (lower
	// "priority" values first, vLLM --scheduling-policy). Defaults to "fcfs".
	Policy string

	// MaxQueuedRequests caps waiting + running requests; beyond it requests
	// are refused with HTTP 503 like vLLM ≥ 0.29's --max-num-queued-reqs
	// (approximate: counted at the last step). Defaults to 0 (unbounded, vLLM's default).
	MaxQueuedRequests int

	// StepFixed is the fixed cost of every engine step (weights read, launch
	// overheads). Defaults to the preset's (6ms).
	StepFixed time.Duration
	// PrefillPerToken is the cost of each prompt token computed in a step.
	// Defaults to the preset's (40µs).
	PrefillPerToken time.Duration
	// DecodePerSeq is the cost of each decoding sequence in a step. Defaults
	// to the preset's (45µs).
	DecodePerSeq time.Duration
	// AttnPerContextToken is the cost of each context token whose KV a
	// scheduled sequence reads in a step (attention). Defaults to the preset's (45ns).
	AttnPerContextToken time.Duration

	// StreamInterval sends tokens in chunks of N after the first (vLLM
	// --stream-interval). Defaults to 1.
	StreamInterval int
	// MeanOutputTokens is the mean output length when a request does not set
	// ignore_eos: after each token the "model" stops with probability
	// 1/MeanOutputTokens (a seeded geometric draw), within min_tokens and
	// max_tokens. Defaults to 128.
	MeanOutputTokens int
	// Seed drives output lengths, faults and generated request ids. Defaults to 1.
	Seed int64
	// Virtual runs the engine without sleeping: while busy its clock
	// advances only by each step's modelled duration (when idle it catches
	// up with wall time), so responses come as fast as the CPU allows while
	// the truth and metrics keep the model's timings. After each step the
	// engine waits (up to 5 s) until every stream has written that step's
	// tokens, so chunk boundaries are the engine's (lockstep). For tests,
	// golden transcripts and fast demos. Defaults to false (real time).
	Virtual bool

	// PerRequestMetrics adds vLLM's per-request "metrics" object
	// (--enable-per-request-metrics): on the final usage chunk of a stream
	// (so it needs stream_options.include_usage) and at the top level of a
	// non-streaming response. Defaults to false.
	PerRequestMetrics bool
	// RequestIDHeaders echoes X-Request-Id on responses (vLLM
	// --enable-request-id-headers). Defaults to false.
	RequestIDHeaders bool
	// PromptTokensDetails reports usage.prompt_tokens_details.cached_tokens
	// when some prompt tokens hit the prefix cache (vLLM
	// --enable-prompt-tokens-details). Defaults to true.
	PromptTokensDetails bool
	// FlatErrors uses vLLM's pre-0.10.1 flat error body
	// {"object":"error","message":...} instead of {"error":{...}}. Defaults to false.
	FlatErrors bool

	// FailRate is the probability that a request is refused with FailStatus
	// before it reaches the engine. Defaults to 0.
	FailRate float64
	// FailStatus is the HTTP status of injected failures: 500, 503 or 429. Defaults to 503.
	FailStatus int
	// DisconnectRate is the probability that a stream's connection is cut
	// after half its tokens (no [DONE]). Defaults to 0.
	DisconnectRate float64
	// StreamErrorRate is the probability that a stream ends after half its
	// tokens with a data: {"error":...} event and [DONE], status 200. Defaults to 0.
	StreamErrorRate float64
	// StallRate is the probability that a stream pauses StallDuration after
	// its first token (the engine keeps going; the tokens arrive late, in one
	// chunk). Defaults to 0.
	StallRate float64
	// StallDuration is how long a stalled stream pauses. Defaults to 2s.
	StallDuration time.Duration

	// OTLPTracesEndpoint, when set, exports one "llm_request" span per
	// finished request (vLLM's attribute names, latencies in seconds) as
	// OTLP/HTTP protobuf to this URL; a URL without a path gets /v1/traces.
	// The span joins the caller's trace from the traceparent header. Defaults
	// to "" (off).
	OTLPTracesEndpoint string

	// TruthOut is a file (any traces codec, by extension) that Close writes
	// with one row per finished request. Defaults to "" (none).
	TruthOut string

	// KVPull times the KV pulls of requests whose prompt a prefill replica
	// computed (a body with kv_transfer_params.do_remote_prefill, as llm-d's
	// routing sidecar sends to a decode replica). Defaults to nil: the KV
	// arrives at once.
	KVPull KVPuller

	// ChunkTimes makes truth rows carry ChunkNs and ChunkTokens: when the
	// engine published each chunk of tokens and how many it held, as a
	// client's results would (an offline simulation standing in for a
	// replay). Defaults to false.
	ChunkTimes bool

	// KVBytesPerToken is the KV cache size of one token, which turns a KV
	// pull's tokens into bytes for vllm:nixl_bytes_transferred; a fleet
	// sets it from its own (sim.Fleet.KVTransferBytesPerToken). Defaults
	// to 0: pulls' bytes are not observed.
	KVBytesPerToken int
}

// KVPuller moves a request's KV cache from the prefill replica that
// computed it (Options.KVPull).
type KVPuller interface {
	// Pull starts moving tokens tokens of KV cache and calls done, from any
	// goroutine, once they are there.
	Pull(tokens int, done func())
}

// DefaultOptions returns the documented defaults (preset DefaultPreset).
func DefaultOptions() Options {
	o := Options{
		Model:               DefaultModel,
		Policy:              DefaultPolicy,
		StreamInterval:      DefaultStreamInterval,
		MeanOutputTokens:    DefaultMeanOutputTokens,
		Seed:                DefaultSeed,
		PromptTokensDetails: true,
		FailStatus:          DefaultFailStatus,
		StallDuration:       DefaultStallDuration,
	}
	if err := ApplyPreset(&o, DefaultPreset); err != nil {
		panic(err)
	}
	return o
}

// PresetModel is the model name a standalone simulator serves for a
// preset when none is given: DefaultModel for DefaultPreset, else
// "sim-PRESET", so that results say which deployment they came from.
func PresetModel(preset string) string {
	if preset == DefaultPreset {
		return DefaultModel
	}
	return "sim-" + preset
}

// Preset is a named deployment: capacity and step-time model.
type Preset struct {
	Name string
	// Doc says what the preset resembles and where its numbers come from.
	Doc                                                                   string
	MaxNumSeqs, MaxNumBatchedTokens, NumGPUBlocks, BlockSize, MaxModelLen int
	StepFixed, PrefillPerToken, DecodePerSeq, AttnPerContextToken         time.Duration
}

// Presets lists the built-in presets. The numbers are derived from public
// hardware specifications and model shapes (not measured on GPUs here); the
// Doc of each gives the arithmetic.
var Presets = []Preset{
	{
		Name: "llama3-8b-h100",
		Doc: "Llama-3-8B bf16 on one H100 SXM 80GB. Decode is memory-bound: 16 GB of weights at ~3.35 TB/s HBM3 " +
			"≈ 4.8 ms, plus launch/sampling overhead → StepFixed 6 ms. Prefill is compute-bound: 2·8e9 FLOP/token " +
			"at ~400 TFLOPS effective (≈40% of 989 dense bf16) → 40 µs/token; a decoding sequence costs about the " +
			"same FLOPs plus sampling → 45 µs. KV per token = 32 layers·8 KV heads·128 dim·2 (K,V)·2 B = 128 KiB, " +
			"read at ~3 TB/s → 45 ns per context token. KV capacity: 80 GB·0.9 − 16 GB weights − ~4 GB activations " +
			"≈ 52 GB / 128 KiB ≈ 416k tokens = 26000 blocks of 16. Context 8192 (Llama-3's). 256 seqs, 8192 batched " +
			"tokens: vLLM's server defaults for large GPUs.",
		MaxNumSeqs: 256, MaxNumBatchedTokens: 8192, NumGPUBlocks: 26000, BlockSize: 16, MaxModelLen: 8192,
		StepFixed: 6 * time.Millisecond, PrefillPerToken: 40 * time.Microsecond, DecodePerSeq: 45 * time.Microsecond,
		AttnPerContextToken: 45 * time.Nanosecond,
	},
	{
		Name: "phi4-mini-l4",
		Doc: "Phi-4-mini-instruct (3.8B) bf16 on one NVIDIA L4 24GB. 7.7 GB of weights at 300 GB/s GDDR6 ≈ 26 ms " +
			"→ StepFixed 28 ms. 2·3.8e9 FLOP/token at ~50 TFLOPS effective (≈40% of 121 dense bf16) → 150 µs per " +
			"prefill token and per decoding sequence. KV per token = 32 layers·8 KV heads·128 dim·2·2 B = 128 KiB at " +
			"300 GB/s → 440 ns per context token. KV capacity: 24 GB·0.9 − 7.7 GB − ~2 GB ≈ 12 GB / 128 KiB ≈ 91k " +
			"tokens = 5700 blocks. Context capped at 16384 to fit; 128 seqs, 2048 batched tokens (vLLM's server " +
			"defaults for smaller GPUs).",
		MaxNumSeqs: 128, MaxNumBatchedTokens: 2048, NumGPUBlocks: 5700, BlockSize: 16, MaxModelLen: 16384,
		StepFixed: 28 * time.Millisecond, PrefillPerToken: 150 * time.Microsecond, DecodePerSeq: 150 * time.Microsecond,
		AttnPerContextToken: 440 * time.Nanosecond,
	},
	{
		Name: "tiny",
		Doc: "A toy deployment for tests and demos: 1 ms fixed step, small KV cache (512 blocks of 16 = 8192 " +
			"tokens) and 16 sequences, so queueing, prefix caching and preemption show up with a handful of requests.",
		MaxNumSeqs: 16, MaxNumBatchedTokens: 512, NumGPUBlocks: 512, BlockSize: 16, MaxModelLen: 4096,
		StepFixed: time.Millisecond, PrefillPerToken: 20 * time.Microsecond, DecodePerSeq: 50 * time.Microsecond,
		AttnPerContextToken: 100 * time.Nanosecond,
	},
}

// PresetNames lists the names of Presets.
func PresetNames() []string {
	var n []string
	for _, p := range Presets {
		n = append(n, p.Name)
	}
	return n
}

// ApplyPreset overwrites o's capacity and step-time fields with the named preset's.
func ApplyPreset(o *Options, name string) error {
	for _, p := range Presets {
		if p.Name == name {
			o.Preset = p.Name
			o.MaxNumSeqs, o.MaxNumBatchedTokens, o.NumGPUBlocks, o.BlockSize, o.MaxModelLen =
				p.MaxNumSeqs, p.MaxNumBatchedTokens, p.NumGPUBlocks, p.BlockSize, p.MaxModelLen
			o.StepFixed, o.PrefillPerToken, o.DecodePerSeq, o.AttnPerContextToken =
				p.StepFixed, p.PrefillPerToken, p.DecodePerSeq, p.AttnPerContextToken
			return nil
		}
	}
	return fmt.Errorf("preset %q isn't one of [%s]", name, strings.Join(PresetNames(), ", "))
}

// Validate checks o as given; each problem is a *traces.OptionError naming
// the option, all of them joined.
func (o *Options) Validate() error {
	var errs []error
	pos := func(name string, v int) {
		if v <= 0 {
			errs = append(errs, traces.OptionErrorf("sim", "Options."+name, "must be positive, got %d", v))
		}
	}
	pos("MaxNumSeqs", o.MaxNumSeqs)
	pos("MaxNumBatchedTokens", o.MaxNumBatchedTokens)
	pos("NumGPUBlocks", o.NumGPUBlocks)
	pos("BlockSize", o.BlockSize)
	pos("MaxModelLen", o.MaxModelLen)
	pos("StreamInterval", o.StreamInterval)
	pos("MeanOutputTokens", o.MeanOutputTokens)
	if o.MaxNumBatchedTokens > 0 && o.MaxNumSeqs > 0 && o.MaxNumBatchedTokens < o.MaxNumSeqs {
		// vLLM refuses it too (SchedulerConfig): a step's budget must
		// hold a token of every running sequence, and prompts would
		// prefill a few tokens a step, for minutes.
		errs = append(errs, &traces.OptionError{Pkg: "sim", Option: "Options.MaxNumBatchedTokens", Err: traces.Textf("%d is below %s %d: a step's token budget must hold a token of every running sequence (vLLM refuses it too)",
			o.MaxNumBatchedTokens, traces.OptionRef("Options.MaxNumSeqs"), o.MaxNumSeqs)})
	}
	if o.MaxQueuedRequests < 0 {
		errs = append(errs, traces.OptionErrorf("sim", "Options.MaxQueuedRequests", "must not be negative, got %d", o.MaxQueuedRequests))
	}
	if o.Model == "" {
		errs = append(errs, traces.OptionErrorf("sim", "Options.Model", "must not be empty"))
	}
	if o.NumGPUBlocks > 0 && o.BlockSize > 0 && o.MaxModelLen > o.NumGPUBlocks*o.BlockSize {
		errs = append(errs, traces.OptionErrorf("sim", "Options.MaxModelLen", "%d is larger than the KV cache (%d blocks of %d = %d tokens)",
			o.MaxModelLen, o.NumGPUBlocks, o.BlockSize, o.NumGPUBlocks*o.BlockSize))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"StepFixed", o.StepFixed}, {"PrefillPerToken", o.PrefillPerToken}, {"DecodePerSeq", o.DecodePerSeq},
		{"AttnPerContextToken", o.AttnPerContextToken}, {"StallDuration", o.StallDuration}} {
		if d.v < 0 {
			errs = append(errs, traces.OptionErrorf("sim", "Options."+d.name, "must not be negative, got %v", d.v))
		}
	}
	for _, r := range []struct {
		name string
		v    float64
	}{{"FailRate", o.FailRate}, {"DisconnectRate", o.DisconnectRate}, {"StreamErrorRate", o.StreamErrorRate}, {"StallRate", o.StallRate}} {
		if !(r.v >= 0 && r.v <= 1) {
			errs = append(errs, traces.OptionErrorf("sim", "Options."+r.name, "must be within [0,1], got %g", r.v))
		}
	}
	if o.OTLPTracesEndpoint != "" {
		if _, err := otlpEndpoint(o.OTLPTracesEndpoint); err != nil {
			errs = append(errs, err)
		}
	}
	switch o.FailStatus {
	case 429, 500, 503:
	default:
		errs = append(errs, traces.OptionErrorf("sim", "Options.FailStatus", "must be 429, 500 or 503, got %d", o.FailStatus))
	}
	switch o.Policy {
	case "fcfs", "priority":
	default:
		errs = append(errs, traces.OptionErrorf("sim", "Options.Policy", "%q isn't one of [fcfs, priority]", o.Policy))
	}
	return errors.Join(errs...)
}
