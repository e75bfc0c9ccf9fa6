package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/replay"
	"github.com/tokentrace/tokentrace/sim"
	"github.com/tokentrace/tokentrace/traces"
)

func writeReplayTrace(t *testing.T, n int) string {
	t.Helper()
	return writeTraceN(t, filepath.Join(t.TempDir(), "trace.jsonl"), n)
}

// writeTraceN writes writeReplayTrace's n requests to path.
func writeTraceN(t *testing.T, path string, n int) string {
	t.Helper()
	recs := make([]traces.Record, n)
	for i := range recs {
		r := traces.NewRecord()
		r.Seq = int64(i)
		r.ArrivalNs = int64(i) * 2e6
		r.InputTokens, r.OutputTokens = 64, 4
		if i%2 == 0 {
			r.PrefixBlocks = []int64{1}
		}
		recs[i] = r
	}
	m := traces.NewMeta("test")
	m.BlockSize = 32
	writeTrace(t, path, m, recs)
	return path
}

func TestReplayCommandBuiltinSim(t *testing.T) {
	trace := writeReplayTrace(t, 20)
	out := filepath.Join(filepath.Dir(trace), "res.jsonl")
	so, _ := runMain(t, "replay", "--out", out, "--speed", "4", "--max-lateness", "10s", "--header", "X-A: 1,2", trace)
	recs, m, err := traces.ReadAll(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 20 {
		t.Fatalf("%d results, want 20", len(recs))
	}
	for _, r := range recs {
		if r.Status != traces.StatusOK || r.ServerPromptTokens != 64 || r.ServerQueueNs < 0 {
			t.Errorf("seq %d: %s %q prompt %d queue %d", r.Seq, r.Status, r.Error, r.ServerPromptTokens, r.ServerQueueNs)
		}
	}
	if m.Get("replay.server_timing_source") != "response_metrics" || !strings.Contains(m.Command, "X-A: (redacted)") {
		t.Errorf("meta: %v command %q", m.Extra, m.Command)
	}
	if _, err := os.Stat(out + ".journal.jsonl"); !os.IsNotExist(err) {
		t.Errorf("journal left behind: %v", err)
	}
	if !strings.Contains(so, "lateness") || !strings.Contains(so, "TTFT") {
		t.Errorf("summary missing:\n%s", so)
	}
}

func TestReplayCommandLatenessExit3(t *testing.T) {
	trace := writeReplayTrace(t, 5)
	out := filepath.Join(filepath.Dir(trace), "res.jsonl")
	code, _, se := runCLI(nil, "replay", "--out", out, "--max-lateness", "1ns", trace)
	if code != exitNotReproduced || !strings.Contains(se, "did not reproduce") {
		t.Fatalf("exit %d, stderr:\n%s", code, se)
	}
	if recs, _, err := traces.ReadAll(out); err != nil || len(recs) != 5 {
		t.Errorf("results not written on exit 3: %d, %v", len(recs), err)
	}
}

func TestReplayCommandUsageErrors(t *testing.T) {
	trace := writeReplayTrace(t, 1)
	out := filepath.Join(filepath.Dir(trace), "results.parquet") // not the package directory's, should one run
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--shard", "3/2", trace}, "--shard"},
		{[]string{"--window", "5s", trace}, "--window"},
		{[]string{"--speed", "0", "--url", "http://127.0.0.1:1", trace}, "--speed"},
		{[]string{"--start-at", "tomorrow", trace}, "--start-at"},
		{[]string{"--header", "bad", trace}, "--header"},
		{[]string{"--api-key-file", "/nonexistent/key", trace}, "--api-key-file"},
		{[]string{trace, "--speed", "2"}, "after an argument"},
	} {
		code, _, se := runCLI(nil, append([]string{"replay", "--out", out}, tc.args...)...)
		if code != exitUsage || !strings.Contains(se, tc.want) {
			t.Errorf("replay %v: exit %d, stderr %q; want 2 naming %s", tc.args, code, se, tc.want)
		}
	}
}

