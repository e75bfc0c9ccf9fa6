package formats_test

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/traces"
)

// The fixture follows kv-cache-tester's documented format: a conversation
// with a subagent that spawns a subagent of its own, then a pretty-printed
// conversation with global hash ids, in one stream.
func TestImportWekaFixture(t *testing.T) {
	recs, m, st := importAllT(t, "weka", "testdata/import/weka.json", true)
	if m.BlockSize != 64 || m.Source != "weka:weka.json" || st.Skipped != 0 {
		t.Fatalf("Meta %+v, stats %+v", m, st)
	}
	const nr = traces.NotReported
	local := func(ids ...int64) []int64 {
		for i := range ids {
			ids[i] |= 1 << 32
		}
		return ids
	}
	want := []struct {
		arrivalNs, finishNs, thinkNs, parent int64
		session                              int64
		turn                                 int32
		in                                   int32
		model                                string
		blocks                               []int64
	}{
		{0, 2_500_000_000, 0, nr, 1, 1, 130, "model-a", local(1, 2, 3)},                               // the first call: no parent
		{5_000_000_000, 6_250_000_000, 1_500_000_000, 0, 1, 2, 200, "model-a", local(1, 2, 3, 4)},     // follows call 0 after its think time
		{7_500_000_000, 8_000_000_000, nr, 1, 1, 3, 64, "model-b", local(9)},                          // the subagent's first call: spawned by call 1, think time derived
		{8_000_000_000, 11_000_000_000, 1_750_000_000, 1, 1, 6, 260, "model-a", local(1, 2, 3, 4, 5)}, // the parent goes on after call 1, not after its subagent
		{8_750_000_000, 8_875_000_000, nr, 2, 1, 4, 70, "model-b", local(11, 12)},                     // the nested subagent: spawned by the subagent's call, times add up
		{9_500_000_000, 10_250_000_000, 1_000_000_000, 2, 1, 5, 150, "model-b", local(9, 10, 13)},     // the subagent goes on after its own call
		{0, nr, nr, nr, 2, 1, 64, "", []int64{1}},                                                     // the second conversation starts at 0 too; global ids kept
		{1, nr, nr, 6, 2, 2, 128, "", []int64{1, 7}},                                                  // 1 ns later, exact
	}
	if len(recs) != len(want) {
		t.Fatalf("%d rows, want %d", len(recs), len(want))
	}
	for i, w := range want {
		r := recs[i]
		if r.Seq != int64(i) || r.ArrivalNs != w.arrivalNs || r.FinishNs != w.finishNs || r.ThinkNs != w.thinkNs || r.ParentSeq != w.parent ||
			r.Session != w.session || r.Turn != w.turn || r.InputTokens != w.in || r.Model != w.model || !slices.Equal(r.PrefixBlocks, w.blocks) {
			t.Errorf("row %d = arrival %d finish %d think %d parent %d session %d turn %d in %d model %q blocks %v; want %+v",
				i, r.ArrivalNs, r.FinishNs, r.ThinkNs, r.ParentSeq, r.Session, r.Turn, r.InputTokens, r.Model, r.PrefixBlocks, w)
		}
		if len(r.AfterSeqs) != 0 || r.HasOutcome() {
			t.Errorf("row %d draws a join or an outcome: %+v", i, r)
		}
	}
}

// How documents are framed and linked: each case is a whole input and the
// (session, parent, think) of every row.
func TestImportWekaLinks(t *testing.T) {
	type row struct{ session, parent, think int64 }
	nr := int64(traces.NotReported)
	for _, tc := range []struct {
		name, content string
		want          []row
	}{
		{"Conversations concatenated without a separator (cat of files without a final newline) are read one by one.",
			`{"requests":[{"t":0,"in":1,"out":1}]}{"requests":[{"t":0,"in":1,"out":1}]}`,
			[]row{{1, nr, nr}, {2, nr, nr}}},
		{"A subagent as the first entry has no spawning call: its first call has no parent.",
			`{"requests":[{"t":1,"type":"subagent","requests":[{"t":0,"in":1,"out":1,"think_time":0}]},{"t":5,"in":1,"out":1,"think_time":2}]}`,
			[]row{{1, nr, nr}, {1, nr, 2e9}}},
		{"Two subagents spawned by the same call both hang off it (a fan-out).",
			`{"requests":[{"t":0,"in":1,"out":1},{"t":1,"type":"subagent","requests":[{"t":0,"in":1,"out":1}]},{"t":1,"type":"subagent","requests":[{"t":0,"in":1,"out":1}]}]}`,
			[]row{{1, nr, nr}, {1, 0, nr}, {1, 0, nr}}},
		{"An empty subagent adds no row and changes no link.",
			`{"requests":[{"t":0,"in":1,"out":1},{"t":1,"type":"subagent","requests":[]},{"t":2,"in":1,"out":1}]}`,
			[]row{{1, nr, nr}, {1, 0, nr}}},
		{"A skipped conversation takes no session number and no seqs.",
			`{"requests":[{"t":0,"in":-1,"out":1}]}` + "\n" + `{"requests":[{"t":0,"in":1,"out":1},{"t":1,"in":1,"out":1}]}`,
			[]row{{1, nr, nr}, {1, 0, nr}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			importRowsT(t, "weka", "links.json", tc.content, tc.want, "session, parent, think", func(r traces.Record) row {
				return row{r.Session, r.ParentSeq, r.ThinkNs}
			})
		})
	}
}

