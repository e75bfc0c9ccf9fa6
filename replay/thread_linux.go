//go:build linux

package replay

import (
	"runtime"
	"syscall"
	"time"
	"unsafe"
)

// The dispatcher keeps its P. Go's scheduler preempts a goroutine that has
// run on the same scheduling tick for 10 ms, and the dispatcher, which
// waits in raw system calls that keep its P, never ends a tick on its
// own: at 10k req/s it was preempted every 10 ms. A goroutine locked to
// its thread (LockOSThread) that is preempted, or that blocks, cannot be
// resumed by its own thread: another thread must take it off the run
// queue and hand it a P, and that thread is an ordinary one, which on a
// busy core waits for the CPU behind everything else; the dispatcher's
// real-time class cannot help while it has no P. An execution trace of
// 4 s at 10k req/s on one pinned core showed 48 ms of such waits.
//
// So the dispatcher ends its ticks itself, at moments it chooses: as a
// wait begins (right after a send) that would take the tick past
// yieldEvery, it unlocks its thread and yields (runtime.Gosched). Unlocked, the goroutine goes to the global run queue
// and the same thread, still holding the P, takes it straight back (a
// new tick, a microsecond), unless the P had other work queued: then that
// runs first, on the real-time thread, and another thread may take the
// dispatcher. The dispatcher notices (its thread id changed), takes the
// real-time class from the old thread and gives it to the new one. It
// avoids yielding while a goroutine it woke may still be queued on its P.
//
// Waits longer than looseAbove (low rates, gaps in the trace, waiting
// for the trace to be read) are spent loose: unlocked and out of the
// real-time class, in system calls that let the P go; the dispatcher
// takes its thread back, with a fresh tick, hold before the deadline.

const (
	// yieldEvery is how long the dispatcher's scheduling tick may last,
	// under the runtime's 10 ms. Each yield costs the dispatcher about
	// 5 µs runnable (the runtime wakes a spinning thread on the way).
	yieldEvery = 7 * time.Millisecond
	// yieldForce: a yield put off (no room before the next deadline, a
	// goroutine just woken) happens anyway once the tick would pass this.
	yieldForce = 8500 * time.Microsecond
	// yieldRoom is the least time before the next deadline a yield goes
	// into before yieldForce.
	yieldRoom = 40 * time.Microsecond
	// wokeGrace: after the dispatcher wakes a goroutine (onto its own P's
	// run queue), yields wait this long for an idle P to take it.
	wokeGrace = time.Millisecond
	// looseAbove: waits longer than hold plus this are spent loose.
	looseAbove = 2 * time.Millisecond
)

// dispatchThread is the dispatcher's OS thread: how it is tuned, when it
// last yielded and whether it is loose. The dispatcher's goroutine alone
// uses it.
type dispatchThread struct {
	t0       time.Time
	realtime bool // asked for the real-time class
	rt       bool // got it
	tid      int
	loose    bool
	last     time.Duration // run offset of the last yield
	woke     time.Duration // run offset of the last goroutine woken
	// yields and moves count the yields and the times the dispatcher came
	// back on another thread.
	yields, moves int
}

// startDispatchThread locks the calling goroutine to its thread and tunes
// it (tuneDispatcherThread); notRealtime says why it is not in the
// real-time class ("" when it is).
func startDispatchThread(t0 time.Time, realtime bool) (d *dispatchThread, notRealtime string) {
	runtime.LockOSThread()
	d = &dispatchThread{t0: t0, realtime: realtime, tid: syscall.Gettid()}
	notRealtime = tuneDispatcherThread(realtime)
	d.rt = notRealtime == ""
	return d, notRealtime
}

func (d *dispatchThread) now() time.Duration { return time.Since(d.t0) }

// wokeSomeone notes that the dispatcher just woke a goroutine, which the
// runtime queued on the dispatcher's P.
func (d *dispatchThread) wokeSomeone() {
	if d != nil {
		d.woke = d.now()
	}
}

