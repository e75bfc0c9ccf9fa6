package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCPUProfileFlag checks the global --cpuprofile flag: a gzip'd pprof
// profile is written for a command that succeeds, and an unwritable path is
// a usage error that names the flag.
func TestCPUProfileFlag(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.prof")
	var out, errb bytes.Buffer
	if code := Main(context.Background(), []string{"tokentrace", "--cpuprofile", path, "version"}, strings.NewReader(""), &out, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	b, err := os.ReadFile(path)
	if err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Errorf("profile %s: %d bytes, err %v; want a gzip'd pprof profile", path, len(b), err)
	}
	errb.Reset()
	code := Main(context.Background(), []string{"tokentrace", "--cpuprofile", filepath.Join(t.TempDir(), "no", "such", "dir", "p"), "version"}, strings.NewReader(""), &out, &errb)
	if code != exitUsage || !strings.Contains(errb.String(), "--cpuprofile") {
		t.Errorf("unwritable profile path: exit %d, %q; want 2 naming --cpuprofile", code, errb.String())
	}
}
