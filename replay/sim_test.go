package replay

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/sim"
	"github.com/tokentrace/tokentrace/traces"
	"github.com/tokentrace/tokentrace/traces/formats"
)

// mooncakeSlice imports the first n records of the shared Mooncake synthetic
// trace.
func mooncakeSlice(t *testing.T, n int) ([]traces.Record, traces.Meta) {
	t.Helper()
	path := filepath.Join("..", "..", "shared", "traces", "mooncake", "synthetic_trace.jsonl")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("shared trace %s not present: %v", path, err)
	}
	recs, meta, _, err := formats.ImportAll(context.Background(), "mooncake", path, traces.DefaultOpenOptions())
	if err != nil {
		t.Fatalf("import %s: %v", path, err)
	}
	if len(recs) < n {
		t.Fatalf("trace has %d records, want >= %d", len(recs), n)
	}
	return recs[:n], meta
}

// startSim starts the simulator in virtual-clock mode with room for
// Mooncake's long prompts.
func startSim(t *testing.T, perRequestMetrics bool) *sim.Server {
	t.Helper()
	so := sim.DefaultOptions()
	so.Virtual = true
	so.MaxModelLen = 131072
	so.NumGPUBlocks = 200000
	so.PerRequestMetrics = perRequestMetrics
	s, err := sim.Start(context.Background(), so)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestSimMooncakeSlice(t *testing.T) {
	n := 150 // 44 s of trace, 9 records reuse an earlier record's first block
	recs, meta := mooncakeSlice(t, n)
	if testing.Short() || raceEnabled {
		// The race detector makes 2M prompt tokens slow: keep only the
		// records that share a block with another one (same arrival times).
		count := map[int64]int{}
		for _, r := range recs {
			for _, b := range r.PrefixBlocks {
				count[b]++
			}
		}
		var keep []traces.Record
		for _, r := range recs {
			if len(r.PrefixBlocks) > 0 && count[r.PrefixBlocks[0]] > 1 {
				keep = append(keep, r)
			}
		}
		recs, n = keep, len(keep)
	}
	s := startSim(t, true)
	o := DefaultOptions()
	o.URL = s.URL
	o.Run = "mc"
	o.Speed = 40
	res := mustRun(t, recs, meta, o)
	s.Close()
	truth := map[string]traces.Record{}
	for _, tr := range s.Truth() {
		if strings.HasSuffix(tr.RequestID, "-preflight") {
			continue
		}
		if _, dup := truth[tr.RequestID]; dup {
			t.Errorf("request %s reached the server twice", tr.RequestID)
		}
		truth[tr.RequestID] = tr
	}
	if len(res.Records) != n || len(truth) != n {
		t.Fatalf("sent %d records, server saw %d, want %d", len(res.Records), len(truth), n)
	}
	seen := map[int64]bool{}
	// blockDone: when a request carrying the block finished (last token).
	blockDone := map[int64]int64{}
	for _, rec := range res.Records {
		for _, b := range rec.PrefixBlocks {
			if d, ok := blockDone[b]; !ok || rec.LastTokenNs < d {
				blockDone[b] = rec.LastTokenNs
			}
		}
	}
	hitsExpected, hitsGot := 0, 0
	for _, rec := range res.Records {
		if seen[rec.Seq] {
			t.Errorf("seq %d recorded twice", rec.Seq)
		}
		seen[rec.Seq] = true
		if rec.Status != traces.StatusOK {
			t.Errorf("seq %d: %s %q", rec.Seq, rec.Status, rec.Error)
			continue
		}
		if rec.ServerPromptTokens != rec.InputTokens {
			t.Errorf("seq %d: server prompt tokens %d, want input_tokens %d", rec.Seq, rec.ServerPromptTokens, rec.InputTokens)
		}
		if rec.ServerOutputTokens != rec.OutputTokens {
			t.Errorf("seq %d: server output tokens %d, want output_tokens %d", rec.Seq, rec.ServerOutputTokens, rec.OutputTokens)
		}
		if n, _ := rec.ReceivedOutputTokens(); n != int(rec.OutputTokens) {
			t.Errorf("seq %d: received %d tokens", rec.Seq, n)
		}
		// Its first block was computed by a request that had finished
		// before this one was sent: the prefix cache must hit.
		if len(rec.PrefixBlocks) > 0 {
			if d, ok := blockDone[rec.PrefixBlocks[0]]; ok && d >= 0 && d < rec.SentNs {
				hitsExpected++
				if rec.ServerCachedTokens >= int32(formats.MooncakeBlockSize) {
					hitsGot++
				}
			}
		}
		tr, ok := truth[rec.RequestID]
		if !ok {
			t.Errorf("seq %d: request id %s unknown to the server", rec.Seq, rec.RequestID)
			continue
		}
		for _, c := range []struct {
			name      string
			got, want int64
		}{{"queue", rec.ServerQueueNs, tr.ServerQueueNs}, {"prefill", rec.ServerPrefillNs, tr.ServerPrefillNs}, {"decode", rec.ServerDecodeNs, tr.ServerDecodeNs}} {
			if d := c.got - c.want; c.got < 0 || d > int64(time.Millisecond) || d < -int64(time.Millisecond) {
				t.Errorf("seq %d: server %s %d ns, sim truth %d ns", rec.Seq, c.name, c.got, c.want)
			}
		}
	}
	if hitsExpected == 0 || hitsGot != hitsExpected {
		t.Errorf("prefix cache hits on %d of %d records with repeated blocks", hitsGot, hitsExpected)
	}
	if res.Meta.Get(MetaTimingSource) != TimingSourceResponseMetrics || res.Meta.Get(MetaTimingMatched) != strconv.Itoa(n) {
		t.Errorf("timing meta %q matched %q", res.Meta.Get(MetaTimingSource), res.Meta.Get(MetaTimingMatched))
	}
	if res.Summary.LatenessP99 <= 0 || res.Meta.Get(MetaLatenessP99) == "" {
		t.Errorf("lateness p99 not reported: %v %q", res.Summary.LatenessP99, res.Meta.Get(MetaLatenessP99))
	}
	t.Logf("lateness p50 %v p99 %v max %v; cache hits %d/%d", res.Summary.LatenessP50, res.Summary.LatenessP99, res.Summary.LatenessMax, hitsGot, hitsExpected)
}

func TestSimMetricsOffNotInvented(t *testing.T) {
	recs, meta := mooncakeSlice(t, 10)
	s := startSim(t, false)
	o := DefaultOptions()
	o.URL = s.URL
	o.Speed = 50
	res := mustRun(t, recs, meta, o)
	for _, rec := range res.Records {
		if rec.Status != traces.StatusOK {
			t.Fatalf("seq %d: %s %q", rec.Seq, rec.Status, rec.Error)
		}
		if rec.ServerQueueNs != -1 || rec.ServerPrefillNs != -1 || rec.ServerDecodeNs != -1 {
			t.Errorf("seq %d: timings %d/%d/%d without per-request metrics, want -1", rec.Seq, rec.ServerQueueNs, rec.ServerPrefillNs, rec.ServerDecodeNs)
		}
	}
	if res.Meta.Get(MetaTimingSource) != TimingSourceNone || res.Meta.Get(MetaTimingUnmatched) != "10" {
		t.Errorf("timing meta %v", res.Meta.Extra)
	}
}

func TestSimChatCalibration(t *testing.T) {
	s := startSim(t, false)
	recs := testTrace(8, time.Millisecond, 300, 4)
	recs[2].Category, recs[2].PrefixTokens = "a", 100
	recs[3].Category, recs[3].PrefixTokens = "a", 100
	o := DefaultOptions()
	o.URL = s.URL
	o.API = traces.APIChat
	res := mustRun(t, recs, traces.NewMeta("t"), o)
	for _, rec := range res.Records {
		if rec.Status != traces.StatusOK || rec.ServerPromptTokens != rec.InputTokens {
			t.Errorf("chat seq %d: %s %q prompt %d want %d (calibration %q)", rec.Seq, rec.Status, rec.Error, rec.ServerPromptTokens, rec.InputTokens, res.Meta.Get(MetaChatCalibration))
		}
	}
}

func TestSimInjectedFaults(t *testing.T) {
	so := sim.DefaultOptions() // real time: mid-stream faults need a stream in progress
	so.FailRate, so.DisconnectRate, so.StreamErrorRate = 0.2, 0.2, 0.2
	s, err := sim.Start(context.Background(), so)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	o := DefaultOptions()
	o.URL = s.URL
	res := mustRun(t, testTrace(60, time.Millisecond, 64, 8), traces.NewMeta("t"), o)
	by := map[string]int{}
	for _, rec := range res.Records {
		by[rec.Status]++
		if rec.Status == traces.StatusStreamError && len(rec.ChunkNs) == 0 {
			t.Errorf("stream error kept no tokens")
		}
	}
	if len(res.Records) != 60 || by[traces.StatusOK] == 0 || by[traces.StatusHTTPError] == 0 || by[traces.StatusDisconnect] == 0 || by[traces.StatusStreamError] == 0 {
		t.Errorf("statuses %v over %d records, want every kind", by, len(res.Records))
	}
}
