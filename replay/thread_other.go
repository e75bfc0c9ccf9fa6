//go:build !linux

package replay

import (
	"runtime"
	"time"
)

// dispatchThread does nothing off Linux but lock the dispatcher to its
// thread (see thread_linux.go).
type dispatchThread struct{ yields, moves int }

func startDispatchThread(_ time.Time, realtime bool) (*dispatchThread, string) {
	runtime.LockOSThread()
	return nil, tuneDispatcherThread(realtime)
}

func (d *dispatchThread) wokeSomeone()                          {}
func (d *dispatchThread) beforeWait(_, _ time.Duration) bool    { return false }
func (d *dispatchThread) loosen()                               {}
func (d *dispatchThread) tighten()                              {}
func (d *dispatchThread) keep(hold time.Duration) time.Duration { return hold }
