package analyze

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// TestTextShowsNoValueAsDash checks that the text report never prints a
// number where there is none: the peak concurrency of a run where every
// request failed, and the latencies of a timeline window in which no
// request succeeded, read "-", not 0.
func TestTextShowsNoValueAsDash(t *testing.T) {
	var failed []traces.Record
	for i := range 5 {
		r := rec(int64(i), time.Duration(i)*100*ms, 0, 0, 0, 10, 2, 1)
		r.Status, r.HTTPStatus, r.Error = traces.StatusHTTPError, 503, "HTTP 503"
		r.FirstTokenNs, r.LastTokenNs, r.ChunkNs = -1, -1, nil
		failed = append(failed, r)
	}
	rep, err := Analyze(context.Background(), failed, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	rep.WriteText(&b)
	if !strings.Contains(b.String(), "Concurrency   peak -") {
		t.Errorf("every request failed, yet:\n%s", b.String())
	}

	// Successes in the first and last second, only failures in between.
	var recs []traces.Record
	for i := range 10 {
		recs = append(recs, rec(int64(i), time.Duration(i)*50*ms, 0, 20*ms, 80*ms, 10, 4, 1))
	}
	for i := 10; i < 15; i++ {
		r := failed[0]
		r.Seq, r.SentNs, r.ScheduledNs, r.ArrivalNs = int64(i), int64(1500*ms), int64(1500*ms), int64(1500*ms)
		recs = append(recs, r)
	}
	recs = append(recs, rec(15, 2500*ms, 0, 20*ms, 80*ms, 10, 4, 1))
	o := DefaultOptions()
	o.Window = time.Second
	rep, err = Analyze(context.Background(), recs, o)
	if err != nil {
		t.Fatal(err)
	}
	b.Reset()
	rep.WriteText(&b)
	var row string
	for _, l := range strings.Split(b.String(), "\n") {
		if f := strings.Fields(l); len(f) > 4 && f[0] == "1.0" {
			row = l
		}
	}
	if f := strings.Fields(row); len(f) < 8 || f[4] != "-" || f[7] != "-" {
		t.Errorf("window 1.0 s (5 sent, none ok) prints %q; want '-' for its latencies\n%s", row, b.String())
	}
}
