//go:build unix

package atomicfile

import (
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestDeviceWrittenInPlace checks that a device or a pipe is written
// straight to: nothing is renamed over /dev/null (a validate-only run's
// --out, refused once as an unknown format) and a FIFO stays a FIFO, its
// reader getting every byte.
func TestDeviceWrittenInPlace(t *testing.T) {
	if err := WriteFile(os.DevNull, func(w io.Writer) error {
		_, err := w.Write([]byte("discarded"))
		return err
	}); err != nil {
		t.Fatalf("WriteFile(%s): %v", os.DevNull, err)
	}
	if st, err := os.Stat(os.DevNull); err != nil || st.Mode()&os.ModeCharDevice == 0 {
		t.Fatalf("%s after the write: %v, %v; want the character device untouched", os.DevNull, st.Mode(), err)
	}

	dir := t.TempDir()
	fifo := filepath.Join(dir, "pipe")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	got := make(chan string, 1)
	go func() {
		f, err := os.Open(fifo)
		if err != nil {
			got <- err.Error()
			return
		}
		b, _ := io.ReadAll(f)
		f.Close()
		got <- string(b)
	}()
	a, err := Create(fifo)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.SetAside(); err == nil {
		t.Error("SetAside on a pipe succeeded; what went into a pipe cannot be read back")
	}
	if _, err := a.Write([]byte("through the pipe")); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if s := <-got; s != "through the pipe" {
		t.Errorf("the FIFO's reader got %q", s)
	}
	if st, err := os.Lstat(fifo); err != nil || st.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("%s after Close: %v, %v; want it still a FIFO", fifo, st.Mode(), err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("%d entries in the directory, want the FIFO alone (no temporary file)", len(ents))
	}
}
