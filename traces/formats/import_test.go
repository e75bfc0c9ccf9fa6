package formats_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/internal/testtraces"
	"github.com/tokentrace/tokentrace/traces"
	"github.com/tokentrace/tokentrace/traces/formats"
)

// importSharedTrace returns the path of a public trace (see
// internal/testtraces) or skips the test when it is absent.
func importSharedTrace(t testing.TB, rel string) string {
	t.Helper()
	return testtraces.Path(t, rel)
}

func importAllT(t *testing.T, format, name string, strict bool) ([]traces.Record, traces.Meta, traces.ReadStats) {
	t.Helper()
	recs, m, st, err := formats.ImportAll(context.Background(), format, name, openStrict(strict))
	if err != nil {
		t.Fatalf("ImportAll(%s, %s) error: %v", format, name, err)
	}
	return recs, m, st
}

// jsonRows decodes each JSON value of the file at path into a T: the
// independent reading, with encoding/json, that importer tests compare with.
func jsonRows[T any](t *testing.T, path string) []T {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []T
	dec := json.NewDecoder(f)
	for {
		var row T
		if err := dec.Decode(&row); err == io.EOF {
			return rows
		} else if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		rows = append(rows, row)
	}
}

func importStringT(t *testing.T, format, name, content string, strict bool) ([]traces.Record, traces.ReadStats, error) {
	t.Helper()
	fn, err := formats.Importer(format)
	if err != nil {
		t.Fatal(err)
	}
	r, err := fn(strings.NewReader(content), name, openStrict(strict))
	if err != nil {
		return nil, traces.ReadStats{}, err
	}
	defer r.Close()
	recs, err := traces.ReadFrom(r)
	return recs, r.Stats(), err
}

