package synth

import (
	"context"
	"syscall"
	"testing"
	"time"
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

// BenchmarkFit fits the shared Azure conversation trace (19,366 records).
func BenchmarkFit(b *testing.B) {
	recs, meta := loadPublic(b, publicTraces[0])
	b.ResetTimer()
	cpu0 := cpuSeconds()
	for b.Loop() {
		if _, err := Fit(context.Background(), recs, FitOptions{Meta: meta}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(recs))*float64(b.N)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(len(recs))*float64(b.N)/(cpuSeconds()-cpu0), "records/cpu-s")
}

// benchGenerate generates from a model fitted on a shared trace into a
// counting writer (no encoding): the generator's own speed on one core.
func benchGenerate(b *testing.B, p publicTrace, dur time.Duration) {
	recs, meta := loadPublic(b, p)
	m, err := Fit(context.Background(), recs, FitOptions{Meta: meta})
	if err != nil {
		b.Fatal(err)
	}
	var total int64
	b.ResetTimer()
	cpu0 := cpuSeconds()
	for b.Loop() {
		var w countWriter
		n, err := m.Generate(context.Background(), GenOptions{Seed: 1, Duration: dur}, &w)
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
