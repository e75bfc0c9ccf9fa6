package sim

import "github.com/tokentrace/tokentrace/traces"

// LongestRequest is the most tokens (input + output) a row of recs holds.
func LongestRequest(recs []traces.Record) int {
	longest := 0
	for i := range recs {
		longest = max(longest, int(recs[i].InputTokens)+int(recs[i].OutputTokens))
	}
	return longest
}

// AdmitLongest returns o with MaxModelLen raised to admit a request of
// longest tokens (input + output), but no further than the KV cache holds
// (NumGPUBlocks × BlockSize): a trace's production requests then get an
// answer rather than vLLM's 400, unless no cache could hold them.
//
// In a fleet the context length is fleet-wide: it stops at the smallest
// replica's cache.
func (o Options) AdmitLongest(longest int) Options {
	limit := o.NumGPUBlocks * o.BlockSize
	if specs, err := o.ReplicaSpecs(); err == nil {
		for _, sp := range specs {
			limit = min(limit, sp.Options.NumGPUBlocks*sp.Options.BlockSize)
		}
	}
	o.MaxModelLen = min(max(o.MaxModelLen, longest), limit)
	return o
}
