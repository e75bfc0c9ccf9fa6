package sweep

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/internal/testtraces"
	"github.com/tokentrace/tokentrace/sim"
	"github.com/tokentrace/tokentrace/traces"
)

// kneeSim is a simulator whose capacity follows from its step model alone:
// every step costs StepFixed (no per-token costs), a request holds one of
// MaxNumSeqs slots for exactly OUT steps (its prefill step makes the first
// token, OUT−1 decode steps the rest), so it serves at most
// MaxNumSeqs / (OUT · StepFixed) requests per second.
func kneeSim(seqs int, step time.Duration) sim.Options {
	o := sim.DefaultOptions()
	if err := sim.ApplyPreset(&o, "tiny"); err != nil {
		panic(err)
	}
	o.MaxNumSeqs = seqs
	o.StepFixed = step
	o.PrefillPerToken, o.DecodePerSeq, o.AttnPerContextToken = 0, 0, 0
	o.PerRequestMetrics = true
	return o
}

func TestSweepSearchFindsKnee(t *testing.T) {
	if testing.Short() {
		t.Skip("about 15 s of real-time replays")
	}
	// Below capacity a request waits at most one step for admission and
	// one for its prefill (TTFT ≤ 2·step = 80 ms); above it the backlog
	// grows by (1 − capacity/rate) of the requests, so at 1.1× capacity
	// the last of 500 requests wait about 45/200 s = 230 ms more. The SLO
	// (250 ms) sits between, with room for a loaded machine's noise; 40 ms
	// steps keep the engine's timer overshoot to a few percent.
	const (
		seqs = 32
		step = 40 * time.Millisecond
		out  = 4
		base = 100.0 // trace rate, req/s
	)
	capacity := float64(seqs) / (out * step.Seconds()) // 200 req/s
	want := capacity / base                            // knee at 2×
	recs := testtraces.Constant(500, base, 8, out)
	cfg := DefaultOptions()
	cfg.Sim = kneeSim(seqs, step)
	cfg.SLO, cfg.Percentile = traces.SLO{TTFT: 250 * time.Millisecond}, 99
	cfg.Search, cfg.Low, cfg.High, cfg.Tolerance = true, 1.5, 3, 0.05
	cfg.OutDir, cfg.Ext = t.TempDir(), ".jsonl"
	if testing.Verbose() {
		cfg.Log = os.Stderr
	}
	res, err := Run(context.Background(), recs, traces.NewMeta("test"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(res.Knee-want)/want > 0.10 {
		t.Fatalf("knee at %g×, want within 10%% of %g× (capacity %.0f req/s over a %.0f req/s trace); steps %+v", res.Knee, want, capacity, base, res.Steps)
	}
	if n, _ := filepath.Glob(filepath.Join(cfg.OutDir, "speed-*.jsonl")); len(n) != len(res.Steps) {
		t.Errorf("%d results files for %d steps", len(n), len(res.Steps))
	}
	ans := res.Answer()
	if !strings.Contains(ans, "before p99 TTFT exceeds 250 ms") {
		t.Errorf("answer %q", ans)
	}
	chart := filepath.Join(cfg.OutDir, "sweep.svg")
	if err := res.WriteChart(chart); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(chart); !bytes.Contains(b, []byte("<svg")) || !bytes.Contains(b, []byte("knee")) {
		t.Errorf("chart %s is not an SVG with the knee marked", chart)
	}
	t.Logf("%s", ans)
}

func TestJudgeCountsFailuresAsInfinite(t *testing.T) {
	recs := testtraces.Constant(100, 10, 8, 4)
	for i := range recs {
		r := &recs[i]
		r.Status, r.SentNs, r.FirstTokenNs, r.LastTokenNs = traces.StatusOK, 0, int64(10*time.Millisecond), int64(40*time.Millisecond)
	}
	slo := traces.SLO{TTFT: 50 * time.Millisecond}
	if st := Judge(recs, slo, 99); !st.OK || st.AtPct["ttft"] != 10 {
		t.Fatalf("all fast: %+v", st)
	}
	recs[0].Status = traces.StatusHTTPError
	recs[1].Status = traces.StatusHTTPError
	if st := Judge(recs, slo, 99); st.OK || st.Broken != "ttft" || !math.IsInf(st.AtPct["ttft"], 1) {
		t.Fatalf("2%% failed at p99 should miss the SLO: %+v", st)
	}
	if st := Judge(recs, slo, 90); !st.OK {
		t.Fatalf("2%% failed at p90 should meet it: %+v", st)
	}
}

func TestWorstRun(t *testing.T) {
	pass := &Step{OK: true, AtPct: map[string]float64{"ttft": 50}, severity: 0.5}
	worse := &Step{OK: true, AtPct: map[string]float64{"ttft": 90}, severity: 0.9}
	miss := &Step{OK: false, Broken: "ttft", AtPct: map[string]float64{"ttft": 200}, severity: 2}
	for _, c := range []struct {
		why        string
		runs       []*Step
		ok         bool
		passed     int
		wantAtTTFT float64
	}{
		{"one run is itself", []*Step{pass}, true, 1, 50},
		{"two passing runs pass and show the slower", []*Step{pass, worse}, true, 2, 90},
		{"one miss in three fails the speed and shows the miss", []*Step{pass, miss, worse}, false, 2, 200},
	} {
		got := worstRun(c.runs)
		if got.OK != c.ok || got.PassedRuns != c.passed || got.Runs != len(c.runs) || got.AtPct["ttft"] != c.wantAtTTFT {
			t.Errorf("%s: ok %v, %d/%d passed, ttft %g; want ok %v, %d/%d, %g", c.why, got.OK, got.PassedRuns, got.Runs, got.AtPct["ttft"], c.ok, c.passed, len(c.runs), c.wantAtTTFT)
		}
	}
}
