package traces_test

import (
	"cmp"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/traces"
)

// spillRecords are n records in shuffled order with ties: every arrival is
// shared by three rows (two of them with one seq, told apart by Run), so
// the sort's tie rule shows.
func spillRecords(n int) []traces.Record {
	rng := rand.New(rand.NewPCG(7, 11))
	out := iterRecords(n)
	for i := range out {
		out[i].ArrivalNs = int64(i/3) * 1000
		out[i].Seq = int64(i / 2)
		out[i].Run = string(rune('a' + i%26))
	}
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

func writeParquet(t *testing.T, name string, recs []traces.Record, o traces.CreateOptions) {
	t.Helper()
	w, err := traces.CreateWith(name, traces.NewMeta("test"), o)
	if err != nil {
		t.Fatal(err)
	}
	for len(recs) > 0 {
		n := min(len(recs), 333)
		if _, err := w.Write(recs[:n]); err != nil {
			t.Fatal(err)
		}
		recs = recs[n:]
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func readParquet(t *testing.T, name string) []traces.Record {
	t.Helper()
	r, err := traces.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, err := traces.Collect(traces.All(r))
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func assertEmptyDir(t *testing.T, dir, when string) {
	t.Helper()
	left, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("%s: %d temporary entries left in %s, first %s", when, len(left), dir, left[0].Name())
	}
}

// A Parquet file larger than its sort budget is spilled in sorted runs and
// merged: the rows, their order (ties included) and every column equal the
// in-memory sort's, and the runs are gone after Close.
func TestParquetSpillMatchesInMemory(t *testing.T) {
	shuffled := spillRecords(20000)
	sorted := slices.Clone(shuffled)
	slices.SortStableFunc(sorted, func(a, b traces.Record) int {
		return cmp.Or(cmp.Compare(a.ArrivalNs, b.ArrivalNs), cmp.Compare(a.Seq, b.Seq))
	})
	// In order for 12000 records, then one earlier than all of them, then
	// shuffled: the writer sets aside what it wrote directly.
	late := append(slices.Clone(sorted[:12000]), sorted[0])
	late = append(late, shuffled[:7999]...)
	dir := t.TempDir()
	for _, tc := range []struct {
		name   string
		recs   []traces.Record
		budget int64
	}{
		{"shuffled, a few runs", shuffled, 2 << 20},
		{"shuffled, hundreds of runs merged 16 at a time", shuffled, 32 << 10},
		{"shuffled, one record per run", shuffled, 1},
		{"in order: written directly", sorted, 32 << 10},
		{"in order, then out of order: the direct part becomes the first run", late, 256 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmp := t.TempDir()
			spilled := filepath.Join(dir, "spill.parquet")
			n := tc.recs
			if tc.budget == 1 {
				n = n[:600]
			}
			if len(n) != len(shuffled) && tc.budget != 1 {
				t.Fatalf("test input has %d records", len(n))
			}
			writeParquet(t, spilled, n, traces.CreateOptions{SortMemoryBytes: tc.budget, TempDir: tmp, RowGroupRows: 4096})
			assertEmptyDir(t, tmp, "after Close")
			if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) > 0 {
				t.Errorf("left beside the output: %v", left)
			}
			want := inMemory(t, n)
			got := readParquet(t, spilled)
			if len(got) != len(want) {
				t.Fatalf("%d rows, want %d", len(got), len(want))
			}
			for i := range want {
				if !reflect.DeepEqual(got[i], want[i]) {
					t.Fatalf("row %d:\n got %+v\nwant %+v", i, got[i], want[i])
				}
			}
		})
	}
}

// Abort after runs were spilled removes them and leaves no output; a
// TempDir that cannot be written is named in the error.
func TestParquetSpillCleanup(t *testing.T) {
	recs := spillRecords(5000)
	tmp, dir := t.TempDir(), t.TempDir()
	out := filepath.Join(dir, "t.parquet")
	w, err := traces.CreateWith(out, traces.NewMeta("test"), traces.CreateOptions{SortMemoryBytes: 64 << 10, TempDir: tmp})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(recs); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(tmp); len(left) == 0 {
		t.Fatal("no sorted run was spilled: the test does not test the spill")
	}
	traces.Abort(w)
	assertEmptyDir(t, tmp, "after Abort")
	assertEmptyDir(t, dir, "after Abort (output)")

	w, err = traces.CreateWith(out, traces.NewMeta("test"), traces.CreateOptions{SortMemoryBytes: 64 << 10, TempDir: filepath.Join(tmp, "missing")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = w.Write(recs)
	if err == nil {
		t.Fatal("spilling into a missing TempDir: no error")
	}
	if want := "TempDir"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not name %s", err, want)
	}
	traces.Abort(w)
	assertEmptyDir(t, dir, "after a failed spill (output)")
}

// inMemory is recs as the writer sorts them in memory: a plain io.Writer
// (nothing to write directly) and a budget larger than them.
func inMemory(t *testing.T, recs []traces.Record) []traces.Record {
	return viaStream(t, recs, traces.CreateOptions{SortMemoryBytes: 1 << 40})
}

// viaStream writes recs through a Parquet writer over a plain io.Writer
// and reads them back.
func viaStream(t *testing.T, recs []traces.Record, o traces.CreateOptions) []traces.Record {
	t.Helper()
	name := filepath.Join(t.TempDir(), "streamed.parquet")
	if err := os.WriteFile(name, encodeAll(t, traces.FormatParquet, traces.NewMeta("test"), o, recs), 0o644); err != nil {
		t.Fatal(err)
	}
	return readParquet(t, name)
}

// A writer over a plain io.Writer (no file to set aside) sorts through
// spilled runs from the start: the rows equal the in-memory sort's.
func TestParquetSpillToStream(t *testing.T) {
	recs := spillRecords(5000)
	got := viaStream(t, recs, traces.CreateOptions{SortMemoryBytes: 64 << 10, TempDir: t.TempDir()})
	if want := inMemory(t, recs); !reflect.DeepEqual(got, want) {
		t.Fatalf("spilled and in-memory sorts differ (%d and %d rows)", len(got), len(want))
	}
}

// A caller may reuse its batch (lists included) once Write returns, as
// traces.Copy and capture do: written directly, sorted in memory or
// spilled, the file holds what was written, not what the buffer became.
func TestParquetWriterDoesNotKeepCallerMemory(t *testing.T) {
	want := iterRecords(3000)
	for _, tc := range []struct {
		name  string
		order []traces.Record
		o     traces.CreateOptions
	}{
		{"in order, written directly", want, traces.CreateOptions{}},
		{"reversed, sorted in memory", reversed(want), traces.CreateOptions{}},
		{"reversed, spilled", reversed(want), traces.CreateOptions{SortMemoryBytes: 64 << 10, TempDir: t.TempDir()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := filepath.Join(t.TempDir(), "t.parquet")
			w, err := traces.CreateWith(name, traces.NewMeta("test"), tc.o)
			if err != nil {
				t.Fatal(err)
			}
			batch := make([]traces.Record, 0, 100)
			pb := make([]int64, 0, 1<<16)
			for i, r := range tc.order {
				// The batch's lists live in one reused array.
				start := len(pb)
				pb = append(pb, r.PrefixBlocks...)
				r.PrefixBlocks = pb[start:len(pb):len(pb)]
				if len(r.PrefixBlocks) == 0 {
					r.PrefixBlocks = nil
				}
				batch = append(batch, r)
				if len(batch) == cap(batch) || i == len(tc.order)-1 {
					if _, err := w.Write(batch); err != nil {
						t.Fatal(err)
					}
					for j := range batch {
						batch[j].Seq, batch[j].ArrivalNs, batch[j].Run = -7, -7, "overwritten"
					}
					for j := range pb {
						pb[j] = -99
					}
					batch, pb = batch[:0], pb[:0]
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			got := readParquet(t, name)
			if len(got) != len(want) {
				t.Fatalf("%d rows, want %d", len(got), len(want))
			}
			for i := range want {
				if got[i].Seq != want[i].Seq || got[i].Run != want[i].Run || !slices.Equal(got[i].PrefixBlocks, want[i].PrefixBlocks) {
					t.Fatalf("row %d = seq %d run %q blocks %v, want seq %d run %q blocks %v", i, got[i].Seq, got[i].Run, got[i].PrefixBlocks, want[i].Seq, want[i].Run, want[i].PrefixBlocks)
				}
			}
		})
	}
}

func reversed(recs []traces.Record) []traces.Record {
	out := slices.Clone(recs)
	slices.Reverse(out)
	return out
}
