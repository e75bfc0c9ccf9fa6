package replay

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// outcome is what a results row says about its request, for comparing a
// streamed run with one held in memory.
type outcome struct {
	seq      int64
	status   string
	out      int32
	chunks   int
	sched    int64
	hasTimes bool
}

func outcomes(recs []traces.Record) []outcome {
	var o []outcome
	for i := range recs {
		r := &recs[i]
		n, _ := r.ReceivedOutputTokens()
		o = append(o, outcome{r.Seq, r.Status, int32(n), len(r.ChunkNs), r.ScheduledNs, r.SentNs >= 0 && r.LastTokenNs > 0})
	}
	slices.SortFunc(o, func(a, b outcome) int { return int(a.seq - b.seq) })
	return o
}

// TestRecordsInJournalSameResults runs one trace twice against the fake:
// once holding results in memory, once streaming them to the journal. The
// streamed run keeps no records, counts them, and its results file holds
// the same requests with the same outcomes and schedule.
func TestRecordsInJournalSameResults(t *testing.T) {
	f := newFake(time.Millisecond)
	defer f.Close()
	recs := testTrace(400, 500*time.Microsecond, 8, 4)
	o := f.options()
	o.Warmup = 0
	o.JournalSync = 10 * time.Millisecond
	mem, err := Run(context.Background(), recs, traces.NewMeta("t"), o)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	o.Journal = filepath.Join(dir, "res.journal.jsonl")
	o.RecordsInJournal = true
	st, err := Run(context.Background(), recs, traces.NewMeta("t"), o)
	if err != nil {
		t.Fatal(err)
	}
	if st.Records != nil || st.Count != 400 || st.Journal != o.Journal {
		t.Fatalf("streamed run: %d records in memory, Count %d, Journal %q; want none, 400, the journal", len(st.Records), st.Count, st.Journal)
	}
	for _, name := range []string{"res.parquet", "res.jsonl"} {
		out := filepath.Join(dir, name)
		n, err := st.Write(context.Background(), out, traces.DefaultCreateOptions())
		if err != nil || n != 400 {
			t.Fatalf("Write %s = %d, %v; want 400 records", name, n, err)
		}
		got, _, err := traces.ReadAll(out)
		if err != nil {
			t.Fatal(err)
		}
		if a, b := outcomes(got), outcomes(mem.Records); !slices.Equal(a, b) {
			t.Errorf("%s: streamed outcomes differ from the in-memory run's (%d vs %d rows)", name, len(a), len(b))
		}
	}
	if st.Summary.Sent != mem.Summary.Sent || st.Summary.OK != 400 || st.Summary.NotSent != 0 {
		t.Errorf("streamed summary sent %d ok %d not sent %d; in memory sent %d", st.Summary.Sent, st.Summary.OK, st.Summary.NotSent, mem.Summary.Sent)
	}
}

// TestRecordsInJournalFailedWrite fills the journal's disk mid-run with
// results streamed to it: the results file still holds every request that
// finished, once, from the cut journal and from memory.
func TestRecordsInJournalFailedWrite(t *testing.T) {
	f := newFake(time.Millisecond)
	defer f.Close()
	jpath := journalOnFullDisk(t, 8192)
	dir := filepath.Dir(jpath)
	o := f.options()
	o.Journal = jpath
	o.RecordsInJournal = true
	o.JournalSync = 20 * time.Millisecond
	o.Drain = 2 * time.Second
	res, err := Run(context.Background(), testTrace(1000, 3*time.Millisecond, 4, 3), traces.NewMeta("t"), o)
	var je *JournalError
	if !errors.As(err, &je) || !errors.Is(err, syscall.ENOSPC) || res == nil {
		t.Fatalf("Run = %v, want a result and a *JournalError wrapping ENOSPC", err)
	}
	if res.Journal != je.Path {
		t.Errorf("Result.Journal %q, want the renamed journal %q", res.Journal, je.Path)
	}
	out := filepath.Join(dir, "res.parquet")
	n, err := res.Write(context.Background(), out, traces.DefaultCreateOptions())
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := traces.ReadAll(out)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	for _, r := range got {
		if seen[r.Seq] {
			t.Fatalf("seq %d written twice", r.Seq)
		}
		seen[r.Seq] = true
	}
	if int(n) != res.Count || len(got) != res.Count || res.Count+res.Summary.NotSent != 1000 || res.Summary.NotSent < 500 {
		t.Errorf("wrote %d (%d read back), Count %d, not sent %d: want every finished request once and sending stopped early", n, len(got), res.Count, res.Summary.NotSent)
	}
}

