//go:build unix

package tempfile

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// age makes name look as old as a leftover: Sweep leaves entries younger
// than minAge alone.
func age(t *testing.T, name string) {
	t.Helper()
	old := time.Now().Add(-2 * minAge)
	if err := os.Chtimes(name, old, old); err != nil {
		t.Fatal(err)
	}
}

// TestSweepRemovesOnlyLeftovers: a file or directory whose lock is held
// (a run using it) stays; once released (the run ended or was killed)
// the next Sweep removes it; a young entry stays either way.
func TestSweepRemovesOnlyLeftovers(t *testing.T) {
	dir := t.TempDir()
	f, err := CreateTemp(dir, "tokentrace-test-*.tmp")
	if err != nil {
		t.Fatal(err)
	}
	d, release, err := MkdirTemp(dir, "tokentrace-test-*.d")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(d, "run-00000"), []byte("x"), 0o644)
	young := filepath.Join(dir, "tokentrace-test-young.tmp")
	os.WriteFile(young, nil, 0o644)
	other := filepath.Join(dir, "someone-else.tmp")
	os.WriteFile(other, nil, 0o644)
	for _, n := range []string{f.Name(), d, other} {
		age(t, n)
	}
	pattern := filepath.Join(dir, "tokentrace-test-*")
	if got := Sweep(pattern); len(got) != 0 {
		t.Fatalf("removed %v while they were in use", got)
	}
	f.Close()
	release()
	got := Sweep(pattern)
	slices.Sort(got)
	want := []string{d, f.Name()}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("removed %v, want %v", got, want)
	}
	for _, n := range []string{young, other} {
		if _, err := os.Stat(n); err != nil {
			t.Errorf("%s was removed: %v", n, err)
		}
	}
	if _, err := os.Stat(d); !os.IsNotExist(err) {
		t.Errorf("the released directory is still there: %v", err)
	}
}