// importRowsT imports content in the default mode and checks view of each
// row against want, in order; what names the viewed fields in errors.
func importRowsT[R comparable](t *testing.T, format, name, content string, want []R, what string, view func(traces.Record) R) {
	t.Helper()
	recs, _, err := importStringT(t, format, name, content, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(want) {
		t.Fatalf("%d rows, want %d", len(recs), len(want))
	}
	for i, w := range want {
		if got := view(recs[i]); got != w {
			t.Errorf("row %d: %s = %v, want %v", i, what, got, w)
		}
	}
}

// importBadLine2T checks that content, whose line 2 is malformed, fails a
// strict import with a malformed-row error on line 2 that does not quote
// secret, and returns its import in the default mode.
func importBadLine2T(t *testing.T, format, name, content, secret string) ([]traces.Record, traces.ReadStats, error) {
	t.Helper()
	_, _, err := importStringT(t, format, name, content, true)
	var re *traces.RowError
	if !errors.As(err, &re) || re.Line != 2 || !errors.Is(err, traces.ErrMalformed) {
		t.Fatalf("strict error = %v, want a malformed-row error on line 2", err)
	}
	if strings.Contains(err.Error(), secret) {
		t.Errorf("error %q quotes the input", err)
	}
	return importStringT(t, format, name, content, false)
}

// The Azure 2023 code and conversation traces import with the arrival
// offsets of Vidur's re-based copies (splitwise_*.csv) to within 1 µs, and
// the same token counts.
func TestImportAzureMatchesVidurSplitwise(t *testing.T) {
	for _, tc := range []struct {
		azure, vidur string
		rows         int
	}{
		{"azure_llm_2023/AzureLLMInferenceTrace_code.csv", "vidur_processed/splitwise_code.csv", 8819},
		{"azure_llm_2023/AzureLLMInferenceTrace_conv.csv", "vidur_processed/splitwise_conv.csv", 19366},
	} {
		t.Run(filepath.Base(tc.azure), func(t *testing.T) {
			az, m, st := importAllT(t, "azure", importSharedTrace(t, tc.azure), true)
			sw, _, _ := importAllT(t, "splitwise", importSharedTrace(t, tc.vidur), true)
			if len(az) != tc.rows || len(sw) != tc.rows {
				t.Fatalf("rows: azure %d, splitwise %d, want %d", len(az), len(sw), tc.rows)
			}
			if st.Rows != int64(tc.rows) || st.Skipped != 0 {
				t.Errorf("Stats() = %+v, want %d rows and no skips", st, tc.rows)
			}
			if want := "azure:" + filepath.Base(tc.azure); m.Source != want {
				t.Errorf("Meta.Source = %q, want %q", m.Source, want)
			}
			var maxDiff int64
			for i := range az {
				d := az[i].ArrivalNs - sw[i].ArrivalNs
				if d < 0 {
					d = -d
				}
				maxDiff = max(maxDiff, d)
				if d > 1000 {
					t.Fatalf("row %d: azure arrival %d ns, splitwise %d ns: differ by more than 1 µs", i, az[i].ArrivalNs, sw[i].ArrivalNs)
				}
				if az[i].InputTokens != sw[i].InputTokens || az[i].OutputTokens != sw[i].OutputTokens {
					t.Fatalf("row %d: azure tokens %d/%d, splitwise %d/%d", i, az[i].InputTokens, az[i].OutputTokens, sw[i].InputTokens, sw[i].OutputTokens)
				}
				if az[i].Seq != int64(i) {
					t.Fatalf("row %d: Seq = %d", i, az[i].Seq)
				}
			}
			t.Logf("%d rows, max arrival difference %d ns", len(az), maxDiff)
		})
	}
}

// The Mooncake traces import every row, and the token sums equal the sums
// computed from the file with encoding/json.
func TestImportMooncakeSharedTraces(t *testing.T) {
	for _, tc := range []struct {
		file string
		rows int
	}{
		{"mooncake/conversation_trace.jsonl", 12031},
		{"mooncake/synthetic_trace.jsonl", 3993},
		// The tool-and-agent trace: same keys and block size, 23,608 requests
		// (FAST25-release/README.md @ 3b5a5941).
		{"mooncake/toolagent_trace.jsonl", 23608},
	} {
		t.Run(filepath.Base(tc.file), func(t *testing.T) {
			path := importSharedTrace(t, tc.file)
			recs, m, _ := importAllT(t, "mooncake", path, true)
			if len(recs) != tc.rows {
				t.Fatalf("rows = %d, want %d", len(recs), tc.rows)
			}
			// Independent sums.
			type mooncakeRow struct {
				Timestamp    int64   `json:"timestamp"`
				InputLength  int64   `json:"input_length"`
				OutputLength int64   `json:"output_length"`
				HashIDs      []int64 `json:"hash_ids"`
			}
			var wantIn, wantOut, wantBlocks, wantTS int64
			for _, row := range jsonRows[mooncakeRow](t, path) {
				wantIn += row.InputLength
				wantOut += row.OutputLength
				wantBlocks += int64(len(row.HashIDs))
				wantTS += row.Timestamp
			}
			var in, out, blocks, ts int64
			for _, r := range recs {
				in += int64(r.InputTokens)
				out += int64(r.OutputTokens)
				blocks += int64(len(r.PrefixBlocks))
				ts += r.ArrivalNs / 1e6
			}
			if in != wantIn || out != wantOut || blocks != wantBlocks || ts != wantTS {
				t.Errorf("sums: input %d, output %d, blocks %d, timestamps %d; want %d, %d, %d, %d", in, out, blocks, ts, wantIn, wantOut, wantBlocks, wantTS)
			}
			if m.BlockSize != 512 || m.Source != "mooncake:"+filepath.Base(tc.file) {
				t.Errorf("Meta = %+v, want block size 512 and source mooncake:%s", m, filepath.Base(tc.file))
			}
			cats := map[string]int{}
			shared := 0
			for _, r := range recs {
				if r.Category != "" {
					cats[r.Category]++
					shared++
				}
				if r.PrefixTokens > r.InputTokens || (r.Category == "") != (r.PrefixTokens == 0) {
					t.Fatalf("seq %d: category %q prefix %d input %d", r.Seq, r.Category, r.PrefixTokens, r.InputTokens)
				}
			}
			t.Logf("input %d, output %d tokens; %d rows reuse a prefix, %d categories", in, out, shared, len(cats))
		})
	}
}

// import → export mooncake → import gives the same records, and for the
// published files the export is byte-for-byte the original.
func TestMooncakeRoundTrip(t *testing.T) {
	files := []string{"testdata/import/mooncake.jsonl"}
	for _, f := range []string{"mooncake/conversation_trace.jsonl", "mooncake/synthetic_trace.jsonl"} {
		p := filepath.Join(testtraces.Dir(), f)
		if _, err := os.Stat(p); err == nil && testtraces.Dir() != "" {
			files = append(files, p)
		} else {
			t.Logf("skipping %s: public traces not available (docs/traces.md)", f)
		}
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			ctx := context.Background()
			first, m, _ := importAllT(t, "mooncake", path, true)
			var buf bytes.Buffer
			n, err := formats.Export(ctx, "mooncake", &buf, &exportSliceReader{recs: first, meta: m}, formats.DefaultExportOptions())
			if err != nil || n != int64(len(first)) {
				t.Fatalf("Export = %d, %v; want %d rows", n, err, len(first))
			}
			orig, _ := os.ReadFile(path)
			if !bytes.Equal(buf.Bytes(), orig) {
				t.Errorf("export differs from the original file (%d vs %d bytes)", buf.Len(), len(orig))
			}
			second, err := importReadMooncake(buf.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(first, second) {
				for i := range first {
					if !reflect.DeepEqual(first[i], second[i]) {
						t.Fatalf("row %d after the round trip:\n got %+v\nwant %+v", i, second[i], first[i])
					}
				}
				t.Fatalf("round trip changed the records (%d vs %d rows)", len(second), len(first))
			}
		})
	}
}

