package main

import (
	"time"

	"github.com/tokentrace/tokentrace/replay"
	"github.com/tokentrace/tokentrace/replay/otlp"
	"github.com/tokentrace/tokentrace/replay/scrape"
	"github.com/tokentrace/tokentrace/traces"
	"github.com/urfave/cli/v2"
)

// The replay command: its flags land in replayArgs, and runReplay
// (replay_run.go) is the body, which tests call without urfave/cli.

const replayUsageText = `tokentrace replay [flags] TRACE

Examples:
  tokentrace replay --url http://localhost:8000 --model meta-llama/Llama-3.1-8B-Instruct --out results.parquet trace.parquet
  tokentrace replay --speed 10 --window 0s,60s --out results.parquet trace.parquet     # built-in simulator
  tokentrace replay --target sim:max-num-seqs=32 --out results.parquet trace.parquet  # configured simulator
  tokentrace replay --target sim:replicas=4,router=prefix-aware --out results.parquet trace.parquet
  tokentrace replay --url http://vllm:8000 --shard 2/8 --start-at 2026-11-22T03:00:00Z --out results-2.parquet trace.parquet`

const replayDescription = `replay sends every record of TRACE to the server at its recorded arrival time
(open loop: a slow server never slows the sender) and writes one results row
per sent request: scheduled, sent, first and last token offsets, every chunk's
arrival, server usage and (with vLLM --enable-per-request-metrics) the
server's own queue, prefill and decode times. Lateness = sent − scheduled is
recorded per request; when its p99 exceeds --max-lateness the run did not
reproduce the trace and replay exits with code 3.

Prompts: token-id lists of exactly input_tokens on /v1/completions (default),
or text calibrated through the server's /tokenize on /v1/chat/completions
(--api chat, or a record's api column). Records sharing prefix_blocks or a
category get byte-identical prefixes. max_tokens = output_tokens with
ignore_eos and min_tokens (--no-vllm-extensions leaves those out).

The target (--target) is sim, the built-in simulator started in process
(the default); sim:KEY=VALUE,..., the simulator configured by the keys of
tokentrace sim's flags (max-num-seqs, preset, prefix-caching, ...), a fleet
included (replicas, router, prefill-replicas, decode-replicas, ...); or a
running server's URL (--url URL says the same). The results record the
simulator's configuration (replay.sim) as a spec --target takes.

Nothing is lost: finished requests go to OUT.journal.jsonl (fsync'd every
250ms) while the run goes; at the end it is converted to OUT and removed.
After a crash or SIGKILL, read the journal itself: it is a JSONL results file,
its last line maybe torn (tokentrace analyze --salvage OUT.journal.jsonl).
Ctrl-C stops sending, waits --drain for in-flight requests and writes
everything.

Distributed: run n replayers with --shard i/n (deterministic by session or
seq) and a shared --start-at; see deploy/ for a Kubernetes Indexed Job.`

// replayArgs are the replay command's flags as given, and its trace.
type replayArgs struct {
	o                                                     replay.Options
	trace, targetSpec                                     string
	targetSet                                             bool // --target given, if empty
	out, window, shard, startAt, apiKeyFile, journal, api string
	maxLateness                                           time.Duration
	maxFailed                                             float64
	keepJournal, quiet, simMetrics                        bool
	headers                                               headerFlag
	otlpListen, metricsURL, metricsOut                    string
	instanceLabel, roleLabel                              string
	otlpGrace, metricsInterval                            time.Duration
	background, metadata, modelMap                        headerFlag // repeatable, values may hold commas
	noDescribe, affinity                                  bool
	sessionHeader                                         string
	contextGrowth                                         bool
	sort                                                  sortFlags
	read                                                  readFlags
	// commandLine is the command line recorded in the results' metadata.
	commandLine string
}

// newReplayArgs are the flags' defaults.
func newReplayArgs() *replayArgs {
	o := replay.DefaultOptions()
	o.Terms = cliTerms{replayFlags}
	return &replayArgs{
		o: o, api: o.API, out: "results.parquet", shard: "0/1",
		maxLateness: replay.DefaultMaxLateness, maxFailed: replay.DefaultMaxFailed,
		otlpGrace: otlp.DefaultGrace, metricsInterval: scrape.DefaultInterval,
		sessionHeader: replay.DefaultSessionHeader, contextGrowth: true, simMetrics: true,
		sort: sortFlags{mib: traces.DefaultSortMemoryBytes >> 20},
		read: readFlags{o: traces.DefaultOpenOptions()},
	}
}

func replayCommand() *cli.Command {
	a := newReplayArgs()
	return &cli.Command{
		Name:        "replay",
		Usage:       "replay a trace against an OpenAI-compatible server with its arrival timing",
		UsageText:   replayUsageText,
		Description: replayDescription,
		Flags:       a.flags(),
		Action: func(c *cli.Context) error {
			pos, err := args(c, 1, 1, "TRACE")
			if err != nil {
				return err
			}
			a.trace, a.targetSet = pos[0], c.IsSet("target")
			a.commandLine = replayCommandLine(c, a.headers.v)
			return runReplay(c.Context, a, stdio(c))
		},
	}
}

