package analyze

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// benchAnalyze streams n synthetic result rows (16 chunks each, server
// usage, no server timings: the estimator runs) through an Analyzer and
// reports rows/s and the memory obtained from the OS.
func benchAnalyze(b *testing.B, n int) {
	r := traces.NewRecord()
	r.Status, r.HTTPStatus, r.Model, r.Class = traces.StatusOK, 200, "m", "interactive"
	r.ChunkNs = make([]int64, 16)
	r.ChunkTokens = make([]int32, 16)
	for i := range r.ChunkTokens {
		r.ChunkTokens[i] = 4
	}
	b.ReportAllocs()
	for range b.N {
		start := time.Now()
		a, err := New(DefaultOptions())
		if err != nil {
			b.Fatal(err)
		}
		for i := range n {
			at := int64(i) * int64(time.Millisecond) / 4 // 4000 req/s
			r.Seq, r.InputTokens, r.OutputTokens = int64(i), int32(100+i%3000), 61
			r.ScheduledNs, r.SentNs = at, at+int64(i%7)*1000
			ttft := int64(20*time.Millisecond) + int64(i%3000)*30_000 + int64(i%101)*100_000
			r.FirstTokenNs = r.SentNs + ttft
			for k := range r.ChunkNs {
				r.ChunkNs[k] = r.FirstTokenNs + int64(k)*int64(40*time.Millisecond+time.Duration(i%13)*time.Millisecond)
			}
			r.LastTokenNs = r.ChunkNs[15]
			r.ServerPromptTokens, r.ServerOutputTokens, r.ServerCachedTokens = r.InputTokens, 61, int32(i%5)*16
			a.Add(&r)
		}
		rep, err := a.Close(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if rep.Completed != n {
			b.Fatalf("completed %d, want %d", rep.Completed, n)
		}
		el := time.Since(start)
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		b.ReportMetric(float64(n)/el.Seconds(), "rows/s")
		b.ReportMetric(float64(ms.Sys)/(1<<20), "MiB-sys")
		b.ReportMetric(el.Seconds(), "s/analysis")
	}
}

// BenchmarkAnalyze10M: go test -run '^$' -bench Analyze10M -benchtime 1x ./analyze
func BenchmarkAnalyze10M(b *testing.B) { benchAnalyze(b, 10_000_000) }

// BenchmarkAnalyze100k is the quick version.
func BenchmarkAnalyze100k(b *testing.B) { benchAnalyze(b, 100_000) }