func importReadMooncake(b []byte) ([]traces.Record, error) {
	r, err := formats.NewMooncakeReader(bytes.NewReader(b), "roundtrip.jsonl", openStrict(true))
	if err != nil {
		return nil, err
	}
	return traces.ReadFrom(r)
}

// The Mooncake importer derives categories from the longest run of leading
// blocks already seen: the label names the last shared block and the prefix
// is that many 512-token blocks, capped at the prompt.
func TestImportMooncakeCategories(t *testing.T) {
	recs, m, _ := importAllT(t, "mooncake", "testdata/import/mooncake.jsonl", true)
	want := []struct {
		arrivalNs int64
		in, out   int32
		cat       string
		prefix    int32
		blocks    []int64
	}{
		{0, 1200, 40, "", 0, []int64{0, 1, 2}},                     // first row: nothing seen before
		{0, 700, 12, "prefix-0", 512, []int64{0, 3}},               // shares block 0
		{3052e6, 1600, 300, "prefix-2", 1536, []int64{0, 1, 2, 4}}, // shares 0,1,2
		{3052e6, 300, 5, "", 0, []int64{5}},                        // a new first block
		{6104e6, 2048, 1, "prefix-4", 2048, []int64{0, 1, 2, 4}},   // repeats row 2 entirely
		{9000e6, 512, 0, "prefix-0", 512, []int64{0}},              // only the common block
	}
	if len(recs) != len(want) {
		t.Fatalf("%d rows, want %d", len(recs), len(want))
	}
	for i, w := range want {
		r := recs[i]
		if r.ArrivalNs != w.arrivalNs || r.InputTokens != w.in || r.OutputTokens != w.out || r.Category != w.cat || r.PrefixTokens != w.prefix || !reflect.DeepEqual(r.PrefixBlocks, w.blocks) {
			t.Errorf("row %d = arrival %d in %d out %d cat %q prefix %d blocks %v; want %+v", i, r.ArrivalNs, r.InputTokens, r.OutputTokens, r.Category, r.PrefixTokens, r.PrefixBlocks, w)
		}
		if r.HasOutcome() || r.SentNs != traces.NotReported {
			t.Errorf("row %d has outcome columns set: %+v", i, r)
		}
	}
	if m.BlockSize != formats.MooncakeBlockSize {
		t.Errorf("Meta.BlockSize = %d, want %d", m.BlockSize, formats.MooncakeBlockSize)
	}
}

// Azure 2023 files have CRLF line endings, 7 fractional digits and no final
// newline; offsets are exact to 100 ns.
func TestImportAzure2023CRLF(t *testing.T) {
	raw, err := os.ReadFile("testdata/import/azure2023_crlf.csv")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(raw, []byte("\r\n")) || bytes.HasSuffix(raw, []byte("\n")) {
		t.Fatal("fixture must use CRLF and have no final newline")
	}
	recs, _, st := importAllT(t, "azure", "testdata/import/azure2023_crlf.csv", true)
	want := []struct {
		ns      int64
		in, out int32
	}{
		{0, 4808, 10},
		{52_000_000, 3180, 8},
		{52_000_000, 110, 27},
		{1_020_041_000, 7437, 1},
		{199_143_496_000, 0, 45},
		{2_576_020_040_000, 1469, 13}, // the last row, without a newline
	}
	if len(recs) != len(want) || st.Skipped != 0 {
		t.Fatalf("%d rows, %d skipped; want %d, 0", len(recs), st.Skipped, len(want))
	}
	for i, w := range want {
		if recs[i].ArrivalNs != w.ns || recs[i].InputTokens != w.in || recs[i].OutputTokens != w.out {
			t.Errorf("row %d = %d ns %d/%d, want %d ns %d/%d", i, recs[i].ArrivalNs, recs[i].InputTokens, recs[i].OutputTokens, w.ns, w.in, w.out)
		}
	}
}

// The 2024 format has a +00:00 offset and mixed fractions (none, 1 or 6
// digits).
func TestImportAzure2024(t *testing.T) {
	recs, _, _ := importAllT(t, "azure", "testdata/import/azure2024.csv", true)
	want := []int64{0, 9_930_000, 500_000_000, 1_000_011_000, 3_599_999_999_000, 3_600_000_000_000, 86_400_000_001_000}
	if len(recs) != len(want) {
		t.Fatalf("%d rows, want %d", len(recs), len(want))
	}
	for i, w := range want {
		if recs[i].ArrivalNs != w {
			t.Errorf("row %d arrival = %d ns, want %d", i, recs[i].ArrivalNs, w)
		}
	}
	if recs[6].InputTokens != 12000 || recs[6].OutputTokens != 640 {
		t.Errorf("last row tokens = %d/%d, want 12000/640", recs[6].InputTokens, recs[6].OutputTokens)
	}
}

