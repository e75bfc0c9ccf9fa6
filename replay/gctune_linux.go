//go:build linux

package replay

import (
	"math"
	"os"
	"runtime/debug"
	"syscall"
)

// replayGCPercent is GOGC while a replay runs.
//
// Each garbage collection stalls the dispatcher: its stack must be scanned,
// so it is preempted, and it resumes queued behind a mark worker on another
// P, which keeps that P until the runtime preempts it 10 ms later. On one
// pinned core at 5k req/s (25,000 requests) GOGC=100 gave lateness p99
// 28–305 µs and max 6–11 ms, GOGC=400 19–59 µs and 2.8–3.9 ms (4 runs
// each, alternating).
const replayGCPercent = 400

// tuneGC raises GOGC to replayGCPercent, under a soft memory limit of a
// quarter of RAM so that a long replay's heap stays bounded (near the limit
// the collector runs as often as it must). It leaves both alone when
// GOGC or GOMEMLIMIT is set in the environment. restore undoes it.
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
	return func() {
		debug.SetGCPercent(oldPercent)
		debug.SetMemoryLimit(oldLimit)
	}
}
