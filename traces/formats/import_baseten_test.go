package formats_test

import (
	"bytes"
	"context"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/tokentrace/tokentrace/internal/golden"
	"github.com/tokentrace/tokentrace/traces"
	"github.com/tokentrace/tokentrace/traces/formats"
)

// basetenRow is one row of the Baseten trace schema (AIPerf's
// baseten_trace_models.py), the column types a pyarrow writer gives them.
type basetenRow struct {
	TimestampStartUnixMs int64   `parquet:"timestamp_start_unix_ms"`
	Prompt               string  `parquet:"prompt"`
	InputTokens          int64   `parquet:"input_tokens"`
	OutputTokens         int64   `parquet:"output_tokens"`
	TotalHashes          []int64 `parquet:"total_hashes,list"`
	ProvidedSessionID    *string `parquet:"provided_session_id,optional"`
	PoorManSessionID     *int64  `parquet:"poor_man_session_id,optional"`
	DurationE2EMs        *int64  `parquet:"duration_e2e_ms,optional"`
	DurationTTFTMs       *int64  `parquet:"duration_ttft_ms,optional"`
	RequestCanceled      *int64  `parquet:"request_canceled,optional"`
	CachedTokens         *int64  `parquet:"cached_tokens_reference,optional"`
	ModelName            *string `parquet:"model_name,optional"`
	OrgID                *string `parquet:"org_id,optional"`
	BlockSize            *int64  `parquet:"block_size,optional"`
}

const basetenFixture = publicTraces + "baseten_trace.parquet"

// basetenFixtureRows are the rows of testdata/publictraces/baseten_trace.parquet
// (written by this test with -update): a session of three turns with a
// growing shared prefix, a session keyed only by poor_man_session_id, a
// canceled request and a row without durations, out of time order.
func basetenFixtureRows() []basetenRow {
	s := func(v string) *string { return &v }
	n := func(v int64) *int64 { return &v }
	return []basetenRow{
		{1_000, "A-1 prompt", 128, 50, []int64{10, 11}, s("A"), n(1), n(800), n(120), n(0), n(0), s("m-large"), s("org-1"), n(64)},
		{3_000, "A-2 prompt", 192, 40, []int64{10, 11, 12}, s("A"), n(1), n(700), n(90), n(0), n(128), s("m-large"), s("org-1"), n(64)},
		{500, "B-1 prompt", 70, 5, []int64{20, 21}, nil, n(9), n(300), n(40), n(1), nil, s("m-large"), nil, n(64)},
		{5_500, "A-3 prompt", 256, 30, []int64{10, 11, 12, 13}, s("A"), n(1), n(650), n(80), n(0), n(192), s("m-large"), s("org-1"), n(64)},
		{6_000, "lone prompt", 9, 1, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil},
	}
}

// The fixture imports with arrivals re-based on the earliest row, sessions
// by provided_session_id then poor_man_session_id, block hashes, and the
// recorded durations as the production outcome; content is never read.
func TestImportBaseten(t *testing.T) {
	if golden.Update() {
		var buf bytes.Buffer
		w := parquet.NewGenericWriter[basetenRow](&buf)
		if _, err := w.Write(basetenFixtureRows()); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		golden.Write(t, basetenFixture, buf.Bytes())
	}
	r, recs := importWithNotes(t, "baseten", basetenFixture)
	if m := r.Meta(); m.BlockSize != 64 || len(recs) != 5 {
		t.Fatalf("block size %d, %d rows", m.BlockSize, len(recs))
	}
	const nr = traces.NotReported
	want := []struct {
		arrivalNs, firstNs, lastNs, session, parent int64
		turn, in, out, cached                       int32
		status                                      string
		blocks                                      []int64
	}{
		{500_000_000, 620_000_000, 1_300_000_000, 1, nr, 1, 128, 50, 0, "ok", []int64{10, 11}},
		{2_500_000_000, 2_590_000_000, 3_200_000_000, 1, 0, 2, 192, 40, 128, "ok", []int64{10, 11, 12}},
		{0, 40_000_000, 300_000_000, 2, nr, 1, 70, 5, nr, "disconnect", []int64{20, 21}}, // poor_man_session_id; canceled
		{5_000_000_000, 5_080_000_000, 5_650_000_000, 1, 1, 3, 256, 30, 192, "ok", []int64{10, 11, 12, 13}},
		{5_500_000_000, nr, nr, 0, nr, 0, 9, 1, nr, "", nil}, // no durations: no outcome
	}
	for i, w := range want {
		g := recs[i]
		if g.ArrivalNs != w.arrivalNs || g.FirstTokenNs != w.firstNs || g.LastTokenNs != w.lastNs || g.Session != w.session ||
			g.ParentSeq != w.parent || g.Turn != w.turn || g.InputTokens != w.in || g.OutputTokens != w.out ||
			g.ServerCachedTokens != w.cached || g.Status != w.status || !reflect.DeepEqual(g.PrefixBlocks, w.blocks) {
			t.Errorf("row %d = %+v\nwant %+v", i, g, w)
		}
	}
	if notes := strings.Join(noteStrings(r), "\n"); !strings.Contains(notes, "prompt (content, never kept)") || !strings.Contains(notes, "org_id") {
		t.Errorf("notes %q do not name the columns not kept", notes)
	}
	// Through a pipe (no random access) the file is spooled and reads the same.
	f, err := os.Open(basetenFixture)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	piped, err := formats.ImportFrom(context.Background(), "baseten", struct{ *os.File }{f}, "-", openStrict(true))
	if err != nil {
		t.Fatal(err)
	}
	again, err := traces.ReadFrom(piped)
	piped.Close()
	if err != nil || len(again) != len(recs) || !reflect.DeepEqual(again[3].PrefixBlocks, recs[3].PrefixBlocks) {
		t.Errorf("piped import: %d rows, err %v", len(again), err)
	}
}

// A file without the required columns, or not Parquet at all, is refused
// with an error naming it.
func TestImportBasetenRefused(t *testing.T) {
	for _, tc := range []struct{ name, content string }{
		{"Not Parquet.", "timestamp_start_unix_ms,input_tokens\n1,2\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := formats.ImportFrom(context.Background(), "baseten", strings.NewReader(tc.content), "x.parquet", traces.DefaultOpenOptions())
			if err == nil || !strings.Contains(err.Error(), "x.parquet") {
				t.Errorf("err = %v, want a refusal naming x.parquet", err)
			}
		})
	}
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[struct {
		Foo int64 `parquet:"foo"`
	}](&buf)
	w.Write([]struct {
		Foo int64 `parquet:"foo"`
	}{{1}})
	w.Close()
	if _, err := formats.ImportFrom(context.Background(), "baseten", &buf, "y.parquet", traces.DefaultOpenOptions()); err == nil || !strings.Contains(err.Error(), "timestamp_start_unix_ms") {
		t.Errorf("err = %v, want the missing column named", err)
	}
}