// beforeWait is called as a wait until deadline begins: a wait longer
// than hold+looseAbove goes loose (and true is returned: the caller waits
// until deadline-hold, then calls tighten); else the dispatcher yields if
// it is due. A nil d does nothing.
func (d *dispatchThread) beforeWait(deadline, hold time.Duration) (loose bool) {
	if d == nil {
		return false
	}
	now := d.now()
	if deadline-now > hold+looseAbove {
		d.loosen()
		return true
	}
	if d.loose {
		d.tighten()
		return false
	}
	if yieldDue(now, d.last, d.woke, deadline) {
		d.yield()
	}
	return false
}

// yieldDue tells whether a wait from now until deadline should begin with
// a yield, the last having been at last and the last goroutine woken at
// woke (run offsets): when the tick would pass yieldEvery by the wait's
// end, unless there is less than yieldRoom to the deadline or a goroutine
// was just woken; then at yieldForce regardless.
func yieldDue(now, last, woke, deadline time.Duration) bool {
	room := max(deadline-now, 0)
	end := now - last + room // the tick's length when this wait ends
	if end < yieldEvery {
		return false
	}
	return end >= yieldForce || (room >= yieldRoom && now-woke >= wokeGrace)
}

// keep is how long before a deadline the dispatcher keeps its P through
// its waits, given the caller's hold: all of a wait that is not loose (the
// P is the dispatcher's own); hold without a dispatchThread (tests).
func (d *dispatchThread) keep(hold time.Duration) time.Duration {
	if d == nil {
		return hold
	}
	return hold + looseAbove
}

// yield ends the dispatcher's scheduling tick without giving up its P
// (see above).
func (d *dispatchThread) yield() {
	runtime.UnlockOSThread()
	wakeIdleP()
	runtime.Gosched()
	runtime.LockOSThread()
	d.yields++
	d.last = d.now()
	if tid := syscall.Gettid(); tid != d.tid {
		// Another thread took the dispatcher: the old one ran whatever was
		// queued on the P, and must not keep the real-time class.
		if d.rt {
			setOther(d.tid)
		}
		d.tid = tid
		d.moves++
		d.retune()
	}
}

// wakeIdleP has the runtime wake an idle P (starting a goroutine does:
// the runtime's wakep), so that a thread stands ready to take the
// dispatcher off the run queue. Without it, when what runs on the
// dispatcher's P during a yield blocks in a system call (a file write, an
// fsync), the P stays with that call and the dispatcher waits until sysmon
// retakes it, which a quiet sysmon does only after 10-20 ms.
func wakeIdleP() { go func() {}() }

// loosen unlocks the thread for a long wait, out of the real-time class.
func (d *dispatchThread) loosen() {
	if d == nil || d.loose {
		return
	}
	if d.rt {
		setOther(0)
	}
	runtime.UnlockOSThread()
	d.loose = true
}

// tighten ends a loose wait: a fresh scheduling tick, the thread locked
// and tuned again.
func (d *dispatchThread) tighten() {
	if d == nil || !d.loose {
		return
	}
	wakeIdleP()
	runtime.Gosched()
	runtime.LockOSThread()
	d.loose = false
	d.yields++
	d.last = d.now()
	if tid := syscall.Gettid(); tid != d.tid {
		d.tid = tid
		d.moves++
	}
	d.retune()
}

// retune tunes the thread the dispatcher is on now as startDispatchThread
// did the first.
func (d *dispatchThread) retune() {
	notRealtime := tuneDispatcherThread(d.realtime && d.rt)
	d.rt = d.rt && notRealtime == ""
}

// setOther puts thread tid (0: the calling one) back in the normal class.
func setOther(tid int) {
	var prio int32
	syscall.RawSyscall(syscall.SYS_SCHED_SETSCHEDULER, uintptr(tid), 0, uintptr(unsafe.Pointer(&prio)))
}
