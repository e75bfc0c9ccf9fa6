package capture

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	benchOnce              sync.Once
	benchUsage, benchNoUse []byte
	benchLines             int
)

// benchData is 20 s of sample logs with usage numbers, and the same logs
// with usage removed (so every prompt and output is tokenized).
func benchData(b *testing.B) ([]byte, []byte, int) {
	benchOnce.Do(func() {
		benchUsage = sampleLogs(b, 11, 20*time.Second)
		var sb bytes.Buffer
		for _, line := range strings.Split(strings.TrimSpace(string(benchUsage)), "\n") {
			var m map[string]any
			json.Unmarshal([]byte(line), &m)
			if resp, ok := m["response"].(map[string]any); ok {
				delete(resp, "usage")
			}
			out, _ := json.Marshal(m)
			sb.Write(out)
			sb.WriteByte('\n')
			benchLines++
		}
		benchNoUse = sb.Bytes()
	})
	return benchUsage, benchNoUse, benchLines
}

func benchCapture(b *testing.B, data []byte, lines int, blockSize int) {
	o := DefaultOptions()
	o.BlockSize = blockSize
	// Warm the tokenizer outside the timer.
	if _, err := CountTokens(o.Tokenizer, "warm up"); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := 0; i < b.N; i++ {
		res, err := Capture(context.Background(), o, []Input{{R: bytes.NewReader(data)}})
		if err != nil || len(res.Records) != lines {
			b.Fatalf("%v, %d records", err, len(res.Records))
		}
	}
	cpu := (cpuTime() - cpu0).Seconds()
	b.ReportMetric(float64(lines)*float64(b.N)/b.Elapsed().Seconds(), "lines/s")
	// Per CPU-second figures stay honest on a loaded machine, where wall
	// time includes waiting for a core. GC work on other threads counts too.
	b.ReportMetric(float64(len(data))*float64(b.N)/cpu/1e6, "MB/cpu-s")
	b.ReportMetric(float64(lines)*float64(b.N)/cpu, "lines/cpu-s")
}

// Usage numbers present, no prefix blocks: only system prompts are
// tokenized (once per category).
func BenchmarkCaptureUsage(b *testing.B) {
	u, _, n := benchData(b)
	benchCapture(b, u, n, 0)
}

// Usage numbers present, prefix blocks of 512 (the default): every prompt
// is tokenized (each distinct message once).
func BenchmarkCaptureUsageBlocks(b *testing.B) {
	u, _, n := benchData(b)
	benchCapture(b, u, n, DefaultBlockSize)
}

// No usage numbers: every prompt and output is tokenized.
func BenchmarkCaptureTokenize(b *testing.B) {
	_, t, n := benchData(b)
	benchCapture(b, t, n, 0)
}

// Raw tokenizer throughput on distinct text (no memoization).
func BenchmarkTiktokenO200k(b *testing.B) {
	enc, err := encoder(DefaultTokenizer)
	if err != nil {
		b.Fatal(err)
	}
	benchTokenizer(b, func(text string) { enc.EncodeOrdinary(text) })
}

// benchTokenizer runs encode on 1 MiB of the benchmark's distinct text per
// iteration and reports bytes/s and MB per CPU-second.
func benchTokenizer(b *testing.B, encode func(text string)) {
	u, _, _ := benchData(b)
	text := string(u[:1<<20])
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := 0; i < b.N; i++ {
		encode(text)
	}
	b.ReportMetric(float64(len(text))*float64(b.N)/(cpuTime()-cpu0).Seconds()/1e6, "MB/cpu-s")
}
