package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// tokentrace sim prints its URL, serves until the context ends and then
// writes --truth-out.
func TestSimCommand(t *testing.T) {
	truth := filepath.Join(t.TempDir(), "truth.jsonl")
	// per-request metrics are on by default; the model is named after the preset
	run := runSimCommand(t, "--preset", "tiny", "--virtual", "--max-num-seqs", "4", "--truth-out", truth)
	resp, err := http.Post(run.URL+"/v1/completions", "application/json", strings.NewReader(`{"model":"sim-tiny","prompt":"hi","max_tokens":3,"ignore_eos":true}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"metrics":{`) {
		t.Fatalf("status %d body %s", resp.StatusCode, body)
	}
	if c := run.stop(t); c != 0 {
		t.Fatalf("exit %d, stderr %s", c, run.stderr.String())
	}
	recs, _, err := traces.ReadAll(truth)
	if err != nil || len(recs) != 1 || recs[0].OutputTokens != 3 {
		t.Fatalf("truth: %v %+v", err, recs)
	}
}

// Bad flags are usage errors (exit 2) that name the flag.
func TestSimCommandUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"sim", "--preset", "nope"}, "--preset"},
		{[]string{"sim", "--fail-status", "418"}, "--fail-status"},
		{[]string{"sim", "--max-num-seqs", "0"}, "--max-num-seqs"},
		{[]string{"sim", "extra"}, "argument"},
	} {
		var out, errb bytes.Buffer
		code := Main(context.Background(), append([]string{"tokentrace"}, c.args...), strings.NewReader(""), &out, &errb)
		if code != 2 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 naming %s", c.args, code, errb.String(), c.want)
		}
	}
}

// tokentrace sim --replicas serves a fleet: each response names its
// replica, and the truth has the replica of every request.
func TestSimFleetCommand(t *testing.T) {
	truth := filepath.Join(t.TempDir(), "truth.jsonl")
	run := runSimCommand(t, "--preset", "tiny", "--replicas", "2", "--router", "least-outstanding",
		"--replica-config", "replica-1.step-fixed=2ms", "--truth-out", truth)
	var served []string
	for range 2 {
		resp, err := http.Post(run.URL+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"hi","max_tokens":3,"ignore_eos":true}`))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		served = append(served, resp.Header.Get("X-Sim-Replica"))
	}
	if c := run.stop(t); c != 0 {
		t.Fatalf("exit %d, stderr %s", c, run.stderr.String())
	}
	if served[0] != "replica-0" || served[1] != "replica-1" || !strings.Contains(run.stderr.String(), "on 2 replicas (replica-0, replica-1), router least-outstanding") {
		t.Errorf("served by %v; stderr %s", served, run.stderr.String())
	}
	recs, _, err := traces.ReadAll(truth)
	if err != nil || len(recs) != 2 || recs[0].Replica != "replica-0" || recs[1].Replica != "replica-1" {
		t.Fatalf("truth: %v %+v", err, recs)
	}
}

// Bad fleet flags are usage errors that say what is wrong.
func TestSimFleetFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--replicas", "0"}, "pool of size 0"},
		{[]string{"--replicas", "2", "--router", "random"}, "round-robin, least-outstanding, session-affinity, prefix-aware"},
		{[]string{"--prefill-replicas", "2"}, "needs a decode pool"},
		{[]string{"--replicas", "2", "--replica-config", "replica-9.step-fixed=1ms"}, `no replica or pool "replica-9"`},
		{[]string{"--kv-transfer-latency", "3ms"}, "applies to a disaggregated fleet"},
	} {
		var stderr bytes.Buffer
		code := Main(context.Background(), append([]string{"tokentrace", "sim"}, tc.args...), strings.NewReader(""), io.Discard, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("sim %v: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}

// simRun is `tokentrace sim` running beside a test.
type simRun struct {
	URL    string
	stderr *syncBuf
	cancel context.CancelFunc
	code   chan int
}

// runSimCommand runs `tokentrace sim ARGS` and returns once it printed
// its URL.
func runSimCommand(t *testing.T, args ...string) *simRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	run := &simRun{stderr: &syncBuf{}, cancel: cancel, code: make(chan int, 1)}
	go func() {
		run.code <- Main(ctx, append([]string{"tokentrace", "sim"}, args...), strings.NewReader(""), pw, run.stderr)
		pw.Close()
	}()
	url, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		cancel()
		t.Fatalf("reading URL: %v (stderr %s)", err, run.stderr.String())
	}
	go io.Copy(io.Discard, pr)
	run.URL = strings.TrimSpace(url)
	return run
}

// stop cancels the command's context and returns its exit code (-1, and
// the test fails, when it does not stop within 10 s).
func (run *simRun) stop(t *testing.T) int {
	t.Helper()
	run.cancel()
	select {
	case c := <-run.code:
		run.code <- c // a second stop gets the same code
		return c
	case <-time.After(10 * time.Second):
		t.Error("sim did not stop on cancel")
		return -1
	}
}

// startSimCommand runs `tokentrace sim --virtual ARGS` until the test ends
// and returns its URL.
func startSimCommand(t *testing.T, args ...string) string {
	t.Helper()
	run := runSimCommand(t, append([]string{"--virtual"}, args...)...)
	t.Cleanup(func() { run.stop(t) })
	return run.URL
}

// A standalone simulator serves a trace's production model names as the
// built-in one does (it answered 404 to them once, so a documented replay
// against it failed its preflight); --model restricts it to one name.
func TestSimServesAnyModelUnlessTold(t *testing.T) {
	post := func(url, model string) int {
		resp, err := http.Post(url+"/v1/completions", "application/json",
			strings.NewReader(`{"model":"`+model+`","prompt":"hi","max_tokens":2,"ignore_eos":true}`))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	anyURL := startSimCommand(t)
	if got := post(anyURL, "prod-llama-70b"); got != http.StatusOK {
		t.Errorf("sim without --model: a request for a production model name got HTTP %d, want 200", got)
	}
	oneURL := startSimCommand(t, "--model", "only-this")
	if got := post(oneURL, "prod-llama-70b"); got != http.StatusNotFound {
		t.Errorf("sim --model only-this: a request for another model got HTTP %d, want vLLM's 404", got)
	}
	if got := post(oneURL, "only-this"); got != http.StatusOK {
		t.Errorf("sim --model only-this: a request for it got HTTP %d, want 200", got)
	}
}

// syncBuf is a bytes.Buffer a command's goroutine writes while the test
// reads it.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
