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
// reports rows/s and the memory obtained from the OS. exactRows is
// Options.ExactRows (0 = the default): past it the analysis streams.
func benchAnalyze(b *testing.B, n, exactRows int) {
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
		o := DefaultOptions()
		if exactRows > 0 {
			o.ExactRows = exactRows
		}
		a, err := New(o)
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
		if (rep.Sampling != nil) != (n > o.ExactRows) || (n > o.ExactRows && !rep.TTFT.Approx) {
			b.Fatalf("%d rows, budget %d: sampling %+v, approx %v", n, o.ExactRows, rep.Sampling, rep.TTFT.Approx)
		}
		el := time.Since(start)
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		b.ReportMetric(float64(n)/el.Seconds(), "rows/s")
		b.ReportMetric(float64(ms.Sys)/(1<<20), "MiB-sys")
		b.ReportMetric(el.Seconds(), "s/analysis")
		if s := rep.Sampling; s != nil {
			b.ReportMetric(float64(s.OneIn), "one-in")
			b.ReportMetric(float64(s.Kept), "kept-rows")
		}
	}
}

// BenchmarkAnalyze100M is the streaming target: 100 M rows past the
// default budget in at most 2 GB of memory and 3 minutes. go test -c -o /tmp/analyze.test ./analyze &&
// /usr/bin/time -v /tmp/analyze.test -test.run '^$' -test.bench Analyze100M -test.benchtime 1x
func BenchmarkAnalyze100M(b *testing.B) { benchAnalyze(b, 100_000_000, 0) }

// BenchmarkAnalyze10M: go test -run '^$' -bench Analyze10M -benchtime 1x ./analyze
// (past the default budget of 4 Mi rows: it streams).
func BenchmarkAnalyze10M(b *testing.B) { benchAnalyze(b, 10_000_000, 0) }

// BenchmarkAnalyze10MExact is 10 M rows all kept exactly (the analysis
// before the budget existed).
func BenchmarkAnalyze10MExact(b *testing.B) { benchAnalyze(b, 10_000_000, 10_000_000) }

// BenchmarkAnalyze100k is the quick version (exact).
func BenchmarkAnalyze100k(b *testing.B) { benchAnalyze(b, 100_000, 0) }

// BenchmarkAnalyze1MStream is a quick look at the streaming path's speed
// (1 M rows past a 100 k budget).
func BenchmarkAnalyze1MStream(b *testing.B) { benchAnalyze(b, 1_000_000, 100_000) }

// BenchmarkAnalyzeBudget is the largest exact analysis by default
// (DefaultExactRows rows): the memory peak of a default analyze of any size.
func BenchmarkAnalyzeBudget(b *testing.B) { benchAnalyze(b, DefaultExactRows, 0) }

// BenchmarkSessionsPrefixCache is the cost per row of the session and
// prefix-cache sections: 1 M agentic rows (8 turns per session, 64
// sessions interleaved, a shared block and up to 8 session blocks each)
// through an LRU of 4096 blocks, streaming past 100 k rows; "off" is the
// same rows without session or blocks.
func BenchmarkSessionsPrefixCache(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "off"
		if on {
			name = "on"
		}
		b.Run(name, func(b *testing.B) { benchSessions(b, on) })
	}
}

func benchSessions(b *testing.B, on bool) {
	const n = 1_000_000
	for b.Loop() {
		o := DefaultOptions()
		o.ExactRows, o.KVBlocks, o.BlockSize = 100_000, 4096, 512
		a, err := New(o)
		if err != nil {
			b.Fatal(err)
		}
		r := rec(0, 0, 0, 50*ms, 500*ms, 4096, 16, 4)
		blocks := make([]int64, 0, 9)
		for i := range n {
			s, turn := int64(i/512*64+i%64), int32(i/64%8+1)
			sent := int64(i) * int64(ms)
			r.Seq, r.ScheduledNs, r.SentNs, r.FirstTokenNs, r.LastTokenNs = int64(i), sent, sent, sent+int64(50*ms), sent+int64(500*ms)
			if on {
				blocks = append(blocks[:0], 1)
				for j := range turn {
					blocks = append(blocks, s<<4|int64(j))
				}
				r.Session, r.Turn, r.PrefixBlocks, r.ServerCachedTokens = s+1, turn, blocks, 512
			}
			a.Add(&r)
		}
		if _, err := a.Close(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/row")
}
