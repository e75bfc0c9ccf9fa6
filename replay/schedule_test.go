package replay

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// fakeClock is the scheduler's clock in a synctest bubble: time.Sleep
// there is virtual, so every wait ends exactly at its deadline.
type fakeClock struct{ t0 time.Time }

func (c fakeClock) now() time.Duration { return time.Since(c.t0) }

func (c fakeClock) sleepUntil(deadline, _, _ time.Duration) { time.Sleep(deadline - c.now()) }

// due is an item named name, due at sched.
type due struct {
	name  string
	sched time.Duration
}

// schedBatch is a batch of static items that prepare hands over at ready.
type schedBatch struct {
	ready time.Duration
	items []due
}

// schedPush is what a worker does at when: push a follow-up, or with an
// empty name drop one (its call failed), then poke.
type schedPush struct {
	when time.Duration
	due
}

// released is an item's name and when the scheduler released it.
type released struct {
	name string
	at   time.Duration
}

func ms(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }

func TestScheduler(t *testing.T) {
	for _, c := range []struct {
		name    string
		closed  bool
		batches []schedBatch
		pushes  []schedPush // the follow-ups still to come, in order
		stopAt  time.Duration
		want    []released
		end     time.Duration // when next returns nil
	}{
		{
			name: "Static items are released exactly at their deadlines, in schedule order, across batches and through a wait longer than a slice; the run ends with the last batch.",
			batches: []schedBatch{
				{0, []due{{"a", ms(1)}, {"b", ms(5)}}},
				{0, []due{{"c", ms(200)}, {"d", ms(200.5)}}},
			},
			want: []released{{"a", ms(1)}, {"b", ms(5)}, {"c", ms(200)}, {"d", ms(200.5)}},
			end:  ms(200.5),
		},
		{
			name:    "Static items with the same deadline keep their schedule order.",
			batches: []schedBatch{{0, []due{{"a", ms(3)}, {"b", ms(3)}, {"c", ms(3)}}}},
			want:    []released{{"a", ms(3)}, {"b", ms(3)}, {"c", ms(3)}},
			end:     ms(3),
		},
		{
			name:    "An item already due is released at once.",
			batches: []schedBatch{{ms(10), []due{{"late", ms(2)}}}},
			want:    []released{{"late", ms(10)}},
			end:     ms(10),
		},
		{
			name:    "A stop during a long open-mode wait returns within one 50 ms slice, releasing nothing.",
			batches: []schedBatch{{0, []due{{"far", 10 * time.Second}}}},
			stopAt:  ms(120),
			end:     ms(150),
		},
		{
			name:    "A stop while waiting for a batch returns at once.",
			batches: []schedBatch{{time.Second, []due{{"a", time.Second}}}},
			stopAt:  ms(70),
			end:     ms(70),
		},
		{
			name:    "In closed mode a stop during a long wait returns within one 250 µs slice.",
			closed:  true,
			batches: []schedBatch{{0, []due{{"far", 10 * time.Second}}}},
			stopAt:  ms(120.1),
			end:     ms(120.25),
		},
		{
			name:   "In closed mode a stop while only follow-ups are to come returns at once.",
			closed: true,
			pushes: []schedPush{{time.Second, due{"f", 2 * time.Second}}},
			stopAt: ms(33),
			end:    ms(33),
		},
		{
			name:    "Follow-ups pushed while waiting for a later static item are released first, each at its own deadline, earliest first whatever the push order.",
			closed:  true,
			batches: []schedBatch{{0, []due{{"s", ms(100)}}}},
			pushes: []schedPush{
				{ms(10.1), due{"f60", ms(60)}},
				{ms(20.1), due{"f40", ms(40)}},
			},
			want: []released{{"f40", ms(40)}, {"f60", ms(60)}, {"s", ms(100)}},
			end:  ms(100),
		},
		{
			name:    "A follow-up already due when pushed goes out within one slice.",
			closed:  true,
			batches: []schedBatch{{0, []due{{"s", ms(100)}}}},
			pushes:  []schedPush{{ms(10.1), due{"f", ms(5)}}},
			want:    []released{{"f", ms(10.25)}, {"s", ms(100)}},
			end:     ms(100),
		},
		{
			name:   "An earlier follow-up pushed during the last, precise wait for another is released right after it (the last 750 µs are not sliced), and each only once.",
			closed: true,
			pushes: []schedPush{
				{ms(1.1), due{"f50", ms(50)}},
				{ms(49.4), due{"f49", ms(49.3)}},
			},
			want: []released{{"f50", ms(50)}, {"f49", ms(50)}},
			end:  ms(50),
		},
		{
			name:   "A follow-up pushed 2 ms before a later one falls due is released at its own deadline: in closed mode only the last 750 µs of a wait go unsliced, so no follow-up waits a millisecond for another item.",
			closed: true,
			pushes: []schedPush{
				{ms(1.1), due{"f50", ms(50)}},
				{ms(48.1), due{"f49", ms(49)}},
			},
			want: []released{{"f49", ms(49)}, {"f50", ms(50)}},
			end:  ms(50),
		},
		{
			name:    "A static item and a follow-up due at the same time go static first.",
			closed:  true,
			batches: []schedBatch{{0, []due{{"s", ms(10)}}}},
			pushes:  []schedPush{{ms(2.1), due{"f", ms(10)}}},
			want:    []released{{"s", ms(10)}, {"f", ms(10)}},
			end:     ms(10),
		},
		{
			name:   "Follow-ups due at the same time go in the order they were pushed.",
			closed: true,
			pushes: []schedPush{
				{ms(1.1), due{"x", ms(20)}},
				{ms(1.2), due{"y", ms(20)}},
				{ms(1.3), due{"z", ms(20)}},
			},
			want: []released{{"x", ms(20)}, {"y", ms(20)}, {"z", ms(20)}},
			end:  ms(20),
		},
		{
			name:    "Closed mode does not end when the static items are done while a follow-up is still to come, and ends as soon as it is released.",
			closed:  true,
			batches: []schedBatch{{0, []due{{"s", ms(2)}}}},
			pushes:  []schedPush{{ms(30.1), due{"f", ms(35)}}},
			want:    []released{{"s", ms(2)}, {"f", ms(35)}},
			end:     ms(35),
		},
		{
			name:    "Closed mode ends when the last follow-up still to come is dropped instead.",
			closed:  true,
			batches: []schedBatch{{0, []due{{"s", ms(2)}}}},
			pushes:  []schedPush{{ms(25.3), due{}}},
			want:    []released{{"s", ms(2)}},
			end:     ms(25.3),
		},
		{
			name:   "Closed mode releases follow-ups while the next static batch is late, then the batch.",
			closed: true,
			batches: []schedBatch{
				{0, []due{{"s1", ms(1)}}},
				{ms(30), []due{{"s2", ms(40)}}},
			},
			pushes: []schedPush{{ms(5.1), due{"f", ms(10)}}},
			want:   []released{{"s1", ms(1)}, {"f", ms(10)}, {"s2", ms(40)}},
			end:    ms(40),
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				got, end := runScheduler(c.closed, c.batches, c.pushes, c.stopAt)
				if !slices.Equal(got, c.want) || end != c.end {
					t.Errorf("released %v, ended at %v; want %v, ending at %v", got, end, c.want, c.end)
				}
			})
		})
	}
}

