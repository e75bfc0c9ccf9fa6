package formats_test

import (
	"testing"

	"github.com/tokentrace/tokentrace/traces"
)

// The fixture follows TraceLab's documented round schema: two interleaved
// sessions (Claude, Codex), a round whose input is two tool results, and a
// round that never answered.
func TestImportTraceLabFixture(t *testing.T) {
	recs, m, st := importAllT(t, "tracelab", "testdata/import/tracelab.jsonl", true)
	if m.Source != "tracelab:tracelab.jsonl" || st.Rows != 4 || st.Skipped != 0 {
		t.Fatalf("Meta %+v, stats %+v", m, st)
	}
	const nr = traces.NotReported
	want := []struct {
		arrivalNs, finishNs, parent, session int64
		turn                                 int32
		in, out                              int32
		class, model                         string
	}{
		{0, 2_349_000_000, nr, 1, 1, 1000, 50, "claude", "claude-x"},              // sent at the user message, finished at the last tool call
		{0, 6_214_000_000, nr, 2, 1, 500, 20, "codex", "gpt-y"},                   // another session starts at 0 too; usage_report ends the round
		{21_099_000_000, 24_974_000_000, 0, 1, 2, 1600, 70, "claude", "claude-x"}, // sent at the later tool result (the slow tool), after row 0
		{279_849_000_000, nr, 2, 1, 3, 1700, 0, "claude", "claude-x"},             // nothing after the user message: no finish
	}
	for i, w := range want {
		r := recs[i]
		if r.ArrivalNs != w.arrivalNs || r.FinishNs != w.finishNs || r.ParentSeq != w.parent || r.Session != w.session || r.Turn != w.turn ||
			r.InputTokens != w.in || r.OutputTokens != w.out || r.Class != w.class || r.Model != w.model {
			t.Errorf("row %d = arrival %d finish %d parent %d session %d turn %d in %d out %d class %q model %q; want %+v",
				i, r.ArrivalNs, r.FinishNs, r.ParentSeq, r.Session, r.Turn, r.InputTokens, r.OutputTokens, r.Class, r.Model, w)
		}
		if r.ThinkNs != nr || len(r.PrefixBlocks) != 0 || r.HasOutcome() {
			t.Errorf("row %d sets a column the trace does not carry: %+v", i, r)
		}
	}
}

// How a round's arrival and finish come from its events: each case is one
// round's events (after a first round that fixes the session's start) and
// the arrival and finish it must get, in ms from that start.
func TestImportTraceLabTiming(t *testing.T) {
	const start = `{"session_id":"s","round_index":0,"input_tokens_total":1,"output_tokens":1,"timing_events":[{"event_type":"user_message","timestamp":"2026-01-01T00:00:00Z"}]}` + "\n"
	nr := int64(traces.NotReported)
	for _, tc := range []struct {
		name, events        string
		arrivalMs, finishMs int64
	}{
		{"The latest input event sends the round, whichever comes first in the list.",
			`{"event_type":"tool_result","timestamp":"2026-01-01T00:00:09Z"},{"event_type":"tool_result","timestamp":"2026-01-01T00:00:04Z"},{"event_type":"text","timestamp":"2026-01-01T00:00:10Z"}`, 9000, 10000},
		{"Without an input event the first event sends it.",
			`{"event_type":"text","timestamp":"2026-01-01T00:00:03Z"},{"event_type":"reasoning","timestamp":"2026-01-01T00:00:02Z"},{"event_type":"tool_call","timestamp":"2026-01-01T00:00:05Z"}`, 2000, 5000},
		{"Output events before the input is complete do not finish the round.",
			`{"event_type":"text","timestamp":"2026-01-01T00:00:01Z"},{"event_type":"user_message","timestamp":"2026-01-01T00:00:06Z"}`, 6000, nr},
		{"Events without a timestamp are ignored; offsets keep the milliseconds.",
			`{"event_type":"tool_result"},{"event_type":"user_message","timestamp":"2026-01-01T00:00:01.5Z"},{"event_type":"usage_report","timestamp":"2026-01-01T00:00:02.25+00:00"}`, 1500, 2250},
	} {
		t.Run(tc.name, func(t *testing.T) {
			content := start + `{"session_id":"s","round_index":1,"input_tokens_total":1,"output_tokens":1,"timing_events":[` + tc.events + `]}` + "\n"
			recs, _, err := importStringT(t, "tracelab", "timing.jsonl", content, true)
			if err != nil {
				t.Fatal(err)
			}
			r := recs[1]
			finish := r.FinishNs
			if finish != nr {
				finish /= 1e6
			}
			if r.ArrivalNs/1e6 != tc.arrivalMs || finish != tc.finishMs || r.ParentSeq != 0 {
				t.Errorf("arrival %d ms, finish %d, parent %d; want %d ms, %d, 0", r.ArrivalNs/1e6, finish, r.ParentSeq, tc.arrivalMs, tc.finishMs)
			}
		})
	}
}

