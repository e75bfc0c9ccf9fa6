package traces

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// writeRowGroups writes recs as the Parquet file name in a temporary
// directory, in row groups of rows, and returns its path.
func writeRowGroups(t *testing.T, name string, rows int, recs []Record) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	w, err := CreateWith(path, NewMeta("test"), with(DefaultCreateOptions(), func(o *CreateOptions) { o.RowGroupRows = rows }))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(recs); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRowGroupsBounded(t *testing.T) {
	recs := make([]Record, 350)
	for i := range recs {
		recs[i] = NewRecord()
		recs[i].Seq = int64(i)
		recs[i].ArrivalNs = int64((i * 7919) % 350) // out of order on purpose
	}
	name := writeRowGroups(t, "rg.parquet", 100, recs)
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	if n := len(pf.RowGroups()); n != 4 {
		t.Errorf("row groups = %d, want 4", n)
	}
	got, _, err := ReadAll(name)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(got); i++ {
		if got[i].ArrivalNs < got[i-1].ArrivalNs {
			t.Fatalf("row %d arrival %d < previous %d: not sorted", i, got[i].ArrivalNs, got[i-1].ArrivalNs)
		}
	}
}

// TestParquetMissingColumns: a Parquet file written by another tool with only
// some of our columns reads the missing outcome columns as NotReported.
func TestParquetMissingColumns(t *testing.T) {
	type small struct {
		Seq          int64  `parquet:"seq"`
		ArrivalNs    int64  `parquet:"arrival_ns"`
		InputTokens  int32  `parquet:"input_tokens"`
		OutputTokens int32  `parquet:"output_tokens"`
		Model        string `parquet:"model"`
		Extra        string `parquet:"something_else"`
	}
	name := filepath.Join(t.TempDir(), "small.parquet")
	if err := parquet.WriteFile(name, []small{{1, 5, 10, 2, "m", "x"}, {2, 6, 11, 3, "m", "y"}}); err != nil {
		t.Fatal(err)
	}
	got, m, err := ReadAll(name)
	if err != nil {
		t.Fatal(err)
	}
	if m.SchemaVersion != SchemaVersion {
		t.Errorf("schema version %q", m.SchemaVersion)
	}
	want := NewRecord()
	want.Seq, want.ArrivalNs, want.InputTokens, want.OutputTokens, want.Model = 1, 5, 10, 2, "m"
	if len(got) != 2 || got[0].ServerOutputTokens != NotReported || got[0].SentNs != NotReported {
		t.Fatalf("got %+v", got)
	}
	got[0].PrefixBlocks = nil
	if got[0].Model != want.Model || got[0].FirstTokenNs != -1 || got[0].ServerPreemptions != -1 {
		t.Errorf("got %+v, want %+v", got[0], want)
	}
}

