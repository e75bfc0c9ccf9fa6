package traces_test

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/tokentrace/tokentrace/traces"
)

func TestSummarize(t *testing.T) {
	var recs []traces.Record
	// Arrivals at 0, 1, 2, 4 s: gaps 1, 1, 2 (mean 4/3).
	for i, at := range []int64{0, 1e9, 2e9, 4e9} {
		r := traces.NewRecord()
		r.Seq, r.ArrivalNs = int64(i), at
		r.InputTokens, r.OutputTokens = int32(100*(i+1)), int32(10*(i+1))
		r.Model = "m"
		if i%2 == 0 {
			r.Category, r.Session = "sys", 7
		}
		recs = append(recs, r)
	}
	// Two replayed: one ok (TTFT 50 ms, E2E 200 ms, 5 ms late), one timeout.
	recs[0].Status, recs[0].ScheduledNs, recs[0].SentNs = traces.StatusOK, 0, 5e6
	recs[0].FirstTokenNs, recs[0].LastTokenNs = 55e6, 205e6
	recs[1].Status, recs[1].ScheduledNs, recs[1].SentNs = traces.StatusTimeout, 1e9, 1e9
	s, err := summarizeFile(t, "s.parquet", recs)
	if err != nil {
		t.Fatal(err)
	}
	if s.Rows != 4 || s.DurationS != 4 || s.RateRPS != 0.75 || s.Sessions != 1 {
		t.Errorf("rows %d duration %v rate %v sessions %d; want 4, 4, 0.75, 1", s.Rows, s.DurationS, s.RateRPS, s.Sessions)
	}
	// gaps 1,1,2: mean 4/3, population sd sqrt(2/9) → CV = sqrt(2)/4.
	if want := math.Sqrt(2) / 4; math.Abs(s.BurstinessCV-want) > 1e-12 {
		t.Errorf("CV = %v, want %v", s.BurstinessCV, want)
	}
	if s.InputTokens.Sum != 1000 || s.InputTokens.Max != 400 || s.InputTokens.P50 != 250 {
		t.Errorf("input %+v", s.InputTokens)
	}
	if len(s.Categories) != 2 || s.Categories[0].Share != 0.5 || len(s.Models) != 1 || s.Models[0].Count != 4 {
		t.Errorf("categories %+v models %+v", s.Categories, s.Models)
	}
	o := s.Outcome
	if o == nil || o.Requests != 2 || o.OK != 1 || o.Failed != 1 || o.ByStatus[traces.StatusTimeout] != 1 {
		t.Fatalf("outcome %+v", o)
	}
	if o.TTFTMs.P50 != 50 || o.E2EMs.P99 != 200 || o.LatenessMs.N != 2 || o.LatenessMs.Max != 5 {
		t.Errorf("latencies ttft %+v e2e %+v late %+v", o.TTFTMs, o.E2EMs, o.LatenessMs)
	}
}

func TestSummarizeEmpty(t *testing.T) {
	s, err := summarizeFile(t, "e.jsonl", nil)
	if err != nil || s.Rows != 0 || s.Outcome != nil || s.RateRPS != 0 {
		t.Errorf("Summarize(empty) = %+v, %v", s, err)
	}
}

// summarizeFile writes recs to a file named name (its format from the
// extension) and summarizes it as read back.
func summarizeFile(t *testing.T, name string, recs []traces.Record) (traces.Summary, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	writeFile(t, path, traces.NewMeta("test"), recs)
	r, err := traces.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	return traces.Summarize(context.Background(), r)
}
