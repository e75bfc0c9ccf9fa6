// Package cgroup reads the CPU quota of the process's own cgroup and how
// much it has been throttled, in cgroup v2 (cpu.max, cpu.stat
// throttled_usec) and v1 (cpu.cfs_quota_us, cpu.stat throttled_time). A
// throttled period stops every thread of the cgroup at once, which a
// replayer must be able to tell from a slow server.
package cgroup

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// CPU is the CPU controller of one cgroup.
type CPU struct {
	// Dir is the cgroup's directory.
	Dir string
	// Version is 1 or 2.
	Version int
	// Quota is the CPU time the cgroup may use per Period (0: no quota).
	Quota, Period time.Duration
}

// CPUs is the quota in CPUs (0: no quota).
func (c *CPU) CPUs() float64 {
	if c.Quota <= 0 || c.Period <= 0 {
		return 0
	}
	return float64(c.Quota) / float64(c.Period)
}

// String says what the quota is, e.g. "1.00 CPU (cgroup v1)" or "none".
func (c *CPU) String() string {
	if c == nil {
		return "unknown (no cpu controller found)"
	}
	if c.CPUs() == 0 {
		return fmt.Sprintf("none (cgroup v%d)", c.Version)
	}
	return fmt.Sprintf("%.2f CPU (cgroup v%d)", c.CPUs(), c.Version)
}

// Stat is the cgroup's throttling so far.
type Stat struct {
	// Throttled is how many periods were throttled.
	Throttled int64
	// ThrottledTime is the time its threads were held back.
	ThrottledTime time.Duration
}

// ReadStat reads the cgroup's cpu.stat.
func (c *CPU) ReadStat() (Stat, error) {
	b, err := os.ReadFile(filepath.Join(c.Dir, "cpu.stat"))
	if err != nil {
		return Stat{}, err
	}
	var s Stat
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "nr_throttled":
			s.Throttled = n
		case "throttled_usec": // v2
			s.ThrottledTime = time.Duration(n) * time.Microsecond
		case "throttled_time": // v1, in ns
			s.ThrottledTime = time.Duration(n)
		}
	}
	return s, nil
}

// Self returns the CPU controller of the calling process's cgroup, or nil
// when there is none to read (not Linux, no cpu controller mounted).
func Self() (*CPU, error) {
	cg, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, nil
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, nil
	}
	return find(cg, mi, "")
}

// find locates the cpu controller of the cgroup named in procCgroup (the
// contents of /proc/PID/cgroup) through mountinfo; root prefixes every path
// (tests).
func find(procCgroup, mountinfo []byte, root string) (*CPU, error) {
	var v1Path, v2Path string
	hasV1, hasV2 := false, false
	for _, line := range strings.Split(string(procCgroup), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			v2Path, hasV2 = parts[2], true
			continue
		}
		for _, ctl := range strings.Split(parts[1], ",") {
			if ctl == "cpu" {
				v1Path, hasV1 = parts[2], true
			}
		}
	}
	type mount struct{ root, point string }
	var v1Mount, v2Mount *mount
	for _, line := range strings.Split(string(mountinfo), "\n") {
		f := strings.Fields(line)
		sep := -1
		for i, x := range f {
			if x == "-" {
				sep = i
				break
			}
		}
		if sep < 5 || sep+3 > len(f) {
			continue
		}
		fstype, super := f[sep+1], f[sep+3]
		m := &mount{root: f[3], point: f[4]}
		switch fstype {
		case "cgroup2":
			v2Mount = m
		case "cgroup":
			for _, o := range strings.Split(super, ",") {
				if o == "cpu" {
					v1Mount = m
				}
			}
		}
	}
	under := func(m *mount, p string) string {
		rel, err := filepath.Rel(m.root, p)
		if err != nil || strings.HasPrefix(rel, "..") {
			rel = "." // the mount shows our cgroup as its root (a container)
		}
		return filepath.Join(root, m.point, rel)
	}
	// v1's cpu controller wins where both are mounted: v2 then holds no
	// cpu controller (a controller lives in one hierarchy only).
	if hasV1 && v1Mount != nil {
		c := &CPU{Dir: under(v1Mount, v1Path), Version: 1}
		q, err1 := readInt(filepath.Join(c.Dir, "cpu.cfs_quota_us"))
		p, err2 := readInt(filepath.Join(c.Dir, "cpu.cfs_period_us"))
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("cgroup v1 cpu controller at %s: %w", c.Dir, err)
		}
		if q > 0 && p > 0 {
			c.Quota, c.Period = time.Duration(q)*time.Microsecond, time.Duration(p)*time.Microsecond
		}
		return c, nil
	}
	if hasV2 && v2Mount != nil {
		c := &CPU{Dir: under(v2Mount, v2Path), Version: 2}
		b, err := os.ReadFile(filepath.Join(c.Dir, "cpu.max"))
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil, nil // the cpu controller is not enabled here
			}
			return nil, fmt.Errorf("cgroup v2 at %s: %w", c.Dir, err)
		}
		q, p, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
		if qi, err := strconv.ParseInt(q, 10, 64); err == nil {
			if pi, err := strconv.ParseInt(p, 10, 64); err == nil && pi > 0 {
				c.Quota, c.Period = time.Duration(qi)*time.Microsecond, time.Duration(pi)*time.Microsecond
			}
		}
		return c, nil
	}
	return nil, nil
}

func readInt(name string) (int64, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}