// BurstGPT v1 (6 columns): model and log type are kept, failed rows (0
// response tokens) are kept with OutputTokens 0 and an http_error outcome.
func TestImportBurstGPTv1(t *testing.T) {
	recs, m, st := importAllT(t, "burstgpt", "testdata/import/burstgpt_v1.csv", true)
	if len(recs) != 6 || st.Skipped != 0 {
		t.Fatalf("%d rows %d skipped, want 6, 0", len(recs), st.Skipped)
	}
	if m.Get("burstgpt_version") != "" {
		t.Errorf("v1 file marked as version %q", m.Get("burstgpt_version"))
	}
	type row struct {
		ns      int64
		model   string
		class   string
		in, out int32
		ok      bool
	}
	want := []row{
		{0, "ChatGPT", "conversation", 391, 22, true},
		{38e9, "ChatGPT", "conversation", 1203, 244, true},
		{38e9, "GPT-4", "api", 388, 0, false},
		{94e9, "GPT-4", "conversation", 455, 301, true},
		{117e9, "ChatGPT", "api", 0, 0, false},
		{130e9, "ChatGPT", "api", 87, 19, true},
	}
	for i, w := range want {
		r := recs[i]
		got := row{r.ArrivalNs, r.Model, r.Class, r.InputTokens, r.OutputTokens, r.OK()}
		if got != w {
			t.Errorf("row %d = %+v, want %+v", i, got, w)
		}
		if r.Run != "production" || r.SentNs != r.ArrivalNs || r.ScheduledNs != r.ArrivalNs || r.LastTokenNs != traces.NotReported {
			t.Errorf("row %d outcome = run %q sent %d scheduled %d last %d", i, r.Run, r.SentNs, r.ScheduledNs, r.LastTokenNs)
		}
		if !w.ok && (r.Status != traces.StatusHTTPError || r.Error != formats.BurstGPTFailedError) {
			t.Errorf("failed row %d: status %q error %q", i, r.Status, r.Error)
		}
		if r.Session != 0 || r.Turn != 0 {
			t.Errorf("row %d has session %d turn %d without a Session ID column", i, r.Session, r.Turn)
		}
	}
}

// BurstGPT v3 inserts Session ID and Elapsed time at positions 2-3: columns
// are found by name, sessions are renumbered in order of first appearance
// with turns, and Elapsed time gives the E2E latency of successful rows.
func TestImportBurstGPTv3(t *testing.T) {
	recs, m, _ := importAllT(t, "burstgpt", "testdata/import/burstgpt_v3.csv", true)
	if m.Get("burstgpt_version") != "3" {
		t.Errorf("Meta burstgpt_version = %q, want 3", m.Get("burstgpt_version"))
	}
	type row struct {
		ns           int64
		session      int64
		turn         int32
		in, out      int32
		model, class string
		status       string
		e2eNs        int64 // -1 = undefined
	}
	want := []row{
		{0, 1, 1, 912, 440, "GPT-4", "conversation", "ok", 41e9},
		{2e9, 0, 0, 120, 35, "ChatGPT", "api", "ok", 3e9},
		{40e9, 2, 1, 38, 27, "ChatGPT", "conversation", "ok", 2e9},
		{51e9, 1, 2, 1420, 310, "GPT-4", "conversation", "ok", 12e9},
		{51e9, 0, 0, 2210, 0, "ChatGPT", "api", "http_error", -1},
		{80.5e9, 0, 0, 0, 0, "ChatGPT", "api", "http_error", -1},
		{120e9, 2, 2, 101, 88, "ChatGPT", "conversation", "ok", 5e9},
	}
	if len(recs) != len(want) {
		t.Fatalf("%d rows, want %d", len(recs), len(want))
	}
	for i, w := range want {
		r := recs[i]
		e2e := int64(-1)
		if d, ok := r.E2E(); ok {
			e2e = int64(d)
		}
		got := row{r.ArrivalNs, r.Session, r.Turn, r.InputTokens, r.OutputTokens, r.Model, r.Class, r.Status, e2e}
		if got != w {
			t.Errorf("row %d = %+v, want %+v", i, got, w)
		}
		if _, ok := r.TTFT(); ok {
			t.Errorf("row %d has a TTFT; BurstGPT has none", i)
		}
	}
	for _, r := range recs {
		for _, s := range []string{r.Category, r.Model, r.Class, r.Error, r.RequestID} {
			if strings.Contains(s, "-4b7a-") || strings.Contains(s, "-4c3d-") {
				t.Fatalf("seq %d keeps a session UUID: %q", r.Seq, s)
			}
		}
	}
}

