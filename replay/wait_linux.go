//go:build linux

package replay

import (
	"syscall"
	"time"
	"unsafe"
)

// prSetTimerSlack is prctl(PR_SET_TIMERSLACK).
const prSetTimerSlack = 29

// holdP is how long before a deadline the dispatcher stops giving its P
// back to the scheduler while it sleeps (see sleepUntil). It stays below
// the runtime's 10 ms forced-preemption threshold.
const holdP = 3 * time.Millisecond

// sleepUntil sleeps until spin before deadline (a monotonic offset from t0),
// spins the rest, and returns the offset at which it returned.
//
// Go's timers overshoot short sleeps by about 1 ms here (time.Sleep(100µs)
// measured ~1 ms late at p50), so the wait is a nanosleep system call on a
// thread whose timer slack is first set to 1 ns (prctl, per thread, so it is
// set again before every sleep: the goroutine may have moved). Measured
// wake-up error: ~8 µs p50, ~20 µs p99.
//
// With hold > 0, the last hold before the deadline is slept in a raw
// nanosleep that keeps the goroutine's P. A normal system call gives the P
// away; coming back, the goroutine needs a P again, and when every P is busy
// it waits on the global run queue behind every runnable goroutine of the
// process (measured: tens to hundreds of ms with CPU-bound goroutines
// around). So the P is re-acquired hold early, and the deadline itself
// only needs the OS thread to run.
func sleepUntil(t0 time.Time, deadline, spin, hold time.Duration) time.Duration {
	for {
		now := time.Since(t0)
		rem := deadline - now
		if rem <= 0 {
			return now
		}
		if rem > spin {
			syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerSlack, 1, 0)
			if rem > hold {
				ts := syscall.NsecToTimespec(int64(rem - max(hold, spin)))
				syscall.Nanosleep(&ts, nil)
			} else {
				// EINTR (a preemption signal, GC) just ends the sleep early.
				ts := syscall.NsecToTimespec(int64(rem - spin))
				syscall.RawSyscall(syscall.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&ts)), 0, 0)
			}
			continue
		}
		for {
			if now = time.Since(t0); now >= deadline {
				return now
			}
		}
	}
}
