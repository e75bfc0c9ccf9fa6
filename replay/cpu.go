package replay

import (
	"encoding/json"
	"strconv"
	"sync"
	"time"

	"github.com/tokentrace/tokentrace/internal/cgroup"
	"github.com/tokentrace/tokentrace/internal/steal"
	"github.com/tokentrace/tokentrace/traces"
)

// Metadata keys for the replayer's own CPU: whether the dispatcher got the
// real-time class, the cgroup's CPU quota, how long the cgroup was
// throttled during the run, and how long the hypervisor took the CPUs the
// replayer may run on (steal; in 10 ms steps). Both in all, and per second
// of the run with any: [offset of the second in ms, µs] pairs, at most a
// day's.
const (
	MetaRealtime         = "replay.realtime"
	MetaCPUQuota         = "replay.cpu_quota"
	MetaThrottledNs      = "replay.throttled_ns"
	MetaThrottledPeriods = "replay.throttled_periods"
	MetaThrottledWindows = "replay.throttled_windows"
	MetaStealNs          = "replay.steal_ns"
	MetaStealWindows     = "replay.steal_windows"
)

// RealtimeNotAsked is Summary.Realtime when Options.NoRealtime was set.
const RealtimeNotAsked = "not asked for (Options.NoRealtime)"

// cpuWindow is how often the replayer's throttling and steal are sampled.
var cpuWindow = time.Second

const maxCPUWindows = 86400

// cpuCount is a cumulative count of time the replayer's CPU was taken
// from it (and, for throttling, in how many periods).
type cpuCount struct {
	time time.Duration
	n    int64
}

// cpuWatch samples a cumulative cpuCount while the run goes: a throttled
// period stalls every thread of the process at once, and so does the
// hypervisor taking the virtual CPU (steal); analyze needs to know when,
// to tell a late send from a slow server.
type cpuWatch struct {
	read    func() (cpuCount, error)
	t0      time.Time
	first   cpuCount
	last    cpuCount
	mu      sync.Mutex
	windows [][2]int64 // [offset of the second in ms, µs taken in it]
	stop    chan struct{}
	done    chan struct{}
}

// watchCPU starts sampling read (nil when it cannot be read).
func watchCPU(read func() (cpuCount, error), t0 time.Time) *cpuWatch {
	c, err := read()
	if err != nil {
		return nil
	}
	w := &cpuWatch{read: read, t0: t0, first: c, last: c, stop: make(chan struct{}), done: make(chan struct{})}
	go w.loop()
	return w
}

// watchThrottling samples the cgroup's throttling (nil without a cgroup).
func watchThrottling(cg *cgroup.CPU, t0 time.Time) *cpuWatch {
	if cg == nil {
		return nil
	}
	return watchCPU(func() (cpuCount, error) {
		st, err := cg.ReadStat()
		return cpuCount{st.ThrottledTime, st.Throttled}, err
	}, t0)
}

// watchSteal samples the steal of the CPUs the replayer may run on (nil
// where there is none to read).
func watchSteal(src *steal.Source, t0 time.Time) *cpuWatch {
	if src == nil {
		return nil
	}
	return watchCPU(func() (cpuCount, error) {
		d, err := src.Read()
		return cpuCount{time: d}, err
	}, t0)
}

func (w *cpuWatch) loop() {
	defer close(w.done)
	t := time.NewTicker(cpuWindow)
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

// sample records the time taken since the last sample, in the window that
// ends now.
func (w *cpuWatch) sample(now time.Time) {
	c, err := w.read()
	if err != nil {
		return
	}
	d := c.time - w.last.time
	w.last = c
	if d <= 0 {
		return
	}
	start := now.Add(-cpuWindow).Sub(w.t0)
	w.mu.Lock()
	if len(w.windows) < maxCPUWindows {
		w.windows = append(w.windows, [2]int64{start.Milliseconds(), d.Microseconds()})
	}
	w.mu.Unlock()
}

// end stops sampling and returns what was taken during the run, in all
// and per window (ok false for a nil w).
func (w *cpuWatch) end() (taken cpuCount, windows string, ok bool) {
	if w == nil {
		return cpuCount{}, "", false
	}
	close(w.stop)
	<-w.done
	if len(w.windows) > 0 {
		b, _ := json.Marshal(w.windows)
		windows = string(b)
	}
	return cpuCount{w.last.time - w.first.time, w.last.n - w.first.n}, windows, true
}

// finishThrottling puts what w (watchThrottling) saw in m and s.
func finishThrottling(w *cpuWatch, m *traces.Meta, s *Summary) {
	c, windows, ok := w.end()
	if !ok {
		return
	}
	s.ThrottledTime, s.ThrottledPeriods = c.time, c.n
	m.Set(MetaThrottledNs, strconv.FormatInt(int64(c.time), 10))
	m.Set(MetaThrottledPeriods, strconv.FormatInt(c.n, 10))
	if windows != "" {
		m.Set(MetaThrottledWindows, windows)
	}
}

// finishSteal puts what w (watchSteal) saw in m and s.
func finishSteal(w *cpuWatch, m *traces.Meta, s *Summary) {
	c, windows, ok := w.end()
	if !ok {
		return
	}
	s.StealTime = c.time
	m.Set(MetaStealNs, strconv.FormatInt(int64(c.time), 10))
	if windows != "" {
		m.Set(MetaStealWindows, windows)
	}
}
