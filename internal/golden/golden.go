// Package golden compares what a test produced with a golden file kept under
// testdata, or rewrites the file instead when the test binary runs with
// -update (review the diff, then commit it). A package whose tests use it
// gets its -update flag from here and must not declare its own.
package golden

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files instead of comparing with them")

// Update reports whether the tests run with -update.
func Update() bool { return *update }

// Write writes data to the golden file at path, making its folder.
func Write(tb testing.TB, path string, data []byte) {
	tb.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		tb.Fatal(err)
	}
}

// Read returns the golden file at path; when it cannot be read the test
// stops with the hint to write it with -update.
func Read(tb testing.TB, path string) []byte {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("%v (run the test with -update to write it, and review it)", err)
	}
	return b
}

// Check compares got with the golden file at path and reports the first line
// that differs; under -update it writes got there instead.
func Check(tb testing.TB, path string, got []byte) {
	tb.Helper()
	if *update {
		Write(tb, path, got)
		return
	}
	if want := Read(tb, path); !bytes.Equal(got, want) {
		tb.Errorf("%s differs (run the test with -update to accept an intended change, and review the diff): %s", path, firstDiff(got, want))
	}
}

// firstDiff names the first line where got and want differ.
func firstDiff(got, want []byte) string {
	gl, wl := bytes.Split(got, []byte("\n")), bytes.Split(want, []byte("\n"))
	for i := range max(len(gl), len(wl)) {
		var g, w []byte
		if i < len(gl) {
			g = gl[i]
		}
		if i < len(wl) {
			w = wl[i]
		}
		if !bytes.Equal(g, w) {
			return fmt.Sprintf("line %d is %q, want %q", i+1, g, w)
		}
	}
	return fmt.Sprintf("%d bytes, want %d: only a final newline differs", len(got), len(want))
}
