package formats_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/traces"
	"github.com/tokentrace/tokentrace/traces/formats"
)

// AIPerf's own mixed fixture: a spawn joined two turns later, a delayed
// turn and a fork on the last turn. Inputs are estimated from the text (4
// bytes per token) and grow with the conversation's replies; a fork child
// inherits the whole history.
func TestImportAIPerfDAGMixed(t *testing.T) {
	r, recs := importWithNotes(t, "aiperf-dag", publicTraces+"aiperf_mixed_full.dag.jsonl")
	_ = r
	nr := int64(traces.NotReported)
	want := []struct {
		arrivalNs, think, parent int64
		after                    []int64
		turn, in, out            int32
		model                    string
	}{
		{0, nr, nr, nil, 1, 12, 32, "mixed-model"},                      // root: system + user, 5 + 7 tokens; no delay: no think time
		{0, 0, 0, nil, 1, 8, 12, ""},                                    // helper spawned by it: fresh context
		{10e6, 10e6, 1, nil, 2, 8 + 12 + 5, 8, "helper-model"},          // delay 10 ms
		{20e6, 20e6, 0, nil, 2, 12 + 32 + 9, 24, ""},                    // root's next turn, delay 20 ms
		{20e6, 0, 3, []int64{3, 2}, 3, 53 + 24 + 11, 16, "mixed-model"}, // join_at 2: waits for the helper's last turn
		{20e6, 0, 4, nil, 1, 88 + 16 + 7, 8, "finisher-model"},          // the fork inherits the history
	}
	if len(recs) != len(want) {
		t.Fatalf("%d rows, want %d", len(recs), len(want))
	}
	for i, w := range want {
		g := recs[i]
		if g.Session != 1 || g.ArrivalNs != w.arrivalNs || g.ThinkNs != w.think || g.ParentSeq != w.parent || !reflect.DeepEqual(g.AfterSeqs, w.after) ||
			g.Turn != w.turn || g.InputTokens != w.in || g.OutputTokens != w.out || g.Model != w.model {
			t.Errorf("row %d = %+v\nwant %+v", i, g, w)
		}
	}
}

// An orchestrator spine: each round's children start fresh (payload
// isolation), wait for every child of the previous round (a join) and
// the round's think time.
func TestImportAIPerfDAGOrchestrator(t *testing.T) {
	r, recs := importWithNotes(t, "aiperf-dag", publicTraces+"aiperf_orchestrator_spine_per_round.dag.jsonl")
	if len(recs) != 12 {
		t.Fatalf("%d rows, want 12 (the orchestrator sends nothing)", len(recs))
	}
	lastA, lastB := int64(-1), int64(-1)
	for _, g := range recs {
		if g.Session != 1 || g.InputTokens != 5 {
			t.Errorf("row %d: session %d input %d, want 1 and 5 (each turn sends its own messages)", g.Seq, g.Session, g.InputTokens)
		}
		switch {
		case g.ArrivalNs == 50e6 && g.ParentSeq == traces.NotReported:
			if g.ThinkNs != 50e6 {
				t.Errorf("round 0 call %d think %d, want 50 ms", g.Seq, g.ThinkNs)
			}
		case g.ArrivalNs == 130e6 && len(g.AfterSeqs) == 2:
			lastA, lastB = g.AfterSeqs[0], g.AfterSeqs[1]
			if g.ThinkNs != 80e6 {
				t.Errorf("round 1 call %d think %d, want 80 ms", g.Seq, g.ThinkNs)
			}
		}
	}
	if lastA < 0 || recs[lastA].OutputTokens != 150 || recs[lastB].OutputTokens != 50 {
		t.Errorf("round 1 does not wait for round 0's last turns (%d, %d)", lastA, lastB)
	}
	if notes := strings.Join(noteStrings(r), "\n"); !strings.Contains(notes, "the input of all 12 calls was estimated") {
		t.Errorf("notes %q do not say the inputs are estimates", notes)
	}
}

// Lines that are not conversations are skipped by line; a child naming no
// conversation and a repeated session_id are counted.
func TestImportAIPerfDAGBadLines(t *testing.T) {
	content := `{"session_id":"a","turns":[{"messages":[{"role":"user","content":"hi"}],"max_tokens":2,"spawns":["ghost"]}]}` + "\n" +
		`{"session_id":"b","turns":[{"messages":[{"role":"user","content":"x"}],"max_tokens":-1}]}` + "\n" +
		`{"session_id":"a","turns":[{"messages":[{"role":"user","content":"x"}]}]}` + "\n"
	recs, st, err := importBadLine2T(t, "aiperf-dag", "d.jsonl", content, "ZZSECRETZZ")
	if err != nil || len(recs) != 1 || st.Skipped != 1 {
		t.Fatalf("rows %+v, stats %+v, err %v", recs, st, err)
	}
}

func importWithNotes(t *testing.T, format, path string) (traces.Reader, []traces.Record) {
	t.Helper()
	r, err := formats.Import(t.Context(), format, path, openStrict(true))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	recs, err := traces.ReadFrom(r)
	if err != nil {
		t.Fatal(err)
	}
	return r, recs
}
