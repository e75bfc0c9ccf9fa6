package traces_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/tokentrace/tokentrace/internal/testtraces"
	"github.com/tokentrace/tokentrace/traces"
	"github.com/tokentrace/tokentrace/traces/formats"
)

// sharedTraces are the public traces (see internal/testtraces) with their
// import format.
var sharedTraces = []struct{ format, path string }{
	{"azure", "azure_llm_2023/AzureLLMInferenceTrace_code.csv"},
	{"azure", "azure_llm_2023/AzureLLMInferenceTrace_conv.csv"},
	{"mooncake", "mooncake/conversation_trace.jsonl"},
	{"mooncake", "mooncake/synthetic_trace.jsonl"},
	{"splitwise", "vidur_processed/splitwise_code.csv"},
	{"splitwise", "vidur_processed/splitwise_conv.csv"},
	{"splitwise", "vidur_processed/arxiv_summarization_stats_llama2_tokenizer_filtered_v2.csv"},
	{"splitwise", "sarathi_sharegpt/sharegpt_8k_filtered_stats_llama2_tokenizer.csv"},
}

// sharedDir is the folder of the public traces ("" when absent).
var sharedDir = testtraces.Dir()

func requireShared(tb testing.TB) {
	tb.Helper()
	if sharedDir == "" {
		tb.Skipf("public traces not found: set %s to their folder (docs/traces.md)", testtraces.EnvVar)
	}
}

// parquetSize writes recs as Parquet in memory and returns the byte count.
func parquetSize(tb testing.TB, m traces.Meta, recs []traces.Record) int {
	return len(encodeAll(tb, traces.FormatParquet, m, traces.DefaultCreateOptions(), recs))
}

// compactness imports one shared trace and returns its source size, rows and
// Parquet size; ok is false when the file or importer is unavailable.
func compactness(tb testing.TB, format, rel string) (src int64, rows, pq int, ok bool) {
	path := filepath.Join(sharedDir, rel)
	fi, err := os.Stat(path)
	if err != nil {
		tb.Logf("skip %s: %v", rel, err)
		return 0, 0, 0, false
	}
	recs, m, _, err := formats.ImportAll(context.Background(), format, path, traces.DefaultOpenOptions())
	if err != nil {
		tb.Logf("skip %s: import: %v", rel, err)
		return 0, 0, 0, false
	}
	return fi.Size(), len(recs), parquetSize(tb, m, recs), true
}

// TestParquetCompactness holds the format's size target: the Azure traces take at
// most 8 bytes per request in our Parquet. BenchmarkParquetCompactness
// measures every shared trace.
func TestParquetCompactness(t *testing.T) {
	requireShared(t)
	for _, st := range sharedTraces[:2] {
		src, rows, n, ok := compactness(t, st.format, st.path)
		if !ok {
			continue
		}
		per := float64(n) / float64(rows)
		t.Logf("%s: %d rows, source %d B, parquet %d B = %.2f B/request", st.path, rows, src, n, per)
		if per > 8 {
			t.Errorf("%s: %.2f bytes/request in Parquet, want <= 8", st.path, per)
		}
	}
}

// BenchmarkParquetCompactness reports bytes per request of our Parquet
// (B/req) and of the source file (src_B/req) for every shared trace.
func BenchmarkParquetCompactness(b *testing.B) {
	requireShared(b)
	for _, st := range sharedTraces {
		b.Run(filepath.Base(st.path), func(b *testing.B) {
			var src int64
			var rows, n int
			for b.Loop() {
				var ok bool
				if src, rows, n, ok = compactness(b, st.format, st.path); !ok {
					b.Skip("unavailable")
				}
			}
			b.ReportMetric(float64(n)/float64(rows), "B/req")
			b.ReportMetric(float64(src)/float64(rows), "src_B/req")
			b.ReportMetric(float64(rows), "rows")
		})
	}
}

// benchRecords is a results-like set: request columns plus outcomes.
func benchRecords(n int, outcome bool) []traces.Record {
	return randRecords(42, n, outcome)
}

// azureRecords returns the imported Azure conv trace, or synthetic rows if
// the shared traces are absent.
func azureRecords(b *testing.B) []traces.Record {
	path := filepath.Join(sharedDir, "azure_llm_2023/AzureLLMInferenceTrace_conv.csv")
	recs, _, _, err := formats.ImportAll(context.Background(), "azure", path, traces.DefaultOpenOptions())
	if err != nil || len(recs) == 0 {
		return benchRecords(20000, false)
	}
	return recs
}

func benchRead(b *testing.B, f traces.Format, recs []traces.Record) {
	data := encodeAll(b, f, traces.NewMeta("bench"), traces.DefaultCreateOptions(), recs)
	var src io.Reader
	path := ""
	if f == traces.FormatParquet {
		// Parquet reads from a file (random access), as Open does.
		path = filepath.Join(b.TempDir(), "b.parquet")
		os.WriteFile(path, data, 0o644)
	}
	buf := make([]traces.Record, 4096)
	b.ResetTimer()
	for b.Loop() {
		var r traces.Reader
		var err error
		if path != "" {
			r, err = traces.Open(path)
		} else {
			src = bytes.NewReader(data)
			r, err = traces.NewReader(src, "bench", traces.DefaultOpenOptions())
		}
		if err != nil {
			b.Fatal(err)
		}
		total := 0
		for {
			n, err := r.Read(buf)
			total += n
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		r.Close()
		if total != len(recs) {
			b.Fatalf("read %d rows, want %d", total, len(recs))
		}
	}
	b.ReportMetric(float64(len(recs))*float64(b.N)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(len(data))/float64(len(recs)), "B/record")
}

func benchWrite(b *testing.B, f traces.Format, recs []traces.Record) {
	for b.Loop() {
		w, err := traces.NewWriter(io.Discard, f, traces.NewMeta("bench"), traces.DefaultCreateOptions())
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; i < len(recs); i += 1024 {
			if _, err := w.Write(recs[i:min(i+1024, len(recs))]); err != nil {
				b.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(recs))*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

func BenchmarkParquetRead(b *testing.B) {
	b.Run("azure_conv", func(b *testing.B) { benchRead(b, traces.FormatParquet, azureRecords(b)) })
	b.Run("results", func(b *testing.B) { benchRead(b, traces.FormatParquet, benchRecords(20000, true)) })
}

func BenchmarkParquetWrite(b *testing.B) {
	b.Run("azure_conv", func(b *testing.B) { benchWrite(b, traces.FormatParquet, azureRecords(b)) })
	b.Run("results", func(b *testing.B) { benchWrite(b, traces.FormatParquet, benchRecords(20000, true)) })
}

func BenchmarkJSONLRead(b *testing.B) {
	b.Run("azure_conv", func(b *testing.B) { benchRead(b, traces.FormatJSONL, azureRecords(b)) })
	b.Run("results", func(b *testing.B) { benchRead(b, traces.FormatJSONL, benchRecords(20000, true)) })
	b.Run("azure_conv_zst", func(b *testing.B) { benchRead(b, traces.FormatJSONLZstd, azureRecords(b)) })
}

func BenchmarkJSONLWrite(b *testing.B) {
	b.Run("azure_conv", func(b *testing.B) { benchWrite(b, traces.FormatJSONL, azureRecords(b)) })
	b.Run("results", func(b *testing.B) { benchWrite(b, traces.FormatJSONL, benchRecords(20000, true)) })
}

func BenchmarkCSVRead(b *testing.B) {
	b.Run("azure_conv", func(b *testing.B) { benchRead(b, traces.FormatCSV, azureRecords(b)) })
}