// runScheduler runs a scheduler in the calling synctest bubble, with the
// batches handed over and the follow-ups pushed (or dropped) at their
// times, and a stop at stopAt (0: none); it returns what was released
// and when next returned nil.
func runScheduler(closed bool, batches []schedBatch, pushes []schedPush, stopAt time.Duration) ([]released, time.Duration) {
	clk := fakeClock{t0: time.Now()}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if stopAt > 0 {
		time.AfterFunc(stopAt, cancel)
	}
	s := newScheduler(closed, 0)
	names := map[*item]string{}
	static := make([][]*item, len(batches))
	for i, b := range batches {
		for _, a := range b.items {
			it := &item{sched: a.sched}
			names[it] = a.name
			static[i] = append(static[i], it)
		}
	}
	// The bubble's goroutines must have ended when it does.
	var wg sync.WaitGroup
	defer wg.Wait()
	ch := make(chan []*item, len(batches))
	wg.Go(func() {
		defer close(ch)
		for i, b := range batches {
			time.Sleep(b.ready - clk.now())
			ch <- static[i]
		}
	})
	// The follow-ups' items exist before the run, as the graph's do.
	s.outstanding.Add(int64(len(pushes)))
	items := make([]*item, len(pushes))
	for i, p := range pushes {
		if p.name != "" {
			items[i] = &item{sched: p.sched}
			names[items[i]] = p.name
		}
	}
	wg.Go(func() {
		for i, p := range pushes {
			time.Sleep(p.when - clk.now())
			if items[i] != nil {
				s.push(items[i])
			}
			s.outstanding.Add(-1)
			s.poke()
		}
	})
	s.start(ctx, ch, clk)
	var got []released
	for {
		it := s.next()
		if it == nil {
			return got, clk.now()
		}
		got = append(got, released{names[it], clk.now()})
	}
}

func (r released) String() string { return fmt.Sprintf("%s@%v", r.name, r.at) }

// TestSchedulerNextAllocatesNothing: the dispatcher calls next once per
// request, on the production clock, so it must not allocate.
func TestSchedulerNextAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, c := range []struct {
		name   string
		closed bool
	}{
		{"Releasing static items that are due allocates nothing.", false},
		{"Releasing static items and follow-ups in turn allocates nothing.", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			const runs = 100
			s := newScheduler(c.closed, 0)
			// Everything is due: items 1 ns apart, a second before now.
			batch := make([]*item, runs+1)
			for i := range batch {
				batch[i] = &item{sched: time.Duration(2 * i)}
				if c.closed {
					s.push(&item{sched: time.Duration(2*i + 1)})
				}
			}
			ch := make(chan []*item, 1)
			ch <- batch
			s.start(context.Background(), ch, runClock{t0: time.Now().Add(-time.Second)})
			if n := testing.AllocsPerRun(runs, func() {
				if s.next() == nil {
					t.Fatal("the scheduler ended early")
				}
			}); n != 0 {
				t.Errorf("%v allocations per item, want 0", n)
			}
		})
	}
}
