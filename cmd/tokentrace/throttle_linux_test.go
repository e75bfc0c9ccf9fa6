package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/internal/cgroup"
	"github.com/tokentrace/tokentrace/replay"
	"github.com/tokentrace/tokentrace/traces"
)

// quotaCgroup makes a cgroup (v1 cpu controller) under this process's own
// with a CPU quota of quota per 100 ms, removed at the end of the test; it
// skips where that cannot be done (not root, cgroup v2 only, read-only).
func quotaCgroup(t *testing.T, quotaUs int) string {
	t.Helper()
	c, err := cgroup.Self()
	if err != nil || c == nil {
		t.Skipf("no cpu cgroup controller to use (%v)", err)
	}
	if c.Version != 1 {
		t.Skip("cgroup v2: a child cgroup with a quota needs the parent's cpu controller delegated; this test uses cgroup v1")
	}
	dir := filepath.Join(c.Dir, fmt.Sprintf("tokentrace-test-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("cannot make a cgroup (needs root and a writable cpu controller): %v", err)
	}
	t.Cleanup(func() { os.Remove(dir) })
	for name, v := range map[string]int{"cpu.cfs_period_us": 100000, "cpu.cfs_quota_us": quotaUs} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(strconv.Itoa(v)), 0o644); err != nil {
			t.Skipf("cannot set %s: %v", name, err)
		}
	}
	return dir
}

// TestReplayUnderCPUQuota replays in a child process held to 0.2 CPU by its
// cgroup, against the built-in simulator in the same process: the results'
// metadata carries the quota and the throttled time, and analyze blames
// the late sends on the quota. It runs beside other tests (t.Parallel):
// held to 0.2 CPU it mostly waits out its throttling, and the load of the
// tests beside it can only add to the lateness it blames on the quota.
func TestReplayUnderCPUQuota(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a child process in a cgroup")
	}
	t.Parallel() // analyze runs in a child process too
	cg := quotaCgroup(t, 20000)
	trace := writeReplayTrace(t, 1000) // 2 s at 500 req/s
	out := filepath.Join(t.TempDir(), "res.parquet")
	args := []string{"tokentrace", "replay", "--quiet", "--max-lateness", "1h", "--max-failed", "1", "--timeout", "60s", "--out", out, trace}
	cmd := exec.Command("/bin/sh", "-c", `echo $$ > "$0/cgroup.procs" && exec "$1"`, cg, os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"="+strings.Join(args, "\x1f"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("replay under a quota: %v\n%s", err, stderr.String())
	}
	_, m, err := traces.ReadAll(out)
	if err != nil {
		t.Fatal(err)
	}
	ns, _ := strconv.ParseInt(m.Get(replay.MetaThrottledNs), 10, 64)
	if q := m.Get(replay.MetaCPUQuota); q != "0.20 CPU (cgroup v1)" || ns <= 0 || m.Get(replay.MetaThrottledWindows) == "" {
		t.Fatalf("metadata: quota %q, throttled %d ns, windows %q; want the quota and some throttling", q, ns, m.Get(replay.MetaThrottledWindows))
	}
	so, _ := runMainChild(t, "", "analyze", "--json", out)
	var rep struct {
		ClientThrottling *struct {
			ThrottledMs     float64 `json:"throttled_ms"`
			LateRequests    int64   `json:"late_requests"`
			LateInThrottled int64   `json:"late_in_throttled_seconds"`
		} `json:"client_throttling"`
		Attribution struct {
			Diagnosis []string `json:"diagnosis"`
		} `json:"attribution"`
	}
	if err := json.Unmarshal([]byte(so), &rep); err != nil {
		t.Fatal(err)
	}
	ct := rep.ClientThrottling
	if ct == nil || ct.ThrottledMs <= 0 || ct.LateInThrottled == 0 || !strings.Contains(strings.Join(rep.Attribution.Diagnosis, " "), "Client CPU quota") {
		t.Fatalf("analyze: throttling %+v, diagnosis %q; want late sends blamed on the quota", ct, rep.Attribution.Diagnosis)
	}
	t.Logf("throttled %.0f ms; %d of %d late sends in throttled seconds", ct.ThrottledMs, ct.LateInThrottled, ct.LateRequests)
}
