// Package replay sends the records of a trace to an OpenAI-compatible server
// at their recorded arrival times and records what happened to each one.
//
// The scheduler is open-loop: every request has an absolute deadline from the
// run start (no drift), the dispatcher sleeps with a precise timer and spins
// the last microseconds, and workers grow on demand so a slow server never
// slows the sender. Anything that delays a request (a --max-concurrency cap,
// an overloaded client) shows up as lateness (sent − scheduled), never
// silently.
//
// Prompts are token-id lists of exactly input_tokens on /v1/completions, or
// text calibrated through the server's /tokenize on /v1/chat/completions.
// Records that share prefix blocks or a category get byte-identical prefixes,
// so the server's prefix cache behaves as in production.
//
// Results are journaled to a JSONL file beside the output while the run goes
// (fsync'd every JournalSync), so a killed replay loses at most the last
// fraction of a second.
package replay

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// Defaults shared by the library and the CLI flags.
const (
	DefaultSpeed          = 1.0
	DefaultTimeout        = 10 * time.Minute
	DefaultDrain          = 30 * time.Second
	DefaultMaxLateness    = 5 * time.Millisecond
	DefaultJournalSync    = 250 * time.Millisecond
	DefaultBlockSize      = 512
	DefaultRunLabel       = "replay"
	DefaultSessions       = SessionsOpen
	DefaultAPI            = traces.APICompletions
	DefaultTokenIDMin     = 1000
	DefaultTokenIDMax     = 30000
	DefaultSpin           = 0
	DefaultProgressPeriod = time.Second
)

// Session modes.
const (
	// SessionsOpen sends every turn at its recorded time.
	SessionsOpen = "open"
	// SessionsClosed sends a follow-up call its think time after the calls
	// it depends on finish: the previous turn of its session, or the calls
	// its parent_seq and after_seqs name (subagents, joins). The think time
	// is think_ns, else its arrival − the dependencies' last finish_ns, else
	// the recorded spacing from the dependency's send (never before it
	// finished); Speed scales it, never the server's service time.
	SessionsClosed = "closed"
)