func TestReplayCommandAPIKeyNotStored(t *testing.T) {
	trace := writeReplayTrace(t, 2)
	dir := filepath.Dir(trace)
	key := filepath.Join(dir, "key")
	os.WriteFile(key, []byte("sk-very-secret\n"), 0o600)
	out := filepath.Join(dir, "res.jsonl")
	so, se := runMain(t, "replay", "--api-key-file", key, "--keep-journal", "--max-lateness", "10s", "--out", out, trace)
	for _, f := range []string{out, out + ".journal.jsonl"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte("very-secret")) {
			t.Errorf("%s contains the API key", f)
		}
	}
	if strings.Contains(so+se, "very-secret") {
		t.Errorf("output contains the API key")
	}
}

// An empty --api-key-file is no key, not an error: the Kubernetes replay
// Job passes --api-key-file=$(API_KEY_PATH), empty for a server without
// auth (deploy/k8s/kustomization.yaml).
func TestReplayCommandEmptyAPIKeyFile(t *testing.T) {
	trace := writeReplayTrace(t, 2)
	out := filepath.Join(filepath.Dir(trace), "res.jsonl")
	if code, _, se := runCLI(nil, "replay", "--api-key-file=", "--max-lateness", "10s", "--out", out, trace); code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, se)
	}
	if recs, _, err := traces.ReadAll(out); err != nil || len(recs) != 2 {
		t.Errorf("results: %d records, %v; want 2", len(recs), err)
	}
}

func TestReplayCommandOTLPAndMetrics(t *testing.T) {
	trace := writeReplayTrace(t, 10)
	dir := filepath.Dir(trace)
	out := filepath.Join(dir, "res.parquet")
	runMain(t, "replay", "--out", out, "--speed", "4", "--max-lateness", "10s",
		"--sim-per-request-metrics=false", "--otlp-listen", "127.0.0.1:0", "--otlp-grace", "5s",
		"--metrics-out", filepath.Join(dir, "m.jsonl"), "--metrics-interval", "20ms", trace)
	recs, m, err := traces.ReadAll(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.ServerQueueNs < 0 || r.ServerPrefillNs < 0 || r.ServerDecodeNs < 0 {
			t.Errorf("seq %d: no server timings from OTLP", r.Seq)
		}
	}
	if m.Get("replay.server_timing_source") != "otlp" || m.Get("replay.server_timing_matched") != "10" {
		t.Errorf("timing meta: source %q matched %q", m.Get("replay.server_timing_source"), m.Get("replay.server_timing_matched"))
	}
	b, err := os.ReadFile(filepath.Join(dir, "m.jsonl"))
	if err != nil || bytes.Count(b, []byte("\n")) < 2 {
		t.Errorf("metrics series: %v, %d lines", err, bytes.Count(b, []byte("\n")))
	}
}

