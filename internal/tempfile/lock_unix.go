//go:build unix

package tempfile

import (
	"errors"
	"os"
	"syscall"
)

// lock takes an exclusive lock on f, held until f is closed.
func lock(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err != syscall.EINTR {
			return err
		}
	}
}

// tryLock takes an exclusive lock on f if no one holds one; held reports
// that someone does.
func tryLock(f *os.File) (held bool, err error) {
	err = lock(f)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return true, nil
	}
	return false, err
}
