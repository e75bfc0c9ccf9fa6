package kmerge

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestCompact(t *testing.T) {
	dir := t.TempDir()
	var runs []string
	merges := 0
	name := func() string { return filepath.Join(dir, fmt.Sprintf("merged-%d", merges)) }
	merge := func(out string, rs []string) error {
		merges++
		return os.WriteFile(out, []byte(fmt.Sprint(len(rs))), 0o644)
	}
	for i := range MaxRuns + 3 {
		r := filepath.Join(dir, fmt.Sprintf("run-%d", i))
		if err := os.WriteFile(r, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		var err error
		if runs, err = Compact(append(runs, r), name, merge); err != nil {
			t.Fatal(err)
		}
	}
	// The 16th run merged all 16 into merged-0; three more followed it.
	want := []string{filepath.Join(dir, "merged-0"), filepath.Join(dir, "run-16"), filepath.Join(dir, "run-17"), filepath.Join(dir, "run-18")}
	if merges != 1 || !slices.Equal(runs, want) {
		t.Fatalf("merges %d, runs %v, want 1, %v", merges, runs, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "run-0")); !os.IsNotExist(err) {
		t.Errorf("merged run not removed: %v", err)
	}

	boom := errors.New("boom")
	full := slices.Repeat([]string{"x"}, MaxRuns)
	got, err := Compact(full, name, func(string, []string) error { return boom })
	if !errors.Is(err, boom) || !slices.Equal(got, full) {
		t.Errorf("failed merge: %v, %v; want boom and the runs unchanged", got, err)
	}
}
