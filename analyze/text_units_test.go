package analyze

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// TestTextColumnsOneUnit checks that a column of durations in the text
// report uses one unit: the tail attribution's "tail mean" column holding
// 16.5 s of decode and 4.21 s of queueing, and the per-class tail
// thresholds, were printed as "16.5 s" beside "4210 ms".
func TestTextColumnsOneUnit(t *testing.T) {
	var recs []traces.Record
	for i := range 100 {
		e2e := 400*ms + time.Duration(i)*2*ms
		r := withServer(rec(int64(i), time.Duration(i)*100*ms, 0, 60*ms, e2e, 100, 10, 1), 10*ms, 50*ms, e2e-60*ms, 0)
		r.Class = "interactive"
		if i%2 == 1 {
			r.Class = "batch"
		}
		recs = append(recs, r)
	}
	// the tail: two requests 4.21 s queued, 16.5 s decoding
	for i := range 2 {
		r := withServer(rec(int64(100+i), 10*time.Second, 0, 4300*ms, 20800*ms, 100, 10, 1), 4210*ms, 90*ms, 16500*ms, 0)
		r.Class = "batch"
		recs = append(recs, r)
	}
	o := DefaultOptions()
	o.By = ByClass
	rep := mustAnalyze(t, recs, o)
	if err := AttributeGroups(context.Background(), rep, recs); err != nil {
		t.Fatal(err)
	}
	out := textOf(t, rep)
	var tailMean, allMean, thr []string
	section := ""
	for _, l := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(l, "Tail attribution by"):
			section = "groups"
			continue
		case strings.HasPrefix(l, "Tail attribution:"):
			section = "table"
			continue
		case l == "" || !strings.HasPrefix(l, "  "):
			section = ""
		}
		f := strings.Fields(l)
		switch {
		case section == "table" && len(f) == 7 && f[0] != "component": // lateness 0.0% 0.0 s 0.0% 0 ms
			tailMean, allMean = append(tailMean, f[3]), append(allMean, f[6])
		case section == "groups" && len(f) > 5 && f[3] == "≥": // batch p99 E2E ≥ 20.8 s: …
			thr = append(thr, f[5])
		}
	}
	if len(tailMean) != 5 || len(thr) != 2 { // a single engine: no fleet components
		t.Fatalf("parsed %d table rows and %d class rows from:\n%s", len(tailMean), len(thr), out)
	}
	for name, col := range map[string][]string{"tail mean": tailMean, "all mean": allMean, "class threshold": thr} {
		for _, u := range col[1:] {
			if u != col[0] {
				t.Errorf("%s column mixes units %q:\n%s", name, col, out)
				break
			}
		}
	}
	if !strings.Contains(out, "16.5 s") || !strings.Contains(out, "4.2 s") {
		t.Errorf("want the tail's decode 16.5 s beside queue 4.2 s:\n%s", out)
	}
}

func TestFmtMsColumn(t *testing.T) {
	for _, tt := range []struct {
		in   []float64
		want string
	}{
		{[]float64{16500, 4210, 0}, "16.5 s|4.2 s|0.0 s"},
		{[]float64{1350, 0, 150}, "1350 ms|0 ms|150 ms"},
		{[]float64{12.5, 3}, "12.5 ms|3.0 ms"},
		{[]float64{0.25, 0}, "0.25 ms|0.00 ms"},
	} {
		if got := strings.Join(fmtMsColumn(tt.in), "|"); got != tt.want {
			t.Errorf("fmtMsColumn(%v) = %s, want %s", tt.in, got, tt.want)
		}
	}
}
