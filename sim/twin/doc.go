// Package twin calibrates the simulator to a user's own server: it fits
// the engine's step model (package sim/engine) to what a user already has,
// writes the fitted simulator as a configuration file that every
// simulator target reads (sim:config=FILE), and checks a twin's
// predictions against measured runs it was not fitted on.
//
// The inputs, in order of richness, each used where present:
//
//   - the results of a replay against the server: per-chunk arrival
//     times give the engine's steps (every streaming request gets one
//     chunk per step it takes part in, so the chunks of the requests in
//     flight mark the steps' ends), per-request server timings give a
//     prefill pool's steps (requests scheduled together start a step);
//   - a captured production trace whose log held latencies (first token,
//     last token) and the server's metrics series (postmortem's Prometheus
//     history): each request's decode time is its steps' sum, and the
//     requests decoding beside it say what was in those steps;
//   - several runs at different loads together.
//
// The step model is linear in its costs,
//
//	step = StepFixed + PrefillPerToken·(prefill tokens) + DecodePerSeq·(decoding sequences)
//	     + AttnPerContextToken·(context tokens read),
//
// so the fit is a least-squares regression of measured step times (or sums
// of them) on the steps' contents, after BLIS's alpha/beta coefficients
// fitted from ground-truth runs (inference-sim) and vllm-vcr's latency
// model fitted from server-side captures; unlike them it reads a
// client-side replay or production logs. A parameter whose feature does
// not vary in the data, or whose estimate is not significant, keeps its
// prior and the report says so. Limits (max-num-seqs, the token budget,
// the KV cache) are read where the data shows them binding and confirmed
// by simulating the measured run on candidate values.
//
// Everything is deterministic: the sampled steps and the fitted window are
// chosen by an explicit seed, and memory follows the requests in flight
// and a bounded sample of steps, not the number of rows.
package twin
