package formats_test

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/traces/formats"
)

// A model of how AIPerf reads a mooncake_trace file, from ai-dynamo/aiperf:
//   - src/aiperf/dataset/loader/mooncake_trace.py @ 0308411
//     (_group_traces: rows grouped by session_id in file order, a row
//     without one a session of its own; _infer_context_mode: a session's
//     context_mode, when given, on every row);
//   - docs/reference/conversation-context-mode.md @ 0109a64 (the default
//     for mooncake rows with hash_ids is deltas_without_responses: each
//     turn is appended to the session's history, live replies threaded in;
//     message_array_with_responses sends each turn as it is);
//   - src/aiperf/dataset/generator/prompt.py _build_token_sequence @
//     01da14a (a row's prompt is its hash_ids' blocks of the block size,
//     512 by default, the last block holding input_length − (len − 1) ×
//     block size tokens, which must be in 1..block size, else the row is
//     refused).
//
// A reply is taken as output_length tokens (AIPerf's max_tokens).

type aiperfTurn struct {
	session string
	sends   int64 // prompt tokens AIPerf sends
	refused bool  // the hash_ids do not fit the block size
}

func aiperfRead(t *testing.T, jsonl []byte, blockSize int64) []aiperfTurn {
	t.Helper()
	history := map[string]int64{} // tokens of the session's history, replies included
	var out []aiperfTurn
	for n, line := range bytes.Split(bytes.TrimSpace(jsonl), []byte("\n")) {
		var row struct {
			InputLength  int64   `json:"input_length"`
			OutputLength int64   `json:"output_length"`
			HashIDs      []int64 `json:"hash_ids"`
			SessionID    *string `json:"session_id"`
			ContextMode  string  `json:"context_mode"`
		}
		if err := json.Unmarshal(line, &row); err != nil {
			t.Fatalf("AIPerf model: line %d: %v", n+1, err)
		}
		turn := aiperfTurn{session: "row" + string(rune(n))}
		if row.SessionID != nil {
			turn.session = *row.SessionID
		}
		if len(row.HashIDs) > 0 {
			last := row.InputLength - int64(len(row.HashIDs)-1)*blockSize
			turn.refused = last <= 0 || last > blockSize
		}
		turn.sends = row.InputLength
		if row.ContextMode != "message_array_with_responses" {
			turn.sends += history[turn.session]
		}
		history[turn.session] = turn.sends + row.OutputLength
		out = append(out, turn)
	}
	return out
}

// The aiperf exports of the agentic fixture (trace_0291), of the test's
// agentic trace and of a plain trace, read by the model of AIPerf: every
// row is accepted at the block size the export says, every call is sent
// within 1 % of its recorded prompt, and each of trace_0291's two subagents
// is a session of its own (so AIPerf runs them side by side, as recorded).
func TestPeerAIPerfReadsExports(t *testing.T) {
	for _, tc := range peerTraces(t) {
		t.Run(tc.name, func(t *testing.T) {
			buf, lost := exportT(t, "aiperf", tc.recs, tc.m)
			bs := int64(formats.DefaultExportBlockSize)
			if tc.m.BlockSize > 0 {
				bs = int64(tc.m.BlockSize)
				if !strings.Contains(strings.Join(lost, "\n"), "hash_ids are "+itoa(bs)+"-token blocks") {
					t.Errorf("the block size is not said: %q", lost)
				}
			}
			turns := aiperfRead(t, buf.Bytes(), bs)
			if len(turns) != len(tc.recs) {
				t.Fatalf("%d rows, want %d", len(turns), len(tc.recs))
			}
			for i, r := range tc.recs { // one row per record, in order
				if turns[i].refused {
					t.Errorf("seq %d: AIPerf refuses the row's hash_ids at %d-token blocks", r.Seq, bs)
				}
				if d := math.Abs(float64(turns[i].sends-int64(r.InputTokens))) / float64(r.InputTokens); d > 0.01 {
					t.Errorf("seq %d: AIPerf sends %d tokens, the trace has %d (%.1f%% off)", r.Seq, turns[i].sends, r.InputTokens, 100*d)
				}
			}
			if tc.name == "trace_0291" {
				// Seqs 16–20 are subagent 1, 21–26 and 28 subagent 2.
				sub1, sub2, main := turns[16].session, turns[21].session, turns[15].session
				for _, s := range []int{17, 18, 19, 20} {
					if turns[s].session != sub1 {
						t.Errorf("seq %d in session %s, want subagent 1's %s", s, turns[s].session, sub1)
					}
				}
				for _, s := range []int{22, 23, 24, 25, 26, 28} {
					if turns[s].session != sub2 {
						t.Errorf("seq %d in session %s, want subagent 2's %s", s, turns[s].session, sub2)
					}
				}
				if sub1 == sub2 || sub1 == main || sub2 == main || turns[27].session != main {
					t.Errorf("sessions main %s (seq 27 in %s), subagents %s and %s: want three", main, turns[27].session, sub1, sub2)
				}
			}
		})
	}
}

