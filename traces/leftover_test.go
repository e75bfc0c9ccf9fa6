//go:build unix

package traces_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/internal/tempfile"
	"github.com/tokentrace/tokentrace/traces"
)

// TestSortRemovesKilledSortsRuns: a Parquet writer that spills removes the
// sort directories a killed run left in its temporary directory, and only
// those: one a running sort holds stays.
func TestSortRemovesKilledSortsRuns(t *testing.T) {
	tmp := t.TempDir()
	stale := filepath.Join(tmp, "tokentrace-sort-killed")
	if err := os.Mkdir(stale, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(stale, "run-00000.parquet"), []byte("PAR1"), 0o644)
	held, release, err := tempfile.MkdirTemp(tmp, traces.SortDirPattern)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	old := time.Now().Add(-time.Minute)
	for _, d := range []string{stale, held} {
		os.Chtimes(d, old, old)
	}
	out := filepath.Join(t.TempDir(), "t.parquet")
	w, err := traces.CreateWith(out, traces.NewMeta("t"), with(traces.DefaultCreateOptions(), func(o *traces.CreateOptions) { o.SortMemoryBytes = 1; o.TempDir = tmp }))
	if err != nil {
		t.Fatal(err)
	}
	recs := randRecords(5, 200, false) // out of arrival order: the writer sorts, spilling
	if _, err := w.Write(recs); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the killed sort's directory is still there (%v)", err)
	}
	if _, err := os.Stat(held); err != nil {
		t.Errorf("the running sort's directory was removed: %v", err)
	}
	left, _ := filepath.Glob(filepath.Join(tmp, traces.SortDirPattern))
	if len(left) != 1 {
		t.Errorf("left %v, want only the held directory", left)
	}
}
