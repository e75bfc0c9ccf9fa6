package cgroup

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func write(t *testing.T, name, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestFind reads quota and throttling from fake cgroup trees, one case
// per layout a replayer meets.
func TestFind(t *testing.T) {
	for _, tc := range []struct {
		name       string
		cgroup     string
		mountinfo  string
		files      map[string]string
		wantNil    bool
		wantCPUs   float64
		wantVer    int
		wantStat   Stat
		wantString string
	}{
		{
			name:      "cgroup v2 with a one-CPU quota (a container with cpu limit 1)",
			cgroup:    "0::/kubepods/pod1/c1\n",
			mountinfo: "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw\n",
			files: map[string]string{
				"sys/fs/cgroup/kubepods/pod1/c1/cpu.max":  "100000 100000\n",
				"sys/fs/cgroup/kubepods/pod1/c1/cpu.stat": "usage_usec 5\nnr_periods 10\nnr_throttled 3\nthrottled_usec 4500\n",
			},
			wantCPUs: 1, wantVer: 2, wantStat: Stat{Throttled: 3, ThrottledTime: 4500 * time.Microsecond}, wantString: "1.00 CPU (cgroup v2)",
		},
		{
			name:      "cgroup v2 without a quota",
			cgroup:    "0::/user.slice\n",
			mountinfo: "30 23 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
			files:     map[string]string{"sys/fs/cgroup/user.slice/cpu.max": "max 100000\n", "sys/fs/cgroup/user.slice/cpu.stat": "nr_throttled 0\nthrottled_usec 0\n"},
			wantCPUs:  0, wantVer: 2, wantString: "none (cgroup v2)",
		},
		{
			name:      "cgroup v2 mounted at our own cgroup (a container's namespace)",
			cgroup:    "0::/\n",
			mountinfo: "30 23 0:26 /kubepods/pod1/c1 /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
			files:     map[string]string{"sys/fs/cgroup/cpu.max": "50000 100000\n", "sys/fs/cgroup/cpu.stat": "nr_throttled 7\nthrottled_usec 10\n"},
			wantCPUs:  0.5, wantVer: 2, wantStat: Stat{Throttled: 7, ThrottledTime: 10 * time.Microsecond}, wantString: "0.50 CPU (cgroup v2)",
		},
		{
			name:   "cgroup v1 cpu controller (throttled_time in ns)",
			cgroup: "4:memory:/x\n1:cpu,cpuacct:/job\n0::/\n",
			mountinfo: "31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n" +
				"32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n" +
				"41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n",
			files: map[string]string{
				"sys/fs/cgroup/cpu,cpuacct/job/cpu.cfs_quota_us":  "200000\n",
				"sys/fs/cgroup/cpu,cpuacct/job/cpu.cfs_period_us": "100000\n",
				"sys/fs/cgroup/cpu,cpuacct/job/cpu.stat":          "nr_periods 9\nnr_throttled 2\nthrottled_time 3000000\n",
			},
			wantCPUs: 2, wantVer: 1, wantStat: Stat{Throttled: 2, ThrottledTime: 3 * time.Millisecond}, wantString: "2.00 CPU (cgroup v1)",
		},
		{
			name:      "cgroup v2 without the cpu controller enabled: nothing to read",
			cgroup:    "0::/a\n",
			mountinfo: "30 23 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
			files:     map[string]string{"sys/fs/cgroup/a/cgroup.procs": ""},
			wantNil:   true,
		},
		{
			name:      "no cgroup mount at all",
			cgroup:    "0::/\n",
			mountinfo: "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n",
			wantNil:   true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for n, s := range tc.files {
				write(t, filepath.Join(root, n), s)
			}
			c, err := find([]byte(tc.cgroup), []byte(tc.mountinfo), root)
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantNil {
				if c != nil {
					t.Fatalf("found %+v, want nothing", c)
				}
				return
			}
			if c == nil {
				t.Fatal("found nothing")
			}
			if c.CPUs() != tc.wantCPUs || c.Version != tc.wantVer || c.String() != tc.wantString {
				t.Errorf("CPUs %v version %d %q, want %v, %d, %q", c.CPUs(), c.Version, c.String(), tc.wantCPUs, tc.wantVer, tc.wantString)
			}
			st, err := c.ReadStat()
			if err != nil {
				t.Fatal(err)
			}
			if st != tc.wantStat {
				t.Errorf("stat %+v, want %+v", st, tc.wantStat)
			}
		})
	}
}

// TestSelf reads this process's own cgroup, whatever the machine has.
func TestSelf(t *testing.T) {
	c, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	if c == nil {
		t.Skip("no cpu controller to read on this machine")
	}
	if _, err := c.ReadStat(); err != nil {
		t.Fatalf("%s: %v", c.Dir, err)
	}
	t.Logf("quota %s at %s", c, c.Dir)
}
