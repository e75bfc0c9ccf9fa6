//go:build linux

package replay

import (
	"runtime"
	"syscall"
	"time"
	"unsafe"
)

// prSetTimerSlack is prctl(PR_SET_TIMERSLACK).
const prSetTimerSlack = 29

// sysSchedSetattr is the number of sched_setattr(2), which package syscall
// does not wrap; 0 where we do not know it.
var sysSchedSetattr = map[string]uintptr{"amd64": 314, "arm64": 274, "riscv64": 274, "loong64": 274}[runtime.GOARCH]

// schedAttr is struct sched_attr, first version (48 bytes).
type schedAttr struct {
	size     uint32
	policy   uint32 // SCHED_OTHER
	flags    uint64
	nice     int32
	priority uint32
	runtime  uint64 // for SCHED_OTHER: the requested slice, in ns
	deadline uint64
	period   uint64
}

// tuneDispatcherThread prepares the calling OS thread (the caller has
// locked its goroutine to it) for the dispatcher:
//   - timer slack 1 ns (prctl), so nanosleep wakes on time rather than up to
//     50 µs late;
//   - a 100 µs scheduler slice (sched_setattr; Linux 6.12+ EEVDF honours it
//     for normal tasks without privileges, older kernels refuse and nothing
//     changes). A task with a shorter slice preempts the running one when it
//     wakes; without it the woken dispatcher waits for the slice of whatever
//     else runs on its core (a GC worker, the journal writer): a CPU hog on
//     the same core delayed 200 µs sleeps by 1.9 ms at p99, 37 µs with the
//     short slice.
//   - with realtime, first the real-time class SCHED_FIFO at priority 1
//     (the lowest: it still runs before every normal thread on its core),
//     which needs CAP_SYS_NICE or an RLIMIT_RTPRIO of 1 or more; then the
//     slice above is not asked for (sched_setattr would reset the class).
//
// It returns "" when it got the real-time class, else why not.
func tuneDispatcherThread(realtime bool) (notRealtime string) {
	syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerSlack, 1, 0)
	notRealtime = RealtimeNotAsked
	if realtime {
		if notRealtime = setFIFO(); notRealtime == "" {
			return ""
		}
	}
	if sysSchedSetattr != 0 {
		a := schedAttr{size: uint32(unsafe.Sizeof(schedAttr{})), runtime: 100_000}
		syscall.RawSyscall(sysSchedSetattr, 0, uintptr(unsafe.Pointer(&a)), 0)
	}
	return notRealtime
}

// schedFIFO is SCHED_FIFO.
const schedFIFO = 1

// setFIFO puts the calling thread in SCHED_FIFO at priority 1; it returns
// "" or why it could not.
func setFIFO() string {
	prio := int32(1)
	_, _, e := syscall.RawSyscall(syscall.SYS_SCHED_SETSCHEDULER, 0, schedFIFO, uintptr(unsafe.Pointer(&prio)))
	switch e {
	case 0:
		return ""
	case syscall.EPERM:
		return "not permitted (needs CAP_SYS_NICE or ulimit -r 1)"
	default:
		return e.Error()
	}
}

// probeRealtime tells, before the clock starts, whether the dispatcher
// will get the real-time class: it tries on a thread of its own, which
// ends with the probe.
func probeRealtime() string {
	ch := make(chan string)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread goes with the goroutine
		ch <- setFIFO()
	}()
	return <-ch
}

// holdP is how long before a deadline the dispatcher stops giving its P
// back to the scheduler while it sleeps (see sleepUntil). It stays below
// the runtime's 10 ms forced-preemption threshold.
const holdP = 3 * time.Millisecond

// sleepUntil sleeps until spin before deadline (a monotonic offset from t0),
// spins the rest, and returns the offset at which it returned.
//
// Go's timers overshoot short sleeps by about 1 ms here (time.Sleep(100µs)
// measured ~1 ms late at p50), so the wait is a nanosleep system call on
// the dispatcher's own thread (see tuneDispatcherThread). Measured wake-up
// error: ~10 µs p50.
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
