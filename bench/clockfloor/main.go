// Command clockfloor measures the floor under a replay's timing on this
// machine: a thread that does nothing but read the clock, on the core the
// client is pinned to, in the scheduling class the replayer's dispatcher
// asks for (SCHED_FIFO where permitted), checks deadlines at -rate per
// second for -duration of spinning and prints how late it saw each one. Whatever
// makes it late (other threads on the core, the hypervisor taking the
// virtual CPU, interrupts) makes any client late by as much; a replay's
// lateness beyond this floor is the client's own. The bench scripts run it
// pinned just before each replay and print the two side by side.
//
//	taskset -c 1 go run ./bench/clockfloor -rate 10000 -duration 5s
//
// With -sleep it sleeps until each deadline instead, as the dispatcher
// does: that floor adds the machine's wake-up latency, and the CPU per
// deadline it prints (on stderr) is what one wake-up costs here. Its output line has
// the shape of the replay's summary line:
//
//	floor      p50 0µs  p99 31µs  max 2.31ms  late>500µs 0.010%
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sort"
	"syscall"
	"time"
	"unsafe"

	"github.com/tokentrace/tokentrace/replay"
)

func main() {
	rate := flag.Float64("rate", 10000, "deadlines per second")
	duration := flag.Duration("duration", 5*time.Second, "how long to spin")
	realtime := flag.Bool("realtime", true, "run in SCHED_FIFO priority 1, as the replayer's dispatcher does, where permitted")
	sleep := flag.Bool("sleep", false, "sleep until each deadline (nanosleep, 1 ns timer slack) instead of spinning, as the dispatcher does: the floor with the machine's wake-up latency in it")
	flag.Parse()
	if *rate <= 0 || *duration <= 0 {
		fmt.Fprintln(os.Stderr, "clockfloor: -rate and -duration must be > 0")
		os.Exit(2)
	}
	runtime.LockOSThread()
	class := "normal"
	if *realtime && runtime.GOOS == "linux" {
		prio := int32(1)
		const schedFIFO = 1
		if _, _, e := syscall.RawSyscall(syscall.SYS_SCHED_SETSCHEDULER, 0, schedFIFO, uintptr(unsafe.Pointer(&prio))); e == 0 {
			class = "SCHED_FIFO 1"
		} else {
			class = "normal (SCHED_FIFO: " + e.Error() + ")"
		}
	}
	period := time.Duration(float64(time.Second) / *rate)
	n := int(duration.Seconds() * *rate)
	late := make([]time.Duration, 0, n)
	// The kernel lets real-time threads run at most sched_rt_runtime_us of
	// each sched_rt_period_us (by default 0.95 s of 1 s) and stops them
	// for the rest: a thread that spins for longer would measure that
	// throttling, which the replayer's dispatcher (asleep most of the time)
	// never meets. So it spins burst long and sleeps pause, and the
	// deadlines that fall in a pause are not counted.
	const burst, pause = 400 * time.Millisecond, 100 * time.Millisecond
	t0 := time.Now()
	next := period
	burstEnd := burst
	if *sleep {
		const prSetTimerSlack = 29
		syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerSlack, 1, 0)
		for len(late) < n {
			if rem := next - time.Since(t0); rem > 0 {
				// A raw system call keeps the P: a real-time thread that has
				// to get its P back from a normal one on its own core
				// waits until the kernel throttles it (up to 50 ms a second).
				ts := syscall.NsecToTimespec(int64(rem))
				syscall.RawSyscall(syscall.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&ts)), 0, 0)
			}
			now := time.Since(t0)
			for now >= next && len(late) < n {
				late = append(late, now-next)
				next += period
			}
		}
	}
	for len(late) < n {
		now := time.Since(t0)
		if now >= burstEnd {
			time.Sleep(pause)
			now = time.Since(t0)
			next += (now - next + period - 1) / period * period // skip the pause's deadlines
			burstEnd = now + burst
		}
		for now >= next && len(late) < n {
			late = append(late, now-next)
			next += period
		}
	}
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	cpu := time.Duration(syscall.TimevalToNsec(ru.Utime) + syscall.TimevalToNsec(ru.Stime))
	slices.Sort(late)
	q := func(p float64) time.Duration { return late[min(len(late)-1, int(p*float64(len(late))))] }
	name := "floor"
	if *sleep {
		name = "floor-wake"
	}
	// The share of deadlines met more than 0.5 ms late, as bench/episodes
	// counts a replay's: the late share no client on this core can go below.
	over := len(late) - sort.Search(len(late), func(i int) bool { return late[i] > 500*time.Microsecond })
	fmt.Printf("%-10s p50 %s  p99 %s  max %s  late>500µs %.3f%%\n", name, replay.FormatDuration(q(0.5)), replay.FormatDuration(q(0.99)), replay.FormatDuration(late[len(late)-1]), 100*float64(over)/float64(len(late)))
	fmt.Fprintf(os.Stderr, "clockfloor: %d deadlines at %.0f/s over %v, %s, %.1f µs of CPU per deadline\n", n, *rate, *duration, class, float64(cpu)/1e3/float64(n))
}
