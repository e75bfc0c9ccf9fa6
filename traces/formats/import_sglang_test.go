package formats_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/traces"
	"github.com/tokentrace/tokentrace/traces/formats"
)

const publicTraces = "../../testdata/publictraces/"

// The token trace: counts come from the id lists unless num_* override
// them, ts is milliseconds, and prompts that share leading 16-token blocks
// share their block ids (the ids themselves are not kept).
func TestImportSGLangTokenTrace(t *testing.T) {
	recs, m, st := importAllT(t, "sglang-tokens", publicTraces+"sglang_token_trace.jsonl", true)
	if st.Rows != 4 || m.BlockSize != 16 {
		t.Fatalf("stats %+v, block size %d", st, m.BlockSize)
	}
	want := []struct {
		arrivalNs int64
		in, out   int32
		blocks    []int64
	}{
		{1_000_000_000, 40, 4, []int64{0, 1, 2}},  // 40 ids: two full blocks and a partial one
		{1_000_500_000, 34, 12, []int64{0, 1, 3}}, // same first 32 ids: shares two blocks; num_output_tokens
		{1_250_250_000, 300, 1, []int64{4}},       // num_input_tokens overrides the 3 ids
		{0, 16, 2, []int64{0}},                    // no ts: arrives at 0; ids 1..16 are the first block again
	}
	for i, w := range want {
		r := recs[i]
		if r.ArrivalNs != w.arrivalNs || r.InputTokens != w.in || r.OutputTokens != w.out || !reflect.DeepEqual(r.PrefixBlocks, w.blocks) {
			t.Errorf("row %d = arrival %d in %d out %d blocks %v; want %+v", i, r.ArrivalNs, r.InputTokens, r.OutputTokens, r.PrefixBlocks, w)
		}
	}
}

