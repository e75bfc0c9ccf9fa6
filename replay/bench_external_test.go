//go:build linux

package replay

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// Client cost benchmarks against a server in another process
// (bench/fastsse), so only the client's CPU, memory and file descriptors
// count. Both are skipped unless their URL is set.

// BenchmarkOpenStreamsExternal opens REPLAY_BENCH_STREAMS (default 10000)
// streams against REPLAY_BENCH_HOLD_URL (go run ./bench/fastsse -hold),
// waits until the server holds them all open and the client has read their
// first chunk, and reports the client's Go heap, Go runtime total and RSS
// growth per open stream, then releases them.
func BenchmarkOpenStreamsExternal(b *testing.B) {
	url := os.Getenv("REPLAY_BENCH_HOLD_URL")
	if url == "" {
		b.Skip("REPLAY_BENCH_HOLD_URL not set (go run ./bench/fastsse -hold)")
	}
	streams := 10000
	if s := os.Getenv("REPLAY_BENCH_STREAMS"); s != "" {
		streams, _ = strconv.Atoi(s)
	}
	for i := 0; i < b.N; i++ {
		o := DefaultOptions()
		o.URL = url
		o.Model = "m"
		recs := testTrace(streams, 0, 8, 1)
		runtime.GC()
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		rss0 := rssBytes(b)
		done := make(chan struct{})
		var res *Result
		var err error
		go func() {
			defer close(done)
			res, err = Run(context.Background(), recs, traces.NewMeta("b"), o)
		}()
		t0 := time.Now()
		for heldOpen(b, url) < streams {
			select {
			case <-done:
				b.Fatalf("run ended before %d streams were open: %v", streams, err)
			case <-time.After(100 * time.Millisecond):
			}
			if time.Since(t0) > 2*time.Minute {
				b.Fatalf("only %d of %d streams open after 2 minutes", heldOpen(b, url), streams)
			}
		}
		opened := time.Since(t0)
		time.Sleep(time.Second) // let every client read its first chunk
		runtime.GC()
		runtime.ReadMemStats(&m1)
		rss1 := rssBytes(b)
		resp, perr := http.Post(url+"/release", "text/plain", nil)
		if perr != nil {
			b.Fatal(perr)
		}
		resp.Body.Close()
		<-done
		if err != nil || res.Summary.OK != streams {
			b.Fatalf("%v ok=%d of %d: %v", err, res.Summary.OK, streams, res.Summary.FailedBy)
		}
		b.ReportMetric(float64(m1.HeapInuse-m0.HeapInuse)/float64(streams)/1024, "heap-KiB/stream")
		b.ReportMetric(float64(m1.Sys-m0.Sys)/float64(streams)/1024, "gosys-KiB/stream")
		b.ReportMetric(float64(rss1-rss0)/float64(streams)/1024, "rss-KiB/stream")
		b.ReportMetric(float64(rss1)/(1<<20), "rss-MiB-total")
		b.ReportMetric(float64(m1.Sys)/(1<<20), "gosys-MiB-total")
		b.ReportMetric(opened.Seconds(), "s-to-open")
	}
}

// BenchmarkStreamCPU replays REPLAY_BENCH_REQUESTS (default 1000) requests
// of REPLAY_BENCH_TOKENS (default 1000) output tokens, at most
// REPLAY_BENCH_CONCURRENCY (default 200) in flight, against
// REPLAY_BENCH_CPU_URL (go run ./bench/fastsse -tokens 1000 [-flush-each]),
// and reports this process's user+sys CPU (getrusage deltas) per 1M
// streamed tokens and token chunks parsed per CPU-second.
func BenchmarkStreamCPU(b *testing.B) {
	url := os.Getenv("REPLAY_BENCH_CPU_URL")
	if url == "" {
		b.Skip("REPLAY_BENCH_CPU_URL not set (go run ./bench/fastsse -tokens 1000)")
	}
	env := func(name string, def int) int {
		if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
			return v
		}
		return def
	}
	n, tokens, conc := env("REPLAY_BENCH_REQUESTS", 1000), env("REPLAY_BENCH_TOKENS", 1000), env("REPLAY_BENCH_CONCURRENCY", 200)
	recs := testTrace(n, 0, 8, int32(tokens))
	o := DefaultOptions()
	o.URL = url
	o.Model = "m"
	o.MaxConcurrency = conc
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var ru0, ru1 syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
		reads0 := readSyscalls()
		t0 := time.Now()
		res, err := Run(context.Background(), recs, traces.NewMeta("bench"), o)
		wall := time.Since(t0)
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
		reads := readSyscalls() - reads0
		if err != nil {
			b.Fatal(err)
		}
		chunks := 0
		for _, r := range res.Records {
			if r.Status == traces.StatusOK {
				chunks += len(r.ChunkNs)
			}
		}
		if res.Summary.OK != n || chunks != n*tokens {
			b.Fatalf("%d of %d ok, %d of %d chunks: %v", res.Summary.OK, n, chunks, n*tokens, res.Summary.FailedBy)
		}
		user := time.Duration(ru1.Utime.Nano() - ru0.Utime.Nano())
		sys := time.Duration(ru1.Stime.Nano() - ru0.Stime.Nano())
		cpu := (user + sys).Seconds()
		b.ReportMetric(cpu/float64(chunks)*1e6, "cpu-s/1M-tokens")
		b.ReportMetric(user.Seconds()/float64(chunks)*1e6, "user-s/1M-tokens")
		b.ReportMetric(sys.Seconds()/float64(chunks)*1e6, "sys-s/1M-tokens")
		b.ReportMetric(float64(chunks)/cpu, "chunks/cpu-s")
		b.ReportMetric(float64(chunks)/wall.Seconds(), "chunks/wall-s")
		if reads > 0 {
			b.ReportMetric(float64(chunks)/float64(reads), "chunks/read-syscall")
		}
	}
}

// heldOpen asks a fastsse -hold server how many streams it holds open.
func heldOpen(b *testing.B, url string) int {
	resp, err := http.Get(url + "/stats")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var total, open int
	if _, err := fmt.Sscan(string(body), &total, &open); err != nil {
		b.Fatalf("fastsse /stats %q: %v (is it fastsse -hold?)", body, err)
	}
	return open
}

// rssBytes is this process's resident set size (VmRSS, Linux).
func rssBytes(b *testing.B) uint64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Skip("no /proc/self/status")
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseUint(f[1], 10, 64)
			return kb * 1024
		}
	}
	b.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// readSyscalls is this process's read-like syscall count so far (syscr in
// /proc/self/io; 0 when unavailable).
func readSyscalls() int64 {
	data, _ := os.ReadFile("/proc/self/io")
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "syscr: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}
