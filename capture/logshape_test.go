package capture

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/tokentrace/tokentrace/traces"
)

// TestTraceReadersKnowCaptureInputs: every log this package parses (its
// sample inputs, and the sample gateway logs) is recognised as logs where
// a trace is expected, so a command given them says to capture them first.
func TestTraceReadersKnowCaptureInputs(t *testing.T) {
	names, _ := filepath.Glob("testdata/*.jsonl")
	logs, _ := filepath.Glob("testdata/*.log")
	names = append(names, logs...)
	sample := sampleLogs(t, 1, DefaultSampleOptions().Duration)
	gen := filepath.Join(t.TempDir(), "gateway.jsonl")
	if err := os.WriteFile(gen, sample, 0o644); err != nil {
		t.Fatal(err)
	}
	names = append(names, gen)
	if len(names) < 5 {
		t.Fatalf("only %d sample inputs", len(names))
	}
	for _, n := range names {
		_, err := traces.Open(n)
		if !errors.Is(err, traces.ErrLogs) {
			t.Errorf("%s: %v, want it recognised as logs", n, err)
		}
	}
}
