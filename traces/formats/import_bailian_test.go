package formats_test

import (
	"testing"

	"github.com/tokentrace/tokentrace/traces"
	"github.com/tokentrace/tokentrace/traces/formats"
)

// The fixture follows the published schema (README of
// alibaba-edu/qwen-bailian-usagetraces-anon): two roots, a second turn, a
// second child of the same root (a fan-out), a third turn and a request
// whose parent is outside the file.
func TestImportBailianFixture(t *testing.T) {
	recs, m, st := importAllT(t, "bailian", "testdata/import/bailian.jsonl", true)
	if m.BlockSize != formats.BailianBlockSize || m.Source != "bailian:bailian.jsonl" {
		t.Errorf("Meta block size %d source %q, want %d bailian:bailian.jsonl", m.BlockSize, m.Source, formats.BailianBlockSize)
	}
	if st.Rows != 6 || st.Skipped != 0 {
		t.Fatalf("stats %+v, want 6 rows, none skipped", st)
	}
	want := []struct {
		arrivalNs       int64
		in, out         int32
		session         int64
		turn            int32
		parent          int64
		class           string
		blocks, blocks0 int
	}{
		{61_114_000_000, 521, 132, 1, 1, traces.NotReported, "text", 33, 1089}, // root: a new session, no parent
		{61_500_000_000, 40, 7, 2, 1, traces.NotReported, "search", 3, 1089},   // another root: the next session
		{75_020_000_000, 680, 90, 1, 2, 0, "text", 43, 1089},                   // continues chat 159: its session, parent seq 0
		{80_000_000_000, 17, 3, 3, 3, traces.NotReported, "image", 2, 7001},    // parent 55 is not in the file: a session of its own, turn kept
		{90_000_000_001, 533, 20, 1, 2, 0, "file", 34, 1089},                   // a second child of 159 (fan-out); the timestamp is exact to 1 ns
		{120_250_000_000, 790, 0, 1, 3, 2, "text", 50, 1089},                   // continues chat 161 (seq 2)
	}
	if len(recs) != len(want) {
		t.Fatalf("%d rows, want %d", len(recs), len(want))
	}
	for i, w := range want {
		r := recs[i]
		if r.Seq != int64(i) || r.ArrivalNs != w.arrivalNs || r.InputTokens != w.in || r.OutputTokens != w.out ||
			r.Session != w.session || r.Turn != w.turn || r.ParentSeq != w.parent || r.Class != w.class ||
			len(r.PrefixBlocks) != w.blocks || r.PrefixBlocks[0] != int64(w.blocks0) {
			t.Errorf("row %d = seq %d arrival %d in %d out %d session %d turn %d parent %d class %q blocks %d; want %+v",
				i, r.Seq, r.ArrivalNs, r.InputTokens, r.OutputTokens, r.Session, r.Turn, r.ParentSeq, r.Class, len(r.PrefixBlocks), w)
		}
		if r.Category != "" || r.PrefixTokens != 0 || r.FinishNs != traces.NotReported || r.ThinkNs != traces.NotReported || len(r.AfterSeqs) != 0 || r.HasOutcome() {
			t.Errorf("row %d sets a column the trace does not carry: %+v", i, r)
		}
	}
}

