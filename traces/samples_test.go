package traces_test

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/tokentrace/tokentrace/traces"
)

func sampleSeries() []traces.MetricsSample {
	a := traces.NewMetricsSample(0)
	a.Waiting, a.Running, a.KVCacheUsage = 0, 2, 0.125
	b := traces.NewMetricsSample(250_000_000)
	b.IntervalNs = 250_000_000
	b.Waiting, b.Running, b.KVCacheUsage, b.PrefixHitRate = 7, 16, 0.98, 0.5
	b.Preemptions, b.RequestsFinished, b.PromptTokens, b.GenerationTokens = 3, 4, 4096, 512
	b.QueueTimeMeanNs, b.PrefillTimeMeanNs, b.DecodeTimeMeanNs = 1_800_000_000, 300_000_000, 2_100_000_000
	d := b
	d.Instance, d.Waiting = "10.0.0.7:8000", 5
	d.Role, d.KVTransferTimeMeanNs, d.KVTransfers, d.Routed = "decode", 12_500_000, 6, 9
	c := traces.NewMetricsSample(500_000_000)
	c.ScrapeError = `GET /metrics: status 503, "quoted", comma`
	return []traces.MetricsSample{a, b, c, d}
}

// TestSamplesWithoutInstanceColumn reads a Parquet series written before
// the instance column existed: every row is a pooled row (instance "");
// nor had it the fleet's columns, which read as not reported (not zero)
// and no role.
func TestSamplesWithoutInstanceColumn(t *testing.T) {
	type oldSample struct {
		TimeNs      int64  `parquet:"time_ns,delta"`
		Waiting     int64  `parquet:"waiting,delta"`
		ScrapeError string `parquet:"scrape_error,dict"`
	}
	name := filepath.Join(t.TempDir(), "old.metrics.parquet")
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	var opts []parquet.WriterOption
	m := traces.NewMeta("replay:metrics")
	m.SchemaVersion = traces.SchemaVersion
	for _, kv := range m.KeyValues() {
		opts = append(opts, parquet.KeyValueMetadata(kv[0], kv[1]))
	}
	w := parquet.NewGenericWriter[oldSample](f, opts...)
	if _, err := w.Write([]oldSample{{TimeNs: 0, Waiting: 3}, {TimeNs: 1e9, Waiting: 9}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	got, _, err := traces.ReadSamples(name)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[1].Waiting != 9 || got[0].Instance != "" || got[1].Instance != "" {
		t.Errorf("old series read as %+v", got)
	}
	for _, x := range got {
		if x.Role != "" || x.KVTransferTimeMeanNs != traces.NotReported || x.KVTransfers != traces.NotReported || x.Routed != traces.NotReported {
			t.Errorf("old series: fleet columns read as role %q, KV transfer %d ns × %d, routed %d; want none and not reported", x.Role, x.KVTransferTimeMeanNs, x.KVTransfers, x.Routed)
		}
	}
}

func TestSamplesRoundTrip(t *testing.T) {
	dir := t.TempDir()
	want := sampleSeries()
	meta := traces.NewMeta("replay:metrics")
	meta.Set("metrics_url", "http://127.0.0.1:8000/metrics")
	for _, ext := range []string{".parquet", ".jsonl", ".jsonl.zst", ".csv", ".csv.zst"} {
		t.Run(ext, func(t *testing.T) {
			name := filepath.Join(dir, "results.metrics"+ext)
			if err := traces.WriteSamples(name, meta, want); err != nil {
				t.Fatalf("WriteSamples(%s) = %v", ext, err)
			}
			got, m, err := traces.ReadSamples(name)
			if err != nil {
				t.Fatalf("ReadSamples(%s) = %v", ext, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("ReadSamples(%s) =\n%+v\nwant\n%+v", ext, got, want)
			}
			if m.Source != "replay:metrics" || m.Get("metrics_url") != "http://127.0.0.1:8000/metrics" || m.SchemaVersion != traces.SchemaVersion {
				t.Errorf("ReadSamples(%s) meta = %+v", ext, m)
			}
		})
	}
}

func TestSamplesEmptySeries(t *testing.T) {
	dir := t.TempDir()
	for _, ext := range []string{".parquet", ".jsonl", ".csv"} {
		name := filepath.Join(dir, "empty"+ext)
		if err := traces.WriteSamples(name, traces.NewMeta("x"), nil); err != nil {
			t.Fatalf("WriteSamples(%s, nil) = %v", ext, err)
		}
		got, _, err := traces.ReadSamples(name)
		if err != nil || len(got) != 0 {
			t.Errorf("ReadSamples(%s) = %v, %v; want empty", ext, got, err)
		}
	}
}

func TestSamplesErrors(t *testing.T) {
	dir := t.TempDir()
	// An unknown extension is refused before anything is created.
	if err := traces.WriteSamples(filepath.Join(dir, "x.txt"), traces.NewMeta(""), nil); !errors.Is(err, traces.ErrUnknownFormat) {
		t.Errorf("WriteSamples(x.txt) = %v, want ErrUnknownFormat", err)
	}
	// A malformed JSONL row names its line.
	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, []byte("{\"time_ns\":1}\nnot json\n"), 0o644)
	_, _, err := traces.ReadSamples(bad)
	var re *traces.RowError
	if !errors.As(err, &re) || re.Line != 2 {
		t.Errorf("ReadSamples(bad.jsonl) = %v, want a RowError on line 2", err)
	}
	// A CSV that is a trace, not a series, is refused.
	trace := filepath.Join(dir, "trace.csv")
	os.WriteFile(trace, []byte("seq,arrival_ns\n1,2\n"), 0o644)
	if _, _, err := traces.ReadSamples(trace); !errors.Is(err, traces.ErrUnknownFormat) {
		t.Errorf("ReadSamples(trace.csv) = %v, want ErrUnknownFormat", err)
	}
	// A results file (records, not samples) is refused, in Parquet and JSONL.
	for _, ext := range []string{".parquet", ".jsonl"} {
		name := filepath.Join(dir, "results"+ext)
		rec := traces.NewRecord()
		rec.Seq = 1
		if err := traces.WriteAll(name, traces.NewMeta("replay"), []traces.Record{rec}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := traces.ReadSamples(name); err == nil {
			t.Errorf("ReadSamples(results%s) = nil error, want a refusal", ext)
		}
	}
	// A file of another schema major is refused.
	future := filepath.Join(dir, "future.jsonl")
	os.WriteFile(future, []byte(`{"tokentrace_meta":{"schema_version":"9.0"}}`+"\n"), 0o644)
	if _, _, err := traces.ReadSamples(future); !errors.Is(err, traces.ErrSchemaVersion) {
		t.Errorf("ReadSamples(future.jsonl) = %v, want ErrSchemaVersion", err)
	}
}

func TestSamplesPathFor(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"results.parquet", "results.metrics.parquet"},                 // the usual case
		{"out/run1.jsonl", "out/run1.metrics.parquet"},                 // any results codec
		{"out/run1.jsonl.zst", "out/run1.metrics.parquet"},             // compressed ones too
		{"results", "results.metrics.parquet"},                         // no extension
		{"-", "metrics.parquet"},                                       // stdout results
		{"a.b/results.CSV", "a.b/results.metrics.parquet"},             // case-insensitive
		{"results.parquet.bak", "results.parquet.bak.metrics.parquet"}, // unknown extension kept
	} {
		if got := traces.SamplesPathFor(c.in); got != c.want {
			t.Errorf("SamplesPathFor(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func FuzzReadSamples(f *testing.F) {
	f.Add([]byte("{\"tokentrace_meta\":{\"schema_version\":\"1.0\"}}\n{\"time_ns\":1,\"waiting\":3}\n"))
	f.Add([]byte("#tokentrace {}\ntime_ns,waiting\n1,2\n"))
	f.Add([]byte("PAR1garbage"))
	f.Fuzz(func(t *testing.T, b []byte) {
		name := filepath.Join(t.TempDir(), "f")
		if err := os.WriteFile(name, b, 0o644); err != nil {
			t.Fatal(err)
		}
		traces.ReadSamples(name) // must not panic
	})
}

// BenchmarkWriteSamplesHour writes one hour of 250 ms samples (14,400 rows)
// in each codec and reports the file size.
func BenchmarkWriteSamplesHour(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	s := make([]traces.MetricsSample, 14400)
	waiting := int64(0)
	for i := range s {
		x := traces.NewMetricsSample(int64(i) * 250e6)
		x.IntervalNs = 250e6
		waiting = max(0, waiting+int64(rng.IntN(5))-2)
		x.Waiting, x.Running, x.KVCacheUsage, x.PrefixHitRate = waiting, int64(rng.IntN(64)), rng.Float64(), rng.Float64()
		x.Preemptions, x.RequestsFinished = int64(rng.IntN(2)), int64(rng.IntN(20))
		x.QueueTimeMeanNs, x.PrefillTimeMeanNs, x.DecodeTimeMeanNs = rng.Int64N(1e9), rng.Int64N(1e9), rng.Int64N(1e10)
		x.PromptTokens, x.GenerationTokens = rng.Int64N(50000), rng.Int64N(5000)
		s[i] = x
	}
	for _, ext := range []string{".parquet", ".jsonl", ".csv"} {
		b.Run(ext[1:], func(b *testing.B) {
			name := filepath.Join(b.TempDir(), "m"+ext)
			for b.Loop() {
				if err := traces.WriteSamples(name, traces.NewMeta("bench"), s); err != nil {
					b.Fatal(err)
				}
			}
			st, err := os.Stat(name)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(st.Size()), "bytes/file")
		})
	}
}
