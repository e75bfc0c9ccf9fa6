package formats_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/traces"
)

// inference-perf's own fan-in example (examples/otel/test_traces/advanced):
// two calls after the first run in parallel and the fourth waits for all
// three (its messages hold their outputs: inference-perf's causal edges),
// which the importer reads as a join; token counts are estimated as
// inference-perf does (the file has no usage), outputs from the recorded
// text rather than max_tokens, and the estimates are said. The expected
// values are inference-perf's own build_graph output at 7de5ef2.
func TestImportInferencePerfFanIn(t *testing.T) {
	recs, _, st := importAllT(t, "inference-perf", publicTraces+"inference-perf_fan_in_dependencies.json", true)
	if st.Rows != 4 {
		t.Fatalf("%d rows, want 4", st.Rows)
	}
	nr := int64(traces.NotReported)
	want := []struct {
		arrivalNs, finishNs, parent int64
		after                       []int64
		in, out                     int32
	}{
		{0, 2e9, nr, nil, 9, 42},                  // 37 characters / 4; a 170-character output
		{2.5e9, 4.5e9, 0, nil, 10, 49},            // after the first
		{3e9, 5e9, 0, nil, 8, 48},                 // in parallel with the second
		{6e9, 9e9, 2, []int64{0, 1, 2}, 183, 100}, // the fan-in: all three outputs are in its messages; parent = the one that ended last
	}
	for i, w := range want {
		g := recs[i]
		if g.Session != 1 || g.Turn != int32(i+1) || g.ArrivalNs != w.arrivalNs || g.FinishNs != w.finishNs || g.ParentSeq != w.parent ||
			!reflect.DeepEqual(g.AfterSeqs, w.after) || g.InputTokens != w.in || g.OutputTokens != w.out || g.Model != "gpt-4" {
			t.Errorf("row %d = %+v\nwant %+v", i, g, w)
		}
	}
}

// Usage attributes win over estimates; OTLP nanosecond times read too;
// non-LLM spans are skipped and counted; a bad document is skipped whole.
func TestImportInferencePerfSpans(t *testing.T) {
	content := `{"spans": [
 {"name": "tool bash", "start_time": "2026-01-01T00:00:00Z", "end_time": "2026-01-01T00:00:01Z", "attributes": {}},
 {"name": "chat m", "start_time_unix_nano": 5000000000, "end_time_unix_nano": "6000000000", "attributes": {"gen_ai.usage.input_tokens": 120, "gen_ai.usage.output_tokens": "7", "gen_ai.input.messages": "[{\"role\":\"user\",\"content\":\"x\"}]"}}
]}
{"spans": [{"name": "chat m", "start_time": "2026-01-01T00:00:09Z", "end_time": "2026-01-01T00:00:08Z", "attributes": {"gen_ai.usage.input_tokens": 1, "gen_ai.usage.output_tokens": 1}}]}
{"spans": [{"name": "chat m", "start_time": "2026-01-01T00:00:00Z", "end_time": "2026-01-01T00:00:01Z", "attributes": {"gen_ai.usage.prompt_tokens": 3, "gen_ai.usage.completion_tokens": 4}}]}
`
	recs, st, err := importStringT(t, "inference-perf", "t.json", content, false)
	if err != nil || len(recs) != 2 || st.Skipped != 1 {
		t.Fatalf("rows %+v, stats %+v, err %v", recs, st, err)
	}
	if recs[0].InputTokens != 120 || recs[0].OutputTokens != 7 || recs[0].FinishNs != 1e9 || recs[1].Session != 2 || recs[1].InputTokens != 3 || recs[1].OutputTokens != 4 {
		t.Errorf("rows %+v", recs)
	}
	if !strings.Contains(st.FirstSkip.Error(), "t.json:5") {
		t.Errorf("first skip %v, want it at t.json:5", st.FirstSkip)
	}
}
