package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/tokentrace/tokentrace/sim"
	"github.com/urfave/cli/v2"
)

const simUsageText = `tokentrace sim [flags]

Examples:
  tokentrace sim --listen 127.0.0.1:8000
  tokentrace sim --preset phi4-mini-l4 --truth-out truth.parquet
  tokentrace sim --fail-rate 0.05 --fail-status 429 --stream-error-rate 0.01
  tokentrace sim --replicas 4 --router prefix-aware --replica-config replica-3.step-fixed=24ms
  tokentrace sim --prefill-replicas 2 --decode-replicas 6 --kv-transfer-latency 2ms --kv-transfer-bandwidth 25GB/s
  tokentrace sim --config twin.conf --replicas 4 --router prefix-aware`

var simDescription = `sim serves POST /v1/completions, POST /v1/chat/completions, POST /tokenize,
GET /v1/models, GET /health and GET /metrics like vLLM's OpenAI-compatible
server, backed by a simulated continuous-batching engine (chunked prefill,
KV blocks with prefix caching, preemption). It prints its URL, runs until
Ctrl-C and then writes --truth-out: one row per request with the engine's
own queue, prefill and decode times.

Presets: ` + strings.Join(sim.PresetNames(), ", ") + `. A preset sets the capacity and
step-time flags; flags given explicitly override it.

--replicas N serves a fleet instead: N engines behind one endpoint and a
router (` + strings.Join(sim.Routers, ", ") + `); --prefill-replicas and
--decode-replicas a disaggregated one whose decode replicas pull the KV
cache over a shared link. Every engine flag applies to every replica;
--replica-config SCOPE.KEY=VALUE sets one pool (prefill, decode) or one
replica (replica-3, decode-0). /metrics has every replica with pod and
role labels, /replicas/NAME/metrics one of them.

--config FILE reads a simulator configuration file: a twin of your own
server that sim fit wrote, or keys you keep in one; flags given explicitly
override it. sim fit and sim check make and check a twin.`

