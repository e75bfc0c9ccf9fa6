package formats_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/traces"
)

// Dynamo's request trace, written in the order requests end, comes out in
// arrival order with the agent tree as one session, the subagent's first
// call linked to its parent session's latest call, and the outcome Dynamo
// measured; tool, payload and duplicate records are counted, not read.
func TestImportDynamo(t *testing.T) {
	r, recs := importWithNotes(t, "dynamo", publicTraces+"dynamo_request_trace.jsonl")
	if m := r.Meta(); m.BlockSize != 4 || len(recs) != 4 {
		t.Fatalf("block size %d, %d rows; want 4 and 4", m.BlockSize, len(recs))
	}
	const nr = traces.NotReported
	want := []struct {
		arrivalNs, finishNs, firstNs, queueNs, prefillNs, session, parent int64
		turn, in, out, cached                                             int32
		blocks                                                            []int64
	}{
		{0, 800_000_000, 120_500_000, 2_250_000, 100_000_000, 1, nr, 1, 10, 4, 0, []int64{11, 22, -1}}, // the 2^64-1 hash keeps its bits
		{850_000_000, 1_600_000_000, nr, nr, nr, 1, 0, 2, 16, 8, nr, []int64{11, 22, 55, 66}},
		{900_000_000, 1_500_000_000, 950_000_000, nr, nr, 1, 1, 1, 6, 2, nr, []int64{33, 44}}, // the subagent: same tree, parent = main's latest call
		{1_500_000_000, 2_000_000_000, nr, nr, nr, 0, nr, 0, 7, 1, nr, nil},                   // no agent context; arrival = end − total
	}
	for i, w := range want {
		g := recs[i]
		if g.Seq != int64(i) || g.ArrivalNs != w.arrivalNs || g.FinishNs != w.finishNs || g.FirstTokenNs != w.firstNs || g.LastTokenNs != w.finishNs ||
			g.ServerQueueNs != w.queueNs || g.ServerPrefillNs != w.prefillNs || g.Session != w.session || g.ParentSeq != w.parent ||
			g.Turn != w.turn || g.InputTokens != w.in || g.OutputTokens != w.out || g.ServerCachedTokens != w.cached ||
			!reflect.DeepEqual(g.PrefixBlocks, w.blocks) || g.Status != traces.StatusOK || g.SentNs != w.arrivalNs {
			t.Errorf("row %d = %+v\nwant %+v", i, g, w)
		}
	}
	notes := strings.Join(noteStrings(r), "\n")
	for _, n := range []string{"1 duplicate request_end", "1 request_payload records were skipped", "1 tool and other non-request events"} {
		if !strings.Contains(notes, n) {
			t.Errorf("notes %q lack %q", notes, n)
		}
	}
}

// Malformed lines come out before any row: strict mode fails without a
// row, the default mode counts them and keeps the rest.
func TestImportDynamoBadLines(t *testing.T) {
	content := `{"schema":"dynamo.request.trace.v1","event_type":"request_end","event_time_unix_ms":5,"request":{"input_tokens":1,"output_tokens":1,"request_received_ms":1}}` + "\n" +
		`{"schema":"dynamo.request.trace.v1","event_type":"request_end","event_time_unix_ms":5,"request":{"input_tokens":"ZZSECRETZZ","output_tokens":1,"request_received_ms":1}}` + "\n" +
		`{"schema":"dynamo.request.trace.v1","event_type":"request_end","event_time_unix_ms":5,"request":{"input_tokens":1,"output_tokens":1}}` + "\n"
	recs, st, err := importBadLine2T(t, "dynamo", "d.jsonl", content, "ZZSECRETZZ")
	if err != nil || len(recs) != 1 || st.Skipped != 2 {
		t.Fatalf("rows %d, stats %+v, err %v: want 1 row, 2 skipped", len(recs), st, err)
	}
	strict, _, _ := importStringT(t, "dynamo", "d.jsonl", content, true)
	if len(strict) != 0 {
		t.Errorf("strict mode returned %d rows before failing, want none", len(strict))
	}
}

// SageMaker captures: usage from a JSON response or from the streamed
// events, else estimates said in notes; rows in inferenceTime order.
func TestImportSageMaker(t *testing.T) {
	r, recs := importWithNotes(t, "sagemaker", publicTraces+"sagemaker_data_capture.jsonl")
	want := []struct {
		arrivalNs int64
		in, out   int32
		api       string
	}{
		{0, 20, 7, traces.APIChat},                    // base64, streamed: usage from the last event
		{1_500_000_000, 12, 3, traces.APIChat},        // JSON body with usage
		{3_000_000_000, 3, 16, traces.APICompletions}, // no response: 10 bytes ≈ 3 tokens, output = max_tokens
	}
	if len(recs) != len(want) {
		t.Fatalf("%d rows, want %d", len(recs), len(want))
	}
	for i, w := range want {
		g := recs[i]
		if g.ArrivalNs != w.arrivalNs || g.InputTokens != w.in || g.OutputTokens != w.out || g.API != w.api || g.Model != "llama-3" {
			t.Errorf("row %d = arrival %d in %d out %d api %q model %q; want %+v", i, g.ArrivalNs, g.InputTokens, g.OutputTokens, g.API, g.Model, w)
		}
	}
	if notes := strings.Join(noteStrings(r), "\n"); !strings.Contains(notes, "1 captures without usage: input tokens estimated") || !strings.Contains(notes, "1 captures without usage: output length taken") {
		t.Errorf("notes %q do not count the estimated row", notes)
	}
}
