//go:build linux

package replay

import (
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"syscall"
)

// replayGCPercent is GOGC while a replay runs, where gcFloorBytes does not
// set a higher one.
//
// Each garbage collection stalls the dispatcher: its stack must be scanned,
// so it is preempted, and it resumes queued behind a mark worker on another
// P, which keeps that P until the runtime preempts it 10 ms later. What
// keeps collections rare is the floor: with a replay's usual live heap of a
// few MB it sets GOGC far above this value. This value only matters once
// the live heap passes half the floor (a long closed-session replay holding
// the sessions under way). There it trades memory against lateness: on a
// closed replay with a ~230 MB live heap, GOGC 400 held 0.94-1.0 GB of RSS
// at 150 k sessions (1.24 GB at 1 M) with lateness p99 1.7-2.0 ms, GOGC 100
// 0.45-0.47 GB (0.6 GB at 1 M) with p99 3.3-4.8 ms. Memory that follows the
// sessions under way is what a long agentic replay needs; GOGC in the
// environment takes the other side.
const replayGCPercent = 100

// gcFloorBytes is the smallest heap goal while a replay runs (a quarter of
// the memory limit where that is less). A replay's live heap is small (a
// few MB at 10k req/s against a fast server), so GOGC alone put the goal at
// 16–25 MB and collected every 0.6–1 s; every collection preempts the
// dispatcher at least twice, and an execution trace of a 10k req/s run on
// one core showed the stop-the-world phase taking 3.4 ms once the
// dispatcher's real-time thread had preempted the thread that held the
// scheduler's lock. With the floor, a 10 s run at 10k req/s (about 27 MB
// allocated per second) had its first collection at 10.04 s, after the run.
const gcFloorBytes = 256 << 20

// tuneGC sets GOGC to replayGCPercent, with a heap goal of at least
// gcFloorBytes, under a soft memory limit of a quarter of RAM so that a
// long replay's heap stays bounded (near the limit the collector runs as
// often as it must). It leaves all of it alone when GOGC or GOMEMLIMIT is
// set in the environment. restore undoes it.
func tuneGC() (restore func()) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	var si syscall.Sysinfo_t
	if syscall.Sysinfo(&si) != nil || si.Totalram == 0 {
		return func() {}
	}
	limit := uint64(si.Totalram) * uint64(si.Unit) / 4
	if limit > math.MaxInt64 {
		limit = math.MaxInt64
	}
	oldLimit := debug.SetMemoryLimit(int64(limit))
	oldPercent := debug.SetGCPercent(replayGCPercent)
	stop := keepGCFloor(min(gcFloorBytes, limit/4), replayGCPercent)
	return func() {
		stop()
		debug.SetGCPercent(oldPercent)
		debug.SetMemoryLimit(oldLimit)
	}
}

// keepGCFloor sets GOGC after each collection so that the next heap goal,
// live × (1 + GOGC/100), is at least floor, and never below percent. The
// runtime has no minimum heap goal of its own; a finalizer that re-arms
// itself runs once per collection, on the finalizer goroutine. It stops
// for good when stop is called or when someone else has changed GOGC
// meanwhile (theirs stands).
func keepGCFloor(floor uint64, percent int) (stop func()) {
	var mu sync.Mutex
	stopped := false
	last := percent // what GOGC is when nobody else has touched it
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/gogc:percent"},
		{Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"}}
	set := func() {
		metrics.Read(sample)
		if sample[1].Value.Kind() != metrics.KindUint64 || sample[1].Value.Uint64() != uint64(last) {
			stopped = true
			return
		}
		// The runtime's goal is live + (live + stacks + globals) × GOGC/100,
		// and never below its 4 MB minimum heap × GOGC/100: with a live heap
		// under 4 MB the minimum sets the goal. Taking such a heap as 1 MB
		// put the goal near 1 GB (a closed-session replay that streams
		// reached 1.08 GB RSS with a live heap of 35-53 MB).
		live := uint64(4 << 20)
		if sample[0].Value.Kind() == metrics.KindUint64 {
			var roots uint64
			for _, r := range sample[2:] {
				if r.Value.Kind() == metrics.KindUint64 {
					roots += r.Value.Uint64()
				}
			}
			live = max(sample[0].Value.Uint64()+roots, live)
		}
		last = int(min(max(uint64(percent), floor*100/live), math.MaxInt32))
		debug.SetGCPercent(last)
	}
	type sentinel struct{ _ [16]byte } // big enough not to be a tiny alloc
	var arm func()
	arm = func() {
		runtime.SetFinalizer(&sentinel{}, func(*sentinel) {
			mu.Lock()
			defer mu.Unlock()
			if !stopped {
				set()
				arm()
			}
		})
	}
	mu.Lock()
	set()
	mu.Unlock()
	arm()
	return func() {
		mu.Lock()
		stopped = true
		mu.Unlock()
	}
}