// TestReplaySIGKILLKeepsJournal runs a replay in a child process, kills it
// with SIGKILL mid-run and checks that every request the server had finished
// more than a second before the kill is in the journal, readable as a
// results file.
func TestReplaySIGKILLKeepsJournal(t *testing.T) {
	if args := os.Getenv("TOKENTRACE_REPLAY_CHILD"); args != "" {
		Main(context.Background(), append([]string{"tokentrace", "replay"}, strings.Split(args, "\x1f")...), nil, os.Stdout, os.Stderr)
		return
	}
	if testing.Short() {
		t.Skip("kills a child process")
	}
	srv := startSimServer(t, "", nil)
	simStart := time.Now() // >= the sim's own clock zero
	dir := t.TempDir()
	recs := make([]traces.Record, 3000) // 6 s of trace
	for i := range recs {
		r := traces.NewRecord()
		r.Seq, r.ArrivalNs, r.InputTokens, r.OutputTokens = int64(i), int64(i)*2e6, 64, 4
		recs[i] = r
	}
	trace := writeTrace(t, filepath.Join(dir, "trace.jsonl"), traces.NewMeta("t"), recs)
	out := filepath.Join(dir, "res.parquet")
	cmd := exec.Command(os.Args[0], "-test.run=^TestReplaySIGKILLKeepsJournal$")
	cmd.Env = append(os.Environ(), "TOKENTRACE_REPLAY_CHILD="+strings.Join([]string{"--url", srv.URL, "--quiet", "--no-preflight", "--out", out, trace}, "\x1f"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Kill once requests finished more than 1.2 s ago (a loaded machine
	// starts the child late: a fixed sleep could kill it before its first
	// request).
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		old := 0
		for _, tr := range srv.Truth() {
			if tr.LastTokenNs >= 0 && simStart.Add(time.Duration(tr.LastTokenNs)).Before(time.Now().Add(-1200*time.Millisecond)) {
				old++
			}
		}
		if old >= 20 {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("the child replay finished %d requests in 60 s", old)
		}
	}
	cmd.Process.Kill() // SIGKILL
	killed := time.Now()
	cmd.Wait()

	got, _, err := traces.ReadAll(replay.JournalPath(out))
	if err != nil && !errors.Is(err, traces.ErrTruncated) {
		t.Fatalf("read journal: %v", err)
	}
	inJournal := map[string]bool{}
	for _, r := range got {
		if !r.HasOutcome() || r.RequestID == "" {
			t.Errorf("journal row %d has no outcome", r.Seq)
		}
		inJournal[r.RequestID] = true
	}
	need := 0
	for _, tr := range srv.Truth() {
		if tr.LastTokenNs < 0 || simStart.Add(time.Duration(tr.LastTokenNs)).After(killed.Add(-time.Second)) {
			continue
		}
		need++
		if !inJournal[tr.RequestID] {
			t.Errorf("request %s finished on the server at %v, more than 1 s before the kill, but is not in the journal", tr.RequestID, time.Duration(tr.LastTokenNs))
		}
	}
	if need == 0 || len(got) < need {
		t.Fatalf("journal has %d rows, server finished %d more than 1 s before the kill", len(got), need)
	}
	t.Logf("journal: %d rows; %d requests finished >1 s before the kill", len(got), need)
}

// TestReplayCommandBuiltinSimServesTraceModel checks that a captured trace,
// whose records name a production model the simulator does not serve, still
// replays against the built-in simulator: every request goes to the
// simulator's model instead of failing with 404.
func TestReplayCommandBuiltinSimServesTraceModel(t *testing.T) {
	recs := make([]traces.Record, 6)
	for i := range recs {
		r := traces.NewRecord()
		r.Seq = int64(i)
		r.ArrivalNs = int64(i) * 1e6
		r.InputTokens, r.OutputTokens = 32, 2
		r.Model = "prod-llama-70b"
		recs[i] = r
	}
	dir := t.TempDir()
	trace := writeTrace(t, filepath.Join(dir, "trace.jsonl"), traces.NewMeta("test"), recs)
	out := filepath.Join(dir, "res.jsonl")
	_, se := runMain(t, "replay", "--out", out, "--max-lateness", "10s", trace)
	res, _, err := traces.ReadAll(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Status != traces.StatusOK {
			t.Errorf("seq %d: %s %q", r.Seq, r.Status, r.Error)
		}
	}
	if !strings.Contains(se, "(model "+sim.DefaultModel+")") {
		t.Errorf("stderr does not name the simulator's model:\n%s", se)
	}
}

// TestReplayRejectsBadValuesFirst checks that an invalid value is a usage
// error naming its flag before the trace is even read.
func TestReplayRejectsBadValuesFirst(t *testing.T) {
	code, _, se := runCLI(nil, "replay", "--speed", "-2", "does-not-exist.parquet")
	if code != exitUsage || !strings.Contains(se, "--speed: must be > 0") || strings.Contains(se, "does-not-exist") {
		t.Errorf("exit %d, stderr %q; want exit 2 naming --speed, before opening the trace", code, se)
	}
}

// TestReplayTotalFailureIsNotSuccess checks a run against a URL nothing
// listens on: the preflight stops it before the clock starts (exit 1,
// naming the cause, no results file); without the preflight, every request
// fails and the run exits 3 saying why, instead of printing a summary and
// exiting 0.
func TestReplayTotalFailureIsNotSuccess(t *testing.T) {
	trace := writeReplayTrace(t, 4)
	out := filepath.Join(filepath.Dir(trace), "res.jsonl")
	code, _, se0 := runCLI(nil, "replay", "--url", "http://127.0.0.1:1", "--model", "m", "--out", out, trace)
	if code != exitFailure || !strings.Contains(se0, "preflight") || !strings.Contains(se0, "connection refused") {
		t.Errorf("exit %d, stderr %q; want exit 1 from the preflight naming the refused connection", code, se0)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a results file after the preflight failed (%v)", err)
	}
	code, so, se := runCLI(nil, "replay", "--url", "http://127.0.0.1:1", "--no-preflight", "--model", "m", "--out", out, trace)
	if code != exitNotReproduced || !strings.Contains(se, "4 of 4 requests failed") || !strings.Contains(se, "connection refused") {
		t.Errorf("exit %d, stderr %q; want exit 3 naming the failures and their reason", code, se)
	}
	if !strings.Contains(so, "× disconnect: connection refused") {
		t.Errorf("summary lacks the top failure reason:\n%s", so)
	}
}

// TestReplayCommandSpillsResults gives the results' Parquet sort a 1 MiB
// budget in a temporary directory of its own: the run writes every request,
// sorted by arrival, and leaves the directory empty; a budget of 0 is a
// usage error before anything starts.
func TestReplayCommandSpillsResults(t *testing.T) {
	trace := writeReplayTrace(t, 300)
	dir := filepath.Dir(trace)
	tmp := t.TempDir()
	out := filepath.Join(dir, "res.parquet")
	runMain(t, "replay", "--quiet", "--speed", "4", "--max-lateness", "10s", "--sort-memory-mib", "1", "--temp-dir", tmp, "--out", out, trace)
	recs, _, err := traces.ReadAll(out)
	if err != nil || len(recs) != 300 {
		t.Fatalf("%d results (%v), want 300", len(recs), err)
	}
	for i := 1; i < len(recs); i++ {
		if recs[i].ArrivalNs < recs[i-1].ArrivalNs {
			t.Fatalf("results out of arrival order at row %d", i)
		}
	}
	if es, _ := os.ReadDir(tmp); len(es) != 0 {
		t.Errorf("left in --temp-dir: %s", es[0].Name())
	}
	if code, _, se := runCLI(nil, "replay", "--sort-memory-mib", "0", "--out", out, trace); code != exitUsage || !strings.Contains(se, "--sort-memory-mib 0") {
		t.Errorf("--sort-memory-mib 0: exit %d, stderr %q", code, se)
	}
}

// --sessions closed grows each follow-up's prompt from the previous turn's
// by default (the summary and replay.sessions count it, and the built-in
// simulator's cache hits the previous prompt); --context-growth=false
// builds every prompt from the trace alone.
func TestReplayCommandContextGrowth(t *testing.T) {
	var recs []traces.Record
	for s := 1; s <= 4; s++ {
		in := int32(0)
		for k := range 3 {
			r := traces.NewRecord()
			r.Seq, r.Session, r.ArrivalNs = int64(len(recs)), int64(s), int64(s)*1e6
			r.InputTokens, r.OutputTokens = in+100, 8
			if k > 0 {
				r.ThinkNs = 1e6
			}
			in = r.InputTokens + r.OutputTokens
			recs = append(recs, r)
		}
	}
	trace := writeTrace(t, filepath.Join(t.TempDir(), "sessions.jsonl"), traces.NewMeta("test"), recs)
	for _, growth := range []bool{true, false} {
		out := filepath.Join(filepath.Dir(trace), "res.jsonl")
		args := []string{"replay", "--sessions", "closed", "--out", out, "--max-lateness", "10s", "--quiet", trace}
		if !growth {
			args = append(args[:1], append([]string{"--context-growth=false"}, args[1:]...)...)
		}
		so, _ := runMain(t, args...)
		res, m, err := traces.ReadAll(out)
		if err != nil {
			t.Fatal(err)
		}
		cached := 0
		for _, r := range res {
			if r.Seq%3 != 0 && r.ServerCachedTokens >= 96 {
				cached++
			}
		}
		line := strings.Contains(so, "context    8 turns grown")
		counted := strings.Contains(m.Get(replay.MetaSessions), `"ContextGrown":8`)
		if growth != line || growth != counted || growth != (cached == 8) {
			t.Errorf("growth %v: summary line %v, counted %v (%s), %d of 8 follow-ups hit the previous prompt\n%s", growth, line, counted, m.Get(replay.MetaSessions), cached, so)
		}
	}
}

// TestReplayValidSaysWhyLate: a run over --max-lateness names what its own
// CPU went through (no real-time class, a throttling CPU quota, the
// hypervisor's steal), the first suspects; a run that was not told to skip the class and got it says
// nothing more.
func TestReplayValidSaysWhyLate(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    replay.Summary
		want []string
		not  string
	}{
		{"real-time class refused and a throttled quota", replay.Summary{Sent: 10, OK: 10, LatenessP99: 20 * time.Millisecond, Realtime: "not permitted (needs CAP_SYS_NICE or ulimit -r 1)", ThrottledTime: 1500 * time.Millisecond, CPUQuota: "0.50 CPU (cgroup v2)"},
			[]string{"without the real-time class (not permitted", "throttled for 1.5s by its CPU quota (0.50 CPU (cgroup v2))"}, ""},
		{"the hypervisor took the replayer's CPUs", replay.Summary{Sent: 10, OK: 10, LatenessP99: 20 * time.Millisecond, StealTime: 40 * time.Millisecond},
			[]string{"the hypervisor took 40ms of the replayer's CPUs (steal)"}, "real-time"},
		{"real-time class held, no quota", replay.Summary{Sent: 10, OK: 10, LatenessP99: 20 * time.Millisecond}, []string{"exceeds --max-lateness"}, "steal"},
		{"told not to ask", replay.Summary{Sent: 10, OK: 10, LatenessP99: 20 * time.Millisecond, Realtime: replay.RealtimeNotAsked}, []string{"exceeds --max-lateness"}, "real-time"},
	} {
		err := replayValid(&tc.s, 0.5, 5*time.Millisecond)
		if err == nil {
			t.Fatalf("%s: no error", tc.name)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", tc.name, err, w)
			}
		}
		if tc.not != "" && strings.Contains(err.Error(), tc.not) {
			t.Errorf("%s: %q says %q", tc.name, err, tc.not)
		}
	}
}