// Rows that bend the schema: each case is a whole file and the sessions,
// turns and parents it must give.
func TestImportBailianLinks(t *testing.T) {
	type row struct {
		session int64
		turn    int32
		parent  int64
	}
	nr := int64(traces.NotReported)
	for _, tc := range []struct {
		name    string
		content string
		want    []row
	}{
		{"A file without parent_chat_id reads every row as a root, each its own session.",
			`{"chat_id": 1, "timestamp": 0, "input_length": 1, "output_length": 1}` + "\n" +
				`{"chat_id": 2, "timestamp": 1, "input_length": 1, "output_length": 1}` + "\n",
			[]row{{1, 1, nr}, {2, 1, nr}}},
		{"A missing turn is the parent's turn + 1, and 1 for a root.",
			`{"chat_id": 1, "parent_chat_id": -1, "timestamp": 0, "input_length": 1, "output_length": 1}` + "\n" +
				`{"chat_id": 2, "parent_chat_id": 1, "timestamp": 1, "input_length": 1, "output_length": 1}` + "\n" +
				`{"chat_id": 3, "parent_chat_id": 2, "timestamp": 2, "input_length": 1, "output_length": 1}` + "\n",
			[]row{{1, 1, nr}, {1, 2, 0}, {1, 3, 1}}},
		{"A parent that comes later in the file is not a parent yet: the child starts its own session and the parent stays a root.",
			`{"chat_id": 2, "parent_chat_id": 1, "timestamp": 0, "input_length": 1, "output_length": 1, "turn": 2}` + "\n" +
				`{"chat_id": 1, "parent_chat_id": -1, "timestamp": 1, "input_length": 1, "output_length": 1, "turn": 1}` + "\n",
			[]row{{1, 2, nr}, {2, 1, nr}}},
		{"Sessions interleave: a turn joins its root's session however many rows of other sessions came between.",
			`{"chat_id": 10, "parent_chat_id": -1, "timestamp": 0, "input_length": 1, "output_length": 1, "turn": 1}` + "\n" +
				`{"chat_id": 20, "parent_chat_id": -1, "timestamp": 1, "input_length": 1, "output_length": 1, "turn": 1}` + "\n" +
				`{"chat_id": 21, "parent_chat_id": 20, "timestamp": 2, "input_length": 1, "output_length": 1, "turn": 2}` + "\n" +
				`{"chat_id": 11, "parent_chat_id": 10, "timestamp": 3, "input_length": 1, "output_length": 1, "turn": 2}` + "\n",
			[]row{{1, 1, nr}, {2, 1, nr}, {2, 2, 1}, {1, 2, 0}}},
		{"A skipped malformed row does not shift the seqs that parents point to.",
			`{"chat_id": 1, "parent_chat_id": -1, "timestamp": 0, "input_length": 1, "output_length": 1, "turn": 1}` + "\n" +
				`{"chat_id": 2, "parent_chat_id": -1, "timestamp": 1, "input_length": -4, "output_length": 1, "turn": 1}` + "\n" +
				`{"chat_id": 3, "parent_chat_id": 1, "timestamp": 2, "input_length": 1, "output_length": 1, "turn": 2}` + "\n",
			[]row{{1, 1, nr}, {1, 2, 0}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			importRowsT(t, "bailian", "links.jsonl", tc.content, tc.want, "session, turn, parent", func(r traces.Record) row {
				return row{r.Session, r.Turn, r.ParentSeq}
			})
		})
	}
}

