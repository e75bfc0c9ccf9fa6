package formats_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/traces"
	"github.com/tokentrace/tokentrace/traces/formats"
)

// importBenchTraces are the shared public traces and their import formats.
var importBenchTraces = []struct{ format, file string }{
	{"mooncake", "mooncake/conversation_trace.jsonl"},
	{"mooncake", "mooncake/synthetic_trace.jsonl"},
	{"azure", "azure_llm_2023/AzureLLMInferenceTrace_code.csv"},
	{"azure", "azure_llm_2023/AzureLLMInferenceTrace_conv.csv"},
	{"splitwise", "vidur_processed/splitwise_code.csv"},
	{"splitwise", "vidur_processed/splitwise_conv.csv"},
	{"splitwise", "sarathi_sharegpt/sharegpt_8k_filtered_stats_llama2_tokenizer.csv"},
}

// BenchmarkImport measures import throughput (records/s, one goroutine)
// of each shared trace, decoding from memory so disk speed is out of it.
//
//	go test ./traces -run '^$' -bench BenchmarkImport -benchtime 20x
func BenchmarkImport(b *testing.B) {
	for _, tc := range importBenchTraces {
		name := strings.TrimSuffix(filepath.Base(tc.file), filepath.Ext(tc.file))
		b.Run(name, func(b *testing.B) {
			data, err := os.ReadFile(importSharedTrace(b, tc.file))
			if err != nil {
				b.Fatal(err)
			}
			fn, _ := formats.Importer(tc.format)
			buf := make([]traces.Record, 1024)
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			b.ResetTimer()
			var rows int64
			for b.Loop() {
				r, err := fn(bytes.NewReader(data), tc.file, openStrict(true))
				if err != nil {
					b.Fatal(err)
				}
				for {
					n, err := r.Read(buf)
					rows += int64(n)
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				r.Close()
			}
			b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// BenchmarkExportMooncake measures the mooncake exporter on the
// conversation trace.
func BenchmarkExportMooncake(b *testing.B) {
	recs, m, _, err := formats.ImportAll(context.Background(), "mooncake", importSharedTrace(b, "mooncake/conversation_trace.jsonl"), openStrict(true))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var rows int64
	for b.Loop() {
		n, err := formats.Export(context.Background(), "mooncake", io.Discard, &exportSliceReader{recs: recs, meta: m}, formats.DefaultExportOptions())
		if err != nil {
			b.Fatal(err)
		}
		rows += n
	}
	b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "records/s")
}
