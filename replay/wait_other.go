//go:build !linux

package replay

import (
	"runtime"
	"time"
)

// sleepUntil sleeps with Go timers until 2 ms before deadline (their
// granularity is about 1 ms) and yields in a loop for the rest. hold is
// not used here.
func sleepUntil(t0 time.Time, deadline, spin, hold time.Duration) time.Duration {
	const margin = 2 * time.Millisecond
	for {
		now := time.Since(t0)
		rem := deadline - now
		if rem <= 0 {
			return now
		}
		if rem > margin {
			time.Sleep(rem - margin)
			continue
		}
		runtime.Gosched()
	}
}

// holdP is unused off Linux (see wait_linux.go).
const holdP = 0

// tuneDispatcherThread does nothing off Linux.
func tuneDispatcherThread(bool) string { return notRealtimeHere }

const notRealtimeHere = "not available on this OS"

func probeRealtime() string { return notRealtimeHere }
