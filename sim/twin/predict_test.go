package twin

import (
	"testing"
)

// TestPredictLooksLikeResults: a predicted row reads as a replay's
// results row: sent at its arrival, one chunk per token (stream interval
// 1) from the first token to the last, the source's seq.
func TestPredictLooksLikeResults(t *testing.T) {
	recs := workload(200, 5, 3)
	rows := measure(t, mustConfig(t, "preset=tiny,max-num-seqs=8"), recs)
	if len(rows) != len(recs) {
		t.Fatalf("%d rows for %d requests", len(rows), len(recs))
	}
	for i, r := range rows {
		src := recs[i]
		n, _ := r.ReceivedOutputTokens()
		switch {
		case r.Seq != src.Seq || r.SentNs != src.ArrivalNs || !r.OK():
			t.Fatalf("row %d: seq %d sent %d status %s, want seq %d sent %d ok", i, r.Seq, r.SentNs, r.Status, src.Seq, src.ArrivalNs)
		case n != int(src.OutputTokens) || len(r.ChunkNs) != n:
			t.Fatalf("row %d: %d tokens in %d chunks, want %d", i, n, len(r.ChunkNs), src.OutputTokens)
		case r.ChunkNs[0] != r.FirstTokenNs || r.ChunkNs[n-1] != r.LastTokenNs:
			t.Fatalf("row %d: chunks %d..%d, first/last token %d/%d", i, r.ChunkNs[0], r.ChunkNs[n-1], r.FirstTokenNs, r.LastTokenNs)
		}
	}
}
