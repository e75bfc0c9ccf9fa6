package engine

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// cpuSeconds is the process's user+system CPU time: tokens per CPU-second
// is what one core sustains, whatever else the (shared) machine runs.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// discardWriter is an http.ResponseWriter + Flusher that drops the body but
// counts SSE events, so a benchmark measures the simulator alone.
type discardWriter struct {
	h      http.Header
	bytes  int64
	events int64
}

func (w *discardWriter) Header() http.Header { return w.h }
func (w *discardWriter) WriteHeader(int)     {}
func (w *discardWriter) Flush()              {}
func (w *discardWriter) Write(p []byte) (int, error) {
	w.bytes += int64(len(p))
	w.events += int64(strings.Count(string(p), "data: "))
	return len(p), nil
}

// BenchmarkEmitSSE measures the SSE tokens per second the simulator emits:
// engine steps, chunk JSON and writes, one token per chunk (Virtual mode's
// lockstep guarantees no coalescing), 256 concurrent streams of 256 tokens,
// no network. Run it on one core:
//
//	go test ./sim/engine -run '^$' -bench EmitSSE -cpu 1 -benchtime 20x
func BenchmarkEmitSSE(b *testing.B) {
	o := DefaultOptions()
	o.Virtual = true
	o.MaxNumSeqs, o.MaxNumBatchedTokens = 1024, 65536
	s, err := listen(context.Background(), o)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	h := s.Handler()
	tok, el, cpu, events := emitStreams(b, func(body string) int64 {
		req, _ := http.NewRequest("POST", "/v1/completions", strings.NewReader(body))
		w := &discardWriter{h: http.Header{}}
		h.ServeHTTP(w, req)
		return w.events
	})
	b.ReportMetric(tok/cpu, "tokens/cpu-s")
	b.ReportMetric(tok/el, "tokens/s")
	b.ReportMetric(events/el, "events/s")
	b.ReportMetric(float64(s.lockstepTimeouts.Load()), "lockstep_timeouts")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkEmitSSELoopback streams through real HTTP over loopback to a Go
// client reading every byte (client and server share the cores given by
// -cpu). The engine runs in real time with 1 ms steps and 256 streams, so it
// offers 256k tokens/s; when the CPU cannot keep up, steps run late and
// streams that fall behind get several tokens per chunk (as in vLLM), so it
// reports the tokens/s delivered and events/s (SSE chunks).
func BenchmarkEmitSSELoopback(b *testing.B) {
	o := DefaultOptions()
	o.StepFixed, o.PrefillPerToken, o.DecodePerSeq, o.AttnPerContextToken = time.Millisecond, 0, 0, 0
	o.MaxNumSeqs, o.MaxNumBatchedTokens = 1024, 65536
	s, err := listen(context.Background(), o)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	tr := &http.Transport{MaxIdleConnsPerHost: emitStreamsN}
	cl := &http.Client{Transport: tr}
	defer tr.CloseIdleConnections()
	tok, el, cpu, events := emitStreams(b, func(body string) int64 {
		resp, err := cl.Post(s.URL+"/v1/completions", "application/json", strings.NewReader(body))
		if err != nil {
			b.Error(err)
			return 0
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return int64(strings.Count(string(got), "data: "))
	})
	b.ReportMetric(tok/cpu, "tokens/cpu-s")
	b.ReportMetric(tok/el, "tokens/s")
	b.ReportMetric(events/el, "events/s")
	b.ReportMetric(events/cpu, "events/cpu-s")
	b.ReportMetric(0, "ns/op")
}

// emitStreamsN streams of emitStreamsTokens tokens each make one round of
// emitStreams.
const emitStreamsN, emitStreamsTokens = 256, 256

// emitStreams runs b.N rounds of emitStreamsN concurrent streamed
// completions, each request body passed to stream, which returns the SSE
// events it read. It returns the tokens asked for, the wall-clock and CPU
// seconds the rounds took and the events read.
func emitStreams(b *testing.B, stream func(body string) int64) (tokens, elapsed, cpu, events float64) {
	var n atomic.Int64
	b.ResetTimer()
	t0, c0 := time.Now(), cpuSeconds()
	for range b.N {
		var wg sync.WaitGroup
		for i := range emitStreamsN {
			wg.Add(1)
			go func() {
				defer wg.Done()
				n.Add(stream(fmt.Sprintf(`{"prompt":[%d,1000,1001,1002],"max_tokens":%d,"ignore_eos":true,"stream":true}`, 300+i, emitStreamsTokens)))
			}()
		}
		wg.Wait()
	}
	return float64(b.N * emitStreamsN * emitStreamsTokens), time.Since(t0).Seconds(), cpuSeconds() - c0, float64(n.Load())
}

// childEnv makes the test binary act as a bare simulator server (see
// TestMain), so BenchmarkStreamMemory can measure the server's own RSS.
const childEnv = "TOKENTRACE_SIM_BENCH_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		o := DefaultOptions()
		o.MaxNumSeqs, o.MaxNumBatchedTokens = 20000, 1<<20
		o.NumGPUBlocks = 1 << 20
		o.StepFixed = 500 * time.Millisecond
		s, err := listen(context.Background(), o)
		if err != nil {
			fmt.Println("ERR", err)
			os.Exit(1)
		}
		fmt.Println(s.URL)
		io.Copy(io.Discard, os.Stdin) // run until the parent closes stdin
		s.Close()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func rssKB(pid int, field string) int64 {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	return -1
}

// BenchmarkStreamMemory holds N concurrent streams (default 10000, env
// SIM_STREAMS) open against a simulator running in a child process and
// reports the child's resident memory per stream once every stream has
// received its first token. Linux only.
//
//	go test ./sim/engine -run '^$' -bench StreamMemory -benchtime 1x
func BenchmarkStreamMemory(b *testing.B) {
	n := 10000
	if v, err := strconv.Atoi(os.Getenv("SIM_STREAMS")); err == nil {
		n = v
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "http://") {
		b.Fatalf("child: %q %v", line, err)
	}
	addr := strings.TrimPrefix(strings.TrimSpace(line), "http://")
	pid := cmd.Process.Pid
	time.Sleep(200 * time.Millisecond)
	idle := rssKB(pid, "VmRSS")
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatalf("dial %d: %v", i, err)
		}
		body := fmt.Sprintf(`{"prompt":[%d,1000,1001,1002,1003,1004,1005,1006],"max_tokens":2000,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}`, 300+i%50000)
		fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		conns = append(conns, c)
	}
	buf := make([]byte, 4096)
	for i, c := range conns {
		c.SetReadDeadline(time.Now().Add(60 * time.Second))
		got := ""
		for !strings.Contains(got, "data: ") {
			k, err := c.Read(buf)
			if err != nil {
				b.Fatalf("stream %d: %v after %q", i, err, got)
			}
			got += string(buf[:k])
		}
	}
	loaded, hwm := rssKB(pid, "VmRSS"), rssKB(pid, "VmHWM")
	b.ReportMetric(float64(n), "streams")
	b.ReportMetric(float64(loaded)/1024, "MB_rss")
	b.ReportMetric(float64(hwm)/1024, "MB_peak")
	b.ReportMetric(float64(loaded-idle)*1024/float64(n), "B/stream")
	b.ReportMetric(0, "ns/op")
}