// A malformed conversation is one malformed row at the line where it
// starts; the default mode skips it whole and keeps the next.
func TestImportWekaBadRows(t *testing.T) {
	const secret = "SECRETCONTENT"
	good := `{"block_size":64,"requests":[{"t":0,"in":5,"out":1,"hash_ids":[1]}]}`
	for _, tc := range []struct {
		name, bad string
		rest      bool // the conversation after the bad one is still read
	}{
		{"A call without t has no arrival.", `{"requests":[{"in":5,"out":1}]}`, true},
		{"A negative in is not a token count.", `{"requests":[{"t":0,"in":-5,"out":1}]}`, true},
		{"A fractional out is not a token count.", `{"requests":[{"t":0,"in":5,"out":1.5}]}`, true},
		{"A call without out has no length.", `{"requests":[{"t":0,"in":5}]}`, true},
		{"A negative think_time is not a delay.", `{"requests":[{"t":0,"in":5,"out":1,"think_time":-1}]}`, true},
		{"An api_time holding text is not a duration.", `{"requests":[{"t":0,"in":5,"out":1,"api_time":"` + secret + `"}]}`, true},
		{"A local hash id of 2^32 does not fit the conversation's namespace.", `{"requests":[{"t":0,"in":5,"out":1,"hash_ids":[4294967296]}]}`, true},
		{"A call arriving before the call it follows cannot follow it.", `{"requests":[{"t":5,"in":5,"out":1},{"t":1,"in":5,"out":1}]}`, true},
		{"A different block_size cannot share the file's Meta.", `{"block_size":16,"requests":[{"t":0,"in":5,"out":1}]}`, true},
		{"hash_ids that are strings have the wrong type.", `{"requests":[{"t":0,"in":5,"out":1,"hash_ids":["` + secret + `"]}]}`, true},
		{"A top-level array is not a conversation.", `[1,2]`, true},
		{"Subagents nested 40 deep are refused.", `{"requests":[` + strings.Repeat(`{"t":0,"type":"subagent","requests":[`, 40) + `{"t":0,"in":1,"out":1}` + strings.Repeat(`]}`, 40) + `]}`, true},
		{"Text that is not JSON ends the stream.", secret + ` {"requests":[]}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			content := good + "\n" + tc.bad + "\n" + `{"requests":[{"t":0,"in":2,"out":1}]}` + "\n"
			recs, st, err := importBadLine2T(t, "weka", "bad.json", content, secret)
			wantRows := 1
			if tc.rest {
				wantRows = 2
			}
			if err != nil || len(recs) != wantRows || st.Skipped != 1 {
				t.Fatalf("non-strict: %d rows, %+v, %v; want %d rows, 1 skipped", len(recs), st, err, wantRows)
			}
			if tc.rest && (recs[1].Session != 2 || recs[1].InputTokens != 2) {
				t.Errorf("the conversation after the bad one: %+v", recs[1])
			}
		})
	}
}

// Two real traces of kv-cache-tester, kept in testdata/publictraces
// (Apache-2.0; see its README): concatenated as `cat` gives them, every
// call comes in, the token sums equal the totals each file states, the
// subagents' first calls hang off the call before them, and finish −
// arrival is each call's api_time.
func TestImportWekaPublicSample(t *testing.T) {
	files := []string{"../../testdata/publictraces/weka_trace_0504.json", "../../testdata/publictraces/weka_trace_0291.json"}
	var all []byte
	var wantIn, wantOut int64
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Totals struct {
				Combined struct{ Input, Output int64 } `json:"combined_tokens"`
			} `json:"totals"`
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		wantIn += doc.Totals.Combined.Input
		wantOut += doc.Totals.Combined.Output
		all = append(all, b...)
	}
	recs, st, err := importStringT(t, "weka", "sample.json", string(all), true)
	if err != nil || st.Skipped != 0 {
		t.Fatalf("import: %v, %+v", err, st)
	}
	var in, out int64
	subFirst := 0
	for i, r := range recs {
		in += int64(r.InputTokens)
		out += int64(r.OutputTokens)
		if r.ParentSeq >= int64(i) || (r.ParentSeq >= 0 && recs[r.ParentSeq].Session != r.Session) {
			t.Fatalf("row %d: parent %d is not an earlier row of its session", i, r.ParentSeq)
		}
		if r.FinishNs < r.ArrivalNs {
			t.Fatalf("row %d finishes before it arrives", i)
		}
		if r.ParentSeq >= 0 && r.ThinkNs == traces.NotReported {
			subFirst++ // a subagent's first call
			if p := recs[r.ParentSeq]; p.ArrivalNs != 1085e9 {
				t.Errorf("subagent call %d hangs off the call at %d ns, want the one at 1085 s", i, p.ArrivalNs)
			}
		}
	}
	if len(recs) != 35 || in != wantIn || out != wantOut || subFirst != 2 {
		t.Errorf("%d rows, %d/%d tokens, %d subagent starts; want 35 rows, %d/%d tokens (the files' totals), 2 subagent starts", len(recs), in, out, subFirst, wantIn, wantOut)
	}
}
