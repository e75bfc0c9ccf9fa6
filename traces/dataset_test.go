package traces_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/traces"
)

// writeParts writes recs as len(exts) time-ordered part files in dir.
func writeParts(t *testing.T, dir string, recs []traces.Record, exts ...string) []string {
	t.Helper()
	var names []string
	per := len(recs) / len(exts)
	for i, ext := range exts {
		part := recs[i*per : (i+1)*per]
		if i == len(exts)-1 {
			part = recs[i*per:]
		}
		name := filepath.Join(dir, "part-0000"+string(rune('1'+i))+ext)
		if err := traces.WriteAll(name, traces.NewMeta("test"), part); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	return names
}

// A directory of part files, or a glob of them, reads as one trace in
// name order, whatever each part's format; hidden files (a writer's
// partial output) are not parts.
func TestDatasetReadsPartsInOrder(t *testing.T) {
	want := iterRecords(3000)
	dir := t.TempDir()
	writeParts(t, dir, want, ".parquet", ".jsonl.zst", ".csv")
	if err := os.WriteFile(filepath.Join(dir, ".part-00004.parquet.partial-1"), []byte("PAR1 half"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{dir, filepath.Join(dir, "part-*")} {
		r, err := traces.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		got, err := traces.Collect(traces.All(r))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d rows, want %d", name, len(got), len(want))
		}
		for i := range want {
			if got[i].Seq != want[i].Seq || got[i].ArrivalNs != want[i].ArrivalNs {
				t.Fatalf("%s: row %d is seq %d, want %d", name, i, got[i].Seq, want[i].Seq)
			}
		}
		if s := r.Stats(); s.Rows != int64(len(want)) {
			t.Errorf("%s: stats count %d rows", name, s.Rows)
		}
		if m := r.Meta(); m.Get("dataset.parts") != "3" {
			t.Errorf("%s: meta dataset.parts %q, want 3", name, m.Get("dataset.parts"))
		}
		r.Close()
	}
}

// Bad datasets: each error names the part or the pattern at fault.
func TestDatasetBadInput(t *testing.T) {
	recs := iterRecords(3000)
	tests := []struct {
		name    string
		setup   func(dir string) string // returns what to open
		wantErr string                  // in the error
		is      error
	}{
		{"a truncated part in the middle is named, after the rows before the damage", func(dir string) string {
			names := writeParts(t, dir, recs, ".parquet", ".parquet", ".parquet")
			b, _ := os.ReadFile(names[1])
			os.WriteFile(names[1], b[:len(b)/2], 0o644)
			return dir
		}, "part-00002.parquet", traces.ErrTruncated},
		{"parts out of time order are named both", func(dir string) string {
			names := writeParts(t, dir, recs, ".jsonl", ".jsonl")
			// Swap the parts' contents: the second now starts at 0.
			a, _ := os.ReadFile(names[0])
			b, _ := os.ReadFile(names[1])
			os.WriteFile(names[0], b, 0o644)
			os.WriteFile(names[1], a, 0o644)
			return dir
		}, "part-00002.jsonl starts at arrival_ns 0, before the previous part", traces.ErrMalformed},
		{"a directory without trace files", func(dir string) string {
			os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o644)
			return dir
		}, "no trace files", nil},
		{"a pattern that matches nothing", func(dir string) string {
			return filepath.Join(dir, "none-*.parquet")
		}, "no file matches", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			name := tc.setup(t.TempDir())
			r, err := traces.Open(name)
			if err == nil {
				_, err = traces.Collect(traces.All(r))
				r.Close()
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || tc.is != nil && !errors.Is(err, tc.is) {
				t.Fatalf("err = %v, want one containing %q (is %v)", err, tc.wantErr, tc.is)
			}
		})
	}
}
