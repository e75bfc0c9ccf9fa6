// Package analyze turns results files (traces.Record rows with outcome
// columns) into a Report: summaries with numpy-compatible percentiles,
// goodput, per-request latency attribution (lateness, queue, prefill, decode,
// other), a diagnosis of the tail in plain words, a windowed timeline,
// agentic sessions (latency by turn, session makespan; sessions.go), the
// prefix-cache hit rate the trace implies beside the server's
// (prefixcache.go), and comparisons of two runs. Reports render as text, JSON, the exact block
// layout and --save-result JSON of `vllm bench serve`, and a self-contained
// HTML page with charts.
//
// The API follows vegeta's accumulator/renderer split: an Analyzer accumulates
// records with Add and produces a Report with Close; the Report's Write*
// methods render it.
//
//	a, _ := analyze.New(analyze.DefaultOptions())
//	for _, r := range recs { a.Add(&r) }
//	rep, err := a.Close(ctx)
//	rep.WriteText(os.Stdout)
//
// Analyze and AnalyzeFiles wrap that loop; Compare compares two Reports.
//
// Memory is bounded by Options.ExactRows: up to that many rows everything
// is exact; past it the Analyzer streams (stream.go): sums and counts stay
// exact, latency percentiles come from log histograms (relative error
// 2^-11, Dist.Approx) and the row-based sections from a deterministic
// 1-in-2^k sample of at most ExactRows rows (Report.Sampling).
package analyze
