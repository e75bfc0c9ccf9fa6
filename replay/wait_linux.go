//go:build linux

package replay

import (
	"syscall"
	"time"
)

// prSetTimerSlack is prctl(PR_SET_TIMERSLACK).
const prSetTimerSlack = 29

// sleepUntil sleeps until spin before deadline (a monotonic offset from t0),
// spins the rest, and returns the offset at which it returned.
//
// Go's timers overshoot short sleeps by about 1 ms here (time.Sleep(100µs)
// measured ~1 ms late at p50), so the wait is a nanosleep system call (the
// runtime frees the goroutine's P meanwhile) on a thread whose timer slack
// is first set to 1 ns (prctl, per thread, so it is set again before every
// sleep: the goroutine may have moved). Measured wake-up error: ~8 µs p50,
// ~20 µs p99.
func sleepUntil(t0 time.Time, deadline time.Duration, spin time.Duration) time.Duration {
	for {
		now := time.Since(t0)
		rem := deadline - now
		if rem <= 0 {
			return now
		}
		if rem > spin {
			syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerSlack, 1, 0)
			ts := syscall.NsecToTimespec(int64(rem - spin))
			syscall.Nanosleep(&ts, nil)
			continue
		}
		for {
			if now = time.Since(t0); now >= deadline {
				return now
			}
		}
	}
}
