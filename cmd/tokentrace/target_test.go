package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/internal/testtraces"
	"github.com/tokentrace/tokentrace/replay"
	"github.com/tokentrace/tokentrace/sim"
	"github.com/tokentrace/tokentrace/traces"
)

// TestReplayTarget: --target configures the built-in simulator (a fleet
// too) and the results record that configuration as a spec --target takes
// again; a URL spec replays against that server.
func TestReplayTarget(t *testing.T) {
	trace := writeReplayTrace(t, 12)
	dir := filepath.Dir(trace)
	for _, tc := range []struct {
		why, spec, recorded string
		check               func(recs []traces.Record) string
	}{
		{"the default is the built-in simulator as it comes", "", "sim", nil},
		// One sequence at a time: 12 requests 2 ms apart, each several
		// 6 ms steps long, queue for at least 100 ms by the last.
		{"a batch cap is the simulator's", "sim:max-num-seqs=1", "sim:max-num-seqs=1",
			func(recs []traces.Record) string {
				var most int64
				for _, r := range recs {
					most = max(most, r.ServerQueueNs)
				}
				if most < 100e6 {
					return fmt.Sprintf("the longest server queue is %v: the cap of one sequence did not hold", time.Duration(most))
				}
				return ""
			}},
		// 12 requests, each busy for tens of ms, 2 ms apart: the router
		// spreads them over every replica, and the results name them.
		{"a fleet is a simulator target", "sim:max-num-seqs=8,router=least-outstanding,replicas=3", "sim:replicas=3,router=least-outstanding,max-num-seqs=8",
			func(recs []traces.Record) string {
				seen := map[string]int{}
				for _, r := range recs {
					seen[r.Replica]++
				}
				if len(seen) != 3 || seen[""] > 0 {
					return fmt.Sprintf("requests per replica %v: want three replicas named", seen)
				}
				return ""
			}},
	} {
		t.Run(tc.why, func(t *testing.T) {
			out := filepath.Join(dir, "res.jsonl")
			args := []string{"replay", "-q", "--max-lateness", "10s", "--out", out}
			if tc.spec != "" {
				args = append(args, "--target", tc.spec)
			}
			_, se := runMain(t, append(args, trace)...)
			recs, m, err := traces.ReadAll(out)
			if err != nil || len(recs) != 12 {
				t.Fatalf("%d results, %v", len(recs), err)
			}
			if got := m.Get(replay.MetaSim); got != tc.recorded {
				t.Errorf("%s = %q, want %q", replay.MetaSim, got, tc.recorded)
			}
			if !strings.Contains(se, "built-in simulator ("+tc.recorded+")") {
				t.Errorf("stderr does not say which simulator:\n%s", se)
			}
			if tc.check != nil {
				if msg := tc.check(recs); msg != "" {
					t.Error(msg)
				}
			}
		})
	}
	// A URL spec is a server: here a standalone simulator.
	srv := startSimServer(t, "", func(so *sim.Options) { so.AnyModel = true })
	out := filepath.Join(dir, "url.jsonl")
	runMain(t, "replay", "-q", "--max-lateness", "10s", "--target", srv.URL, "--out", out, trace)
	recs, m, err := traces.ReadAll(out)
	if err != nil || len(recs) != 12 || m.Get(replay.MetaTarget) != srv.URL || m.Get(replay.MetaSim) != "" {
		t.Errorf("--target URL: %d results, target %q, sim %q, %v", len(recs), m.Get(replay.MetaTarget), m.Get(replay.MetaSim), err)
	}
}