// Malformed TraceLab rows: strict mode names the line, never the content;
// the default mode skips them and keeps the session's links.
func TestImportTraceLabBadRows(t *testing.T) {
	const secret = "SECRETCONTENT"
	good := `{"session_id":"s","round_index":0,"input_tokens_total":5,"output_tokens":1,"timing_events":[{"event_type":"user_message","timestamp":"2026-01-01T00:00:10Z"}]}` + "\n"
	after := `{"session_id":"s","round_index":2,"input_tokens_total":6,"output_tokens":1,"timing_events":[{"event_type":"user_message","timestamp":"2026-01-01T00:00:20Z"}]}` + "\n"
	for _, tc := range []struct{ name, bad string }{
		{"A round without session_id belongs to no session.", `{"input_tokens_total":5,"output_tokens":1,"timing_events":[{"event_type":"text","timestamp":"2026-01-01T00:00:11Z"}]}`},
		{"A null input_tokens_total leaves the prompt unknown.", `{"session_id":"s","input_tokens_total":null,"output_tokens":1,"timing_events":[{"event_type":"text","timestamp":"2026-01-01T00:00:11Z"}]}`},
		{"A negative output_tokens is not a count.", `{"session_id":"s","input_tokens_total":5,"output_tokens":-1,"timing_events":[{"event_type":"text","timestamp":"2026-01-01T00:00:11Z"}]}`},
		{"A round without timed events has no arrival.", `{"session_id":"s","input_tokens_total":5,"output_tokens":1,"timing_events":[]}`},
		{"A timestamp that is not ISO 8601 is refused without quoting it.", `{"session_id":"s","input_tokens_total":5,"output_tokens":1,"timing_events":[{"event_type":"text","timestamp":"` + secret + `"}]}`},
		{"A timestamp in the year 9999 is out of nanosecond range.", `{"session_id":"s","input_tokens_total":5,"output_tokens":1,"timing_events":[{"event_type":"text","timestamp":"9999-01-01T00:00:11Z"}]}`},
		{"A round before its session's first cannot be placed.", `{"session_id":"s","input_tokens_total":5,"output_tokens":1,"timing_events":[{"event_type":"user_message","timestamp":"2026-01-01T00:00:09Z"}]}`},
		{"A session_id that is a number has the wrong type.", `{"session_id":7,"input_tokens_total":5,"output_tokens":1,"timing_events":[{"event_type":"text","timestamp":"2026-01-01T00:00:11Z"}]}`},
		{"A line that is not JSON is skipped.", secret},
	} {
		t.Run(tc.name, func(t *testing.T) {
			content := good + tc.bad + "\n" + after
			recs, st, err := importBadLine2T(t, "tracelab", "bad.jsonl", content, secret)
			if err != nil || len(recs) != 2 || st.Skipped != 1 {
				t.Fatalf("non-strict: %d rows, %+v, %v; want 2 rows, 1 skipped", len(recs), st, err)
			}
			if recs[1].ParentSeq != 0 || recs[1].ArrivalNs != 10e9 {
				t.Errorf("the row after the bad one: parent %d arrival %d, want 0 and 10 s", recs[1].ParentSeq, recs[1].ArrivalNs)
			}
		})
	}
}

