package main

// helpLayout places a command's flags: top first, without a heading, then
// each group under its name. A command with a layout places every flag
// (TestHelpFirstScreen checks it); one without lists its flags as defined.
type helpLayout struct {
	top    []string
	groups []helpGroup
}

type helpGroup struct {
	name  string
	flags []string
}

// helpExamples is how many examples the first screen shows.
const helpExamples = 3

// helpLayouts are the layouts of the commands with too many flags for one
// screen, by command path.
var helpLayouts = map[string]helpLayout{
	"replay": {
		top: []string{"target", "url", "model", "out", "speed", "window", "duration", "max-concurrency", "max-lateness", "quiet"},
		groups: []helpGroup{
			{"Requests", []string{"api", "force-api", "no-vllm-extensions", "continuous-usage", "header", "api-key-file", "model-map", "block-size", "no-calibrate", "timeout", "warmup", "no-preflight", "background"}},
			{"Sessions", []string{"sessions", "max-think", "session-affinity", "session-header", "context-growth", "strict-sessions"}},
			{"Several replayers", []string{"shard", "start-at", "clock-probes"}},
			{"Run control", []string{"run", "drain", "max-failed", "journal", "keep-journal", "no-realtime", "net-http"}},
			{"Server-side measures", []string{"replica-header", "prefill-replica-header", "otlp-listen", "otlp-grace", "metrics-url", "metrics-instance-label", "metrics-role-label", "metrics-interval", "metrics-out", "sim-per-request-metrics", "no-describe-server"}},
			{"Results metadata", []string{"label", "metadata"}},
			{"Input and output files", []string{"sort-memory-mib", "temp-dir", "strict", "salvage", "max-line-mib"}},
		},
	},
	"sim": {
		top: []string{"listen", "preset", "config", "model", "replicas", "router", "truth-out", "virtual", "seed"},
		groups: []helpGroup{
			{"Engine", []string{"max-num-seqs", "max-num-batched-tokens", "num-gpu-blocks", "block-size", "max-model-len", "no-prefix-caching", "max-num-queued-reqs", "policy", "stream-interval", "mean-output-tokens"}},
			{"Step costs", []string{"step-fixed", "prefill-per-token", "decode-per-seq", "attn-per-context-token"}},
			{"Fleet", []string{"prefill-replicas", "decode-replicas", "kv-transfer-latency", "kv-transfer-per-token", "kv-transfer-bandwidth", "kv-transfer-bytes-per-token", "replica-config"}},
			{"API behaviour", []string{"per-request-metrics", "request-id-headers", "prompt-tokens-details", "flat-errors", "otlp-traces-endpoint"}},
			{"Faults", []string{"fail-rate", "fail-status", "disconnect-rate", "stream-error-rate", "stall-rate", "stall-duration"}},
		},
	},
	"sweep": {
		top: []string{"target", "url", "model", "slo", "speeds", "search", "out-dir", "json", "quiet"},
		groups: []helpGroup{
			{"Search and judging", []string{"slo-percentile", "search-range", "search-tolerance", "repeat"}},
			{"Requests", []string{"model-map", "window", "max-concurrency", "timeout"}},
			{"Built-in simulator", []string{"sim-preset", "sim-max-num-seqs", "sim-max-num-batched-tokens", "sim-num-gpu-blocks", "sim-step-fixed", "sim-prefill-per-token", "sim-decode-per-seq", "sim-attn-per-context-token", "sim-per-request-metrics", "sim-config"}},
			{"Output", []string{"ext", "chart", "label", "metadata"}},
			{"Input files", []string{"strict", "salvage", "max-line-mib"}},
		},
	},
	"validate": {
		top: []string{"target", "metrics", "slo", "speed", "repeat", "html", "json", "quiet"},
		groups: []helpGroup{
			{"Statistics", []string{"seed", "resamples", "confidence", "min-effect-pct", "magnitude-tolerance"}},
			{"Explaining a broken conclusion", []string{"explain", "combination-budget"}},
			{"Runs", []string{"realtime", "model", "model-map", "api-key-file", "timeout", "out-dir", "fail-if-broken"}},
			{"Input files", []string{"strict", "salvage", "max-line-mib"}},
		},
	},
	"analyze": {
		top: []string{"slo", "tail", "tail-metric", "by", "html", "json", "format", "window"},
		groups: []helpGroup{
			{"Attribution", []string{"ignore-server-timings", "requests-out", "class"}},
			{"vLLM bench serve output", []string{"vllm-json", "percentile-metrics", "metric-percentiles", "max-concurrency", "request-rate"}},
			{"Capacity and cost", []string{"kv-blocks", "session-idle", "model-bytes", "bandwidth", "cost-per-hour"}},
			{"Input files", []string{"exact-rows", "strict", "salvage", "max-line-mib"}},
		},
	},
	"analyze compare": {
		top: []string{"mode", "slo", "tail", "tail-metric", "label-a", "label-b", "html", "json"},
		groups: []helpGroup{
			{"Statistics", []string{"seed", "resamples", "confidence", "max-sample", "threshold-pct", "practical-pct", "min-change-ms", "max-lateness"}},
			{"Attribution", []string{"ignore-server-timings", "class"}},
			{"Input files", []string{"exact-rows", "strict", "salvage", "max-line-mib"}},
		},
	},
	"capture": {
		top: []string{"out", "format", "key-file", "new-key-file", "field", "tokenizer", "strict"},
		groups: []helpGroup{
			{"Privacy", []string{"min-category-size", "keep-start", "keep-hashes", "max-kanon-entries"}},
			{"Trace shape", []string{"block-size", "sessions", "session-idle", "year", "part"}},
			{"Resources", []string{"workers", "max-line-bytes", "sort-memory-mib", "temp-dir", "memory-limit-mib"}},
		},
	},
	"postmortem": {
		top: []string{"prometheus", "start", "slo", "tail-metric", "tail", "html", "json", "what-if"},
		groups: []helpGroup{
			{"Prometheus", []string{"step", "selector", "instance-label", "role-label", "bearer-token-file", "basic-auth-file", "timeout", "metrics-out"}},
			{"Input files", []string{"strict", "salvage", "max-line-mib"}},
		},
	},
}
