package analyze

import (
	"math"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// streamed is a request streamed as vLLM does with --stream-interval n: the
// first token alone at first, then chunks of n tokens (the last one
// shorter), one token every step; chunk token counts are not reported,
// only the usage total.
func streamed(seq int64, sent, first time.Duration, step time.Duration, out, n int) traces.Record {
	r := traces.NewRecord()
	r.Seq, r.Status, r.Run = seq, traces.StatusOK, "test"
	r.ScheduledNs, r.SentNs, r.FirstTokenNs = int64(sent), int64(sent), int64(first)
	r.InputTokens, r.OutputTokens = 100, int32(out)
	r.ServerOutputTokens = int32(out)
	r.ChunkNs = []int64{int64(first)}
	for tok := 1; tok < out; {
		k := min(n, out-tok)
		tok += k
		r.ChunkNs = append(r.ChunkNs, int64(first)+int64(tok-1)*int64(step))
	}
	r.LastTokenNs = r.ChunkNs[len(r.ChunkNs)-1]
	return r
}

// TestITLPerTokenEstimatedFromUsage checks that without per-chunk usage the
// per-token ITL is estimated from the output total and matches the true
// per-token gap (10 ms) within 1 ms at stream intervals 1, 4 and 16, that
// the report says it is estimated, and that the output peak is never below
// the mean.
func TestITLPerTokenEstimatedFromUsage(t *testing.T) {
	const step = 10 * time.Millisecond
	for _, n := range []int{1, 4, 16} {
		var recs []traces.Record
		for i := 0; i < 20; i++ {
			sent := time.Duration(i) * 200 * time.Millisecond
			recs = append(recs, streamed(int64(i), sent, sent+30*time.Millisecond, step, 97, n))
		}
		rep := mustAnalyze(t, recs, DefaultOptions())
		if rep.ITLPerToken.Count == 0 || math.Abs(rep.ITLPerToken.P50-10) > 1 {
			t.Errorf("stream interval %d: per-token ITL p50 %.3f ms over %d gaps, want 10 ± 1", n, rep.ITLPerToken.P50, rep.ITLPerToken.Count)
		}
		if n > 1 && math.Abs(rep.ITL.P50-float64(n)*10) > 1 {
			t.Errorf("stream interval %d: per-chunk ITL p50 %.3f ms, want %d", n, rep.ITL.P50, n*10)
		}
		if rep.ITLPerTokenEstimated != len(recs) {
			t.Errorf("stream interval %d: %d requests marked estimated, want %d", n, rep.ITLPerTokenEstimated, len(recs))
		}
		if th := rep.Throughput; th.PeakOutputTokensPerS < th.OutputTokensPerS {
			t.Errorf("stream interval %d: peak %.1f tok/s below the mean %.1f", n, th.PeakOutputTokensPerS, th.OutputTokensPerS)
		}
	}
}

// TestITLPerTokenExactWinsOverEstimate checks that reported chunk token
// counts are used as they are and nothing is marked estimated.
func TestITLPerTokenExactWinsOverEstimate(t *testing.T) {
	r := streamed(0, 0, 30*time.Millisecond, 10*time.Millisecond, 9, 4) // chunks 1, 4, 4
	r.ChunkTokens = []int32{1, 4, 4}
	rep := mustAnalyze(t, []traces.Record{r}, DefaultOptions())
	if rep.ITLPerTokenEstimated != 0 || rep.ITLPerToken.Count != 2 || math.Abs(rep.ITLPerToken.P50-10) > 1e-9 {
		t.Errorf("estimated %d, per-token ITL %+v", rep.ITLPerTokenEstimated, rep.ITLPerToken)
	}
}

// TestPeakNotBelowMeanWithoutChunks checks the peak of a run of
// non-streamed responses (no chunks at all): the tokens count when they
// arrive, and the peak is at least the mean.
func TestPeakNotBelowMeanWithoutChunks(t *testing.T) {
	var recs []traces.Record
	for i := 0; i < 10; i++ {
		r := traces.NewRecord()
		r.Seq, r.Status = int64(i), traces.StatusOK
		r.ScheduledNs, r.SentNs = int64(i)*int64(time.Second), int64(i)*int64(time.Second)
		r.FirstTokenNs, r.LastTokenNs = r.SentNs+int64(500*time.Millisecond), r.SentNs+int64(800*time.Millisecond)
		r.InputTokens, r.OutputTokens, r.ServerOutputTokens = 10, 50, 50
		recs = append(recs, r)
	}
	rep := mustAnalyze(t, recs, DefaultOptions())
	if th := rep.Throughput; th.PeakOutputTokensPerS < th.OutputTokensPerS || th.PeakOutputTokensPerS < 50 {
		t.Errorf("peak %.1f tok/s, mean %.1f", th.PeakOutputTokensPerS, th.OutputTokensPerS)
	}
}