// TestParquetFastPathLarge exercises the column-wise reader across many
// pages and row groups: unique strings (dictionary and plain), a list longer
// than a page buffer, and lists in every row.
func TestParquetFastPathLarge(t *testing.T) {
	recs := make([]Record, 30000)
	for i := range recs {
		r := NewRecord()
		r.Seq, r.ArrivalNs = int64(i), int64(i)*1000
		r.Model = "m" + itoa(i%5000)
		r.RequestID = "req-" + itoa(i)
		r.PrefixBlocks = []int64{int64(i), int64(i + 1)}
		if i%7 == 0 {
			r.ChunkNs, r.ChunkTokens = []int64{1, 2, 3}, []int32{1, 1, 2}
		}
		recs[i] = r
	}
	big := make([]int64, 100000)
	for i := range big {
		big[i] = int64(i)
	}
	recs[12345].ChunkNs = big
	name := writeRowGroups(t, "big.parquet", 7000, recs)
	r, err := Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.(*checked).Reader.(*parquetReader).fast == nil {
		t.Fatal("fast path not used for our own file")
	}
	buf := make([]Record, 999)
	i := 0
	for {
		n, err := r.Read(buf)
		for _, got := range buf[:n] {
			want := recs[i]
			want.normalizeLists()
			if got.Seq != want.Seq || got.Model != want.Model || got.RequestID != want.RequestID ||
				!slices.Equal(got.PrefixBlocks, want.PrefixBlocks) ||
				!slices.Equal(got.ChunkNs, want.ChunkNs) || !slices.Equal(got.ChunkTokens, want.ChunkTokens) {
				t.Fatalf("row %d: got %+v", i, got)
			}
			i++
		}
		if err != nil {
			if err.Error() != "EOF" {
				t.Fatal(err)
			}
			break
		}
	}
	if i != len(recs) {
		t.Fatalf("read %d rows, want %d", i, len(recs))
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestIsSorted: only a Parquet file tokentrace's writer made promises
// arrival order (its writer sorts every file); a file another writer made
// with the same sorting columns, and JSON lines, promise nothing.
func TestIsSorted(t *testing.T) {
	dir := t.TempDir()
	recs := []Record{NewRecord(), NewRecord()}
	recs[0].Seq, recs[0].ArrivalNs = 1, 20
	recs[1].Seq, recs[1].ArrivalNs = 0, 10
	ours := filepath.Join(dir, "ours.parquet")
	if err := WriteAll(ours, NewMeta("t"), recs); err != nil {
		t.Fatal(err)
	}
	jsonl := filepath.Join(dir, "t.jsonl")
	if err := WriteAll(jsonl, NewMeta("t"), recs); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other.parquet")
	f, err := os.Create(other)
	if err != nil {
		t.Fatal(err)
	}
	pw := parquet.NewGenericWriter[Record](f, parquet.CreatedBy("someone-else", "1", ""),
		parquet.SortingWriterConfig(parquet.SortingColumns(parquet.Ascending("arrival_ns"), parquet.Ascending("seq"))))
	if _, err := pw.Write(recs); err != nil {
		t.Fatal(err)
	}
	if err := pw.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	for _, c := range []struct {
		name string
		want bool
	}{{ours, true}, {jsonl, false}, {other, false}} {
		r, err := Open(c.name)
		if err != nil {
			t.Fatal(err)
		}
		if got := IsSorted(r); got != c.want {
			t.Errorf("IsSorted(%s) = %v, want %v", filepath.Base(c.name), got, c.want)
		}
		r.Close()
	}
}

// FuzzParquetCheck: the bounds-checking thrift scanner never panics and never
// reads past its input; checkParquetFooter and checkParquetPages on a file of
// arbitrary bytes only return errors.
func FuzzParquetCheck(f *testing.F) {
	var buf bytes.Buffer
	w, _ := NewWriter(&buf, FormatParquet, NewMeta("seed"), DefaultCreateOptions())
	r := NewRecord()
	r.Model, r.PrefixBlocks = "m", []int64{1, 2}
	w.Write([]Record{r, r})
	w.Close()
	f.Add(buf.Bytes())
	f.Add([]byte{0x15, 0x00, 0x15, 0x80, 0x80, 0x80, 0x80, 0x08, 0x00})
	f.Fuzz(func(t *testing.T, data []byte) {
		s := thriftScanner{b: data, onInt: func(int16, int16, int64) {}}
		if err := s.structure(0, 1); err == nil && s.pos > len(data) {
			t.Fatalf("scanner ran to %d past %d bytes", s.pos, len(data))
		}
		name := filepath.Join(t.TempDir(), "f.parquet")
		if err := os.WriteFile(name, data, 0o644); err != nil {
			t.Fatal(err)
		}
		fh, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		defer fh.Close()
		size := int64(len(data))
		if checkParquetFooter(fh, size) == nil && size > 16 {
			checkParquetPages(fh, 4, size/2, size)
		}
	})
}

// TestParquetSalvage: a Parquet file cut before its footer (a writer killed
// before Close) gives back the rows of its complete row groups, then an error
// wrapping ErrTruncated that names the file.
func TestParquetSalvage(t *testing.T) {
	recs := make([]Record, 1000)
	for i := range recs {
		r := NewRecord()
		r.Seq, r.ArrivalNs, r.InputTokens, r.OutputTokens = int64(i), int64(i)*1e6, int32(i), 7
		r.Model, r.RequestID = "m"+strconv.Itoa(i%3), "r"+strconv.Itoa(i)
		r.PrefixBlocks = []int64{int64(i)}
		if i%2 == 0 {
			r.Status, r.SentNs, r.ChunkNs, r.ChunkTokens = StatusOK, 5, []int64{6, 7}, []int32{1, 2}
		}
		recs[i] = r
	}
	// Groups of 300, 300, 300 and a last, smaller one of 100.
	name := writeRowGroups(t, "s.parquet", 300, recs)
	data, _ := os.ReadFile(name)
	var salvaged []int
	for _, frac := range []float64{0.1, 0.2, 0.3, 0.6, 0.95} {
		cut := int(float64(len(data)) * frac)
		os.WriteFile(name, data[:cut], 0o644)
		r, err := Open(name)
		if err != nil {
			// Cut inside the first group: nothing to salvage.
			if !errors.Is(err, ErrTruncated) || !strings.Contains(err.Error(), name) {
				t.Fatalf("cut at %d/%d: Open: %v, want ErrTruncated naming the file", cut, len(data), err)
			}
			t.Logf("cut at %d of %d bytes: salvaged 0 rows; %v", cut, len(data), err)
			continue
		}
		got, err := ReadFrom(r)
		r.Close()
		var re *RowError
		if !errors.Is(err, ErrTruncated) || !errors.As(err, &re) || re.File != name || !r.Stats().Truncated {
			t.Fatalf("cut at %d: err %v, want a RowError naming %s wrapping ErrTruncated", cut, err, name)
		}
		if len(got) == 0 || (len(got)%300 != 0 && len(got) != len(recs)) || len(got) > len(recs) {
			t.Fatalf("cut at %d: salvaged %d rows, want whole groups of 300", cut, len(got))
		}
		for i := range got {
			want := recs[i]
			want.normalizeLists()
			if !reflect.DeepEqual(got[i], want) {
				t.Fatalf("cut at %d: row %d = %+v, want %+v", cut, i, got[i], want)
			}
		}
		t.Logf("cut at %d of %d bytes: salvaged %d rows; %v", cut, len(data), len(got), err)
		salvaged = append(salvaged, len(got))
	}
	// Some cut lands between groups, one after the last (smaller) group.
	if len(salvaged) < 2 || salvaged[len(salvaged)-1] != len(recs) || salvaged[0] >= len(recs) {
		t.Errorf("salvaged %v rows over the cuts, want a partial salvage and a full one", salvaged)
	}
}