// Options configure a replay. Start from DefaultOptions, which holds every
// default, and set what you mean: a zero field is a value of its own, never
// its default, and Validate refuses one that cannot be used.
type Options struct {
	// URL is the server's base URL (http://host:port, optionally ending in
	// /v1). Required. Defaults to "".
	URL string
	// Model is sent as "model" on every request; "" uses each record's model,
	// and when that is empty too, the first model of /v1/models. Defaults to "".
	Model string
	// API is the default endpoint for records whose api column is empty:
	// traces.APICompletions or traces.APIChat. Defaults to completions.
	API string
	// ForceAPI sends every record to API, ignoring the records' api column.
	// Defaults to false.
	ForceAPI bool
	// Run labels the run; request ids are "<Run>-<seq>". Defaults to "replay".
	Run string
	// Speed scales time: 2 replays twice as fast. Defaults to 1.
	Speed float64
	// WindowFrom and WindowTo select the records whose arrival_ns is in
	// [WindowFrom, WindowTo); WindowTo 0 means no upper bound. The run starts
	// at WindowFrom. Defaults to 0, 0.
	WindowFrom, WindowTo time.Duration
	// MaxConcurrency caps in-flight requests (0 = no cap). A request delayed
	// by the cap is late, and its lateness says so. Defaults to 0.
	MaxConcurrency int
	// Warmup sends this many requests (copies of the first records with
	// unique prompts) before the clock starts; they are not recorded.
	// Defaults to 0.
	Warmup int
	// NoPreflight skips the check before the clock starts: one tiny
	// streamed request (the first record's model and API, max_tokens 1)
	// that must not be refused. Defaults to false (check).
	NoPreflight bool
	// Duration stops sending records scheduled after this offset (0 = whole
	// trace). Defaults to 0.
	Duration time.Duration
	// Sessions is SessionsOpen or SessionsClosed. Defaults to open.
	Sessions string
	// ReplicaHeader names the response header that says which replica
	// served a request; its value fills the results' replica column. A
	// gateway sets it when configured to (AIBrix's gateway plugin sets
	// target-pod to the pod's address; Envoy can add the upstream host to
	// responses; see docs/commands.md, replay). A header that some
	// responses lack is counted (Summary.ReplicaMissing) and reported
	// once on Log. Defaults to "": the simulator fleet's X-Sim-Replica
	// is read, and its absence not counted.
	ReplicaHeader string
	// PrefillReplicaHeader names the response header that says which
	// replica prefilled a disaggregated request (the prefill_replica
	// column). A response that names one has its engine timings read as
	// the decode replica's (otlp.DecodeSide). Defaults to "": the
	// simulator fleet's X-Sim-Prefill-Replica.
	PrefillReplicaHeader string
	// RouteReasonHeader names the response header with the router's
	// reason for its choice (the route_reason column). Defaults to "":
	// the simulator fleet's X-Sim-Route-Reason.
	RouteReasonHeader string
	// SessionHeader sends each call's session id ("RUN-sN") in this header,
	// for session-affine routers (llm-d, the gateway inference extension,
	// vLLM's router); calls without a session send none. "" = off. Defaults
	// to "" (plain vLLM ignores it).
	SessionHeader string
	// MaxThink caps a closed-session follow-up's think time (after Speed
	// scales it); 0 = no cap. Capped think times are counted in
	// Summary.Sessions. Defaults to 0.
	MaxThink time.Duration
	// StrictSessions makes a session whose dependencies cannot be replayed
	// (a cycle, a missing call, another session's call) an error
	// (ErrSessionGraph); otherwise that session is replayed open loop and
	// counted. Defaults to false.
	StrictSessions bool
	// NoContextGrowth turns context growth off: in a closed-session replay
	// every follow-up is by default sent as the prompt of the call whose
	// context it continues, the output the server returned for that call
	// (its token ids on /v1/completions, asked for with vLLM's
	// return_token_ids; its text as an assistant message on chat) and new
	// tokens up to the trace's input_tokens, so the server's prefix cache
	// sees the context production's saw. The call it continues is its one
	// dependency (a chain's previous turn, a fan-out's parent: every child
	// starts from it); a join continues its parent_seq, or without one its
	// dependency sent first (the call that spawned the others), because
	// the other dependencies' work comes back to it as new tokens (tool
	// results), not as its conversation. When the trace's input is
	// shorter than that context the call is sent a fresh prompt and
	// counted (Summary.Sessions). Defaults to false (growth on): the
	// trace's prefix blocks alone do not carry a conversation's outputs,
	// so without growth the cache misses them.
	NoContextGrowth bool
	// ShardIndex and ShardCount select the records of one shard of n
	// (deterministic by session, or by seq for single-shot records).
	// Defaults to 0, 1.
	ShardIndex, ShardCount int
	// StartAt is the wall-clock time the run starts (zero = now), so shards
	// on many machines start together. Defaults to zero.
	StartAt time.Time
	// ClockProbes bounds the GET requests that bracket the target's clock
	// offset from its HTTP Date header while the run waits for StartAt
	// (at most one a second, none after StartAt − 50 ms; see clock.go); 0
	// sends none. Defaults to DefaultClockProbes.
	ClockProbes int
	// Timeout bounds one request from send to its last byte. Defaults to
	// DefaultTimeout.
	Timeout time.Duration
	// Drain is how long in-flight requests may finish after sending stops
	// early (ctx cancelled or Duration reached); 0 abandons them at once.
	// Defaults to DefaultDrain.
	Drain time.Duration
	// NoVLLMExtensions leaves out ignore_eos and min_tokens, for servers that
	// reject them. Defaults to false.
	NoVLLMExtensions bool
	// ContinuousUsage asks for usage on every chunk
	// (stream_options.continuous_usage_stats), which gives exact tokens per
	// chunk. Defaults to false.
	ContinuousUsage bool
	// Headers are added to every request. Defaults to nil (none).
	Headers http.Header
	// APIKey is sent as a bearer token. It never reaches a file, a log line
	// or an error message. Defaults to "".
	APIKey string
	// BlockSize is the token size of one prefix_blocks entry when the trace's
	// metadata does not say. Defaults to DefaultBlockSize.
	BlockSize int
	// TokenIDMin and TokenIDMax bound the token ids of generated prompts
	// ([min, max)); the default range is valid and free of special tokens for
	// common vocabularies (Llama 2/3, Qwen, Mistral). Defaults to 1000, 30000.
	TokenIDMin, TokenIDMax int
	// NoCalibrate skips the /tokenize calibration of chat prompts. Defaults
	// to false.
	NoCalibrate bool
	// Spin is how long before a deadline the dispatcher stops sleeping and
	// spins. Defaults to DefaultSpin (0: the nanosleep wake-up error, ~10 µs
	// at p50, is far inside any lateness budget, and spinning 30 µs per
	// request was a third of the client's CPU at 5k req/s).
	Spin time.Duration
	// Journal is the JSONL journal path that receives each finished request
	// while the run goes ("" = no journal). Defaults to "".
	Journal string
	// JournalSync is how often the journal is flushed and fsync'd (> 0).
	// Defaults to DefaultJournalSync.
	JournalSync time.Duration
	// NoRealtime keeps the dispatcher thread out of the real-time class.
	// By default it asks for SCHED_FIFO (priority 1) where the process may
	// (CAP_SYS_NICE, or an RLIMIT_RTPRIO of 1 or more), so that a busy
	// neighbour cannot delay a send; where it may not, Run says so on Log
	// and in the results' metadata (MetaRealtime). Defaults to false.
	NoRealtime bool
	// RecordsInJournal keeps finished requests out of memory: they go to
	// the journal (Journal, required) as they finish, in finish order, and
	// Result.Records is nil; read them back from the journal (traces.Open).
	// Memory then depends on the requests in flight, not on the run's
	// length. Defaults to false: Result.Records holds every request.
	RecordsInJournal bool
	// Progress receives a live progress line every ProgressPeriod (nil =
	// quiet). Defaults to nil.
	Progress io.Writer
	// Log receives one-line notices that cannot wait for the end of the run
	// (a failed journal write). Defaults to nil (none).
	Log io.Writer
	// ProgressPeriod is the progress refresh period (> 0). Defaults to
	// DefaultProgressPeriod (one second).
	ProgressPeriod time.Duration
	// ProgressLines writes each progress report as a plain line (for logs
	// and pipes) instead of rewriting one terminal line. Defaults to false.
	ProgressLines bool
	// TraceParent sends a W3C traceparent header derived from the request id
	// (TraceParentFor), so OTLP spans can be joined on their trace id.
	// Defaults to false.
	TraceParent bool
	// OnStart, when set, is called with the run's start time (t0, the zero
	// of every offset) as the clock starts, e.g. to align a metrics scraper.
	// Defaults to nil.
	OnStart func(t0 time.Time)
	// Client overrides the HTTP client (it implies net/http). Defaults to a
	// tuned net/http client for https and proxied targets, and replay's own
	// HTTP/1.1 client for plain http.
	Client *http.Client
	// NetHTTP uses net/http even for plain-http targets. Defaults to false.
	NetHTTP bool
	// Background are closed-loop loads run beside the trace (see
	// Background); their requests are in the results with their class.
	// Defaults to none.
	Background []Background
	// TraceClass is the class given to trace records without one when
	// Background is set ("" leaves them without). Defaults to
	// DefaultTraceClass ("interactive").
	TraceClass string
	// ModelMap maps a record's model to the served model (--model-map);
	// records whose model is not in it use Model. Defaults to nil.
	ModelMap map[string]string
	// Label names the run in the results metadata (run.label). Defaults to "".
	Label string
	// Metadata are free key=value pairs stored in the results metadata as
	// run.meta.KEY (--metadata). Defaults to nil.
	Metadata map[string]string
	// DescribeServer asks the server about itself (/v1/models, /version,
	// the *_info series of /metrics) and stores the answers in the results
	// metadata (server.*). Defaults to false (the CLI turns it on).
	DescribeServer bool
	// SimTarget is the built-in simulator's configuration as a target spec
	// ("sim:max-num-seqs=32", FormatSimTarget), stored in the results
	// metadata as MetaSim: the URL of an in-process simulator says nothing
	// of it. Target.Apply sets it. Defaults to "" (not the simulator).
	SimTarget string
	// Terms say the options that the results' metadata names (a caller's
	// flags); nil says them by the libraries' names. Defaults to nil.
	Terms traces.Terms
}