func itoa(v int64) string { b, _ := json.Marshal(v); return string(b) }

// AIPerf's documented multi-turn example (the mooncake loader's docstring:
// turns of 300 then 150 tokens in session abc-123) imports as AIPerf sends
// it: the second turn is 300 + 40 + 150 = 490 tokens, within 2 %.
func TestPeerAIPerfImportsSessions(t *testing.T) {
	raw, err := os.ReadFile(publicTraces + "aiperf_mooncake_sessions.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	recs, _, _ := importAllT(t, "aiperf", publicTraces+"aiperf_mooncake_sessions.jsonl", true)
	turns := aiperfRead(t, raw, formats.DefaultExportBlockSize)
	if len(turns) != len(recs) {
		t.Fatalf("%d rows, AIPerf reads %d", len(recs), len(turns))
	}
	for i := range turns {
		if d := math.Abs(float64(int64(recs[i].InputTokens)-turns[i].sends)) / float64(turns[i].sends); d > 0.02 {
			t.Errorf("row %d: prompt %d, AIPerf sends %d", i, recs[i].InputTokens, turns[i].sends)
		}
	}
	if recs[3].InputTokens != 490 {
		t.Errorf("the second turn is %d tokens, want 490", recs[3].InputTokens)
	}
	// A session marked message_array_with_responses sends each row whole.
	content := `{"session_id": "a", "context_mode": "message_array_with_responses", "input_length": 300, "output_length": 40}
{"session_id": "a", "context_mode": "message_array_with_responses", "delay": 2, "input_length": 350, "output_length": 20}
`
	got, _, err := importStringT(t, "aiperf", "m.jsonl", content, true)
	if err != nil || len(got) != 2 || got[1].InputTokens != 350 || aiperfRead(t, []byte(content), 512)[1].sends != 350 {
		t.Errorf("rows %+v, err %v", got, err)
	}
}

// A model of the 512-token readers of mooncake files (AIPerf's
// mooncake_trace at its default block size, GuideLLM's kind=mooncake at
// its default hash_id_block_size): a row is refused unless its hash_ids
// are ceil(input_length / 512) long (prompt.py above). The mooncake export
// of the agentic fixture (64-token blocks) is read whole, and its shared
// prefixes survive: consecutive turns of the main chain share their
// leading 512-token blocks.
func TestPeerMooncakeReadsExportAt512(t *testing.T) {
	w291, wm, _ := importAllT(t, "weka", publicTraces+"weka_trace_0291.json", true)
	buf, lost := exportT(t, "mooncake", w291, wm)
	if !strings.Contains(strings.Join(lost, "\n"), "re-cut from the trace's 64-token blocks to 512-token blocks") {
		t.Errorf("the re-cut is not said: %q", lost)
	}
	turns := aiperfRead(t, buf.Bytes(), 512)
	for i, tr := range turns {
		if tr.refused {
			t.Errorf("row %d refused at 512-token blocks", i)
		}
	}
	back, _, err := importStringT(t, "mooncake", "m.jsonl", buf.String(), true)
	if err != nil {
		t.Fatal(err)
	}
	// Seq 0 (17,869 tokens) and seq 1 (18,763, its continuation): 34 whole
	// 512-token blocks of seq 0 are seq 1's first 34.
	if len(back[0].PrefixBlocks) != 35 || !slices.Equal(back[0].PrefixBlocks[:34], back[1].PrefixBlocks[:34]) {
		t.Errorf("seq 0 blocks %v, seq 1 %v", back[0].PrefixBlocks, back[1].PrefixBlocks)
	}
}
