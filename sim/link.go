package sim

import (
	"math"
	"time"

	"github.com/tokentrace/tokentrace/internal/minheap"
)

// link is the fabric KV pulls share: each pull waits a fixed latency, then
// moves its tokens at its own per-token rate, the concurrent pulls sharing
// a bandwidth cap equally (processor sharing). Time is in nanoseconds on
// the caller's clock; the caller advances it.
type link struct {
	latency int64
	// solo is one pull's own rate and shared the cap on all pulls
	// together, both in tokens per ns (+Inf = no limit).
	solo, shared float64
	now          int64
	starting     []*xfer // in their latency, a min-heap by readyFirst
	moving       []*xfer // moving, in the order they started
	seq          int64   // orders pulls that start moving together
	done         []any   // scratch of advance
	keep         []*xfer // scratch of advance
	maxMoving    int     // most pulls moving at once
	inflight     int     // pulls not yet arrived
	totalTokens  float64 // tokens moved
}

type xfer struct {
	left  float64 // tokens still to move
	ready int64   // when the latency ends
	seq   int64
	tag   any
}

func newLink(latency, perToken time.Duration, bandwidth float64, bytesPerToken int) *link {
	l := &link{latency: int64(latency), solo: math.Inf(1), shared: math.Inf(1)}
	if perToken > 0 {
		l.solo = 1 / float64(perToken)
	}
	if bandwidth > 0 && bytesPerToken > 0 {
		l.shared = bandwidth / float64(bytesPerToken) / 1e9
	}
	return l
}

// rate is each moving pull's rate in tokens per ns.
func (l *link) rate() float64 {
	if len(l.moving) == 0 {
		return l.solo
	}
	return min(l.solo, l.shared/float64(len(l.moving)))
}

// start begins a pull of tokens tokens at now (≥ every earlier time given).
func (l *link) start(now int64, tokens int, tag any) {
	l.progress(now)
	l.seq++
	l.inflight++
	l.totalTokens += float64(tokens)
	minheap.Push(&l.starting, &xfer{left: float64(tokens), ready: now + l.latency, seq: l.seq, tag: tag}, readyFirst)
}

// next is the time of the link's next event (a pull starting to move or
// arriving), or -1 when it is idle.
func (l *link) next() int64 {
	t := int64(-1)
	if len(l.starting) > 0 {
		t = l.starting[0].ready
	}
	if len(l.moving) > 0 {
		r := l.rate()
		first := l.now
		if !math.IsInf(r, 1) {
			least := math.Inf(1)
			for _, x := range l.moving {
				least = min(least, x.left)
			}
			first = l.now + int64(math.Ceil(least/r))
		}
		if t < 0 || first < t {
			t = first
		}
	}
	return t
}

// progress moves every moving pull up to time t, with no event between
// (the caller made sure).
func (l *link) progress(t int64) {
	if t <= l.now {
		return
	}
	if r := l.rate(); len(l.moving) > 0 && !math.IsInf(r, 1) {
		d := r * float64(t-l.now)
		for _, x := range l.moving {
			x.left -= d
		}
	}
	l.now = t
}

// advance runs the link to time t and returns the tags of the pulls that
// arrived by then, in the order they arrived (valid until the next call).
func (l *link) advance(t int64) []any {
	l.done = l.done[:0]
	for {
		ev := l.next()
		if ev < 0 || ev > t {
			l.progress(t)
			return l.done
		}
		l.progress(ev)
		inf := math.IsInf(l.rate(), 1)
		keep := l.keep[:0]
		for _, x := range l.moving {
			if inf || x.left <= 1e-6 {
				l.done = append(l.done, x.tag)
				l.inflight--
				continue
			}
			keep = append(keep, x)
		}
		l.keep = l.moving[:0]
		l.moving = keep
		for len(l.starting) > 0 && l.starting[0].ready <= l.now {
			l.moving = append(l.moving, minheap.Pop(&l.starting, readyFirst))
		}
		l.maxMoving = max(l.maxMoving, len(l.moving))
	}
}

// readyFirst orders the pulls in their latency: by the time they start
// moving, then the order they were started in.
func readyFirst(a, b **xfer) bool {
	return (*a).ready < (*b).ready || (*a).ready == (*b).ready && (*a).seq < (*b).seq
}
