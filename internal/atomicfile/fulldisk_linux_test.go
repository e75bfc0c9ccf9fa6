package atomicfile

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestFullDisk writes to a 64 KiB tmpfs (root only: the test mounts it) and
// checks that the write error surfaces and nothing is left behind.
func TestFullDisk(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=64k"); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v): the full-disk path is covered by TestAbortAndFailedWriteLeaveNothing", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, 0) })
	f, err := Create(filepath.Join(dir, "big.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	chunk := []byte(strings.Repeat("x", 4096))
	var werr error
	for i := 0; i < 64 && werr == nil; i++ {
		_, werr = f.Write(chunk)
	}
	cerr := f.Close()
	if werr == nil || cerr == nil || !strings.Contains(cerr.Error(), "no space left") {
		t.Fatalf("write error %v, close error %v: want no space left", werr, cerr)
	}
	if got := leftovers(t, dir); len(got) != 0 {
		t.Errorf("files left on the full disk: %v", got)
	}
}