func simCommand() *cli.Command {
	o := sim.DefaultOptions()
	preset := sim.DefaultPreset
	// Capacity and step-time flags default to "unset" so --preset can fill
	// them; explicit flags override the preset.
	var maxSeqs, maxBatched, blocks, blockSize, maxLen int
	var replicaConfig headerFlag
	var configFile string
	return &cli.Command{
		Name:        "sim",
		Usage:       "run the vLLM-like engine simulator behind the OpenAI API",
		UsageText:   simUsageText,
		Description: simDescription,
		Subcommands: []*cli.Command{simFitCommand(), simCheckCommand()},
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "config", Usage: "read a simulator configuration file (sim fit's twin); explicit flags override it", Destination: &configFile},
			&cli.StringFlag{Name: "listen", Value: o.Listen, Destination: &o.Listen, Usage: "address to serve on"},
			&cli.StringFlag{Name: "model", Value: o.Model, Destination: &o.Model, Usage: "serve only this model name (a request naming another gets vLLM's 404); without it every request is served whatever model it names, and /v1/models lists sim-PRESET", DefaultText: "any; listed as sim-PRESET, sim-llama3-8b for the default preset"},
			&cli.StringFlag{Name: "preset", Value: preset, Destination: &preset, Usage: "deployment preset: " + strings.Join(sim.PresetNames(), ", ")},
			&cli.IntFlag{Name: "max-num-seqs", Destination: &maxSeqs, Usage: "max running sequences", DefaultText: "preset's"},
			&cli.IntFlag{Name: "max-num-batched-tokens", Destination: &maxBatched, Usage: "token budget per step", DefaultText: "preset's"},
			&cli.IntFlag{Name: "num-gpu-blocks", Destination: &blocks, Usage: "KV cache blocks", DefaultText: "preset's"},
			&cli.IntFlag{Name: "block-size", Destination: &blockSize, Usage: "tokens per KV block", DefaultText: "preset's"},
			&cli.IntFlag{Name: "max-model-len", Destination: &maxLen, Usage: "context length", DefaultText: "preset's"},
			&cli.BoolFlag{Name: "no-prefix-caching", Destination: &o.DisablePrefixCaching, Usage: "disable prefix caching"},
			&cli.IntFlag{Name: "max-num-queued-reqs", Destination: &o.MaxQueuedRequests, Usage: "refuse with 503 beyond this many waiting+running requests (0 = unbounded)"},
			&cli.StringFlag{Name: "policy", Value: o.Policy, Destination: &o.Policy, Usage: "scheduling policy: fcfs or priority"},
			&cli.DurationFlag{Name: "step-fixed", Usage: "fixed cost per engine step", DefaultText: "preset's"},
			&cli.DurationFlag{Name: "prefill-per-token", Usage: "cost per prefill token", DefaultText: "preset's"},
			&cli.DurationFlag{Name: "decode-per-seq", Usage: "cost per decoding sequence", DefaultText: "preset's"},
			&cli.DurationFlag{Name: "attn-per-context-token", Usage: "cost per context token read", DefaultText: "preset's"},
			&cli.IntFlag{Name: "stream-interval", Value: o.StreamInterval, Destination: &o.StreamInterval, Usage: "tokens per chunk after the first"},
			&cli.IntFlag{Name: "mean-output-tokens", Value: o.MeanOutputTokens, Destination: &o.MeanOutputTokens, Usage: "mean output length without ignore_eos"},
			&cli.Int64Flag{Name: "seed", Value: o.Seed, Destination: &o.Seed, Usage: "seed for output lengths, faults and ids"},
			&cli.BoolFlag{Name: "virtual", Destination: &o.Virtual, Usage: "never sleep: virtual engine clock (tests, fast demos)"},
			&cli.BoolFlag{Name: "per-request-metrics", Aliases: []string{"enable-per-request-metrics"}, Value: true, Destination: &o.PerRequestMetrics, Usage: "add vLLM's per-request metrics object (replay matches server timings with it)"},
			&cli.BoolFlag{Name: "request-id-headers", Aliases: []string{"enable-request-id-headers"}, Destination: &o.RequestIDHeaders, Usage: "echo X-Request-Id"},
			&cli.BoolFlag{Name: "prompt-tokens-details", Value: o.PromptTokensDetails, Destination: &o.PromptTokensDetails, Usage: "report usage.prompt_tokens_details.cached_tokens"},
			&cli.BoolFlag{Name: "flat-errors", Destination: &o.FlatErrors, Usage: "use vLLM's pre-0.10.1 flat error body"},
			&cli.Float64Flag{Name: "fail-rate", Destination: &o.FailRate, Usage: "probability of refusing a request with --fail-status"},
			&cli.IntFlag{Name: "fail-status", Value: o.FailStatus, Destination: &o.FailStatus, Usage: "status of injected failures: 500, 503 or 429"},
			&cli.Float64Flag{Name: "disconnect-rate", Destination: &o.DisconnectRate, Usage: "probability of cutting a stream mid-way"},
			&cli.Float64Flag{Name: "stream-error-rate", Destination: &o.StreamErrorRate, Usage: "probability of a data: {\"error\":...} event mid-stream"},
			&cli.Float64Flag{Name: "stall-rate", Destination: &o.StallRate, Usage: "probability of a stream pausing --stall-duration"},
			&cli.DurationFlag{Name: "stall-duration", Value: o.StallDuration, Destination: &o.StallDuration, Usage: "pause of a stalled stream"},
			&cli.StringFlag{Name: "otlp-traces-endpoint", Destination: &o.OTLPTracesEndpoint, Usage: "export llm_request spans as OTLP/HTTP protobuf to this URL"},
			&cli.StringFlag{Name: "truth-out", Destination: &o.TruthOut, Usage: "write the engine's per-request truth here on exit (.parquet, .jsonl, .csv, ...)"},
			&cli.IntFlag{Name: "replicas", Usage: "serve a fleet of N aggregated replicas behind a router", DefaultText: "one engine, no router"},
			&cli.StringFlag{Name: "router", Value: o.Fleet.Router, Usage: "fleet router policy: " + strings.Join(sim.Routers, ", ")},
			&cli.IntFlag{Name: "prefill-replicas", Usage: "serve a disaggregated fleet: its prefill pool's size (with --decode-replicas)"},
			&cli.IntFlag{Name: "decode-replicas", Usage: "serve a disaggregated fleet: its decode pool's size (with --prefill-replicas)"},
			&cli.DurationFlag{Name: "kv-transfer-latency", Value: o.Fleet.KVTransferLatency, Usage: "disaggregated fleet: fixed cost of a KV pull"},
			&cli.DurationFlag{Name: "kv-transfer-per-token", Value: o.Fleet.KVTransferPerToken, Usage: "disaggregated fleet: cost per token of a KV pull on an idle link"},
			&cli.StringFlag{Name: "kv-transfer-bandwidth", Value: "0", Usage: "disaggregated fleet: bytes/s all pulls share (25GB/s, 3GiB/s; 0 = no cap)"},
			&cli.IntFlag{Name: "kv-transfer-bytes-per-token", Value: o.Fleet.KVTransferBytesPerToken, Usage: "disaggregated fleet: KV cache bytes per token"},
			&cli.GenericFlag{Name: "replica-config", Value: &replicaConfig, Usage: "SCOPE.KEY=VALUE for one pool or replica of a fleet, e.g. replica-3.step-fixed=24ms (repeatable)"},
		},
		Action: func(c *cli.Context) error {
			if _, err := args(c, 0, 0, "none"); err != nil {
				return err
			}
			if err := sim.ApplyPreset(&o, preset); err != nil {
				return usageErrorf("--preset: %w", err)
			}
			if !c.IsSet("model") {
				// Like the built-in target, a standalone simulator takes
				// the trace's production model names as they are.
				o.Model, o.AnyModel = sim.PresetModel(preset), true
			}
			if configFile != "" {
				if err := sim.ApplyConfig(&o, "config="+configFile); err != nil {
					return usageErrorf("--config: %w", err)
				}
			}
			setInt := func(name string, v int, dst *int) {
				if c.IsSet(name) {
					*dst = v
				}
			}
			setInt("max-num-seqs", maxSeqs, &o.MaxNumSeqs)
			setInt("max-num-batched-tokens", maxBatched, &o.MaxNumBatchedTokens)
			setInt("num-gpu-blocks", blocks, &o.NumGPUBlocks)
			setInt("block-size", blockSize, &o.BlockSize)
			setInt("max-model-len", maxLen, &o.MaxModelLen)
			for name, dst := range map[string]*time.Duration{"step-fixed": &o.StepFixed, "prefill-per-token": &o.PrefillPerToken,
				"decode-per-seq": &o.DecodePerSeq, "attn-per-context-token": &o.AttnPerContextToken} {
				if c.IsSet(name) {
					*dst = c.Duration(name)
				}
			}
			if err := sim.ApplyConfig(&o, fleetConfig(c, replicaConfig.v)); err != nil {
				return usageErrorf("sim: %w", err)
			}
			srv, err := sim.Start(c.Context, o)
			if err != nil {
				return err
			}
			out := stdio(c)
			fmt.Fprintln(out.out, srv.URL)
			served := fmt.Sprintf("model %q", o.Model)
			if o.AnyModel {
				served = fmt.Sprintf("any model a request names (listed as %q; --model serves one name only)", o.Model)
			}
			what := ""
			if o.IsFleet() {
				what = fmt.Sprintf(" on %d replicas (%s), router %s", len(srv.Replicas()), strings.Join(srv.Replicas(), ", "), o.Fleet.Router)
			}
			fmt.Fprintf(out.err, "tokentrace sim: serving %s (preset %s)%s at %s; Ctrl-C to stop\n", served, o.Preset, what, srv.URL)
			<-c.Context.Done()
			if err := srv.Close(); err != nil {
				return err
			}
			if o.TruthOut != "" {
				fmt.Fprintf(out.err, "tokentrace sim: wrote %d truth rows to %s\n", len(srv.Truth()), o.TruthOut)
			}
			return nil
		},
	}
}

// fleetConfig is the fleet flags that were set, and --replica-config's, as
// configuration keys: sim.ApplyConfig checks them together.
func fleetConfig(c *cli.Context, replicaConfig []string) string {
	var keys []string
	for _, name := range []string{"replicas", "router", "prefill-replicas", "decode-replicas", "kv-transfer-latency",
		"kv-transfer-per-token", "kv-transfer-bandwidth", "kv-transfer-bytes-per-token"} {
		if c.IsSet(name) {
			keys = append(keys, name+"="+fmt.Sprint(c.Value(name)))
		}
	}
	return strings.Join(append(keys, replicaConfig...), ",")
}