// TestReplayTargetUsageErrors: a bad --target is a usage error that names
// the flag and what would do, before anything runs.
func TestReplayTargetUsageErrors(t *testing.T) {
	trace := writeReplayTrace(t, 1)
	// Should a spec be accepted after all, its run writes in the test's
	// directory, not the default results.parquet in the package's.
	out := filepath.Join(filepath.Dir(trace), "results.parquet")
	for _, tc := range []struct {
		why  string
		args []string
		want string
	}{
		{"--url and --target at once", []string{"--url", "http://127.0.0.1:9", "--target", "sim"}, "--url http://127.0.0.1:9 and --target sim both name the target: give one"},
		{"a misspelt key", []string{"--target", "sim:max-num-seq=32"}, `--target: simulator configuration "max-num-seq=32": unknown key "max-num-seq"; did you mean "max-num-seqs"?`},
		{"a bad value", []string{"--target", "sim:replicas=0"}, "replicas: want a whole number of replicas from 1"},
		{"a host without a scheme", []string{"--target", "localhost:8000"}, "did you mean http://localhost:8000?"},
		{"an empty spec", []string{"--target", ""}, "--target: empty: want sim"},
	} {
		t.Run(tc.why, func(t *testing.T) {
			code, _, se := runCLI(nil, append(append([]string{"replay", "--out", out}, tc.args...), trace)...)
			if code != exitUsage || !strings.Contains(se, tc.want) {
				t.Errorf("exit %d, stderr %q; want exit 2 with %q", code, se, tc.want)
			}
		})
	}
}

// TestSweepTarget: sweep --target runs every step against the simulator
// the spec configures, over the --sim-* flags, and each step's results
// record it; --sim-config says the same keys.
func TestSweepTarget(t *testing.T) {
	dir := t.TempDir()
	trace := writeTrace(t, filepath.Join(dir, "t.jsonl"), traces.NewMeta("test"), testtraces.Constant(8, 20, 32, 4))
	for _, tc := range []struct {
		why  string
		args []string
		want string
	}{
		{"a spec's keys apply over the --sim-* flags", []string{"--sim-preset", "tiny", "--target", "sim:max-num-seqs=2,replicas=2"}, "sim:preset=tiny,replicas=2,max-num-seqs=2"},
		{"--sim-config is the same keys", []string{"--sim-preset", "tiny", "--sim-config", "max-num-seqs=2,replicas=2"}, "sim:preset=tiny,replicas=2,max-num-seqs=2"},
		{"no target is the simulator the flags set", []string{"--sim-max-num-seqs", "3"}, "sim:max-num-seqs=3"},
	} {
		t.Run(tc.why, func(t *testing.T) {
			outDir := filepath.Join(dir, strings.ReplaceAll(tc.why, " ", "-"))
			args := append([]string{"sweep", "-q", "--slo", "ttft=5s", "--speeds", "2", "--out-dir", outDir, "--ext", ".jsonl", "--chart", "none"}, tc.args...)
			runMain(t, append(args, trace)...)
			recs, m, err := traces.ReadAll(filepath.Join(outDir, "speed-2.jsonl"))
			if err != nil || len(recs) != 8 {
				t.Fatalf("%d results, %v", len(recs), err)
			}
			if got := m.Get(replay.MetaSim); got != tc.want {
				t.Errorf("%s = %q, want %q", replay.MetaSim, got, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		why  string
		args []string
		want string
	}{
		{"--url and --target at once", []string{"--url", "http://127.0.0.1:9", "--target", "sim"}, "both name the target: give one"},
		{"--sim-config and --target at once", []string{"--sim-config", "max-num-seqs=2", "--target", "sim:replicas=2"}, "give the keys once (--target sim:max-num-seqs=2)"},
		{"a misspelt key", []string{"--target", "sim:replica=2"}, `--target: simulator configuration "replica=2": unknown key "replica"; did you mean "replicas"?`},
		{"a bad URL", []string{"--target", "http://"}, `--target: "http://" is not a server's URL`},
	} {
		t.Run(tc.why, func(t *testing.T) {
			code, _, se := runCLI(nil, append(append([]string{"sweep", "--slo", "ttft=1s", "--out-dir", filepath.Join(filepath.Dir(trace), "sweep")}, tc.args...), trace)...)
			if code != exitUsage || !strings.Contains(se, tc.want) {
				t.Errorf("exit %d, stderr %q; want exit 2 with %q", code, se, tc.want)
			}
		})
	}
}
