// Package synth fits a workload model to a trace, generates synthetic
// traces from it, builds the classic benchmark matrix, and measures how
// faithful a synthetic trace is to a real one.
//
//   - Fit (FitReader) turns records into a Model: per traffic class, the
//     arrival process as counts per rate bin (Model.BinNs; diurnal shape and
//     bursts survive) plus within-bin gap distributions by load level
//     (empirical histograms, clusters of near-simultaneous arrivals, and
//     exponential/gamma/Weibull maximum-likelihood fits); per prefix
//     category, histograms of prefix, input and output lengths with output
//     conditioned on input ranges (their joint shape), block reuse, and the
//     session structure, with follow-up turns' context growth and think
//     time per category (followup.go). A Model is versioned JSON (LoadModel,
//     ReadModelFile, WriteTo) with no raw records. Fitting streams
//     (FitSeq): records are seen once, in arrival order, and memory does
//     not grow with their number (fitstream.go).
//   - (*Model).Generate writes a trace in the same schema: byte-identical
//     for the same seed and options, with rate and length scaling and a
//     category mix override.
//   - Matrix builds fixed-length rows (256/128 at 1 req/s, 2048/1024 at
//     saturation, warm shared prefixes, ...) as one trace with a class per
//     row.
//   - Check compares two traces (KS and Wasserstein distances, rate over
//     time, burstiness, categories, prefix reuse, sessions, input length by
//     turn index and think time) against
//     Thresholds.
//
// synth imports only traces; randomness always comes from an explicit seed.
package synth
