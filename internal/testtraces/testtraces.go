// Package testtraces finds the full public traces for tests that need them,
// and builds the small synthetic traces that tests of several packages share.
//
// The traces are not part of the repository (see docs/traces.md for where to
// download them). Tests read them from the folder named by the environment
// variable TOKENTRACE_TRACES, else from shared/traces beside the clone, and
// skip with a message naming the file when it is absent.
package testtraces

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/tokentrace/tokentrace/traces"
)

// EnvVar names the folder that holds the public traces, laid out as in
// docs/traces.md (mooncake/, azure_llm_2023/, vidur_processed/, …).
const EnvVar = "TOKENTRACE_TRACES"

// Dir returns the folder of the public traces, or "" when none is found.
func Dir() string {
	if d := os.Getenv(EnvVar); d != "" {
		return d
	}
	root := moduleRoot()
	if root == "" {
		return ""
	}
	d := filepath.Join(filepath.Dir(root), "shared", "traces")
	if st, err := os.Stat(d); err == nil && st.IsDir() {
		return d
	}
	return ""
}

// Path returns the path of rel (e.g. "mooncake/conversation_trace.jsonl")
// inside Dir, and skips tb with a message naming the file when it is absent.
func Path(tb testing.TB, rel string) string {
	tb.Helper()
	d := Dir()
	if d == "" {
		tb.Skipf("public trace %s not available: set %s to a folder holding the public traces (docs/traces.md)", rel, EnvVar)
	}
	p := filepath.Join(d, filepath.FromSlash(rel))
	if _, err := os.Stat(p); err != nil {
		tb.Skipf("public trace %s not available (%v): see docs/traces.md", rel, err)
	}
	return p
}

// moduleRoot walks up from the working directory (a package directory under
// go test) to the folder holding go.mod.
func moduleRoot() string {
	d, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		parent := filepath.Dir(d)
		if parent == d {
			return ""
		}
		d = parent
	}
}

// Constant is n requests of in prompt and out output tokens at rate requests
// per second, numbered from 0.
func Constant(n int, rate float64, in, out int32) []traces.Record {
	recs := make([]traces.Record, n)
	for i := range recs {
		r := traces.NewRecord()
		r.Seq = int64(i)
		r.ArrivalNs = int64(float64(i) / rate * 1e9)
		r.InputTokens, r.OutputTokens = in, out
		recs[i] = r
	}
	return recs
}

// ReadAll reads the trace or results file name whole, failing the test
// when it cannot.
func ReadAll(tb testing.TB, name string) ([]traces.Record, traces.Meta) {
	tb.Helper()
	recs, m, err := traces.ReadAll(name)
	if err != nil {
		tb.Fatal(err)
	}
	return recs, m
}