// Vidur's splitwise CSVs carry float artefacts; arrivals round to the
// nearest nanosecond and are not re-based. Length-only files import with
// arrival 0.
func TestImportSplitwise(t *testing.T) {
	recs, _, _ := importAllT(t, "splitwise", "testdata/import/splitwise.csv", true)
	want := []int64{0, 4_314_579_000, 5_892_655_000, 12e9, 3_600_000_000_100}
	if len(recs) != len(want) {
		t.Fatalf("%d rows, want %d", len(recs), len(want))
	}
	for i, w := range want {
		if recs[i].ArrivalNs != w {
			t.Errorf("row %d arrival = %d, want %d", i, recs[i].ArrivalNs, w)
		}
	}
	lengthOnly := "num_prefill_tokens,num_decode_tokens,num_total_tokens,pd_ratio\n3772,54,3826,69.85185185185185\n2015,156,2171,12.916666666666666\n"
	got, _, err := importStringT(t, "splitwise", "arxiv.csv", lengthOnly, true)
	if err != nil || len(got) != 2 || got[1].ArrivalNs != 0 || got[1].InputTokens != 2015 || got[1].OutputTokens != 156 {
		t.Fatalf("length-only import = %+v, %v", got, err)
	}
	p := importSharedTrace(t, "sarathi_sharegpt/sharegpt_8k_filtered_stats_llama2_tokenizer.csv")
	recs, m, _ := importAllT(t, "splitwise", p, true)
	if len(recs) != 30731 || m.Get("arrivals") != "none" {
		t.Errorf("sharegpt stats: %d rows, arrivals %q; want 30731, none", len(recs), m.Get("arrivals"))
	}
}

