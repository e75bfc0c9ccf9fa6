package replay

import (
	"encoding/json"
	"strconv"
	"sync"
	"time"

	"github.com/tokentrace/tokentrace/internal/cgroup"
	"github.com/tokentrace/tokentrace/traces"
)

// Metadata keys for the replayer's own CPU: whether the dispatcher got the
// real-time class, the cgroup's CPU quota, and how long the cgroup was
// throttled during the run (in all, and per second of the run with any:
// [offset of the second in ms, throttled µs] pairs, at most a day's).
const (
	MetaRealtime         = "replay.realtime"
	MetaCPUQuota         = "replay.cpu_quota"
	MetaThrottledNs      = "replay.throttled_ns"
	MetaThrottledPeriods = "replay.throttled_periods"
	MetaThrottledWindows = "replay.throttled_windows"
)

// RealtimeNotAsked is Summary.Realtime when Options.NoRealtime was set.
const RealtimeNotAsked = "not asked for (Options.NoRealtime)"

// throttleWindow is how often the cgroup's throttling is sampled.
var throttleWindow = time.Second

const maxThrottleWindows = 86400

// throttleWatch samples the replayer's cgroup throttling while the run
// goes: a throttled period stalls every thread of the process at once, and
// analyze needs to know when, to tell a late send from a slow server.
type throttleWatch struct {
	cg      *cgroup.CPU
	t0      time.Time
	first   cgroup.Stat
	last    cgroup.Stat
	mu      sync.Mutex
	windows [][2]int64
	stop    chan struct{}
	done    chan struct{}
}

// watchThrottling starts sampling (nil when there is no cgroup to read).
func watchThrottling(cg *cgroup.CPU, t0 time.Time) *throttleWatch {
	if cg == nil {
		return nil
	}
	st, err := cg.ReadStat()
	if err != nil {
		return nil
	}
	w := &throttleWatch{cg: cg, t0: t0, first: st, last: st, stop: make(chan struct{}), done: make(chan struct{})}
	go w.loop()
	return w
}

func (w *throttleWatch) loop() {
	defer close(w.done)
	t := time.NewTicker(throttleWindow)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			w.sample(time.Now())
			return
		case now := <-t.C:
			w.sample(now)
		}
	}
}

// sample records the throttled time since the last sample, in the window
// that ends now.
func (w *throttleWatch) sample(now time.Time) {
	st, err := w.cg.ReadStat()
	if err != nil {
		return
	}
	d := st.ThrottledTime - w.last.ThrottledTime
	w.last = st
	if d <= 0 {
		return
	}
	start := now.Add(-throttleWindow).Sub(w.t0)
	w.mu.Lock()
	if len(w.windows) < maxThrottleWindows {
		w.windows = append(w.windows, [2]int64{start.Milliseconds(), d.Microseconds()})
	}
	w.mu.Unlock()
}

// finish stops sampling and puts what it saw in m and s.
func (w *throttleWatch) finish(m *traces.Meta, s *Summary) {
	if w == nil {
		return
	}
	close(w.stop)
	<-w.done
	s.ThrottledTime = w.last.ThrottledTime - w.first.ThrottledTime
	s.ThrottledPeriods = w.last.Throttled - w.first.Throttled
	m.Set(MetaThrottledNs, strconv.FormatInt(int64(s.ThrottledTime), 10))
	m.Set(MetaThrottledPeriods, strconv.FormatInt(s.ThrottledPeriods, 10))
	if len(w.windows) > 0 {
		b, _ := json.Marshal(w.windows)
		m.Set(MetaThrottledWindows, string(b))
	}
}
