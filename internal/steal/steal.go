// Package steal reads the time the hypervisor took from this guest's
// CPUs: /proc/stat's steal column. On a virtual machine the host can stop a
// virtual CPU for milliseconds to run its other guests; no thread of the
// guest runs on that CPU meanwhile, however urgent (real-time class
// included), and the guest counts the time as the running thread's. A
// replayer must be able to tell those stalls from its own and from a slow
// server.
package steal

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// Tick is the unit of /proc/stat's columns: USER_HZ, 100 per second on
// every architecture Linux exports it for (it does not follow the kernel's
// own HZ).
const Tick = 10 * time.Millisecond

// ErrNoSteal is returned where /proc/stat has no steal column (kernels
// before 2.6.11) or none of the CPUs asked for.
var ErrNoSteal = errors.New("no steal time in /proc/stat")

// Source reads the steal time of a set of CPUs.
type Source struct {
	// Path is the file in /proc/stat's format.
	Path string
	// CPUs are the CPUs counted (as in the "cpuN" lines); nil counts the
	// whole machine (the "cpu" line).
	CPUs []int
}

// Read returns the steal time of s's CPUs so far, in Tick steps.
func (s *Source) Read() (time.Duration, error) {
	f, err := os.Open(s.Path)
	if err != nil {
		return 0, fmt.Errorf("read steal time: %w", err)
	}
	defer f.Close()
	d, err := Parse(f, s.CPUs)
	if err != nil {
		return 0, fmt.Errorf("read steal time from %s: %w", s.Path, err)
	}
	return d, nil
}

// Parse sums the steal column (the eighth number of a "cpu" line) of cpus
// in r, a /proc/stat; nil cpus takes the "cpu" line of the whole machine.
// It fails with ErrNoSteal where no line asked for has the column.
func Parse(r io.Reader, cpus []int) (time.Duration, error) {
	want := map[string]bool{}
	if cpus == nil {
		want["cpu"] = true
	}
	for _, c := range cpus {
		want["cpu"+strconv.Itoa(c)] = true
	}
	var ticks uint64
	found := 0
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || !want[f[0]] {
			continue
		}
		if len(f) < 9 {
			return 0, ErrNoSteal
		}
		n, err := strconv.ParseUint(f[8], 10, 63)
		if err != nil {
			return 0, fmt.Errorf("%s: steal column %q: %w", f[0], f[8], err)
		}
		if ticks+n < ticks {
			return 0, fmt.Errorf("steal time overflows at %s", f[0])
		}
		ticks += n
		found++
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	if found == 0 {
		return 0, ErrNoSteal
	}
	if ticks > uint64(1<<63-1)/uint64(Tick) {
		return 0, fmt.Errorf("steal time of %d ticks overflows", ticks)
	}
	return time.Duration(ticks) * Tick, nil
}