// Malformed Bailian rows: strict mode names the line, never the content;
// the default mode skips and counts them.
func TestImportBailianBadRows(t *testing.T) {
	const secret = "SECRETCONTENT"
	good := `{"chat_id": 1, "parent_chat_id": -1, "timestamp": 0.5, "input_length": 5, "output_length": 1, "type": "text", "turn": 1, "hash_ids": [0]}` + "\n"
	for _, tc := range []struct {
		name, bad string
	}{
		{"A row without chat_id cannot be linked to.", `{"parent_chat_id": -1, "timestamp": 1, "input_length": 5, "output_length": 1}`},
		{"A fractional chat_id is not an id.", `{"chat_id": 2.5, "timestamp": 1, "input_length": 5, "output_length": 1}`},
		{"A chat_id seen before would make two rows one request.", `{"chat_id": 1, "timestamp": 1, "input_length": 5, "output_length": 1}`},
		{"A row that is its own parent is a cycle.", `{"chat_id": 2, "parent_chat_id": 2, "timestamp": 1, "input_length": 5, "output_length": 1}`},
		{"A parent id below -1 is not in the schema.", `{"chat_id": 2, "parent_chat_id": -7, "timestamp": 1, "input_length": 5, "output_length": 1}`},
		{"A timestamp holding text is not seconds.", `{"chat_id": 2, "timestamp": "` + secret + `", "input_length": 5, "output_length": 1}`},
		{"A negative timestamp is before the trace start.", `{"chat_id": 2, "timestamp": -1, "input_length": 5, "output_length": 1}`},
		{"A missing input_length leaves the prompt unknown.", `{"chat_id": 2, "timestamp": 1, "output_length": 1}`},
		{"A fractional output_length is not a token count.", `{"chat_id": 2, "timestamp": 1, "input_length": 5, "output_length": 1.5}`},
		{"A negative turn is not a turn.", `{"chat_id": 2, "timestamp": 1, "input_length": 5, "output_length": 1, "turn": -2}`},
		{"A type that is a number has the wrong type.", `{"chat_id": 2, "timestamp": 1, "input_length": 5, "output_length": 1, "type": 3}`},
		{"hash_ids that are strings have the wrong type.", `{"chat_id": 2, "timestamp": 1, "input_length": 5, "output_length": 1, "hash_ids": ["` + secret + `"]}`},
		{"A line that is not JSON is skipped.", secret},
	} {
		t.Run(tc.name, func(t *testing.T) {
			content := good + tc.bad + "\n" + `{"chat_id": 9, "parent_chat_id": 1, "timestamp": 2, "input_length": 5, "output_length": 1, "turn": 2}` + "\n"
			recs, st, err := importBadLine2T(t, "bailian", "bad.jsonl", content, secret)
			if err != nil || len(recs) != 2 || st.Skipped != 1 {
				t.Fatalf("non-strict: %d rows, %+v, %v; want 2 rows, 1 skipped", len(recs), st, err)
			}
			if recs[1].ParentSeq != 0 || recs[1].Session != recs[0].Session {
				t.Errorf("the row after the bad one lost its parent: %+v", recs[1])
			}
		})
	}
}

// The real traces, when present (docs/traces.md): every link points back to
// an earlier row of the same session that arrived no later, turns grow
// along links, and ids cover the prompt in 16-token blocks.
func TestImportBailianSharedTraces(t *testing.T) {
	for _, f := range []string{"qwen_traceA_blksz_16.jsonl", "qwen_traceB_blksz_16.jsonl", "qwen_thinking_blksz_16.jsonl", "qwen_coder_blksz_16.jsonl"} {
		t.Run(f, func(t *testing.T) {
			path := importSharedTrace(t, "bailian/"+f)
			recs, m, st := importAllT(t, "bailian", path, false)
			if st.Skipped != 0 || len(recs) == 0 || m.BlockSize != 16 {
				t.Fatalf("%d rows, %d skipped (first %v), block size %d", len(recs), st.Skipped, st.FirstSkip, m.BlockSize)
			}
			links, covered := 0, 0
			for i, r := range recs {
				if r.Session < 1 || r.Turn < 1 {
					t.Fatalf("row %d: session %d turn %d", i, r.Session, r.Turn)
				}
				if n := int(r.InputTokens+15) / 16; len(r.PrefixBlocks) == n {
					covered++
				}
				if r.ParentSeq == traces.NotReported {
					continue
				}
				links++
				p := recs[r.ParentSeq]
				if r.ParentSeq >= int64(i) || p.Session != r.Session || p.ArrivalNs > r.ArrivalNs || p.Turn >= r.Turn {
					t.Fatalf("row %d links to row %d: session %d/%d arrival %d/%d turn %d/%d", i, r.ParentSeq, r.Session, p.Session, r.ArrivalNs, p.ArrivalNs, r.Turn, p.Turn)
				}
			}
			t.Logf("%s: %d rows, %d linked turns, %d rows with ceil(input/16) ids", f, len(recs), links, covered)
			if covered*100 < len(recs)*99 {
				t.Errorf("only %d of %d rows have ceil(input_length/16) hash_ids", covered, len(recs))
			}
		})
	}
}
