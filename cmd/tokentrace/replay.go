package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/tokentrace/tokentrace/replay"
	"github.com/tokentrace/tokentrace/replay/otlp"
	"github.com/tokentrace/tokentrace/replay/scrape"
	"github.com/tokentrace/tokentrace/replay/sim"
	"github.com/tokentrace/tokentrace/traces"
	"github.com/urfave/cli/v2"
)

func replayCommand() *cli.Command {
	o := replay.DefaultOptions()
	var (
		out, window, shard, startAt, apiKeyFile, journal, api string
		maxLateness                                           = replay.DefaultMaxLateness
		maxFailed                                             = replay.DefaultMaxFailed
		keepJournal, quiet, simMetrics                        bool
		headers                                               headerFlag
		otlpListen, metricsURL, metricsOut                    string
		otlpGrace                                             = otlp.DefaultGrace
		metricsInterval                                       = scrape.DefaultInterval
		background, metadata, modelMap                        headerFlag // unsplit repeatable flags (issue 9)
		noDescribe, affinity                                  bool
		sessionHeader                                         = replay.DefaultSessionHeader
		contextGrowth                                         = true
		sf                                                    = sortFlags{mib: traces.DefaultSortMemoryBytes >> 20}
	)
	api = o.API
	var rf readFlags
	return &cli.Command{
		Name:  "replay",
		Usage: "replay a trace against an OpenAI-compatible server with its arrival timing",
		UsageText: `tokentrace replay [flags] TRACE

Examples:
  tokentrace replay --url http://localhost:8000 --model meta-llama/Llama-3.1-8B-Instruct --out results.parquet trace.parquet
  tokentrace replay --speed 10 --window 0s,60s --out results.parquet trace.parquet     # built-in simulator
  tokentrace replay --url http://vllm:8000 --shard 2/8 --start-at 2026-11-22T03:00:00Z --out results-2.parquet trace.parquet`,
		Description: `replay sends every record of TRACE to the server at its recorded arrival time
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

Without --url, replay starts the built-in simulator in-process.

Nothing is lost: finished requests go to OUT.journal.jsonl (fsync'd every
250ms) while the run goes; at the end it is converted to OUT and removed.
After a crash or SIGKILL, read the journal itself: it is a JSONL results file,
its last line maybe torn (tokentrace analyze --salvage OUT.journal.jsonl).
Ctrl-C stops sending, waits --drain for in-flight requests and writes
everything.

Distributed: run n replayers with --shard i/n (deterministic by session or
seq) and a shared --start-at; see deploy/ for a Kubernetes Indexed Job.`,
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "url", Usage: "server base URL, e.g. http://localhost:8000 (default: start the built-in simulator)", Destination: &o.URL},
			&cli.StringFlag{Name: "model", Usage: "model name for every request (default: each record's model, else the server's first model)", Destination: &o.Model},
			&cli.StringFlag{Name: "out", Aliases: []string{"o"}, Value: "results.parquet", Usage: "results file (.parquet, .jsonl, .jsonl.zst, .csv; - = stdout JSONL)", Destination: &out},
			&cli.StringFlag{Name: "api", Value: api, Usage: "endpoint for records without an api column: completions or chat", Destination: &api},
			&cli.BoolFlag{Name: "force-api", Usage: "send every record to --api, ignoring the api column", Destination: &o.ForceAPI},
			&cli.StringFlag{Name: "run", Value: o.Run, Usage: "run label; request ids are RUN-SEQ", Destination: &o.Run},
			&cli.Float64Flag{Name: "speed", Value: o.Speed, Usage: "time scale: 2 replays twice as fast", Destination: &o.Speed},
			&cli.StringFlag{Name: "window", Usage: "replay only arrivals in FROM,TO (e.g. 0s,60s; TO may be empty)", Destination: &window},
			&cli.IntFlag{Name: "max-concurrency", Usage: "cap in-flight requests (0 = none); delays show as lateness", Destination: &o.MaxConcurrency},
			&cli.IntFlag{Name: "warmup", Usage: "send N unrecorded warm-up requests before the clock starts", Destination: &o.Warmup},
			&cli.BoolFlag{Name: "no-preflight", Usage: "skip the check before the clock starts (one 1-token request that must not be refused)", Destination: &o.NoPreflight},
			&cli.DurationFlag{Name: "duration", Usage: "stop sending after this long (0 = whole trace)", Destination: &o.Duration},
			&cli.StringFlag{Name: "sessions", Value: o.Sessions, Usage: "open: every call at its recorded time; closed: a call waits for the calls it depends on (previous turn, parent_seq, after_seqs), then its think time", Destination: &o.Sessions},
			&cli.DurationFlag{Name: "max-think", Usage: "--sessions closed: cap each think time (after --speed) at this; 0 = no cap", Destination: &o.MaxThink},
			&cli.BoolFlag{Name: "session-affinity", Usage: "send each call's session id in --session-header, for session-affine routers (llm-d, gateway inference extension)", Destination: &affinity},
			&cli.StringFlag{Name: "session-header", Value: sessionHeader, Usage: "--session-affinity: the header name", Destination: &sessionHeader},
			&cli.BoolFlag{Name: "context-growth", Value: contextGrowth, Usage: "--sessions closed: send a turn that follows exactly one turn as that turn's prompt + the server's output + new tokens (=false: prompts from the trace's lengths and prefix blocks only)", Destination: &contextGrowth},
			&cli.BoolFlag{Name: "strict-sessions", Usage: "--sessions closed: a session whose dependencies cannot be replayed (cycle, missing call, another session's call) is an error instead of being sent open loop", Destination: &o.StrictSessions},
			&cli.StringFlag{Name: "shard", Value: "0/1", Usage: "replay shard i of n (i/n)", Destination: &shard},
			&cli.StringFlag{Name: "start-at", Usage: "start the clock at this RFC3339 wall time (shards start together)", Destination: &startAt},
			&cli.IntFlag{Name: "clock-probes", Usage: "with --start-at: GET requests (at most one a second before it) that bracket the target's clock offset from its Date header, recorded in the results (0 = 12, -1 = none)", Destination: &o.ClockProbes},
			&cli.DurationFlag{Name: "timeout", Value: o.Timeout, Usage: "per-request timeout", Destination: &o.Timeout},
			&cli.DurationFlag{Name: "drain", Value: o.Drain, Usage: "after Ctrl-C or --duration, wait this long for in-flight requests", Destination: &o.Drain},
			&cli.DurationFlag{Name: "max-lateness", Value: maxLateness, Usage: "exit 3 when lateness p99 exceeds this", Destination: &maxLateness},
			&cli.Float64Flag{Name: "max-failed", Value: maxFailed, Usage: "exit 3 when more than this share of the sent requests failed (0 to 1)", Destination: &maxFailed},
			&cli.BoolFlag{Name: "no-vllm-extensions", Usage: "do not send ignore_eos and min_tokens", Destination: &o.NoVLLMExtensions},
			&cli.BoolFlag{Name: "continuous-usage", Usage: "ask for usage on every chunk (exact tokens per chunk)", Destination: &o.ContinuousUsage},
			&cli.GenericFlag{Name: "header", Value: &headers, Usage: `extra request header "Name: value" (repeatable)`},
			&cli.StringFlag{Name: "api-key-file", Usage: "file holding a bearer token (never logged or stored)", Destination: &apiKeyFile},
			&cli.IntFlag{Name: "block-size", Value: o.BlockSize, Usage: "tokens per prefix_blocks entry when the trace metadata does not say", Destination: &o.BlockSize},
			&cli.BoolFlag{Name: "no-calibrate", Usage: "skip the /tokenize calibration of chat prompts", Destination: &o.NoCalibrate},
			&cli.StringFlag{Name: "journal", Usage: "journal path (default: OUT.journal.jsonl; none for - )", Destination: &journal},
			&cli.BoolFlag{Name: "keep-journal", Usage: "keep the journal after writing OUT", Destination: &keepJournal},
			&cli.BoolFlag{Name: "no-realtime", Usage: "do not ask for the real-time class (SCHED_FIFO) for the dispatcher thread (default: ask; where not permitted, say so and go on)", Destination: &o.NoRealtime},
			&cli.BoolFlag{Name: "net-http", Usage: "use Go's net/http client even for http:// targets (default: replay's own lighter HTTP/1.1 client)", Destination: &o.NetHTTP},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no progress (default: a line rewritten every second on a terminal, a plain line every 10s otherwise)", Destination: &quiet},
			&cli.StringFlag{Name: "otlp-listen", Usage: "run an OTLP/HTTP receiver here (e.g. 127.0.0.1:4318) for the server's llm_request spans and join them by request id", Destination: &otlpListen},
			&cli.DurationFlag{Name: "otlp-grace", Value: otlpGrace, Usage: "wait this long after the run for late spans", Destination: &otlpGrace},
			&cli.StringFlag{Name: "metrics-url", Usage: "scrape this Prometheus /metrics endpoint during the run (default with the built-in simulator: its /metrics)", Destination: &metricsURL},
			&cli.DurationFlag{Name: "metrics-interval", Value: metricsInterval, Usage: "scrape interval", Destination: &metricsInterval},
			&cli.StringFlag{Name: "metrics-out", Usage: "metrics time series file (default: beside OUT, e.g. results.parquet → results.metrics.parquet)", Destination: &metricsOut},
			&cli.BoolFlag{Name: "sim-per-request-metrics", Value: true, Usage: "built-in simulator only: return vLLM's per-request metrics", Destination: &simMetrics},
			&cli.GenericFlag{Name: "background", Value: &background, Usage: "closed-loop load beside the trace, e.g. 'class=batch,concurrency=256,input=1024,output=256' (repeatable); trace records get class interactive"},
			&cli.StringFlag{Name: "label", Usage: "name of this run, stored in the results metadata (run.label)", Destination: &o.Label},
			&cli.GenericFlag{Name: "metadata", Value: &metadata, Usage: "key=value stored in the results metadata as run.meta.KEY (repeatable)"},
			&cli.GenericFlag{Name: "model-map", Value: &modelMap, Usage: "prod-name=served-name (repeatable); unmapped names use --model"},
			&cli.BoolFlag{Name: "no-describe-server", Usage: "do not store the server's /v1/models, /version and /metrics info in the metadata", Destination: &noDescribe},
		}, append(sf.flags(), rf.flags()...)...),
		Action: func(c *cli.Context) error {
			a, err := args(c, 1, 1, "TRACE")
			if err != nil {
				return err
			}
			io := stdio(c)
			o.API = api
			if window != "" {
				if o.WindowFrom, o.WindowTo, err = replay.ParseWindow(window); err != nil {
					return replayUsageError(err)
				}
			}
			if o.ShardIndex, o.ShardCount, err = replay.ParseShard(shard); err != nil {
				return replayUsageError(err)
			}
			if startAt != "" {
				if o.StartAt, err = time.Parse(time.RFC3339, startAt); err != nil {
					return usageErrorf("--start-at: want RFC3339 (2026-11-22T03:00:00Z), got %q", startAt)
				}
			}
			if o.Headers, err = parseHeaders(headers.v); err != nil {
				return usageErrorf("%v", err)
			}
			if apiKeyFile != "" {
				b, err := os.ReadFile(apiKeyFile)
				if err != nil {
					return usageErrorf("--api-key-file: cannot read %s", apiKeyFile)
				}
				o.APIKey = strings.TrimSpace(string(b))
				if o.APIKey == "" {
					return usageErrorf("--api-key-file: %s is empty", apiKeyFile)
				}
			}
			if maxLateness <= 0 {
				return usageErrorf("--max-lateness: must be > 0")
			}
			if !(maxFailed >= 0 && maxFailed <= 1) {
				return usageErrorf("--max-failed: want a share from 0 to 1, got %v", maxFailed)
			}
			if err := runRecordOptions(&o, background.v, metadata.v, modelMap.v, !noDescribe); err != nil {
				return err
			}
			if affinity {
				o.SessionHeader = sessionHeader
			}
			o.NoContextGrowth = !contextGrowth
			// Bad values fail before the trace is read or anything starts
			// (the built-in simulator's URL is not known yet).
			probe := o
			if probe.URL == "" {
				probe.URL = "http://built-in"
			}
			if err := probe.Validate(); err != nil {
				return replayUsageError(err)
			}
			if metricsInterval <= 0 {
				return usageErrorf("--metrics-interval: must be > 0")
			}
			co, err := sf.options()
			if err != nil {
				return err
			}
			src, err := newTraceIn(c, &rf, "replay", "replay sorts the trace by arrival in memory").source(a[0])
			if err != nil {
				return err
			}
			// One pass over the trace plans the run; the run reads it
			// again, a little ahead of the schedule.
			plan, err := replay.Scan(c.Context, src, o)
			if err != nil {
				return errors.New(flagNames(err, replayFlags))
			}
			longest := plan.Longest // let the simulator take the trace's longest request
			so := sim.DefaultOptions()
			so.PerRequestMetrics = simMetrics
			tgt, err := replay.StartTarget(c.Context, replay.TargetOptions{
				URL: o.URL, Sim: &so, LongestRequest: longest,
				MetricsURL: metricsURL, MetricsInterval: metricsInterval,
				// The built-in simulator is scraped when results go to a file,
				// so analyze can show the server's queue beside the tail.
				ScrapeBuiltin: metricsOut != "" || out != "-",
				OTLPListen:    otlpListen, OTLPGrace: otlpGrace,
			})
			if err != nil {
				return err
			}
			defer tgt.Close()
			tgt.Apply(&o)
			if tgt.OTLPAddr != "" {
				fmt.Fprintf(io.err, "tokentrace replay: OTLP/HTTP receiver at http://%s%s\n", tgt.OTLPAddr, otlp.TracesPath)
			}
			if tgt.Builtin {
				fmt.Fprintf(io.err, "tokentrace replay: no --url; replaying against the built-in simulator at %s (model %s)\n", tgt.URL, o.Model)
			}
			if tgt.MetricsURL != "" && metricsOut == "" {
				if out == "-" {
					return usageErrorf("--metrics-out: required when --out is -")
				}
				metricsOut = traces.SamplesPathFor(out) // where analyze looks for it
			}
			if err := o.Validate(); err != nil {
				return replayUsageError(err)
			}
			if journal == "" && out != "-" {
				journal = replay.JournalPath(out)
			}
			o.Journal = journal
			// Results stream to the journal and leave memory, unless spans
			// must be joined to them at the end.
			o.RecordsInJournal = journal != "" && tgt.OTLPAddr == ""
			// Progress: one line rewritten every second on a terminal, a
			// plain line every 10 s in logs and pipes.
			if !quiet {
				o.Progress = io.err
				if !isTerminal(io.err) {
					o.Progress = prefixWriter{io.err, "tokentrace "}
					o.ProgressLines, o.ProgressPeriod = true, 10*time.Second
				}
			}
			o.Log = prefixWriter{io.err, "tokentrace "}
			// Process-wide knobs are the CLI's to set, for the run only: the
			// results are written with the collector's usual pace.
			restore := replay.TuneProcess(1)
			res, runErr := plan.Run(c.Context, plan.Meta, o)
			restore()
			if res == nil {
				return errors.New(flagNames(runErr, replayFlags))
			}
			samples, unmatched := tgt.Finish(c.Context, res)
			if tgt.MetricsURL != "" {
				sm := res.Meta
				sm.Source = "replay-metrics"
				if err := traces.WriteSamples(metricsOut, sm, samples); err != nil {
					fmt.Fprintf(io.err, "tokentrace replay: %v\n", err)
				}
			}
			if unmatched > 0 {
				fmt.Fprintf(io.err, "tokentrace replay: %d successful requests have no OTLP span (left as not reported)\n", unmatched)
			}
			res.Meta.Command = replayCommandLine(c, headers.v)
			w := replayWrite{out: out, journal: journal, keepJournal: keepJournal, co: co}
			if err := w.write(c, res, runErr); err != nil {
				return err
			}
			return replayValid(&res.Summary, maxFailed, maxLateness)
		},
	}
}
