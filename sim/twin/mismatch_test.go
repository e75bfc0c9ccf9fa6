package twin

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// lawServer is a test server whose latency law is not the simulator's:
// continuous batching (FCFS, at most maxSeqs running, a prompt computed
// whole in one step) whose every step is the simulator's step times
// (1 + gamma·running), as CPU engines and some simulators slow down with
// load. It runs in virtual time and returns what a streaming replay
// against it would record.
type lawServer struct {
	fixed, prefill, decode, attn time.Duration
	gamma                        float64
	maxSeqs                      int
	// noise scales each step by a uniform draw in [1-noise, 1+noise]
	// (seeded): two runs of one trace differ, as a real server's do.
	noise float64
	seed  uint64
}

func (s lawServer) run(recs []traces.Record) []traces.Record {
	type req struct {
		i, prompt, out, got int
	}
	out := make([]traces.Record, len(recs))
	var waiting, running []*req
	next, t := 0, int64(0)
	for next < len(recs) || len(waiting)+len(running) > 0 {
		for next < len(recs) && recs[next].ArrivalNs <= t {
			waiting = append(waiting, &req{i: next, prompt: int(recs[next].InputTokens), out: max(int(recs[next].OutputTokens), 1)})
			next++
		}
		if len(waiting)+len(running) == 0 {
			t = recs[next].ArrivalNs
			continue
		}
		var prefillTok, ctx float64
		decoders := len(running)
		for _, r := range running {
			ctx += float64(r.prompt + r.got)
		}
		for len(waiting) > 0 && len(running) < s.maxSeqs {
			r := waiting[0]
			waiting = waiting[1:]
			prefillTok += float64(r.prompt)
			ctx += float64(r.prompt)
			running = append(running, r)
		}
		step := float64(s.fixed) + prefillTok*float64(s.prefill) + float64(decoders)*float64(s.decode) + ctx*float64(s.attn)
		jitter := 1.0
		if s.noise > 0 {
			s.seed = splitmix(s.seed)
			jitter += s.noise * (2*float64(s.seed>>11)/(1<<53) - 1)
		}
		t += int64(step * (1 + s.gamma*float64(len(running))) * jitter)
		keep := running[:0]
		for _, r := range running {
			r.got++
			o := &out[r.i]
			if r.got == 1 {
				*o = recs[r.i]
				o.ClearOutcome()
				o.Run, o.Status, o.HTTPStatus = "law", traces.StatusOK, 200
				o.ScheduledNs, o.SentNs, o.FirstTokenNs = recs[r.i].ArrivalNs, recs[r.i].ArrivalNs, t
				o.ServerCachedTokens = 0 // it caches no prefix
			}
			o.ChunkNs = append(o.ChunkNs, t)
			o.ChunkTokens = append(o.ChunkTokens, 1)
			if r.got == r.out {
				o.LastTokenNs = t
				o.ServerOutputTokens = int32(r.out)
				continue
			}
			keep = append(keep, r)
		}
		running = keep
	}
	return out
}

// TestTwinUnderModelMismatch fits a twin to a server whose steps slow down
// with the batch by a factor the simulator does not model, at one load,
// and checks it at twice the load: a mild slowdown is predicted within
// the bounds (p50 and p90 within 10 %, p99 within 20 %); a strong one is
// not, and the check says so, as the fit's report does.
func TestTwinUnderModelMismatch(t *testing.T) {
	base := workload(sized(2500), 4, 21)
	for _, c := range []struct {
		gamma float64
		hold  bool
	}{{0.004, true}, {0.04, false}} {
		srv := lawServer{fixed: 5 * time.Millisecond, prefill: 25 * time.Microsecond, decode: 120 * time.Microsecond, attn: 150 * time.Nanosecond, gamma: c.gamma, maxSeqs: 32}
		fitted := srv.run(base)
		res, err := Fit(context.Background(), []Input{{Name: "fit", Rows: traces.Values(fitted)}}, DefaultFitOptions())
		if err != nil {
			t.Fatal(err)
		}
		var rep strings.Builder
		res.Report.WriteText(&rep, "")
		twice := srv.run(scaled(base, 2))
		chk, err := Check(context.Background(), res.Options, []Input{{Name: "twice", Rows: traces.Values(twice)}}, DefaultCheckOptions())
		if err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		chk.WriteText(&out)
		t.Logf("gamma %g:\n%s\n%s", c.gamma, rep.String(), out.String())
		if chk.Pass != c.hold {
			t.Errorf("gamma %g: check passes %v, want %v", c.gamma, chk.Pass, c.hold)
		}
		for _, r := range chk.Traces[0].Rows {
			if c.hold && (r.Metric == "ttft" || r.Metric == "e2e") && !r.Pass {
				t.Errorf("gamma %g: %s %s off by %s", c.gamma, r.Metric, r.Percentile, fmtErr(r.Error))
			}
		}
		if !c.hold && !strings.Contains(rep.String(), "grows faster than") {
			t.Errorf("gamma %g: the fit's report does not say the step time grows faster than the model with the batch", c.gamma)
		}
	}
}

// TestCheckWidensByRunSpread: two measured runs of one trace are one
// trace in the check, whose bound is widened to 1.5× their spread where
// they disagree more than the tolerance allows.
func TestCheckWidensByRunSpread(t *testing.T) {
	recs := workload(600, 4, 5)
	srv := lawServer{fixed: 5 * time.Millisecond, prefill: 25 * time.Microsecond, decode: 120 * time.Microsecond, maxSeqs: 16, noise: 0.4}
	a, b := srv, srv
	a.seed, b.seed = 1, 2
	o := mustConfig(t, "step-fixed=5ms,prefill-per-token=25us,decode-per-seq=120us,attn-per-context-token=0s,max-num-seqs=16,prefix-caching=false")
	chk, err := Check(context.Background(), o, []Input{{Name: "a", Rows: traces.Values(a.run(recs))}, {Name: "b", Rows: traces.Values(b.run(recs))}}, checkTolerance(0.01))
	if err != nil {
		t.Fatal(err)
	}
	if len(chk.Traces) != 1 || len(chk.Traces[0].Runs) != 2 {
		t.Fatalf("two runs of one trace: %d traces", len(chk.Traces))
	}
	widened := 0
	for _, r := range chk.Traces[0].Rows {
		if r.Bound < max(0.01, SpreadFactor*r.Spread)-1e-12 {
			t.Errorf("%s %s: bound %.3f under 1.5× the spread %.3f", r.Metric, r.Percentile, r.Bound, r.Spread)
		}
		if r.Spread > 0 && r.Bound > 0.02 {
			widened++
		}
	}
	if widened == 0 {
		t.Errorf("no bound was widened by the runs' spread: %+v", chk.Traces[0].Rows)
	}
}
