package synth

import (
	"context"
	"path/filepath"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// cpuSeconds is the process's user+system CPU time: a speed figure that
// does not depend on how loaded the machine is (run with -cpu 1).
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// BenchmarkFit fits the shared Azure conversation trace (19,366 records)
// from a slice (Fit) and streamed from a Parquet file (FitReader), and a
// 1 M-record trace generated from its model, streamed: records/s, and the
// peak memory the Go runtime holds (peak-MB; for the slice, the records
// are included). -benchtime 1x is enough for the 1 M trace.
func BenchmarkFit(b *testing.B) {
	recs, meta := loadPublic(b, publicTraces[0])
	b.Run("slice/azure-conv", func(b *testing.B) {
		benchFit(b, int64(len(recs)), func() error {
			_, err := Fit(context.Background(), recs, fitMeta(meta))
			return err
		})
	})
	stream := func(path string, n int64) func(b *testing.B) {
		return func(b *testing.B) {
			benchFit(b, n, func() error { return fitPath(path) })
		}
	}
	b.Run("stream/azure-conv", stream(writeTrace(b, "azure-conv.parquet", recs, meta), int64(len(recs))))
	// 1 M records drawn from the trace's model (rate ×100 for 30 min),
	// written to Parquet as they are generated.
	m, err := Fit(context.Background(), recs, fitMeta(meta))
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(b.TempDir(), "generated-1m.parquet")
	w, err := traces.Create(path, m.GenMeta(DefaultGenOptions()))
	if err != nil {
		b.Fatal(err)
	}
	n, err := m.Generate(context.Background(), with(genSeed(1), func(o *GenOptions) { o.RateScale = 100; o.Duration = 30 * time.Minute }), w)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		b.Fatal(err)
	}
	b.Run("stream/generated-1m", stream(path, n))
}

// benchFit runs fit b.N times and reports records/s, records/cpu-s and
// peak-MB: the most memory the runtime held (mapped, not returned to the
// OS), sampled every millisecond.
func benchFit(b *testing.B, records int64, fit func() error) {
	b.ReportAllocs()
	debug.FreeOSMemory() // start from what the benchmark itself holds
	samples := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	var peak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		s := slices.Clone(samples)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(s)
			if v := s[0].Value.Uint64() - s[1].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	})
	b.ResetTimer()
	cpu0 := cpuSeconds()
	for b.Loop() {
		if err := fit(); err != nil {
			b.Fatal(err)
		}
	}
	cpu := cpuSeconds() - cpu0
	b.StopTimer()
	close(done)
	wg.Wait()
	b.ReportMetric(float64(records)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(records)*float64(b.N)/cpu, "records/cpu-s")
	b.ReportMetric(float64(peak.Load())/1e6, "peak-MB")
}

// benchGenerate generates from a model fitted on a shared trace into a
// counting writer (no encoding): the generator's own speed on one core.
func benchGenerate(b *testing.B, p publicTrace, dur time.Duration) {
	recs, meta := loadPublic(b, p)
	m, err := Fit(context.Background(), recs, fitMeta(meta))
	if err != nil {
		b.Fatal(err)
	}
	var total int64
	b.ResetTimer()
	cpu0 := cpuSeconds()
	for b.Loop() {
		var w countWriter
		n, err := m.Generate(context.Background(), with(genSeed(1), func(o *GenOptions) { o.Duration = dur }), &w)
		if err != nil {
			b.Fatal(err)
		}
		total += n
	}
	b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(total)/(cpuSeconds()-cpu0), "records/cpu-s")
}

// BenchmarkGenerateAzureConv: no prefix blocks, 10× the rate.
func BenchmarkGenerateAzureConv(b *testing.B) {
	b.Run("rate-scale-1", func(b *testing.B) { benchGenerate(b, publicTraces[0], 0) })
}

// BenchmarkGenerateMooncake: with prefix-block chains (allocates per row).
func BenchmarkGenerateMooncake(b *testing.B) { benchGenerate(b, publicTraces[2], 0) }

// fitPath fits the trace file at path with the default options, streaming.
func fitPath(path string) error {
	r, err := traces.Open(path)
	if err != nil {
		return err
	}
	defer r.Close()
	_, err = FitReader(context.Background(), r, DefaultFitOptions())
	return err
}