// flags binds the command's flags to a.
func (a *replayArgs) flags() []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{Name: "target", Usage: "what to replay against: sim (the built-in simulator, in process), sim:KEY=VALUE,... (configured: sim:max-num-seqs=32, a fleet sim:replicas=4,router=prefix-aware) or a server's URL", DefaultText: "sim", Destination: &a.targetSpec},
		&cli.StringFlag{Name: "url", Usage: "server base URL, e.g. http://localhost:8000 (the same as --target URL)", Destination: &a.o.URL},
		&cli.StringFlag{Name: "model", Usage: "model name for every request (default: each record's model, else the server's first model)", Destination: &a.o.Model},
		&cli.StringFlag{Name: "out", Aliases: []string{"o"}, Value: a.out, Usage: "results file (.parquet, .jsonl, .jsonl.zst, .csv; - = stdout JSONL)", Destination: &a.out},
		&cli.StringFlag{Name: "api", Value: a.api, Usage: "endpoint for records without an api column: completions or chat", Destination: &a.api},
		&cli.BoolFlag{Name: "force-api", Usage: "send every record to --api, ignoring the api column", Destination: &a.o.ForceAPI},
		&cli.StringFlag{Name: "run", Value: a.o.Run, Usage: "run label; request ids are RUN-SEQ", Destination: &a.o.Run},
		&cli.Float64Flag{Name: "speed", Value: a.o.Speed, Usage: "time scale: 2 replays twice as fast", Destination: &a.o.Speed},
		&cli.StringFlag{Name: "window", Usage: "replay only arrivals in FROM,TO (e.g. 0s,60s; TO may be empty)", Destination: &a.window},
		&cli.IntFlag{Name: "max-concurrency", Usage: "cap in-flight requests (0 = none); delays show as lateness", Destination: &a.o.MaxConcurrency},
		&cli.IntFlag{Name: "warmup", Usage: "send N unrecorded warm-up requests before the clock starts", Destination: &a.o.Warmup},
		&cli.BoolFlag{Name: "no-preflight", Usage: "skip the check before the clock starts (one 1-token request that must not be refused)", Destination: &a.o.NoPreflight},
		&cli.DurationFlag{Name: "duration", Usage: "stop sending after this long (0 = whole trace)", Destination: &a.o.Duration},
		&cli.StringFlag{Name: "sessions", Value: a.o.Sessions, Usage: "open: every call at its recorded time; closed: a call waits for the calls it depends on (previous turn, parent_seq, after_seqs), then its think time", Destination: &a.o.Sessions},
		&cli.DurationFlag{Name: "max-think", Usage: "--sessions closed: cap each think time (after --speed) at this; 0 = no cap", Destination: &a.o.MaxThink},
		&cli.BoolFlag{Name: "session-affinity", Usage: "send each call's session id in --session-header, for session-affine routers (llm-d, gateway inference extension)", Destination: &a.affinity},
		&cli.StringFlag{Name: "session-header", Value: a.sessionHeader, Usage: "--session-affinity: the header name", Destination: &a.sessionHeader},
		&cli.StringFlag{Name: "replica-header", Usage: "response header naming the replica that served each request, kept in the replica column (e.g. target-pod behind AIBrix's gateway; tokentrace sim's X-Sim-Replica is read without it)", Destination: &a.o.ReplicaHeader},
		&cli.StringFlag{Name: "prefill-replica-header", Usage: "response header naming the replica that prefilled a disaggregated request (prefill_replica column); the engine timings of such a response are read as the decode side's", Destination: &a.o.PrefillReplicaHeader},
		&cli.BoolFlag{Name: "context-growth", Value: a.contextGrowth, Usage: "--sessions closed: send a turn that follows exactly one turn as that turn's prompt + the server's output + new tokens (=false: prompts from the trace's lengths and prefix blocks only)", Destination: &a.contextGrowth},
		&cli.BoolFlag{Name: "strict-sessions", Usage: "--sessions closed: a session whose dependencies cannot be replayed (cycle, missing call, another session's call) is an error instead of being sent open loop", Destination: &a.o.StrictSessions},
		&cli.StringFlag{Name: "shard", Value: a.shard, Usage: "replay shard i of n (i/n)", Destination: &a.shard},
		&cli.StringFlag{Name: "start-at", Usage: "start the clock at this RFC3339 wall time (shards start together)", Destination: &a.startAt},
		&cli.IntFlag{Name: "clock-probes", Value: a.o.ClockProbes, Usage: "with --start-at: GET requests (at most one a second before it) that bracket the target's clock offset from its Date header, recorded in the results (0 = none)", Destination: &a.o.ClockProbes},
		&cli.DurationFlag{Name: "timeout", Value: a.o.Timeout, Usage: "per-request timeout", Destination: &a.o.Timeout},
		&cli.DurationFlag{Name: "drain", Value: a.o.Drain, Usage: "after Ctrl-C or --duration, wait this long for in-flight requests", Destination: &a.o.Drain},
		&cli.DurationFlag{Name: "max-lateness", Value: a.maxLateness, Usage: "exit 3 when lateness p99 exceeds this", Destination: &a.maxLateness},
		&cli.Float64Flag{Name: "max-failed", Value: a.maxFailed, Usage: "exit 3 when more than this share of the sent requests failed (0 to 1)", Destination: &a.maxFailed},
		&cli.BoolFlag{Name: "no-vllm-extensions", Usage: "do not send ignore_eos and min_tokens", Destination: &a.o.NoVLLMExtensions},
		&cli.BoolFlag{Name: "continuous-usage", Usage: "ask for usage on every chunk (exact tokens per chunk)", Destination: &a.o.ContinuousUsage},
		&cli.GenericFlag{Name: "header", Value: &a.headers, Usage: `extra request header "Name: value" (repeatable)`},
		&cli.StringFlag{Name: "api-key-file", Usage: "file holding a bearer token (never logged or stored)", Destination: &a.apiKeyFile},
		&cli.IntFlag{Name: "block-size", Value: a.o.BlockSize, Usage: "tokens per prefix_blocks entry when the trace metadata does not say", Destination: &a.o.BlockSize},
		&cli.BoolFlag{Name: "no-calibrate", Usage: "skip the /tokenize calibration of chat prompts", Destination: &a.o.NoCalibrate},
		&cli.StringFlag{Name: "journal", Usage: "journal path (default: OUT.journal.jsonl; none for - )", Destination: &a.journal},
		&cli.BoolFlag{Name: "keep-journal", Usage: "keep the journal after writing OUT", Destination: &a.keepJournal},
		&cli.BoolFlag{Name: "no-realtime", Usage: "do not ask for the real-time class (SCHED_FIFO) for the dispatcher thread (default: ask; where not permitted, say so and go on)", Destination: &a.o.NoRealtime},
		&cli.BoolFlag{Name: "net-http", Usage: "use Go's net/http client even for http:// targets (default: replay's own lighter HTTP/1.1 client)", Destination: &a.o.NetHTTP},
		&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no progress (default: a line rewritten every second on a terminal, a plain line every 10s otherwise)", Destination: &a.quiet},
		&cli.StringFlag{Name: "otlp-listen", Usage: "run an OTLP/HTTP receiver here (e.g. 127.0.0.1:4318) for the server's llm_request spans and join them by request id", Destination: &a.otlpListen},
		&cli.DurationFlag{Name: "otlp-grace", Value: a.otlpGrace, Usage: "wait this long after the run for late spans", Destination: &a.otlpGrace},
		&cli.StringFlag{Name: "metrics-url", Usage: "scrape this Prometheus /metrics endpoint during the run (default with the built-in simulator: its /metrics)", Destination: &a.metricsURL},
		&cli.StringFlag{Name: "metrics-instance-label", Usage: "label that tells a fleet's replicas apart on the --metrics-url series, e.g. instance behind a Prometheus federation endpoint (default: pod, as tokentrace sim's fleet labels them; series without it are one server's)", Destination: &a.instanceLabel},
		&cli.StringFlag{Name: "metrics-role-label", Usage: "label holding each replica's role (its pool: prefill, decode) on the --metrics-url series (default: role)", Destination: &a.roleLabel},
		&cli.DurationFlag{Name: "metrics-interval", Value: a.metricsInterval, Usage: "scrape interval", Destination: &a.metricsInterval},
		&cli.StringFlag{Name: "metrics-out", Usage: "metrics time series file (default: beside OUT, e.g. results.parquet → results.metrics.parquet)", Destination: &a.metricsOut},
		&cli.BoolFlag{Name: "sim-per-request-metrics", Value: a.simMetrics, Usage: "built-in simulator only: return vLLM's per-request metrics", Destination: &a.simMetrics},
		&cli.GenericFlag{Name: "background", Value: &a.background, Usage: "closed-loop load beside the trace, e.g. 'class=batch,concurrency=256,input=1024,output=256' (repeatable); trace records get class interactive"},
		&cli.StringFlag{Name: "label", Usage: "name of this run, stored in the results metadata (run.label)", Destination: &a.o.Label},
		&cli.GenericFlag{Name: "metadata", Value: &a.metadata, Usage: "key=value stored in the results metadata as run.meta.KEY (repeatable)"},
		&cli.GenericFlag{Name: "model-map", Value: &a.modelMap, Usage: "prod-name=served-name (repeatable); unmapped names use --model"},
		&cli.BoolFlag{Name: "no-describe-server", Usage: "do not store the server's /v1/models, /version and /metrics info in the metadata", Destination: &a.noDescribe},
	}, append(a.sort.flags(), a.read.flags()...)...)
}