// TraceLab's own sanitized example sessions (kept in testdata/publictraces,
// see its README): every round comes in with the file's token sums, each
// session's rounds chain, and a round waits for its slow tool: the Claude
// session's second round is sent when its WebSearch result came back,
// 19.291 s after the first round's last tool call.
func TestImportTraceLabPublicSample(t *testing.T) {
	const path = "../../testdata/publictraces/tracelab_example_sessions.jsonl"
	recs, _, st := importAllT(t, "tracelab", path, true)
	type round struct {
		In  int64 `json:"input_tokens_total"`
		Out int64 `json:"output_tokens"`
	}
	var wantIn, wantOut int64
	for _, row := range jsonRows[round](t, path) {
		wantIn += row.In
		wantOut += row.Out
	}
	var in, out int64
	for i, r := range recs {
		in += int64(r.InputTokens)
		out += int64(r.OutputTokens)
		if r.FinishNs < r.ArrivalNs {
			t.Errorf("row %d finishes before it is sent", i)
		}
		if r.ParentSeq >= 0 {
			p := recs[r.ParentSeq]
			if p.Session != r.Session || r.ArrivalNs < p.FinishNs {
				t.Errorf("row %d: sent at %d before its parent %d finished at %d", i, r.ArrivalNs, r.ParentSeq, p.FinishNs)
			}
		} else if r.ArrivalNs != 0 {
			t.Errorf("row %d opens a session at %d, want 0", i, r.ArrivalNs)
		}
	}
	if st.Rows != 19 || recs[len(recs)-1].Session != 2 || in != wantIn || out != wantOut {
		t.Errorf("%d rows, %d sessions, %d/%d tokens; want 19 rows, 2 sessions, %d/%d", st.Rows, recs[len(recs)-1].Session, in, out, wantIn, wantOut)
	}
	if think := recs[1].ArrivalNs - recs[0].FinishNs; think != 19_291_000_000 {
		t.Errorf("think time before the second Claude round = %d ns, want 19.291 s", think)
	}
}

// TraceLab's replay CSV (csv_export) reads under the same --format: the
// published sample sessions, converted by the documented mapping, give one
// session per id with the whole prompt, chained parents and the tool waits
// as think times, and arrivals that add the waits to the session's start.
func TestImportTraceLabReplayCSV(t *testing.T) {
	recs, m, st := importAllT(t, "tracelab", "../../testdata/publictraces/tracelab_example_replay.csv", true)
	if st.Rows != 19 || st.Skipped != 0 || m.Get("tracelab_layout") != "replay_csv" {
		t.Fatalf("stats %+v, meta %+v: want 19 rows of the replay CSV layout", st, m)
	}
	const nr = traces.NotReported
	want := []struct {
		seq, arrivalNs, think, parent, session int64
		turn, in, out                          int32
	}{
		{0, 0, nr, nr, 1, 1, 27217 + 5055, 931},                                    // the first round: its arrival_time, no parent
		{1, 20_151_000_000, 20_151_000_000, 0, 1, 2, 29380 + 6360, 1016},           // after the first round's 20.151 s of tools
		{4, 54_451_000_000, 145_000_000, 3, 1, 5, 41129 + 460, 1275},               // waits add up: 20.151 + 12.688 + 21.467 + 0.145 s
		{5, 54_451_000_000, 0, 4, 1, 6, 41587 + 1289, 273},                         // a round without tools: think time 0
		{10, 1_000_000_000, nr, nr, 2, 1, 6912 + 2412, 444},                        // the second session arrives at 1 s
		{13, 1_000_000_000 + 6_332_000_000, 8_000_000, 12, 2, 4, 3456 + 6696, 233}, // compaction: the prefix shrank, the prompt is what was sent
	}
	for _, w := range want {
		r := recs[w.seq]
		if r.Seq != w.seq || r.ArrivalNs != w.arrivalNs || r.ThinkNs != w.think || r.ParentSeq != w.parent || r.Session != w.session ||
			r.Turn != w.turn || r.InputTokens != w.in || r.OutputTokens != w.out {
			t.Errorf("row %d = arrival %d think %d parent %d session %d turn %d in %d out %d; want %+v",
				w.seq, r.ArrivalNs, r.ThinkNs, r.ParentSeq, r.Session, r.Turn, r.InputTokens, r.OutputTokens, w)
		}
		if r.FinishNs != nr || r.HasOutcome() {
			t.Errorf("row %d sets a finish or outcome the CSV does not carry", w.seq)
		}
	}
}

// A malformed replay-CSV row is named by line and skipped, not the file.
func TestImportTraceLabReplayCSVBadRows(t *testing.T) {
	const secret = "ZZSECRETZZ"
	content := "id,input_len,output_len,arrival_time,round_idx,tool_wait_after_ms,prefix_len\n" +
		"0,10," + secret + ",0,0,1,0\n" +
		"0,10,5,0,1,0,20\n"
	recs, st, err := importBadLine2T(t, "tracelab", "replay.csv", content, secret)
	if err != nil || len(recs) != 1 || st.Skipped != 1 || recs[0].InputTokens != 30 || recs[0].ParentSeq != traces.NotReported {
		t.Fatalf("rows %+v, stats %+v, err %v: want the good row alone, a session of its own", recs, st, err)
	}
}