// Malformed rows: strict mode stops at the first with a *RowError naming the
// file and line (and never the row's content); the default skips and counts
// them and returns the good rows.
func TestImportBadRows(t *testing.T) {
	const secret = "SECRETCONTENT"
	for _, tc := range []struct {
		name     string
		format   string
		content  string
		badLine  int64
		goodRows int
		skipped  int64
	}{
		// A CSV row with a missing column.
		{"azure missing column", "azure", "TIMESTAMP,ContextTokens,GeneratedTokens\r\n2023-11-16 18:17:03.9799600,10,2\r\n2023-11-16 18:17:04.0000000,11\r\n2023-11-16 18:17:05.0000000,12,3", 3, 2, 1},
		// A negative token count.
		{"azure negative tokens", "azure", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9799600,-10,2\n2023-11-16 18:17:04.0000000,11,1\n", 2, 1, 1},
		// An unparseable timestamp holding text.
		{"azure bad timestamp", "azure", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9799600,10,2\n" + secret + ",11,1\n", 3, 1, 1},
		// A row earlier than the first.
		{"azure unsorted", "azure", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9799600,10,2\n2023-11-16 18:17:03.0000000,11,1\n", 3, 1, 1},
		// A JSONL line that is not JSON.
		{"mooncake not JSON", "mooncake", `{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [0]}` + "\n" + secret + "\n" + `{"timestamp": 1, "input_length": 5, "output_length": 1, "hash_ids": [0]}` + "\n", 2, 2, 1},
		// Broken JSON with content inside.
		{"mooncake truncated object", "mooncake", `{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [0]}` + "\n" + `{"timestamp": "` + secret + `", "input_length": 5` + "\n", 2, 1, 1},
		// A string where a number belongs.
		{"mooncake wrong type", "mooncake", `{"timestamp": 0, "input_length": "` + secret + `", "output_length": 1}` + "\n", 1, 0, 1},
		// A negative output length.
		{"mooncake negative", "mooncake", `{"timestamp": 0, "input_length": 5, "output_length": -1, "hash_ids": [0]}` + "\n", 1, 0, 1},
		// A missing key.
		{"mooncake missing key", "mooncake", `{"timestamp": 0, "output_length": 1}` + "\n" + `{"timestamp": 0, "input_length": 1, "output_length": 1}` + "\n", 1, 1, 1},
		// A non-integer token count.
		{"mooncake fractional tokens", "mooncake", `{"timestamp": 0, "input_length": 5.5, "output_length": 1}` + "\n", 1, 0, 1},
		// BurstGPT row with a missing column.
		{"burstgpt missing column", "burstgpt", "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n5,ChatGPT,472,18,490,Conversation log\n6,ChatGPT,472\n", 3, 1, 1},
		// BurstGPT negative request tokens.
		{"burstgpt negative", "burstgpt", "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n5,ChatGPT,-472,18,490,Conversation log\n", 2, 0, 1},
		// BurstGPT timestamp that is text.
		{"burstgpt text timestamp", "burstgpt", "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n" + secret + ",ChatGPT,472,18,490,Conversation log\n", 2, 0, 1},
		// BurstGPT v3 elapsed time that is not a number.
		{"burstgpt bad elapsed", "burstgpt", "Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,Total tokens,Log Type\n1.0,,x" + secret + ",ChatGPT,1,1,2,API log\n", 2, 0, 1},
		// A bare quote is a CSV syntax error.
		{"burstgpt bare quote", "burstgpt", "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n5,Chat\"GPT,472,18,490,Conversation log\n7,ChatGPT,1,1,2,API log\n", 2, 1, 1},
		// Splitwise row with a missing column.
		{"splitwise missing column", "splitwise", "arrived_at,num_prefill_tokens,num_decode_tokens\n0.0,374,44\n4.3,396\n5.1,1,1\n", 3, 2, 1},
		// Splitwise negative arrival.
		{"splitwise negative arrival", "splitwise", "arrived_at,num_prefill_tokens,num_decode_tokens\n-1.5,374,44\n", 2, 0, 1},
		// Splitwise token count too large for int32.
		{"splitwise overflow", "splitwise", "arrived_at,num_prefill_tokens,num_decode_tokens\n1,99999999999,44\n", 2, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := importStringT(t, tc.format, "bad.input", tc.content, true)
			var re *traces.RowError
			if !errors.As(err, &re) {
				t.Fatalf("strict import error = %v, want a *RowError", err)
			}
			if re.File != "bad.input" || re.Line != tc.badLine {
				t.Errorf("RowError at %s:%d, want bad.input:%d", re.File, re.Line, tc.badLine)
			}
			if !errors.Is(err, traces.ErrMalformed) {
				t.Errorf("error %v does not wrap ErrMalformed", err)
			}
			if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "472") {
				t.Errorf("error %q quotes the row's content", err)
			}
			recs, st, err := importStringT(t, tc.format, "bad.input", tc.content, false)
			if err != nil {
				t.Fatalf("non-strict import error: %v", err)
			}
			if len(recs) != tc.goodRows || st.Skipped != tc.skipped || st.Rows != int64(tc.goodRows) {
				t.Errorf("non-strict: %d rows, stats %+v; want %d rows, %d skipped", len(recs), st, tc.goodRows, tc.skipped)
			}
			if !errors.As(st.FirstSkip, &re) || re.Line != tc.badLine {
				t.Errorf("FirstSkip = %v, want line %d", st.FirstSkip, tc.badLine)
			}
			for i, r := range recs {
				if r.Seq != int64(i) {
					t.Errorf("kept row %d has Seq %d", i, r.Seq)
				}
			}
		})
	}
}

// A header without a required column fails in every mode.
func TestImportMissingHeaderColumn(t *testing.T) {
	for _, tc := range []struct{ format, content string }{
		{"azure", "TIMESTAMP,ContextTokens\n2023-11-16 18:17:03.9799600,10\n"},
		{"burstgpt", "Timestamp,Model,Request tokens\n5,ChatGPT,472\n"},
		{"splitwise", "arrived_at,num_prefill_tokens\n0.0,1\n"},
		{"azure", ""},
	} {
		for _, strict := range []bool{false, true} {
			_, _, err := importStringT(t, tc.format, "hdr.csv", tc.content, strict)
			var re *traces.RowError
			if !errors.As(err, &re) || re.Line != 1 {
				t.Errorf("%s header %q strict=%v: error %v, want a RowError on line 1", tc.format, tc.content, strict, err)
			}
		}
	}
}

// Import reads files by name, decompresses gzip, names the file in errors,
// refuses unknown formats and stops when the context is cancelled.
func TestImportFiles(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	raw, err := os.ReadFile("testdata/import/burstgpt_v3.csv")
	if err != nil {
		t.Fatal(err)
	}
	gz := filepath.Join(dir, "b.csv.gz")
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(raw)
	zw.Close()
	os.WriteFile(gz, buf.Bytes(), 0o644)
	recs, m, _, err := formats.ImportAll(ctx, "burstgpt", gz, traces.DefaultOpenOptions())
	if err != nil || len(recs) != 7 || m.Source != "burstgpt:b.csv.gz" {
		t.Errorf("gzip import = %d rows, source %q, %v", len(recs), m.Source, err)
	}

	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, []byte("{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1}\nnot json\n"), 0o644)
	_, _, _, err = formats.ImportAll(ctx, "mooncake", bad, openStrict(true))
	if err == nil || !strings.Contains(err.Error(), bad+":2:") {
		t.Errorf("strict import of a bad file: %v, want an error naming %s:2", err, bad)
	}

	if _, err := formats.Import(ctx, "sharegpt", bad, traces.DefaultOpenOptions()); !errors.Is(err, traces.ErrUnknownFormat) {
		t.Errorf("Import(sharegpt) = %v, want ErrUnknownFormat", err)
	}
	if _, err := formats.Import(ctx, "azure", filepath.Join(dir, "missing.csv"), traces.DefaultOpenOptions()); err == nil {
		t.Error("Import of a missing file succeeded")
	}

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	// An importer that reads its header (or its whole input) when it is
	// made stops there; the others at their first Read.
	r, err := formats.Import(cctx, "burstgpt", "testdata/import/burstgpt_v3.csv", traces.DefaultOpenOptions())
	if err == nil {
		defer r.Close()
		_, err = r.Read(make([]traces.Record, 4))
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("import after cancel = %v, want context.Canceled", err)
	}
}

