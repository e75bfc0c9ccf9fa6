package twin

import (
	"context"
	"errors"
	"iter"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/sim"
	"github.com/tokentrace/tokentrace/traces"
)

// benchTrace streams n requests at rate per second (seeded) with short
// outputs, in arrival order, without holding them.
func benchTrace(n int, rate float64) iter.Seq2[traces.Record, error] {
	return func(yield func(traces.Record, error) bool) {
		x := uint64(5)
		at := 0.0
		for i := range n {
			x = splitmix(x)
			at += float64(x%2000) / 1000 / rate * 1e9
			r := traces.NewRecord()
			r.Seq, r.ArrivalNs = int64(i), int64(at)
			r.InputTokens, r.OutputTokens = int32(64+x%1500), int32(4+(x>>20)%40)
			if !yield(r, nil) {
				return
			}
		}
	}
}

var errStop = errors.New("stop")

// measuredStream streams the rows of the trace on the simulator o, as a
// replay's results (in the order requests finish).
func measuredStream(o sim.Options, trace iter.Seq2[traces.Record, error]) iter.Seq2[traces.Record, error] {
	return func(yield func(traces.Record, error) bool) {
		_, err := Predict(context.Background(), o, trace, predictRun("measured"), func(r traces.Record) error {
			if !yield(r, nil) {
				return errStop
			}
			return nil
		})
		if err != nil && !errors.Is(err, errStop) {
			yield(traces.Record{}, err)
		}
	}
}

// maxRSS is the process's peak resident memory (MiB).
func maxRSS() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Maxrss) / 1024
}

func cpu() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

const benchHidden = "step-fixed=4ms,prefill-per-token=20us,decode-per-seq=60us,attn-per-context-token=50ns,max-num-seqs=64"

// BenchmarkFitRows fits a twin to BENCH_ROWS (default 1 M) results rows
// streamed from a simulated replay: the simulation alone first (what
// producing the rows costs), then the simulation and the fit; the fit's
// share is the difference. Reports CPU seconds and the peak RSS.
func BenchmarkFitRows(b *testing.B) {
	n := benchRows()
	o := mustConfig(b, benchHidden)
	for range b.N {
		runtime.GC()
		c0 := cpu()
		rows := int64(0)
		for _, err := range measuredStream(o, benchTrace(n, 40)) {
			if err != nil {
				b.Fatal(err)
			}
			rows++
		}
		simCPU := cpu() - c0
		runtime.GC()
		c1, w1 := cpu(), time.Now()
		res, err := Fit(context.Background(), []Input{{Name: "bench", Rows: measuredStream(o, benchTrace(n, 40))}}, DefaultFitOptions())
		if err != nil {
			b.Fatal(err)
		}
		both, wall := cpu()-c1, time.Since(w1)
		b.ReportMetric(float64(rows), "rows")
		b.ReportMetric(simCPU.Seconds(), "sim-cpu-s")
		b.ReportMetric((both - simCPU).Seconds(), "fit-cpu-s")
		b.ReportMetric(wall.Seconds(), "sim+fit-wall-s")
		b.ReportMetric(maxRSS(), "maxrss-MiB")
		b.Logf("%d rows: simulation %.1f s CPU, simulation + fit %.1f s CPU (%.1f s wall), peak RSS %.0f MiB; twin %s",
			rows, simCPU.Seconds(), both.Seconds(), wall.Seconds(), maxRSS(), res.Config())
	}
}

// BenchmarkCheckRows checks a twin against BENCH_ROWS rows of a simulated
// replay held in memory, beside an offline simulation of the same trace:
// a check is one simulation plus its comparison.
func BenchmarkCheckRows(b *testing.B) {
	n := benchRows()
	o := mustConfig(b, benchHidden)
	rows, err := traces.Collect(measuredStream(o, benchTrace(n, 40)))
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		c0 := cpu()
		if _, err := Predict(context.Background(), o, traces.Values(rows), DefaultPredictOptions(), func(traces.Record) error { return nil }); err != nil {
			b.Fatal(err)
		}
		c1 := cpu()
		if _, err := Check(context.Background(), o, []Input{{Name: "bench", Rows: traces.Values(rows)}}, DefaultCheckOptions()); err != nil {
			b.Fatal(err)
		}
		c2 := cpu()
		b.ReportMetric((c1 - c0).Seconds(), "simulate-cpu-s")
		b.ReportMetric((c2 - c1).Seconds(), "check-cpu-s")
	}
}

func benchRows() int {
	if s := testingEnv("BENCH_ROWS"); s != "" {
		n := 0
		for _, c := range s {
			if c < '0' || c > '9' {
				return 1000000
			}
			n = n*10 + int(c-'0')
		}
		return n
	}
	return 1000000
}

func testingEnv(k string) string { return os.Getenv(k) }
