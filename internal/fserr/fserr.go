// Package fserr says what failed on a file once: an *fs.PathError already
// names its operation and path ("open missing.parquet: no such file or
// directory"), so wrapping it as "open trace: %w" says the operation twice
// ("open trace: open missing.parquet: ..."). Wrap says "open trace
// missing.parquet: no such file or directory" and keeps the chain, so
// errors.Is(err, fs.ErrNotExist) and errors.As still see the PathError.
package fserr

import (
	"errors"
	"io/fs"
)

// Wrap returns err said after what (a verb and its object: "open trace")
// and name (the file; "" when only err knows it). When err is an
// *fs.PathError about name (or any file, when name is ""), its own
// operation and path give way to what and the path; otherwise it reads
// "what name: err". A nil err stays nil.
func Wrap(what, name string, err error) error {
	if err == nil {
		return nil
	}
	var pe *fs.PathError
	if errors.As(err, &pe) && err.Error() == pe.Error() && (name == "" || name == pe.Path) {
		return &wrapped{msg: what + " " + pe.Path + ": " + pe.Err.Error(), err: err}
	}
	if name != "" {
		what += " " + name
	}
	return &wrapped{msg: what + ": " + err.Error(), err: err}
}

type wrapped struct {
	msg string
	err error
}

func (e *wrapped) Error() string { return e.msg }
func (e *wrapped) Unwrap() error { return e.err }