// Every listed import format has an importer.
func TestImportFormatsRegistered(t *testing.T) {
	for _, f := range formats.ImportFormats {
		if _, err := formats.Importer(f); err != nil {
			t.Errorf("Importer(%q): %v", f, err)
		}
	}
	for _, f := range formats.ExportFormats {
		if _, err := formats.Exporter(f); err != nil {
			t.Errorf("Exporter(%q): %v", f, err)
		}
	}
}

// Block ids outside the dense range Mooncake uses (huge or negative
// hashes from other producers) share prefixes the same way.
func TestImportMooncakeLargeIDs(t *testing.T) {
	in := `{"timestamp": 0, "input_length": 1024, "output_length": 1, "hash_ids": [-5, 1099511627776]}
{"timestamp": 1, "input_length": 1536, "output_length": 1, "hash_ids": [-5, 1099511627776, 7]}
{"timestamp": 2, "input_length": 600, "output_length": 1, "hash_ids": [-5, 9223372036854775807]}
`
	recs, _, err := importStringT(t, "mooncake", "big.jsonl", in, true)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		cat    string
		prefix int32
	}{{"", 0}, {"prefix-1099511627776", 1024}, {"prefix--5", 512}}
	for i, w := range want {
		if recs[i].Category != w.cat || recs[i].PrefixTokens != w.prefix {
			t.Errorf("row %d: category %q prefix %d, want %q %d", i, recs[i].Category, recs[i].PrefixTokens, w.cat, w.prefix)
		}
	}
}

// exportSliceReader is a Reader over a slice, for export tests.
type exportSliceReader struct {
	recs []traces.Record
	meta traces.Meta
}

func (r *exportSliceReader) Read(recs []traces.Record) (int, error) {
	n := copy(recs, r.recs)
	r.recs = r.recs[n:]
	if len(r.recs) == 0 {
		return n, io.EOF
	}
	return n, nil
}
func (r *exportSliceReader) Meta() traces.Meta       { return r.meta }
func (r *exportSliceReader) Stats() traces.ReadStats { return traces.ReadStats{} }
func (r *exportSliceReader) Close() error            { return nil }

type mooncakeLine struct {
	Timestamp    int64   `json:"timestamp"`
	InputLength  int32   `json:"input_length"`
	OutputLength int32   `json:"output_length"`
	HashIDs      []int64 `json:"hash_ids"`
}

func exportMooncakeLines(t *testing.T, recs []traces.Record, m traces.Meta, o formats.ExportOptions) []mooncakeLine {
	t.Helper()
	var buf bytes.Buffer
	n, err := formats.Export(context.Background(), "mooncake", &buf, &exportSliceReader{recs: recs, meta: m}, o)
	if err != nil {
		t.Fatalf("Export(mooncake) error: %v", err)
	}
	var out []mooncakeLine
	sc := bufio.NewScanner(&buf)
	for sc.Scan() {
		var l mooncakeLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("exported line %q is not JSON: %v", sc.Text(), err)
		}
		out = append(out, l)
	}
	if int64(len(out)) != n {
		t.Fatalf("Export reported %d rows, wrote %d lines", n, len(out))
	}
	return out
}

func exportRec(arrivalNs int64, in, out int32, cat string, prefix int32) traces.Record {
	r := traces.NewRecord()
	r.ArrivalNs, r.InputTokens, r.OutputTokens, r.Category, r.PrefixTokens = arrivalNs, in, out, cat, prefix
	return r
}