// failingReader gives the first n records of recs, then a read error.
type failingReader struct {
	traces.Reader
	left int
}

func (r *failingReader) Read(buf []traces.Record) (int, error) {
	if r.left <= 0 {
		return 0, errors.New("disk read error")
	}
	n, err := r.Reader.Read(buf[:min(len(buf), r.left)])
	r.left -= n
	if err == io.EOF && r.left > 0 {
		return n, io.EOF
	}
	return n, nil
}

// TestStreamReadErrorStopsRun gives a trace that reads well in Scan and
// fails after 100 records while sending: the run sends those, says so on
// Options.Log and returns the read error with its result.
func TestStreamReadErrorStopsRun(t *testing.T) {
	f := newFake(0)
	defer f.Close()
	recs := testTrace(1000, time.Millisecond, 4, 2)
	opens := 0
	src := func() (traces.Reader, error) {
		opens++
		rd := traces.NewSliceReader(recs, traces.Meta{})
		if opens == 1 {
			return rd, nil
		}
		return &failingReader{Reader: rd, left: 100}, nil
	}
	o := f.options()
	o.Warmup = 0
	var log syncBuffer
	o.Log = &log
	p, err := Scan(context.Background(), src, o)
	if err != nil || p.Selected != 1000 || p.InMemory {
		t.Fatalf("Scan = %+v, %v; want 1000 selected, streamed", p, err)
	}
	res, err := p.Run(context.Background(), traces.Meta{}, o)
	if err == nil || !strings.Contains(err.Error(), "disk read error") || res == nil {
		t.Fatalf("Run = %v; want the read error and a result", err)
	}
	if len(res.Records) != 100 || res.Summary.NotSent != 900 {
		t.Errorf("%d sent, %d not sent; want 100 and 900", len(res.Records), res.Summary.NotSent)
	}
	if !strings.Contains(log.String(), "no more requests are sent") {
		t.Errorf("Options.Log got %q", log.String())
	}
}

// TestPlanRunChecksSelection refuses to run a plan under options that
// select other records than those Scan planned for.
func TestPlanRunChecksSelection(t *testing.T) {
	o := DefaultOptions()
	o.URL = "http://127.0.0.1:1"
	p, err := Scan(context.Background(), Records(testTrace(10, time.Millisecond, 1, 1), traces.Meta{}), o)
	if err != nil {
		t.Fatal(err)
	}
	o.Speed = 2
	if _, err := p.Run(context.Background(), traces.Meta{}, o); err == nil || !strings.Contains(err.Error(), "Scan planned") {
		t.Errorf("Run with another speed = %v, want a refusal", err)
	}
}

// TestScanNothingToSend names the option that left nothing, without
// holding the trace.
func TestScanNothingToSend(t *testing.T) {
	o := DefaultOptions()
	o.WindowFrom, o.WindowTo = 100*time.Second, 200*time.Second
	_, err := Scan(context.Background(), Records(testTrace(10, time.Second, 1, 1), traces.Meta{}), o)
	var oe *traces.OptionError
	if !errors.Is(err, ErrNothingToSend) || !errors.As(err, &oe) || oe.Option != "Options.WindowFrom, Options.WindowTo" || !strings.Contains(err.Error(), "10 records arrive from 0s to 9s") {
		t.Errorf("Scan = %v, want ErrNothingToSend with an option error naming the window", err)
	}
	_, err = Scan(context.Background(), Records(nil, traces.Meta{}), DefaultOptions())
	if !errors.Is(err, ErrNothingToSend) || !strings.Contains(err.Error(), "empty") {
		t.Errorf("Scan of an empty trace = %v", err)
	}
}