// DefaultSessionHeader is the header name the CLI's --session-affinity
// sends the session id in.
const DefaultSessionHeader = traces.SessionHeader

var headerName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]*$`)

// DefaultOptions returns every option's default, the values the field
// docs name; set URL before use. It is the one place replay's defaults
// live: the CLI, validate and sweep all start from it.
func DefaultOptions() Options {
	return Options{
		API:            DefaultAPI,
		Run:            DefaultRunLabel,
		Speed:          DefaultSpeed,
		Sessions:       DefaultSessions,
		ShardIndex:     0,
		ShardCount:     1,
		ClockProbes:    DefaultClockProbes,
		Timeout:        DefaultTimeout,
		Drain:          DefaultDrain,
		BlockSize:      DefaultBlockSize,
		TokenIDMin:     DefaultTokenIDMin,
		TokenIDMax:     DefaultTokenIDMax,
		Spin:           DefaultSpin,
		JournalSync:    DefaultJournalSync,
		ProgressPeriod: DefaultProgressPeriod,
		TraceClass:     DefaultTraceClass,
	}
}

// DefaultMaxFailed is the share of failed requests above which the replay
// command calls the run invalid (exit 3): it measured errors, not latency.
const DefaultMaxFailed = 0.5

// Validate checks the options as given (a zero is a value like any other,
// never the default); each problem is a *traces.OptionError naming the
// option (Options.Speed), all of them joined.
func (o *Options) Validate() error { return o.validate(true) }

// ValidateWithoutURL is Validate for a caller that starts the target
// later (sweep, validate): every option but the URL, which may be "".
func (o *Options) ValidateWithoutURL() error { return o.validate(false) }

// validate is Validate, with the URL required or not (Scan plans before
// the target is known).
func (o *Options) validate(needURL bool) error {
	var errs []error
	if o.URL == "" {
		if needURL {
			errs = append(errs, optionErr("Options.URL", "required"))
		}
	} else if !strings.HasPrefix(o.URL, "http://") && !strings.HasPrefix(o.URL, "https://") {
		errs = append(errs, optionErr("Options.URL", "want http:// or https://"))
	}
	if o.API != traces.APICompletions && o.API != traces.APIChat {
		errs = append(errs, optionErr("Options.API", "%q is not one of %s, %s", o.API, traces.APICompletions, traces.APIChat))
	}
	if !(o.Speed > 0) {
		errs = append(errs, optionErr("Options.Speed", "must be > 0, got %v", o.Speed))
	}
	if o.WindowFrom < 0 || (o.WindowTo != 0 && o.WindowTo <= o.WindowFrom) {
		errs = append(errs, optionErr("Options.WindowFrom, Options.WindowTo", "want 0 <= FROM < TO, got %v,%v", o.WindowFrom, o.WindowTo))
	}
	if o.MaxConcurrency < 0 {
		errs = append(errs, optionErr("Options.MaxConcurrency", "must be >= 0"))
	}
	if o.Warmup < 0 {
		errs = append(errs, optionErr("Options.Warmup", "must be >= 0"))
	}
	if o.Duration < 0 {
		errs = append(errs, optionErr("Options.Duration", "must be >= 0"))
	}
	for _, h := range []struct{ name, v string }{{"SessionHeader", o.SessionHeader}, {"ReplicaHeader", o.ReplicaHeader},
		{"PrefillReplicaHeader", o.PrefillReplicaHeader}, {"RouteReasonHeader", o.RouteReasonHeader}} {
		if h.v != "" && !headerName.MatchString(h.v) {
			errs = append(errs, optionErr("Options."+h.name, "%q is not a header name (letters, digits, '-')", h.v))
		}
	}
	if o.Sessions != SessionsOpen && o.Sessions != SessionsClosed {
		errs = append(errs, optionErr("Options.Sessions", "%q is not one of open, closed", o.Sessions))
	}
	if o.ShardCount < 1 || o.ShardIndex < 0 || o.ShardIndex >= o.ShardCount {
		errs = append(errs, optionErr("Options.ShardIndex, Options.ShardCount", "want i/n with 0 <= i < n, got %d/%d", o.ShardIndex, o.ShardCount))
	}
	if o.ClockProbes < 0 {
		errs = append(errs, optionErr("Options.ClockProbes", "must be >= 0 (0 sends none), got %d", o.ClockProbes))
	}
	if o.Timeout <= 0 {
		errs = append(errs, optionErr("Options.Timeout", "must be > 0"))
	}
	if o.Drain < 0 {
		errs = append(errs, optionErr("Options.Drain", "must be >= 0"))
	}
	if o.BlockSize <= 0 {
		errs = append(errs, optionErr("Options.BlockSize", "must be > 0"))
	}
	if o.TokenIDMin < 0 || o.TokenIDMax <= o.TokenIDMin {
		errs = append(errs, optionErr("Options.TokenIDMin, Options.TokenIDMax", "want 0 <= min < max"))
	}
	if o.Spin < 0 {
		errs = append(errs, optionErr("Options.Spin", "must be >= 0"))
	}
	if o.JournalSync <= 0 {
		errs = append(errs, optionErr("Options.JournalSync", "must be > 0"))
	}
	if o.ProgressPeriod <= 0 {
		errs = append(errs, optionErr("Options.ProgressPeriod", "must be > 0"))
	}
	errs = append(errs, validateBackground(o.Background)...)
	if o.Run == "" || strings.ContainsAny(o.Run, " \t\r\n") {
		errs = append(errs, optionErr("Options.Run", "want a non-empty label without spaces"))
	}
	return errors.Join(errs...)
}

// ParseShard parses "i/n".
func ParseShard(s string) (i, n int, err error) {
	a, b, ok := strings.Cut(s, "/")
	if !ok {
		return 0, 0, optionErr("shard", "want i/n, got %q", s)
	}
	if _, err := fmt.Sscanf(a+" "+b, "%d %d", &i, &n); err != nil {
		return 0, 0, optionErr("shard", "want i/n, got %q", s)
	}
	if n < 1 || i < 0 || i >= n {
		return 0, 0, optionErr("shard", "want 0 <= i < n, got %q", s)
	}
	return i, n, nil
}

// ParseWindow parses "FROM,TO" durations ("0s,60s"; TO may be empty).
func ParseWindow(s string) (from, to time.Duration, err error) {
	a, b, ok := strings.Cut(s, ",")
	if !ok {
		return 0, 0, optionErr("window", "want FROM,TO (e.g. 0s,60s), got %q", s)
	}
	if from, err = time.ParseDuration(strings.TrimSpace(a)); err != nil {
		return 0, 0, optionErr("window", "FROM: %w", err)
	}
	if strings.TrimSpace(b) != "" {
		if to, err = time.ParseDuration(strings.TrimSpace(b)); err != nil {
			return 0, 0, optionErr("window", "TO: %w", err)
		}
		if to <= from {
			return 0, 0, optionErr("window", "TO must be after FROM, got %q", s)
		}
	}
	if from < 0 {
		return 0, 0, optionErr("window", "FROM must be >= 0, got %q", s)
	}
	return from, to, nil
}

// optionErr is replay's option error: option is a field of Options (or of
// TargetOptions), or an input that ParseShard, ParseWindow, ParseBackground,
// ParseModelMap or ParseMetadata reads.
func optionErr(option, format string, a ...any) error {
	return traces.OptionErrorf("replay", option, format, a...)
}