// Records without block ids (Azure, synth) get hash_ids covering the whole
// prompt: the category's full prefix blocks are shared between rows of the
// same category, everything else is fresh; timestamps round to the nearest
// millisecond.
func TestExportMooncakeInventsBlocks(t *testing.T) {
	recs := []traces.Record{
		exportRec(0, 1100, 10, "sys-a", 1024),           // 3 blocks, 2 shared with sys-a
		exportRec(1_499_999, 600, 5, "sys-a", 1024),     // 2 blocks, both sys-a's
		exportRec(1_500_000, 512, 1, "", 0),             // 1 fresh block
		exportRec(2_000_000_000, 0, 3, "", 0),           // empty prompt: no blocks
		exportRec(2_000_000_001, 1500, 7, "sys-a", 700), // 3 blocks, 1 shared
		exportRec(3e9, 100, 7, "sys-b", 100),            // prefix shorter than a block: nothing shared
	}
	got := exportMooncakeLines(t, recs, traces.NewMeta("azure:x.csv"), formats.DefaultExportOptions())
	want := []mooncakeLine{
		{0, 1100, 10, []int64{0, 1, 2}},
		{1, 600, 5, []int64{0, 1}},
		{2, 512, 1, []int64{3}},
		{2000, 0, 3, []int64{}},
		{2000, 1500, 7, []int64{0, 4, 5}},
		{3000, 100, 7, []int64{6}},
	}
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].HashIDs == nil {
			got[i].HashIDs = []int64{}
		}
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("line %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

// Block ids of a trace with the same block size are kept (renumbered densely
// in order of first appearance) and padded to cover the prompt; with another
// export block size they are ignored.
func TestExportMooncakeKeepsBlocks(t *testing.T) {
	a := exportRec(0, 1500, 1, "", 0)
	a.PrefixBlocks = []int64{900, 901} // one block short
	b := exportRec(1e6, 1024, 1, "", 0)
	b.PrefixBlocks = []int64{900, 777}
	c := exportRec(2e6, 1536, 1, "", 0)
	c.PrefixBlocks = []int64{-3, 1 << 40, 900} // ids outside the dense range
	m := traces.NewMeta("capture")
	m.BlockSize = 512
	got := exportMooncakeLines(t, []traces.Record{a, b, c}, m, formats.DefaultExportOptions())
	if !reflect.DeepEqual(got[0].HashIDs, []int64{0, 1, 2}) || !reflect.DeepEqual(got[1].HashIDs, []int64{0, 3}) || !reflect.DeepEqual(got[2].HashIDs, []int64{4, 5, 0}) {
		t.Errorf("hash_ids = %v, %v, %v; want [0 1 2], [0 3], [4 5 0]", got[0].HashIDs, got[1].HashIDs, got[2].HashIDs)
	}
	got = exportMooncakeLines(t, []traces.Record{a, b}, m, with(formats.DefaultExportOptions(), func(o *formats.ExportOptions) { o.BlockSize = 16 }))
	if len(got[0].HashIDs) != 94 || len(got[1].HashIDs) != 64 || got[1].HashIDs[0] != 94 {
		t.Errorf("with block size 16: %d and %d ids starting %d; want 94 and 64 fresh ids", len(got[0].HashIDs), len(got[1].HashIDs), got[1].HashIDs[0])
	}
}

// OKOnly drops rows with a failed outcome (BurstGPT failures) and keeps
// rows without an outcome.
func TestExportOKOnly(t *testing.T) {
	recs, _, _, err := formats.ImportAll(context.Background(), "burstgpt", "testdata/import/burstgpt_v3.csv", openStrict(true))
	if err != nil {
		t.Fatal(err)
	}
	recs = append(recs, exportRec(200e9, 5, 5, "", 0))
	got := exportMooncakeLines(t, recs, traces.Meta{}, with(formats.DefaultExportOptions(), func(o *formats.ExportOptions) { o.OKOnly = true }))
	if len(got) != 6 {
		t.Errorf("OKOnly kept %d rows, want 6 (7 + 1 minus 2 failed)", len(got))
	}
	for _, l := range got {
		if l.OutputLength == 0 {
			t.Errorf("OKOnly kept a row with 0 output tokens: %+v", l)
		}
	}
}

// jsonl and csv exports go through the trace codecs and read back equal;
// a name whose extension names another codec is refused; a bad block size
// is refused.
func TestExportFileCodecs(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	recs, m, _, err := formats.ImportAll(ctx, "burstgpt", "testdata/import/burstgpt_v3.csv", openStrict(true))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ format, name string }{
		{"jsonl", "out.jsonl"},
		{"jsonl", "out.jsonl.zst"},
		{"csv", "out.csv"},
		{"csv", "out.csv.zst"},
	} {
		path := filepath.Join(dir, tc.name)
		n, err := formats.ExportFile(ctx, tc.format, path, &exportSliceReader{recs: recs, meta: m}, formats.DefaultExportOptions())
		if err != nil || n != int64(len(recs)) {
			t.Errorf("ExportFile(%s, %s) = %d, %v", tc.format, tc.name, n, err)
			continue
		}
		back, bm, err := traces.ReadAll(path)
		if err != nil {
			t.Errorf("ReadAll(%s): %v", tc.name, err)
			continue
		}
		if bm.Source != m.Source {
			t.Errorf("%s: Meta.Source = %q, want %q", tc.name, bm.Source, m.Source)
		}
		if !reflect.DeepEqual(back, recs) {
			t.Errorf("%s: records differ after export and read back", tc.name)
		}
	}
	_, err = formats.ExportFile(ctx, "jsonl", filepath.Join(dir, "x.parquet"), &exportSliceReader{recs: recs}, formats.DefaultExportOptions())
	if err == nil || !strings.Contains(err.Error(), "parquet") {
		t.Errorf("ExportFile(jsonl, x.parquet) = %v, want an extension mismatch error", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "x.parquet")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("refused export left a file behind: %v", err)
	}
	_, err = formats.ExportFile(ctx, "mooncake", filepath.Join(dir, "x.jsonl"), &exportSliceReader{recs: recs}, with(formats.DefaultExportOptions(), func(o *formats.ExportOptions) { o.BlockSize = -1 }))
	if err == nil {
		t.Error("ExportFile with block size -1 succeeded")
	}
	if _, err := formats.Exporter("parquet"); !errors.Is(err, traces.ErrUnknownFormat) {
		t.Errorf("Exporter(parquet) = %v, want ErrUnknownFormat", err)
	}
}
