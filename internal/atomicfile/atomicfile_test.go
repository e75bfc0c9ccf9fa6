package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// leftovers lists the files in dir.
func leftovers(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// createIn creates the file base in a new temporary directory dir; name
// is its final path.
func createIn(t *testing.T, base string) (f *File, dir, name string) {
	t.Helper()
	dir = t.TempDir()
	name = filepath.Join(dir, base)
	f, err := Create(name)
	if err != nil {
		t.Fatal(err)
	}
	return f, dir, name
}

// TestCommitRenames checks that a successful Close gives the file its final
// name with every byte, and leaves no temporary file.
func TestCommitRenames(t *testing.T) {
	f, dir, name := createIn(t, "out.jsonl")
	if _, err := os.Stat(name); !os.IsNotExist(err) {
		t.Fatalf("final name exists before Close: %v", err)
	}
	f.Write([]byte("hello\n"))
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(name); err != nil || string(b) != "hello\n" {
		t.Fatalf("read back %q, %v", b, err)
	}
	if st, _ := os.Stat(name); st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", st.Mode().Perm())
	}
	if got := leftovers(t, dir); len(got) != 1 {
		t.Errorf("files left: %v", got)
	}
}

// TestAbortAndFailedWriteLeaveNothing checks that Abort, and a write that
// failed, leave neither the final name nor the temporary file.
func TestAbortAndFailedWriteLeaveNothing(t *testing.T) {
	for _, c := range []struct {
		why   string
		spoil func(f *File)
	}{
		{"an aborted file is removed", func(f *File) { f.Abort() }},
		{"a failed write removes the file on Close", func(f *File) { f.f.Close(); f.Write([]byte("x")) }},
	} {
		f, dir, _ := createIn(t, "out.parquet")
		f.Write([]byte("partial"))
		c.spoil(f)
		err := f.Close()
		if got := leftovers(t, dir); len(got) != 0 {
			t.Errorf("%s: files left %v (Close: %v)", c.why, got, err)
		}
	}
}

// TestWriteFile checks the one-call form: fn's error leaves no file and is
// returned as it is; success leaves the complete file under its name.
func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "out.json")
	boom := errors.New("boom")
	if err := WriteFile(name, func(w io.Writer) error {
		io.WriteString(w, `{"half":`)
		return boom
	}); err != boom {
		t.Errorf("WriteFile = %v, want fn's error", err)
	}
	if es, _ := os.ReadDir(dir); len(es) != 0 {
		t.Errorf("a failed WriteFile left %s", es[0].Name())
	}
	if err := WriteFile(name, func(w io.Writer) error {
		_, err := io.WriteString(w, `{"whole":1}`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(name); err != nil || string(b) != `{"whole":1}` {
		t.Errorf("after WriteFile: %q, %v", b, err)
	}
}

// SetAside moves what was written to a file of its own and starts afresh:
// the final name gets only what was written after it.
func TestSetAside(t *testing.T) {
	f, dir, name := createIn(t, "out")
	f.Write([]byte("first try"))
	aside, err := f.SetAside()
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("second"))
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(aside); string(b) != "first try" {
		t.Errorf("aside holds %q", b)
	}
	if b, _ := os.ReadFile(name); string(b) != "second" {
		t.Errorf("final file holds %q", b)
	}
	if filepath.Dir(aside) != dir || !strings.HasPrefix(filepath.Base(aside), ".out.aside-") {
		t.Errorf("aside file %s: want a hidden .out.aside-* beside the output", aside)
	}
}
