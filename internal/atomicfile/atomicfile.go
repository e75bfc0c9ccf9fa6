// Package atomicfile writes a file so that its final name only ever holds a
// complete file: the bytes go to a temporary file beside it (same
// directory, so the rename cannot cross file systems), and Close syncs and
// renames it into place only when every write succeeded. A failed write (a
// full disk), Abort, or a crash leaves the final name untouched; a crash
// leaves a hidden ".NAME.partial-*" file that says what it is, which the
// next Create of NAME removes (it is locked while in use: see
// internal/tempfile).
package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"

	"github.com/tokentrace/tokentrace/internal/tempfile"
)

// File is a file being written under a temporary name.
type File struct {
	f      *os.File
	name   string // the final name
	err    error  // the first write error; Close then removes the file
	done   bool
	direct bool     // name is a device or a pipe, written in place
	aside  *os.File // holds the lock of the set-aside file, if any
}

// Create starts writing name; the file gets mode 0644. When name already
// exists and is a device or a pipe (/dev/null for a run that only
// validates, /dev/stdout, a FIFO), there is no file to complete: the bytes
// go straight to it, and nothing is renamed over it. Otherwise the
// temporary files of an earlier write of name that was killed are removed
// first.
func Create(name string) (*File, error) {
	if st, err := os.Stat(name); err == nil && !st.Mode().IsRegular() && !st.IsDir() {
		f, err := os.OpenFile(name, os.O_WRONLY, 0)
		if err != nil {
			return nil, err
		}
		return &File{f: f, name: name, direct: true}, nil
	}
	dir, base := filepath.Split(name)
	if dir == "" {
		dir = "."
	}
	Sweep(name)
	f, err := tempfile.CreateTemp(dir, "."+base+".partial-*")
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, &os.PathError{Op: "create", Path: name, Err: err}
	}
	// CreateTemp makes 0600 files; outputs are readable by others, as with
	// os.Create under the usual umask 022.
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, &os.PathError{Op: "create", Path: name, Err: err}
	}
	return &File{f: f, name: name}, nil
}

// Sweep removes the temporary files a killed write of name left beside
// it (".NAME.partial-*", ".NAME.aside-*") and returns their names; those of
// a write still running are locked and left alone.
func Sweep(name string) []string {
	dir, base := filepath.Split(name)
	if dir == "" {
		dir = "."
	}
	var removed []string
	for _, kind := range []string{".partial-*", ".aside-*"} {
		removed = append(removed, tempfile.Sweep(filepath.Join(dir, "."+escapeGlob(base)+kind))...)
	}
	return removed
}

// escapeGlob quotes the characters filepath.Match treats specially.
func escapeGlob(s string) string {
	var b []byte
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '*', '?', '[', '\\':
			b = append(b, '\\')
		}
		b = append(b, s[i])
	}
	return string(b)
}

// Name is the final name.
func (a *File) Name() string { return a.name }

// Write writes to the temporary file. After the first error every write
// fails with it, and Close removes the file instead of renaming it.
func (a *File) Write(p []byte) (int, error) {
	if a.err != nil {
		return 0, a.err
	}
	if a.done {
		return 0, os.ErrClosed
	}
	n, err := a.f.Write(p)
	if err != nil {
		a.err = a.named(err)
		return n, a.err
	}
	return n, nil
}

// named makes an error about the temporary file speak of the final name,
// the one the user chose ("write out.parquet: no space left on device").
func (a *File) named(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return &os.PathError{Op: pe.Op, Path: a.name, Err: pe.Err}
	}
	return &os.PathError{Op: "write", Path: a.name, Err: err}
}

// Abort discards the file; the final name is not touched. It is safe to
// call after Close (then it does nothing).
func (a *File) Abort() {
	if a.done {
		return
	}
	a.done = true
	a.f.Close()
	if !a.direct {
		os.Remove(a.f.Name())
	}
	a.releaseAside()
}

func (a *File) releaseAside() {
	if a.aside != nil {
		a.aside.Close()
		a.aside = nil
	}
}

// Close makes the file durable and gives it its final name, or, after a
// failed write, removes it and returns that error.
func (a *File) Close() error {
	if a.done {
		return nil
	}
	if a.err != nil {
		a.Abort()
		return a.err
	}
	a.done = true
	defer a.releaseAside()
	if a.direct {
		if err := a.f.Close(); err != nil {
			return a.named(err)
		}
		return nil
	}
	tmp := a.f.Name()
	fail := func(err error) error {
		a.f.Close()
		os.Remove(tmp)
		return a.named(err)
	}
	if err := a.f.Sync(); err != nil {
		return fail(err)
	}
	if err := a.f.Close(); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp, a.name); err != nil {
		os.Remove(tmp)
		return a.named(err)
	}
	// The rename is durable once the directory is synced; a failure here
	// does not make the file incomplete, so it is not reported.
	if d, err := os.Open(filepath.Dir(a.name)); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// SetAside moves what was written so far to a file of its own beside the
// final name (a hidden ".NAME.aside-*" file) and starts the temporary file
// afresh. It returns that file's name; the caller reads and removes it.
// A writer that began writing its output directly uses it to turn what it
// wrote into input for a second try.
func (a *File) SetAside() (string, error) {
	if a.err != nil {
		return "", a.err
	}
	if a.done {
		return "", os.ErrClosed
	}
	if a.direct {
		return "", &os.PathError{Op: "set aside", Path: a.name, Err: errors.New("written in place (a device or a pipe): what was written cannot be read back")}
	}
	dir, base := filepath.Split(a.name)
	if dir == "" {
		dir = "."
	}
	old := a.f
	fail := func(err error, remove ...string) (string, error) {
		old.Close()
		for _, n := range append(remove, old.Name()) {
			os.Remove(n)
		}
		a.done = true
		a.err = a.named(err)
		return "", a.err
	}
	if err := old.Sync(); err != nil {
		return fail(err)
	}
	// The written file keeps its descriptor, and so its lock, under its
	// new name: only the name changes.
	name, err := os.CreateTemp(dir, "."+base+".aside-*")
	if err != nil {
		return fail(err)
	}
	name.Close()
	if err := os.Rename(old.Name(), name.Name()); err != nil {
		return fail(err, name.Name())
	}
	f, err := tempfile.CreateTemp(dir, "."+base+".partial-*")
	if err == nil {
		if err = f.Chmod(0o644); err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}
	if err != nil {
		old.Close()
		os.Remove(name.Name())
		a.done = true
		a.err = a.named(err)
		return "", a.err
	}
	a.releaseAside()
	a.aside, a.f = old, f
	return name.Name(), nil
}

// Err is the first write error, if any.
func (a *File) Err() error { return a.err }

// WriteFile writes name atomically with fn: fn's error, a failed write or a
// failed close leaves the final name untouched. The error names the file
// once (fn's own errors are returned as they are).
func WriteFile(name string, fn func(io.Writer) error) error {
	f, err := Create(name)
	if err != nil {
		return err
	}
	if err := fn(f); err != nil {
		f.Abort()
		if f.err != nil {
			return f.err // the write error, already naming the file
		}
		return err
	}
	return f.Close()
}
