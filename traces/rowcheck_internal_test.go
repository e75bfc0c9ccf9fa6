package traces

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestValidateFastPathAgrees: Validate's one-pass check accepts exactly
// the records in which problem, the rule-by-rule check that words the
// error, finds nothing, over values at and around every bound.
func TestValidateFastPathAgrees(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	times := []int64{math.MinInt64, -2, -1, 0, 1, MaxTimeNs - 1, MaxTimeNs, MaxTimeNs + 1, math.MaxInt64}
	counts := []int32{math.MinInt32, -2, -1, 0, 1, MaxTokens, MaxTokens + 1, math.MaxInt32}
	ids := []int64{math.MinInt64, -2, -1, 0, 1, math.MaxInt64}
	tm := func() int64 { return times[rng.IntN(len(times))] }
	ct := func() int32 { return counts[rng.IntN(len(counts))] }
	for range 200000 {
		r := NewRecord()
		// Mostly valid, with a few fields at a bound, so both paths run.
		for range 1 + rng.IntN(3) {
			switch rng.IntN(12) {
			case 0:
				r.Seq = ids[rng.IntN(len(ids))]
			case 1:
				r.ArrivalNs = tm()
			case 2:
				r.InputTokens, r.OutputTokens, r.PrefixTokens = ct(), ct(), ct()
			case 3:
				r.FinishNs, r.ThinkNs = tm(), tm()
			case 4:
				r.ParentSeq, r.Turn = ids[rng.IntN(len(ids))], ct()
			case 5:
				r.AfterSeqs = []int64{ids[rng.IntN(len(ids))]}
			case 6:
				r.ScheduledNs, r.SentNs, r.FirstTokenNs, r.LastTokenNs = tm(), tm(), tm(), tm()
			case 7:
				r.ServerQueueNs, r.ServerPrefillNs, r.ServerDecodeNs = tm(), tm(), tm()
			case 8:
				r.ServerPromptTokens, r.ServerOutputTokens, r.ServerCachedTokens, r.ServerPreemptions = ct(), ct(), ct(), ct()
			case 9:
				r.HTTPStatus = []int32{-1, 0, 200, 999, 1000}[rng.IntN(5)]
			case 10:
				r.ChunkNs = []int64{tm(), 5}[:1+rng.IntN(2)]
			case 11:
				r.ChunkTokens = []int32{ct(), 1}[:1+rng.IntN(2)]
			}
		}
		fast := r.requestValid() && (r.outcomeUnset() || r.outcomeValid())
		if slow := r.problem() == nil; fast != slow {
			t.Fatalf("fast path %v, rule by rule %v (%v) for %+v", fast, slow, r.problem(), r)
		}
	}
}
