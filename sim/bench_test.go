package sim

import (
	"context"
	"iter"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// cpuSeconds is the process's user+system CPU time, the figure that holds
// on a busy machine.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// workload streams n requests at rate per second: 3 in 4 start with one of
// groups shared 512-token prefixes, then 64 to 767 tokens of their own;
// outputs are drawn by the simulator (mean 128 tokens, at most 512).
func workload(n int, rate float64, groups int) iter.Seq2[Request, error] {
	return func(yield func(Request, error) bool) {
		x := uint64(42)
		rnd := func() uint64 { // splitmix64
			x += 0x9E3779B97F4A7C15
			z := x
			z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
			z = (z ^ (z >> 27)) * 0x94D049BB133111EB
			return z ^ (z >> 31)
		}
		prompt := make([]int32, 0, 1280)
		gap := 1e9 / rate
		at := 0.0
		for i := range n {
			at += gap * (0.5 + float64(rnd()>>11)/(1<<53))
			prompt = prompt[:0]
			if r := rnd(); r%4 != 0 {
				g := int32(r>>8) % int32(groups)
				for j := range int32(512) {
					prompt = append(prompt, 1000+(g*7919+j*31)%100000)
				}
			}
			own := 64 + int(rnd()%704)
			for range own {
				prompt = append(prompt, 1000+int32(rnd()%100000))
			}
			q := Request{ID: "b" + strconv.Itoa(i), ArrivalNs: int64(at), Prompt: prompt, MaxTokens: 512, Session: int64(i%50000) + 1}
			if !yield(q, nil) {
				return
			}
		}
	}
}

// BenchmarkFleet64 simulates a 64-replica fleet offline: by default 1 M
// requests (FLEET_BENCH_REQUESTS to change) at 8 per replica per second,
// with prefix-aware routing (FLEET_BENCH_ROUTER). Run it on one core:
//
//	GOMAXPROCS=1 taskset -c 1 go test ./sim -run '^$' -bench Fleet64 -benchtime 1x
func BenchmarkFleet64(b *testing.B) {
	n := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("FLEET_BENCH_REQUESTS")); err == nil {
		n = v
	}
	router := RouterPrefixAware
	if v := os.Getenv("FLEET_BENCH_ROUTER"); v != "" {
		router = v
	}
	o := DefaultOptions()
	if err := ApplyConfig(&o, "replicas=64,router="+router); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		var ms runtime.MemStats
		t0, c0 := time.Now(), cpuSeconds()
		var rows, tokens, peakHeap int64
		res, err := Simulate(context.Background(), o, workload(n, 8*64, 20000), func(r traces.Record) error {
			rows++
			tokens += int64(r.OutputTokens)
			if rows%100000 == 0 {
				runtime.ReadMemStats(&ms)
				peakHeap = max(peakHeap, int64(ms.HeapAlloc))
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		el, cpu := time.Since(t0).Seconds(), cpuSeconds()-c0
		var hits, queries int64
		for _, r := range res.Replicas {
			hits += r.Counters.PrefixHits
			queries += r.Counters.PrefixQueries
		}
		b.ReportMetric(float64(rows), "requests")
		b.ReportMetric(el, "wall-s")
		b.ReportMetric(cpu, "cpu-s")
		b.ReportMetric(float64(rows)/cpu, "requests/cpu-s")
		b.ReportMetric(float64(tokens)/float64(rows), "out-tokens/request")
		b.ReportMetric(float64(res.MaxInFlight), "max-in-flight")
		b.ReportMetric(float64(peakHeap)/(1<<20), "MB-heap-peak")
		b.ReportMetric(float64(hits)/float64(queries), "prefix-hit-rate")
		b.ReportMetric(0, "ns/op")
	}
}
