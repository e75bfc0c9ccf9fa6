// Package tempfile makes a run's temporary files and directories so that a
// later run recognises its own leftovers. Each is created under a name
// pattern that says what it is (".NAME.partial-*" beside an output,
// "tokentrace-sort-*" in the temporary directory, ...) and held under an
// advisory lock (flock) while in use. The kernel drops the lock when the
// process ends, however it ends (SIGKILL too), so Sweep can tell what a
// killed run left from what a live one is using, and removes the former.
package tempfile

import (
	"os"
	"path/filepath"
	"time"
)

// minAge keeps Sweep off entries younger than this: between making an
// entry and locking it, another run could take it for a leftover.
const minAge = 10 * time.Second

// CreateTemp is os.CreateTemp, with the file locked until it is closed.
func CreateTemp(dir, pattern string) (*os.File, error) {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	if err := lock(f); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	return f, nil
}

// MkdirTemp is os.MkdirTemp, with the directory locked until release is
// called (after the directory is removed).
func MkdirTemp(dir, pattern string) (name string, release func(), err error) {
	name, err = os.MkdirTemp(dir, pattern)
	if err != nil {
		return "", nil, err
	}
	d, err := os.Open(name)
	if err == nil {
		if err = lock(d); err != nil {
			d.Close()
		}
	}
	if err != nil {
		os.Remove(name)
		return "", nil, err
	}
	return name, func() { d.Close() }, nil
}

// Sweep removes the files and directories matching the filepath.Glob
// pattern that no process holds: the leftovers of runs that were killed.
// It returns what it removed; what it cannot open or remove (another
// user's, or in use) is left alone.
func Sweep(pattern string) []string {
	names, _ := filepath.Glob(pattern)
	var removed []string
	for _, n := range names {
		fi, err := os.Lstat(n)
		if err != nil || time.Since(fi.ModTime()) < minAge || fi.Mode()&os.ModeSymlink != 0 {
			continue
		}
		f, err := os.Open(n)
		if err != nil {
			continue
		}
		if held, err := tryLock(f); err != nil || held {
			f.Close()
			continue
		}
		// Locked by us now: no run is using it.
		err = os.RemoveAll(n)
		f.Close()
		if err == nil {
			removed = append(removed, n)
		}
	}
	return removed
}
