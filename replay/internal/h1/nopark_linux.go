//go:build linux

package h1

import (
	"sync"
	"syscall"
	"unsafe"
)

// lockNoPark locks mu for the dispatcher, which runs on a thread of its own
// (often in the real-time class) that must not park its goroutine.
//
// sync.Mutex parks a waiter at the Go level: the dispatcher's locked thread
// hands its P away, and the goroutine runs again only when a P reaches the
// scheduler's queue and passes it back. The holder is a connection reader
// on another thread of the same core, which the real-time dispatcher has
// just preempted in its few-nanosecond critical section; an execution
// trace of a 10k req/s run on one pinned core showed 12 such waits of up to
// 2.9 ms. Sleeping in the kernel instead (a raw nanosleep keeps the P)
// lets the holder's thread run at once and finish.
func lockNoPark(mu *sync.Mutex) {
	for !mu.TryLock() {
		ts := syscall.Timespec{Nsec: 2000}
		syscall.RawSyscall(syscall.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&ts)), 0, 0)
	}
}
