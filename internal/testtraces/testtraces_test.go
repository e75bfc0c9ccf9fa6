package testtraces

import (
	"os"
	"path/filepath"
	"testing"
)

// TestEnvVarWins checks that the environment variable names the folder and
// that Path finds a file in it.
func TestEnvVarWins(t *testing.T) {
	d := t.TempDir()
	if err := os.MkdirAll(filepath.Join(d, "mooncake"), 0o755); err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(d, "mooncake", "x.jsonl")
	if err := os.WriteFile(want, []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvVar, d)
	if got := Path(t, "mooncake/x.jsonl"); got != want {
		t.Fatalf("Path = %q, want %q", got, want)
	}
}

// TestMissingFileSkips checks that a missing trace skips rather than fails.
func TestMissingFileSkips(t *testing.T) {
	t.Setenv(EnvVar, t.TempDir())
	ok := t.Run("inner", func(t *testing.T) {
		Path(t, "nope/missing.csv")
		t.Error("Path returned for a missing file")
	})
	if !ok {
		t.Fatal("inner test failed instead of skipping")
	}
}
