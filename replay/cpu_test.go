package replay

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/internal/steal"
	"github.com/tokentrace/tokentrace/traces"
)

// Every bit of time taken while the watch runs lands in one of its
// windows, and the total is what was taken between its start and its end.
func TestCPUWatchAccountsEveryTick(t *testing.T) {
	defer func(w time.Duration) { cpuWindow = w }(cpuWindow)
	cpuWindow = 5 * time.Millisecond
	var taken atomic.Int64
	taken.Store(int64(7 * time.Second)) // before the run: not the run's
	w := watchCPU(func() (cpuCount, error) {
		return cpuCount{time: time.Duration(taken.Add(int64(10 * time.Millisecond)))}, nil
	}, time.Now())
	time.Sleep(30 * time.Millisecond)
	c, windows, ok := w.end()
	if !ok {
		t.Fatal("end of a started watch: not ok")
	}
	var ws [][2]int64
	if err := json.Unmarshal([]byte(windows), &ws); err != nil || len(ws) == 0 {
		t.Fatalf("windows %q: %v", windows, err)
	}
	var sum int64
	for _, x := range ws {
		if x[1] <= 0 {
			t.Errorf("window %v records nothing", x)
		}
		sum += x[1]
	}
	if want := time.Duration(taken.Load()) - 7*time.Second - 10*time.Millisecond; c.time != want || time.Duration(sum)*time.Microsecond != want {
		t.Errorf("total %v, windows sum %v µs; want %v", c.time, sum, want)
	}
}

// A source that cannot be read is no watch, and a nil watch ends with
// nothing and writes no metadata.
func TestCPUWatchUnreadable(t *testing.T) {
	if w := watchCPU(func() (cpuCount, error) { return cpuCount{}, errors.New("no") }, time.Now()); w != nil {
		t.Fatal("watch of an unreadable source")
	}
	if watchSteal(nil, time.Now()) != nil || watchThrottling(nil, time.Now()) != nil {
		t.Fatal("watch without a source")
	}
	var m traces.Meta
	var s Summary
	finishSteal(nil, &m, &s)
	finishThrottling(nil, &m, &s)
	if m.Get(MetaStealNs) != "" || m.Get(MetaThrottledNs) != "" || s.StealTime != 0 {
		t.Fatalf("nil watches wrote %v, %+v", m, s.StealTime)
	}
}

// The steal the run saw reaches the summary and the metadata, in all and
// per second.
func TestStealReachesSummaryAndMeta(t *testing.T) {
	p := filepath.Join(t.TempDir(), "stat")
	write := func(ticks int) {
		b := []byte("cpu  1 2 3 4 5 6 7 " + strconv.Itoa(ticks) + " 0 0\n")
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(100)
	w := watchSteal(&steal.Source{Path: p}, time.Now())
	if w == nil {
		t.Fatal("no watch of a readable file")
	}
	write(103) // 30 ms taken during the run
	m := traces.NewMeta("test")
	var s Summary
	finishSteal(w, &m, &s)
	if s.StealTime != 30*time.Millisecond || m.Get(MetaStealNs) != "30000000" || m.Get(MetaStealWindows) == "" {
		t.Fatalf("steal %v, meta %q %q", s.StealTime, m.Get(MetaStealNs), m.Get(MetaStealWindows))
	}
}