// TestDurationsHistogram checks the summary's percentiles past the exact
// limit: within the histogram's 0.5 % of the exact ones, signs kept.
func TestDurationsHistogram(t *testing.T) {
	defer func(n int) { exactDurations = n }(exactDurations)
	var exact, approx durations
	exactDurations = 1 << 30
	for i := range 20000 {
		v := time.Duration((i*7919)%20000-500) * time.Microsecond
		exact.add(v)
	}
	exactDurations = 1000
	for i := range 20000 {
		approx.add(time.Duration((i*7919)%20000-500) * time.Microsecond)
	}
	if approx.hist == nil || exact.hist != nil {
		t.Fatal("the histogram did not take over past the limit")
	}
	for _, p := range []float64{1, 50, 90, 99, 99.9} {
		e, a := exact.percentile(p), approx.percentile(p)
		if d := float64(a - e); d > 0.006*max(float64(e), -float64(e))+float64(time.Microsecond) || -d > 0.006*max(float64(e), -float64(e))+float64(time.Microsecond) {
			t.Errorf("p%v: histogram %v, exact %v", p, a, e)
		}
	}
	if approx.max != exact.max {
		t.Errorf("max %v, want %v", approx.max, exact.max)
	}
}

// TestSummaryApprox: past the exact limit the summary says its
// percentiles come from the histogram, in Summary and in its text.
func TestSummaryApprox(t *testing.T) {
	defer func(n int) { exactDurations = n }(exactDurations)
	exactDurations = 100
	recs := testTrace(150, time.Millisecond, 4, 2)
	for i := range recs {
		r := &recs[i]
		r.Status, r.ScheduledNs, r.SentNs = traces.StatusOK, r.ArrivalNs, r.ArrivalNs+int64(i)*1000
		r.FirstTokenNs, r.LastTokenNs = r.SentNs+1e6, r.SentNs+3e6
	}
	for _, n := range []int{100, 150} {
		s := Summarize(recs[:n], time.Second)
		var b strings.Builder
		s.WriteText(&b)
		if want := n > 100; s.Approx != want || strings.Contains(b.String(), "histogram") != want {
			t.Errorf("%d requests: Approx %v, text %q; want approx %v", n, s.Approx, b.String(), want)
		}
		if s.LatenessMax != time.Duration(n-1)*time.Microsecond {
			t.Errorf("%d requests: lateness max %v", n, s.LatenessMax)
		}
	}
}

// TestRealtimeReported: the run says in its metadata whether the
// dispatcher got the real-time class, and when it did not (or was told not
// to ask) the reason, with a warning on Options.Log in the first case.
func TestRealtimeReported(t *testing.T) {
	f := newFake(0)
	defer f.Close()
	for _, no := range []bool{false, true} {
		o := f.options()
		o.NoRealtime = no
		var log syncBuffer
		o.Log = &log
		res := mustRun(t, testTrace(20, time.Millisecond, 4, 2), traces.NewMeta("t"), o)
		got := res.Meta.Get(MetaRealtime)
		warned := strings.Contains(log.String(), "without the real-time class")
		switch {
		case no && (got != "no: not asked for (Options.NoRealtime)" || warned):
			t.Errorf("NoRealtime: metadata %q, warned %v", got, warned)
		case !no && got == "SCHED_FIFO 1 (dispatcher thread)" && warned:
			t.Errorf("got the real-time class but warned: %q", log.String())
		case !no && strings.HasPrefix(got, "no: ") && !warned:
			t.Errorf("metadata %q but no warning on Log", got)
		case !no && got != "SCHED_FIFO 1 (dispatcher thread)" && !strings.HasPrefix(got, "no: "):
			t.Errorf("metadata %q", got)
		}
		t.Logf("NoRealtime %v: %s", no, got)
	}
}
