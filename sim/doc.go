// Package sim is the vLLM-like serving simulator: the built-in replay
// target, the demo server and the ground truth for attribution tests. It
// runs one simulated engine (package sim/engine) or a fleet of them
// behind a router, optionally split into a prefill pool and a decode pool
// whose KV caches move between them (prefill/decode disaggregation, as
// llm-d runs vLLM with the NIXL connector).
//
// Options describe both: the engine's options, and a fleet in
// Options.Fleet, so every place that takes the simulator's options or its
// configuration keys (ApplyConfig: "max-num-seqs=64",
// "replicas=4,router=prefix-aware", "prefill-replicas=2,decode-replicas=6,
// kv-transfer-latency=2ms", "replica-3.step-fixed=24ms") takes a fleet.
// Start serves the simulator behind one OpenAI-compatible endpoint in real
// time (or virtual time, Options.Virtual); Simulate runs it offline in
// virtual time, reading requests as a stream. Both run plain options as
// one engine with no router, so a caller needs one path.
//
// The router: round-robin, least outstanding requests, session affinity,
// or prefix-aware scoring modelled on llm-d's inference scheduler (see
// prefixWeight in router.go for what is modelled and from where). Under
// disaggregation it picks a prefill and a decode replica for each request
// when it arrives (llm-d's EPP runs its prefill and decode profiles
// together); the prefill replica computes the prompt and one token (the
// max_tokens=1 request of llm-d's routing sidecar), then the decode
// replica admits the request, takes its KV blocks, pulls the KV over the
// shared link (a fixed latency, a per-token time, a bandwidth cap shared
// equally by the pulls in flight), recomputes the last prompt token and
// decodes, as vLLM does with its NIXL connector.
//
// Every request leaves one truth row (traces.Record) with the replica that
// served it (Replica; under disaggregation the decode replica, and
// PrefillReplica), why the router chose it (RouteReason), and the timings
// of each side. For a disaggregated request:
//
//	server_queue_ns        = prefill replica: first scheduled − arrival
//	server_prefill_ns      = prefill replica: first token − first scheduled
//	                         + decode replica: first token − scheduled after the pull (the last prompt token)
//	server_kv_transfer_ns  = decode replica: KV arrived − blocks taken (the pull)
//	server_decode_queue_ns = decode replica: blocks taken − arrival there
//	                         + scheduled after the pull − KV arrived
//	server_decode_ns       = decode replica: last token − first token
//
// so first_token_ns − arrival_ns = queue + prefill + kv_transfer +
// decode_queue, and last_token_ns − arrival_ns adds decode. Aggregated
// replicas' rows have the single engine's columns (server_kv_transfer_ns
// and server_decode_queue_ns NotReported).
package sim
