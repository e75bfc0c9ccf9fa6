//go:build linux

package replay

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

func gcMetric(name string) uint64 {
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestKeepGCFloor checks that the heap goal stays at the floor while the
// live heap is small, follows GOGC once the live heap is large, comes back
// when it shrinks, and that a GOGC set by someone else stands.
func TestKeepGCFloor(t *testing.T) {
	const floor = 64 << 20
	old := debug.SetGCPercent(400)
	defer debug.SetGCPercent(old)
	runtime.GC()
	if live := gcMetric("/gc/heap/live:bytes"); live > floor/8 {
		t.Skipf("live heap %d B is too large for a %d B floor to show", live, floor)
	}
	stop := keepGCFloor(floor, 400)
	defer stop()
	if goal := gcMetric("/gc/heap/goal:bytes"); goal < floor*9/10 {
		t.Fatalf("heap goal %d B with a small live heap, want about the floor %d B", goal, floor)
	}
	// waitGOGC collects until the finalizer has set GOGC as want says.
	waitGOGC := func(what string, want func(uint64) bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; {
			runtime.GC()
			if p := gcMetric("/gc/gogc:percent"); want(p) {
				return
			} else if time.Now().After(deadline) {
				t.Fatalf("%s: GOGC still %d", what, p)
			}
			time.Sleep(time.Millisecond)
		}
	}
	big := make([]byte, 48<<20)
	big[len(big)-1] = 1
	waitGOGC("48 MB live", func(p uint64) bool { return p == 400 })
	runtime.KeepAlive(big)
	big = nil
	waitGOGC("live heap small again", func(p uint64) bool { return p > 400 })

	debug.SetGCPercent(137)
	for range 3 {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	if p := gcMetric("/gc/gogc:percent"); p != 137 {
		t.Errorf("GOGC %d after another caller set 137", p)
	}
}
