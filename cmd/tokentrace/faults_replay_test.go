package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/sim"
	"github.com/tokentrace/tokentrace/traces"
)

// TestFaultReplayServers replays against every fault the simulator can
// inject and against servers that do not do what was asked. Each case
// checks the exit code, the message, the statuses in the results file
// (complete, one row per request) and that no journal is left behind.
// The cases run side by side (nothing else runs while a test that is not
// parallel waits for its subtests).
func TestFaultReplayServers(t *testing.T) {
	simWith := func(set func(*sim.Options)) func(t *testing.T) string {
		return func(t *testing.T) string { return startSimServer(t, "", set).URL }
	}
	// stream serves every completion with fn, after the server's
	// self-description probes are refused.
	stream := func(fn func(w http.ResponseWriter, r *http.Request)) func(t *testing.T) string {
		return func(t *testing.T) string {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodPost {
					http.NotFound(w, r)
					return
				}
				w.Header().Set("Content-Type", "text/event-stream")
				fn(w, r)
			}))
			t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
			return srv.URL
		}
	}
	for _, c := range []struct {
		name   string
		why    string
		server func(t *testing.T) string
		flags  []string
		n      int
		code   int
		stderr string
		// statuses the results must hold (every one when all is set)
		statuses []string
		all      bool
		// maxChunks bounds the chunks read per request (0 = no bound)
		maxChunks int
	}{
		{
			name:   "refuses-all",
			why:    "a server that refuses every request: the run measured failures, exit 3 naming the most frequent reason",
			server: simWith(func(o *sim.Options) { o.FailRate = 1 }), n: 6, code: exitNotReproduced,
			stderr: "6 of 6 requests failed", statuses: []string{traces.StatusHTTPError}, all: true,
		},
		{
			name:   "disconnects-all",
			why:    "a server that cuts every stream's connection",
			server: simWith(func(o *sim.Options) { o.DisconnectRate = 1 }), n: 6, code: exitNotReproduced,
			stderr: "requests failed", statuses: []string{traces.StatusDisconnect}, all: true,
		},
		{
			name:   "stream-errors-all",
			why:    "a server that ends every stream with an error event",
			server: simWith(func(o *sim.Options) { o.StreamErrorRate = 1 }), n: 6, code: exitNotReproduced,
			stderr: "requests failed", statuses: []string{traces.StatusStreamError}, all: true,
		},
		{
			name:   "stalls-past-timeout",
			why:    "a server whose streams stall longer than the request timeout",
			server: simWith(func(o *sim.Options) { o.StallRate, o.StallDuration = 1, 3*time.Second }), n: 4,
			flags: []string{"--timeout", "1s"}, code: exitNotReproduced,
			stderr: "requests failed", statuses: []string{traces.StatusTimeout}, all: true,
		},
		{
			name:   "stalls-briefly",
			why:    "a server whose streams stall briefly: slow, but every request succeeds",
			server: simWith(func(o *sim.Options) { o.StallRate, o.StallDuration = 1, 200*time.Millisecond }), n: 4,
			code: 0, statuses: []string{traces.StatusOK}, all: true,
		},
		{
			name: "mixed-faults",
			why:  "a server failing a few requests of each kind: a valid run that counts each kind",
			server: simWith(func(o *sim.Options) {
				o.FailRate, o.DisconnectRate, o.StreamErrorRate = 0.1, 0.1, 0.1
			}), n: 80, code: 0, stderr: "",
			statuses: []string{traces.StatusOK, traces.StatusHTTPError, traces.StatusDisconnect, traces.StatusStreamError},
		},
		{
			name: "ignores-max-tokens",
			why:  "a server that ignores max_tokens: length mismatches, read no further than the overrun limit",
			server: stream(func(w http.ResponseWriter, r *http.Request) {
				for i := 0; i < 5000 && r.Context().Err() == nil; i++ {
					fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"text\":\"x\"}]}\n\n")
					w.(http.Flusher).Flush()
					time.Sleep(time.Millisecond)
				}
				fmt.Fprint(w, "data: [DONE]\n\n")
			}), flags: []string{"--model", "m"}, n: 3, code: exitNotReproduced, stderr: "length mismatch", statuses: []string{traces.StatusStreamError}, all: true,
			maxChunks: 2*4 + 16 + 1, // twice the 4 tokens asked, plus 16, plus the chunk that crossed
		},
		{
			name: "50MB-line",
			why:  "a server that sends a 50 MB SSE line: bounded, a stream error",
			server: stream(func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"text\":\"")
				chunk := strings.Repeat("x", 1<<20)
				for i := 0; i < 50 && r.Context().Err() == nil; i++ {
					fmt.Fprint(w, chunk)
				}
				fmt.Fprint(w, "\"}]}\n\ndata: [DONE]\n\n")
			}), flags: []string{"--model", "m"}, n: 3, code: exitNotReproduced, stderr: "SSE line too long", statuses: []string{traces.StatusStreamError}, all: true,
		},
		{
			name: "garbage-json",
			why:  "a server that sends garbage for JSON",
			server: stream(func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"text\":\"x\"}]}\n\ndata: {not json at all\n\ndata: [DONE]\n\n")
			}), flags: []string{"--model", "m"}, n: 3, code: exitNotReproduced, stderr: "malformed SSE chunk", statuses: []string{traces.StatusStreamError}, all: true,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel() // the cases mostly wait on their servers; replay runs in a child process
			url := c.server(t)
			trace := writeReplayTrace(t, c.n)
			out := filepath.Join(t.TempDir(), "res.jsonl")
			args := append([]string{"replay", "--url", url, "--quiet", "--max-lateness", "10s", "--out", out}, c.flags...)
			code, _, se := runCLIChild(t, "", nil, append(args, trace)...)
			if code != c.code || (c.stderr != "" && !strings.Contains(se, c.stderr)) {
				t.Errorf("%s: exit %d, stderr %q; want exit %d saying %q", c.why, code, se, c.code, c.stderr)
			}
			recs, _, err := traces.ReadAll(out)
			if err != nil {
				t.Fatalf("%s: results: %v", c.why, err)
			}
			by := map[string]int{}
			for _, r := range recs {
				by[r.Status]++
				if c.maxChunks > 0 && len(r.ChunkNs) > c.maxChunks {
					t.Errorf("%s: seq %d read %d chunks, want at most %d", c.why, r.Seq, len(r.ChunkNs), c.maxChunks)
				}
			}
			if len(recs) != c.n {
				t.Errorf("%s: %d results for %d requests", c.why, len(recs), c.n)
			}
			for _, st := range c.statuses {
				if by[st] == 0 || (c.all && by[st] != len(recs)) {
					t.Errorf("%s: statuses %v, want %s (all: %v)", c.why, by, st, c.all)
				}
			}
			if _, err := os.Stat(out + ".journal.jsonl"); !os.IsNotExist(err) {
				t.Errorf("%s: journal left behind (%v)", c.why, err)
			}
		})
	}
}
