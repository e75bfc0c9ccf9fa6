package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/traces"
)

// TestCaptureOTLPParentReplayClosed captures an agent's OTLP export (call A
// and the subagent call B it spawned through a tool, exported child first;
// beside them a long call C of the same trace that spawned nothing) and
// replays it against the built-in simulator in closed sessions. B must wait
// for its parent A to finish in the replay, then its recorded think time
// (2 ms: B arrived 2 ms after A's span ended), and not for C, the turn
// before it, which it would wait for if the link were lost (the session
// would be a chain). An open replay sends B before A has finished (A's 8
// output tokens take the simulator far longer than B's 3 ms offset), which
// shows the check can fail.
func TestCaptureOTLPParentReplayClosed(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(dir, "agent.jsonl")
	if _, se := runMain(t, "capture", "--out", trace, filepath.Join("testdata", "agent_otlp.jsonl")); !strings.Contains(se, "1 calls linked to the call that spawned them") {
		t.Errorf("capture stats do not report the link:\n%s", se)
	}
	recs, _, err := traces.ReadAll(trace)
	if err != nil {
		t.Fatal(err)
	}
	// Seqs by arrival: A 0, C 1, B 2.
	if len(recs) != 3 || recs[0].ParentSeq != traces.NotReported || recs[1].ParentSeq != traces.NotReported || recs[2].ParentSeq != 0 ||
		recs[0].Session == 0 || recs[1].Session != recs[0].Session || recs[2].Session != recs[0].Session ||
		recs[0].FinishNs != 1e6 || recs[2].ArrivalNs != 3e6 || recs[1].OutputTokens != 64 {
		t.Fatalf("captured %+v", recs)
	}
	replayed := func(mode string) (a, c, b traces.Record) {
		t.Helper()
		out := filepath.Join(dir, mode+".jsonl")
		runMain(t, "replay", "--sessions", mode, "--max-lateness", "10s", "--out", out, trace)
		res, _, err := traces.ReadAll(out)
		if err != nil {
			t.Fatal(err)
		}
		bySeq := map[int64]traces.Record{}
		for _, r := range res {
			if r.Status != traces.StatusOK {
				t.Fatalf("replay --sessions %s: seq %d %s %q", mode, r.Seq, r.Status, r.Error)
			}
			bySeq[r.Seq] = r
		}
		if len(bySeq) != 3 {
			t.Fatalf("replay --sessions %s: %d results", mode, len(res))
		}
		return bySeq[0], bySeq[1], bySeq[2]
	}
	ms := func(ns int64) float64 { return float64(ns) / 1e6 }
	a, c, b := replayed("closed")
	if b.SentNs < a.LastTokenNs+2e6 {
		t.Errorf("closed: B sent at %v ms, before its parent A finished (%v ms) + 2 ms think", ms(b.SentNs), ms(a.LastTokenNs))
	}
	if b.SentNs >= c.LastTokenNs {
		t.Errorf("closed: B sent at %v ms, after C finished (%v ms): it waited for the previous turn, not its parent", ms(b.SentNs), ms(c.LastTokenNs))
	}
	a, _, b = replayed("open")
	if b.SentNs >= a.LastTokenNs {
		t.Errorf("open: B sent at %v ms, after A finished (%v ms): the closed check above proves nothing", ms(b.SentNs), ms(a.LastTokenNs))
	}
}
