package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/capture"
)

// TestFullDiskLeavesNoPartialOutput writes each command's output onto a
// 16 KiB tmpfs (the test mounts it; root only) and checks that the command
// fails with exit 1 and a message saying the disk is full, and that no file
// is left under the output name: the final name only ever holds a complete
// file.
func TestFullDiskLeavesNoPartialOutput(t *testing.T) {
	full := t.TempDir()
	if err := syscall.Mount("tmpfs", full, "tmpfs", 0, "size=16k"); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v): internal/atomicfile's tests cover failed writes without one", err)
	}
	t.Cleanup(func() { syscall.Unmount(full, 0) })

	src := t.TempDir()
	logs := filepath.Join(src, "gateway.jsonl")
	so := capture.DefaultSampleOptions()
	so.Duration = 30 * time.Second // about 1,400 requests: a trace well over 16 KiB in every format
	var b bytes.Buffer
	if err := capture.WriteSampleLogs(context.Background(), &b, 1, so); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(logs, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	// The Mooncake sample's prefix blocks make a trace well over 16 KiB in every format.
	mooncake, err := filepath.Abs("../../testdata/publictraces/mooncake_conversation_head500.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	trace := filepath.Join(src, "mooncake.parquet")
	if code := Main(context.Background(), []string{"tokentrace", "import", "--format", "mooncake", "--out", trace, mooncake}, nil, &b, &b); code != 0 {
		t.Fatalf("import: exit %d: %s", code, b.String())
	}
	for _, c := range []struct {
		why  string
		args []string
		out  string
	}{
		{"capture onto a full disk", []string{"capture", "--out", filepath.Join(full, "t.jsonl"), logs}, "t.jsonl"},
		{"capture to Parquet onto a full disk", []string{"capture", "--out", filepath.Join(full, "t.parquet"), logs}, "t.parquet"},
		{"import onto a full disk", []string{"import", "--format", "mooncake", "--out", filepath.Join(full, "a.jsonl"), mooncake}, "a.jsonl"},
		{"import to Parquet onto a full disk", []string{"import", "--format", "mooncake", "--out", filepath.Join(full, "a.parquet"), mooncake}, "a.parquet"},
		{"export to Mooncake JSONL onto a full disk", []string{"export", "--format", "mooncake", "--out", filepath.Join(full, "m.jsonl"), trace}, "m.jsonl"},
		{"import to CSV onto a full disk", []string{"import", "--format", "mooncake", "--out", filepath.Join(full, "a.csv"), mooncake}, "a.csv"},
	} {
		var so, se bytes.Buffer
		code := Main(context.Background(), append([]string{"tokentrace"}, c.args...), strings.NewReader(""), &so, &se)
		if code != exitFailure || !strings.Contains(se.String(), "no space left on device") {
			t.Errorf("%s: exit %d, stderr %q; want exit 1 saying no space left", c.why, code, se.String())
		}
		es, _ := os.ReadDir(full)
		for _, e := range es {
			t.Errorf("%s: %s left on the full disk", c.why, e.Name())
			os.Remove(filepath.Join(full, e.Name()))
		}
	}
}