// TestReplayShardClocksReachAnalyze: a replay with --start-at records its
// clock offset against the target (the built-in simulator, on this
// machine's clock) and its start error, and analyze of pooled results
// reports them: the metadata keys replay writes are the ones analyze reads.
func TestReplayShardClocksReachAnalyze(t *testing.T) {
	trace := writeReplayTrace(t, 4)
	dir := t.TempDir()
	start := time.Now().Add(2500 * time.Millisecond).UTC().Format(time.RFC3339Nano)
	res := filepath.Join(dir, "results-0.parquet")
	var so, se bytes.Buffer
	if code := Main(context.Background(), []string{"tokentrace", "replay", "--quiet", "--max-lateness", "10s", "--start-at", start, "--out", res, trace}, nil, &so, &se); code != 0 {
		t.Fatalf("replay: exit %d\n%s", code, se.String())
	}
	b, err := os.ReadFile(res)
	if err != nil {
		t.Fatal(err)
	}
	res1 := filepath.Join(dir, "results-1.parquet")
	if err := os.WriteFile(res1, b, 0o644); err != nil {
		t.Fatal(err)
	}
	so.Reset()
	if code := Main(context.Background(), []string{"tokentrace", "analyze", "--json", res, res1}, nil, &so, &se); code != 0 {
		t.Fatalf("analyze: exit %d\n%s", code, se.String())
	}
	var rep struct {
		ShardClocks *struct {
			Shards []struct {
				OffsetMs      float64 `json:"offset_ms"`
				OffsetErrorMs float64 `json:"offset_error_ms"`
				HasOffset     bool    `json:"has_offset"`
				HasStartError bool    `json:"has_start_error"`
			} `json:"shards"`
			OffsetSpreadMs float64 `json:"offset_spread_ms"`
		} `json:"shard_clocks"`
	}
	if err := json.Unmarshal(so.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	c := rep.ShardClocks
	if c == nil || len(c.Shards) != 2 || !c.Shards[0].HasOffset || !c.Shards[0].HasStartError || c.OffsetSpreadMs != 0 {
		t.Fatalf("shard clocks %+v", c)
	}
	// The simulator runs on our clock: the bracket holds 0.
	if s := c.Shards[0]; s.OffsetMs-s.OffsetErrorMs > 0 || s.OffsetMs+s.OffsetErrorMs < 0 {
		t.Errorf("offset %.3f ± %.3f ms against a target on our own clock", s.OffsetMs, s.OffsetErrorMs)
	}
}
