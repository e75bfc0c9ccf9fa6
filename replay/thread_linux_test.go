//go:build linux

package replay

import (
	"testing"
	"time"
)

// TestYieldDue: the dispatcher ends its scheduling tick itself before the
// runtime's 10 ms preemption, and only where the yield cannot make it
// late: not with less than yieldRoom to the next deadline, not right
// after waking a goroutine (queued on its P), until yieldForce.
func TestYieldDue(t *testing.T) {
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	now := 100 * time.Millisecond
	for _, c := range []struct {
		name                 string
		sinceLast, sinceWoke time.Duration
		room                 time.Duration
		want                 bool
	}{
		{"short tick", ms(1), time.Second, 100 * time.Microsecond, false},
		{"tick ends past yieldEvery", ms(6.95), time.Second, 100 * time.Microsecond, true},
		{"no room before the deadline", ms(7.5), time.Second, 10 * time.Microsecond, false},
		{"deadline already passed", ms(7.5), time.Second, -time.Millisecond, false},
		{"a goroutine just woken", ms(7.5), 200 * time.Microsecond, 100 * time.Microsecond, false},
		{"forced, no room", ms(8.5), time.Second, 10 * time.Microsecond, true},
		{"forced, just woken", ms(8.6), 100 * time.Microsecond, 100 * time.Microsecond, true},
	} {
		if got := yieldDue(now, now-c.sinceLast, now-c.sinceWoke, now+c.room); got != c.want {
			t.Errorf("%s: yieldDue %v, want %v", c.name, got, c.want)
		}
	}
}

// TestDispatchThreadYields: waits of 100 µs, as at 10k req/s, on a thread
// tuned and locked as the dispatcher's, never go loose, and yield (and
// come back locked) at least once in 50 ms of deadlines and no more often
// than yieldEvery less the room allows. How many yields there are between
// those bounds depends on how the machine ran the thread: TestYieldDue
// holds the decision itself.
func TestDispatchThreadYields(t *testing.T) {
	t.Parallel()
	done := make(chan *dispatchThread)
	var elapsed time.Duration
	go func() {
		d, _ := startDispatchThread(time.Now(), false)
		for i := 1; i <= 500; i++ { // 50 ms
			deadline := time.Duration(i) * 100 * time.Microsecond
			if d.beforeWait(deadline, holdP) {
				t.Error("a 100 µs wait went loose")
			}
			sleepUntil(d.t0, deadline, 0, d.keep(holdP))
		}
		elapsed = d.now()
		done <- d
	}()
	d := <-done
	most := int(elapsed/(yieldEvery-100*time.Microsecond)) + 1
	if d.yields < 1 || d.yields > most || d.loose {
		t.Errorf("%d yields in %v (loose %v), want 1 to %d", d.yields, elapsed, d.loose, most)
	}
}
