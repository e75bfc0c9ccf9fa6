package fserr

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// The path is said once, after what failed, and the chain is kept.
func TestWrap(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.parquet")
	_, openErr := os.Open(missing)
	other := errors.New("bad header")
	for _, c := range []struct {
		why  string
		what string
		name string
		err  error
		want string
	}{
		{"an open error says its path once, after what was opened", "open trace", "", openErr, "open trace " + missing + ": no such file or directory"},
		{"the same with the name given", "open trace", missing, openErr, "open trace " + missing + ": no such file or directory"},
		{"an error about another file keeps that file's operation and path", "open dataset", "d", openErr, "open dataset d: open " + missing + ": no such file or directory"},
		{"an error that is no path error reads what, name, error", "open trace", "t.parquet", other, "open trace t.parquet: bad header"},
		{"without a name: what, error", "read model", "", other, "read model: bad header"},
	} {
		got := Wrap(c.what, c.name, c.err)
		if got.Error() != c.want {
			t.Errorf("%s: %q, want %q", c.why, got, c.want)
		}
		if !errors.Is(got, c.err) {
			t.Errorf("%s: %v does not unwrap to %v", c.why, got, c.err)
		}
	}
	if !errors.Is(Wrap("open trace", "", openErr), fs.ErrNotExist) {
		t.Error("a wrapped open error is no longer fs.ErrNotExist")
	}
	if Wrap("open trace", "x", nil) != nil {
		t.Error("nil is not nil")
	}
}
