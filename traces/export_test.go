package traces_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/traces"
)

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

func exportMooncakeLines(t *testing.T, recs []traces.Record, m traces.Meta, o traces.ExportOptions) []mooncakeLine {
	t.Helper()
	var buf bytes.Buffer
	n, err := traces.Export(context.Background(), "mooncake", &buf, &exportSliceReader{recs: recs, meta: m}, o)
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
	got := exportMooncakeLines(t, recs, traces.NewMeta("azure:x.csv"), traces.ExportOptions{})
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
	got := exportMooncakeLines(t, []traces.Record{a, b, c}, m, traces.ExportOptions{})
	if !reflect.DeepEqual(got[0].HashIDs, []int64{0, 1, 2}) || !reflect.DeepEqual(got[1].HashIDs, []int64{0, 3}) || !reflect.DeepEqual(got[2].HashIDs, []int64{4, 5, 0}) {
		t.Errorf("hash_ids = %v, %v, %v; want [0 1 2], [0 3], [4 5 0]", got[0].HashIDs, got[1].HashIDs, got[2].HashIDs)
	}
	got = exportMooncakeLines(t, []traces.Record{a, b}, m, traces.ExportOptions{BlockSize: 16})
	if len(got[0].HashIDs) != 94 || len(got[1].HashIDs) != 64 || got[1].HashIDs[0] != 94 {
		t.Errorf("with block size 16: %d and %d ids starting %d; want 94 and 64 fresh ids", len(got[0].HashIDs), len(got[1].HashIDs), got[1].HashIDs[0])
	}
}

// OKOnly drops rows with a failed outcome (BurstGPT failures) and keeps
// rows without an outcome.
func TestExportOKOnly(t *testing.T) {
	recs, _, _, err := traces.ImportAll(context.Background(), "burstgpt", "testdata/import/burstgpt_v3.csv", traces.OpenOptions{Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	recs = append(recs, exportRec(200e9, 5, 5, "", 0))
	got := exportMooncakeLines(t, recs, traces.Meta{}, traces.ExportOptions{OKOnly: true})
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
	recs, m, _, err := traces.ImportAll(ctx, "burstgpt", "testdata/import/burstgpt_v3.csv", traces.OpenOptions{Strict: true})
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
		n, err := traces.ExportFile(ctx, tc.format, path, &exportSliceReader{recs: recs, meta: m}, traces.ExportOptions{})
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
	_, err = traces.ExportFile(ctx, "jsonl", filepath.Join(dir, "x.parquet"), &exportSliceReader{recs: recs}, traces.ExportOptions{})
	if err == nil || !strings.Contains(err.Error(), "parquet") {
		t.Errorf("ExportFile(jsonl, x.parquet) = %v, want an extension mismatch error", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "x.parquet")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("refused export left a file behind: %v", err)
	}
	_, err = traces.ExportFile(ctx, "mooncake", filepath.Join(dir, "x.jsonl"), &exportSliceReader{recs: recs}, traces.ExportOptions{BlockSize: -1})
	if err == nil {
		t.Error("ExportFile with block size -1 succeeded")
	}
	if _, err := traces.Exporter("parquet"); !errors.Is(err, traces.ErrUnknownFormat) {
		t.Errorf("Exporter(parquet) = %v, want ErrUnknownFormat", err)
	}
}
