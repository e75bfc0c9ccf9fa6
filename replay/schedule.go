package replay

import (
	"container/heap"
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// The scheduler's waiting policy. A wait longer than a slice (plus a
// margin) goes a slice at a time, so a stop, and in closed mode an earlier
// follow-up, is noticed; the rest is one precise wait, which nothing
// interrupts. The margin keeps a late wake from a slice's sleep from
// overshooting the deadline. Closed sessions use short slices and a short
// margin: a follow-up can fall due at any moment, and one pushed during the
// precise wait for another item waits for its end (at most closedSlice +
// closedMargin, well under a millisecond).
const (
	openSlice    = 50 * time.Millisecond
	sliceMargin  = 2 * time.Millisecond
	closedSlice  = 250 * time.Microsecond
	closedMargin = 500 * time.Microsecond
	// idleRecheck bounds an idle wait for follow-ups, should a poke be
	// missed.
	idleRecheck = 10 * time.Millisecond
)

// waitClock is the scheduler's time: runClock in a run; tests give a
// fake whose waits are time.Sleep in a testing/synctest bubble.
type waitClock interface {
	// now is the offset from the run start.
	now() time.Duration
	// sleepUntil returns at deadline (or later), spinning the last spin
	// and keeping the goroutine's P for the last hold (see sleepUntil).
	sleepUntil(deadline, spin, hold time.Duration)
}

// runClock is a run's clock, started at t0, with the precise wait. th is
// the dispatcher's thread (thread_linux.go), which a long wait loosens;
// nil in tests.
type runClock struct {
	t0 time.Time
	th *dispatchThread
}

func (c runClock) now() time.Duration { return time.Since(c.t0) }

func (c runClock) sleepUntil(deadline, spin, hold time.Duration) {
	if c.th.beforeWait(deadline, hold) {
		sleepUntil(c.t0, deadline-hold, 0, 0)
		c.th.tighten()
	}
	sleepUntil(c.t0, deadline, spin, c.th.keep(hold))
}

// scheduler decides which item the dispatcher sends next and waits for its
// deadline: static items come in batches, in schedule order; in closed
// mode, follow-ups that workers push as calls finish wait in a heap, and
// the earlier of the two goes first (the static item on a tie). The
// dispatcher calls next once per request: releasing an item allocates
// nothing.
type scheduler struct {
	closed     bool
	slice      time.Duration // see openSlice
	margin     time.Duration // see sliceMargin
	spin, hold time.Duration // for the precise wait (Options.Spin, holdP)

	// set by start
	stop    context.Context
	batches <-chan []*item
	clock   waitClock
	// idle, when set, is called while the scheduler waits for a batch in
	// open mode: the event loop reads responses meanwhile.
	idle func()
	// th is the dispatcher's thread, loosened before the scheduler blocks
	// (nil in tests).
	th *dispatchThread

	batch      []*item // the rest of the current batch
	static     *item   // the next static item, taken from batch
	staticDone bool    // batches is closed

	// closed-session follow-ups
	mu          sync.Mutex
	dyn         itemHeap
	pushed      uint64 // follow-ups pushed so far, for ties (itemHeap)
	notify      chan struct{}
	outstanding atomic.Int64 // follow-up turns not yet queued or dropped
}

func newScheduler(closed bool, spin time.Duration) *scheduler {
	s := &scheduler{closed: closed, slice: openSlice, margin: sliceMargin, spin: spin, hold: holdP, notify: make(chan struct{}, 1)}
	if closed {
		s.slice, s.margin = closedSlice, closedMargin
	}
	return s
}

// start gives the scheduler its stop, its static items and its clock;
// next may be called from then on.
func (s *scheduler) start(ctx context.Context, batches <-chan []*item, c waitClock) {
	s.stop, s.batches, s.clock = ctx, batches, c
}

// next waits until the next item's deadline and returns it, or nil once
// sending is over: stopped, or every item was released (in closed mode:
// the static ones, and no follow-up is queued or still to come).
func (s *scheduler) next() *item {
	for {
		if s.stop.Err() != nil {
			return nil
		}
		if s.static == nil && !s.staticDone {
			if len(s.batch) == 0 && !s.receive() {
				return nil
			}
			if len(s.batch) > 0 {
				s.static, s.batch = s.batch[0], s.batch[1:]
			}
		}
		pick, fromDyn := s.static, false
		if s.closed {
			s.mu.Lock()
			if len(s.dyn) > 0 && (pick == nil || s.dyn[0].sched < pick.sched) {
				pick, fromDyn = s.dyn[0], true
			}
			s.mu.Unlock()
			if pick == nil {
				if s.staticDone && s.outstanding.Load() == 0 && s.queued() == 0 {
					return nil
				}
				s.th.loosen()
				select {
				case <-s.notify:
				case <-s.stop.Done():
					return nil
				case <-time.After(idleRecheck):
				}
				continue
			}
		}
		if rem := pick.sched - s.clock.now(); rem > s.slice+s.margin {
			s.clock.sleepUntil(s.clock.now()+s.slice, 0, 0)
			continue
		}
		s.clock.sleepUntil(pick.sched, s.spin, s.hold)
		if fromDyn {
			// An earlier follow-up may have been pushed meanwhile: remove
			// exactly the item picked.
			s.mu.Lock()
			for i, x := range s.dyn {
				if x == pick {
					heap.Remove(&s.dyn, i)
					break
				}
			}
			s.mu.Unlock()
		} else {
			s.static = nil
		}
		return pick
	}
}

// receive takes the next batch of static items; false when sending is
// over (stopped, or in open mode the last batch was released). In closed
// mode it does not wait for a batch while follow-ups are queued, and a
// pushed follow-up ends its wait.
func (s *scheduler) receive() bool {
	// Receiving a batch may wake the goroutine that prepares them.
	defer s.th.wokeSomeone()
	for !s.closed {
		select {
		case b, ok := <-s.batches:
			s.batch = b
			return ok
		case <-s.stop.Done():
			return false
		default:
		}
		if s.idle != nil {
			s.idle()
			continue
		}
		s.th.loosen()
		select {
		case b, ok := <-s.batches:
			s.batch = b
			return ok
		case <-s.stop.Done():
			return false
		}
	}
	select {
	case b, ok := <-s.batches:
		s.staticDone, s.batch = !ok, b
	default:
		// prep lagging or done: fall through to the heap
		if s.queued() == 0 {
			s.th.loosen()
			select {
			case b, ok := <-s.batches:
				s.staticDone, s.batch = !ok, b
			case <-s.notify:
			case <-s.stop.Done():
				return false
			}
		}
	}
	return true
}

// push queues a follow-up; poke wakes the scheduler for it.
func (s *scheduler) push(it *item) {
	s.mu.Lock()
	s.pushed++
	it.seq = s.pushed
	heap.Push(&s.dyn, it)
	s.mu.Unlock()
}

// poke wakes a scheduler idle for want of follow-ups.
func (s *scheduler) poke() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// queued is how many follow-ups wait in the heap.
func (s *scheduler) queued() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.dyn)
}

// itemHeap orders follow-ups by deadline, then in the order they were
// pushed (seq): a heap alone leaves ties in any order.
type itemHeap []*item

func (h itemHeap) Len() int { return len(h) }
func (h itemHeap) Less(i, j int) bool {
	if h[i].sched != h[j].sched {
		return h[i].sched < h[j].sched
	}
	return h[i].seq < h[j].seq
}
func (h itemHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *itemHeap) Push(x any)   { *h = append(*h, x.(*item)) }
func (h *itemHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}