// Token-trace rows SGLang would skip are malformed here, named by line.
func TestImportSGLangTokenTraceBadRows(t *testing.T) {
	for _, tc := range []struct{ name, line2 string }{
		{"No input ids.", `{"output_tokens": [1], "ts": 1}`},
		{"No output length at all.", `{"input_tokens": [1, 2]}`},
		{"Token ids that are not integers.", `{"input_tokens": ["ZZSECRETZZ"], "output_tokens": [1]}`},
		{"A negative timestamp.", `{"input_tokens": [1], "output_tokens": [1], "ts": -5}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			content := `{"input_tokens": [1], "output_tokens": [1]}` + "\n" + tc.line2 + "\n"
			recs, st, err := importBadLine2T(t, "sglang-tokens", "tokens.jsonl", content, "ZZSECRETZZ")
			if err != nil || len(recs) != 1 || st.Skipped != 1 {
				t.Errorf("rows %d, stats %+v, err %v: want the first row and one skip", len(recs), st, err)
			}
		})
	}
}

// The agentic trace: one session per conversation, chained turns,
// prompt_tokens kept, missing counts estimated and said, turns without
// messages skipped.
func TestImportSGLangAgentic(t *testing.T) {
	recs, _, st := importAllT(t, "sglang-agentic", publicTraces+"sglang_agentic_trace.json", true)
	if st.Rows != 5 {
		t.Fatalf("rows %d, want 5 (one turn has no messages)", st.Rows)
	}
	nr := int64(traces.NotReported)
	want := []struct {
		session, parent int64
		turn, in, out   int32
	}{
		{1, nr, 1, 1200, 220},
		{1, 0, 2, 1460, 220},
		{1, 1, 3, 1720, 220}, // the turn without messages is not a call
		{2, nr, 1, 2, 220},   // "abcdefgh": 8 bytes = 2 tokens, estimated
		{2, 3, 2, 2 + 220 + 1, 5},
	}
	for i, w := range want {
		r := recs[i]
		if r.Session != w.session || r.ParentSeq != w.parent || r.Turn != w.turn || r.InputTokens != w.in || r.OutputTokens != w.out || r.ArrivalNs != 0 {
			t.Errorf("row %d = session %d parent %d turn %d in %d out %d arrival %d; want %+v", i, r.Session, r.ParentSeq, r.Turn, r.InputTokens, r.OutputTokens, r.ArrivalNs, w)
		}
	}
}

// A malformed conversation is skipped whole; the others are read.
func TestImportSGLangAgenticBadConversation(t *testing.T) {
	content := `{"conversations": [` + "\n" +
		`[{"messages": [{"role": "user", "content": "hi"}], "prompt_tokens": 10}],` + "\n" +
		`[{"messages": [{"role": "user", "content": "ZZSECRETZZ"}], "prompt_tokens": -3}],` + "\n" +
		`[{"messages": [{"role": "user", "content": 7}]}],` + "\n" +
		`[{"messages": [{"role": "user", "content": "x"}], "prompt_tokens": 4}]` + "\n]}\n"
	recs, st, err := importStringT(t, "sglang-agentic", "a.json", content, false)
	if err != nil || len(recs) != 2 || st.Skipped != 2 || recs[1].Session != 2 || recs[1].InputTokens != 4 {
		t.Fatalf("rows %+v, stats %+v, err %v: want 2 good conversations as sessions 1 and 2", recs, st, err)
	}
	if st.FirstSkip == nil || !strings.Contains(st.FirstSkip.Error(), "a.json:3") {
		t.Errorf("first skip %v, want it named at a.json:3", st.FirstSkip)
	}
}

// AIPerf's documented mooncake_trace rows: a fixed-schedule row, and a
// multi-turn session whose second turn has a delay and no timestamp (it
// arrives after the first plus the delay, its think time); rows that carry
// text instead of a length are refused by line.
func TestImportAIPerfLines(t *testing.T) {
	content := `{"timestamp": 1000, "input_length": 10, "hash_ids": [123], "output_length": 4}` + "\n" +
		`{"session_id": "abc-123", "input_length": 300, "output_length": 40}` + "\n" +
		`{"session_id": "abc-123", "delay": 2, "input_length": 150, "output_length": 20}` + "\n" +
		`{"text_input": "ZZSECRETZZ", "output_length": 4}` + "\n"
	recs, st, err := importStringT(t, "aiperf", "a.jsonl", content, false)
	if err != nil || len(recs) != 3 || st.Skipped != 1 {
		t.Fatalf("rows %+v, stats %+v, err %v", recs, st, err)
	}
	nr := int64(traces.NotReported)
	want := []struct {
		arrival, session, parent, think int64
		turn                            int32
	}{
		{1_000_000_000, 0, nr, nr, 0},
		{0, 1, nr, nr, 1},
		{2_000_000, 1, 1, 2_000_000, 2},
	}
	for i, w := range want {
		g := recs[i]
		if g.ArrivalNs != w.arrival || g.Session != w.session || g.ParentSeq != w.parent || g.ThinkNs != w.think || g.Turn != w.turn {
			t.Errorf("row %d = %+v, want %+v", i, g, w)
		}
	}
	if strings.Contains(st.FirstSkip.Error(), "ZZSECRETZZ") || !strings.Contains(st.FirstSkip.Error(), "a.jsonl:4") {
		t.Errorf("skip %v: want line 4 named, the text not quoted", st.FirstSkip)
	}
}

// The documented examples of GuideLLM's trace_synthetic (absolute seconds,
// which GuideLLM schedules from the first row, as the import reads them)
// and of AIPerf's
// mooncake_trace (fixed-schedule rows and a multi-turn session).
func TestImportDocumentedLineExamples(t *testing.T) {
	g, _, _ := importAllT(t, "guidellm", publicTraces+"guidellm_trace_synthetic.jsonl", true)
	if len(g) != 2 || g[1].ArrivalNs-g[0].ArrivalNs != 500_000_000 || g[0].ArrivalNs != 0 || g[1].InputTokens != 512 || g[1].OutputTokens != 64 {
		t.Errorf("guidellm rows %+v", g)
	}
	a, m, _ := importAllT(t, "aiperf", publicTraces+"aiperf_mooncake_sessions.jsonl", true)
	if len(a) != 4 || m.BlockSize != 512 || a[1].ArrivalNs != 105_000_000 || !reflect.DeepEqual(a[1].PrefixBlocks, []int64{0, 3, 4, 5}) ||
		a[2].Session != 1 || a[3].ParentSeq != 2 || a[3].ThinkNs != 2_000_000 || a[3].InputTokens != 300+40+150 {
		t.Errorf("aiperf rows %+v", a)
	}
}

// An out-of-order trace exports as before (rows in the order read), and
// the line formats, whose readers send rows in file order, say so.
func TestExportOutOfOrder(t *testing.T) {
	recs, m := roundTripPlain()
	recs[3], recs[4] = recs[4], recs[3]
	var buf strings.Builder
	var lost []string
	n, err := formats.Export(t.Context(), "vllm", &buf, traces.NewSliceReader(recs, m), with(formats.DefaultExportOptions(), func(o *formats.ExportOptions) { o.Lost = func(s traces.Text) { lost = append(lost, s.String()) } }))
	if err != nil || n != int64(len(recs)) {
		t.Fatalf("export: %d rows, %v", n, err)
	}
	back, _, err := importStringT(t, "vllm", "v", buf.String(), true)
	if err != nil || back[3].ArrivalNs != recs[3].ArrivalNs {
		t.Fatalf("rows reordered or lost: %v", err)
	}
	if !strings.Contains(strings.Join(lost, "\n"), "1 rows came out of arrival order") {
		t.Errorf("notes %q do not say the order", lost)
	}
}
