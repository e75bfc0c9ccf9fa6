package formats_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/traces"
	"github.com/tokentrace/tokentrace/traces/formats"
)

// repeat reads pattern over and over, n bytes in all.
type repeat struct {
	pattern []byte
	n, off  int64
}

func (r *repeat) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), r.n)]
	// The pattern from where the last read left it, then doubled by copy:
	// the generator costs little beside the reader it feeds.
	k := len(r.pattern)
	n := 0
	for ; n < len(p) && n < k; n++ {
		p[n] = r.pattern[(r.off+int64(n))%int64(k)]
	}
	for n < len(p) {
		n += copy(p[n:], p[:n-n%k])
	}
	r.n -= int64(len(p))
	r.off += int64(len(p))
	return len(p), nil
}

// longInput is one format's sample with one line (or JSON document) of
// about size bytes put in it: the input, the long line's number, and the
// sample the rows around it come from (read alone for the rows expected).
type longInput struct {
	format, sample string
	in             func(size int64) io.Reader
	line           int64
	alone          func() io.Reader // the sample without the long line
}

// afterFirstLine puts a long JSON object line after the sample's first
// line (a CSV's header, a JSON-lines file's first row).
func afterFirstLine(format, sample, open, close string) longInput {
	raw, err := os.ReadFile(sample)
	if err != nil {
		panic(err)
	}
	i := bytes.IndexByte(raw, '\n') + 1
	return longInput{format: format, sample: sample, line: 2,
		in: func(size int64) io.Reader {
			return io.MultiReader(bytes.NewReader(raw[:i]), strings.NewReader(open),
				&repeat{pattern: []byte("1,"), n: size}, strings.NewReader(close+"\n"), bytes.NewReader(raw[i:]))
		},
		alone: func() io.Reader { return bytes.NewReader(raw) },
	}
}

// betweenDocuments puts a long document between two copies of a sample of
// whole JSON documents.
func betweenDocuments(format, sample string) longInput {
	raw, err := os.ReadFile(sample)
	if err != nil {
		panic(err)
	}
	raw = append(bytes.TrimRight(raw, "\n"), '\n')
	line := int64(bytes.Count(raw, []byte{'\n'})) + 1
	return longInput{format: format, sample: sample, line: line,
		in: func(size int64) io.Reader {
			return io.MultiReader(bytes.NewReader(raw), strings.NewReader(`{"requests":[`),
				&repeat{pattern: []byte("1,"), n: size}, strings.NewReader("1]}\n"), bytes.NewReader(raw))
		},
		alone: func() io.Reader { return io.MultiReader(bytes.NewReader(raw), bytes.NewReader(raw)) },
	}
}

// longInputs are the importers of text formats, each with a long line in
// one of its samples. (baseten reads Parquet, whose rows are no lines: its
// pages are bounded by the Parquet reader.)
func longInputs() []longInput {
	pub := "../../testdata/publictraces/"
	obj := func(format, sample string) longInput { return afterFirstLine(format, sample, `{"hash_ids":[`, "1]}") }
	csv := func(format, sample string) longInput { return afterFirstLine(format, sample, "", "1") }
	conv := `[{"messages":[{"role":"user","content":"fix the tests"}],"prompt_tokens":12}]`
	sglang := longInput{format: "sglang-agentic", line: 1,
		in: func(size int64) io.Reader {
			return io.MultiReader(strings.NewReader(`{"conversations":[`+conv+`,[{"messages":[{"role":"user","content":"`),
				&repeat{pattern: []byte("ab"), n: size}, strings.NewReader(`"}]}],`+conv+"]}\n"))
		},
		alone: func() io.Reader { return strings.NewReader(`{"conversations":[` + conv + "," + conv + "]}\n") },
	}
	vllm := "{\"timestamp\": 0.5, \"input_length\": 10, \"output_length\": 2, \"hash_ids\": [1]}\n{\"timestamp\": 1.5, \"input_length\": 10, \"output_length\": 2, \"hash_ids\": [1, 2]}\n"
	vllmFile := func(format string) longInput {
		return longInput{format: format, line: 2,
			in: func(size int64) io.Reader {
				l := strings.SplitAfter(vllm, "\n")
				return io.MultiReader(strings.NewReader(l[0]+`{"hash_ids":[`), &repeat{pattern: []byte("1,"), n: size}, strings.NewReader("1]}\n"+l[1]))
			},
			alone: func() io.Reader { return strings.NewReader(vllm) },
		}
	}
	return []longInput{
		obj("aiperf", pub+"aiperf_mooncake_sessions.jsonl"),
		obj("aiperf-dag", pub+"aiperf_mixed_full.dag.jsonl"),
		csv("azure", "testdata/import/azure2024.csv"),
		obj("bailian", "testdata/import/bailian.jsonl"),
		csv("burstgpt", "testdata/import/burstgpt_v3.csv"),
		obj("dynamo", pub+"dynamo_request_trace.jsonl"),
		vllmFile("guidellm"),
		betweenDocuments("inference-perf", pub+"inference-perf_fan_in_dependencies.json"),
		obj("mooncake", "testdata/import/mooncake.jsonl"),
		obj("sagemaker", pub+"sagemaker_data_capture.jsonl"),
		sglang,
		obj("sglang-tokens", pub+"sglang_token_trace.jsonl"),
		csv("splitwise", "testdata/import/splitwise.csv"),
		obj("tracelab", "testdata/import/tracelab.jsonl"),
		csv("tracelab", pub+"tracelab_example_replay.csv"),
		vllmFile("vllm"),
		betweenDocuments("weka", "testdata/import/weka.json"),
	}
}

// importLong imports in and returns the rows kept and the stats.
func importLong(t testing.TB, format string, in io.Reader, o traces.OpenOptions) (int, traces.ReadStats, error) {
	t.Helper()
	r, err := formats.ImportFrom(context.Background(), format, in, "long", o)
	if err != nil {
		return 0, traces.ReadStats{}, err
	}
	defer r.Close()
	recs, err := traces.ReadFrom(r)
	return len(recs), r.Stats(), err
}

// TestImportLongLine: for every text importer, a line (or JSON document)
// of 100 MB in the middle of a good file is read past, counted as one bad
// row (too long, at its line) and the rows around it are imported as
// they are without it; the work is one pass (the bytes allocated stay
// within 3 times the limit, where holding the line would take its
// length several times over).
func TestImportLongLine(t *testing.T) {
	if testing.Short() {
		t.Skip("reads 100 MB per importer")
	}
	const size = 100_000_000
	for _, c := range longInputs() {
		name := c.format + " " + c.sample
		want, _, err := importLong(t, c.format, c.alone(), traces.DefaultOpenOptions())
		if err != nil || want == 0 {
			t.Fatalf("%s without the long line: %d rows, %v", name, want, err)
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		got, st, err := importLong(t, c.format, c.in(size), traces.DefaultOpenOptions())
		runtime.ReadMemStats(&after)
		long := st.Bad[traces.ProblemTooLong]
		if err != nil || got != want || long.Rows != 1 || !strings.Contains(fmt.Sprint(long.First), fmt.Sprintf("long:%d: too long: ", c.line)) {
			t.Errorf("%s with a 100 MB line: %d rows, %v, %d too long (first %v); want %d rows and line %d too long",
				name, got, err, long.Rows, long.First, want, c.line)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 3*traces.DefaultMaxLineBytes {
			t.Errorf("%s with a 100 MB line allocated %d MiB, want at most 3 times the limit (%d MiB)", name, alloc>>20, 3*traces.DefaultMaxLineBytes>>20)
		}
		// Under a lower limit a shorter line costs no more than the limit.
		runtime.ReadMemStats(&before)
		_, st, _ = importLong(t, c.format, c.in(size/10), withLimit(traces.DefaultOpenOptions(), false))
		runtime.ReadMemStats(&after)
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8<<20 || st.Bad[traces.ProblemTooLong].Rows != 1 {
			t.Errorf("%s with a 10 MB line under a 1 MiB limit: %d too long, allocated %d MiB; want 1 and at most 8 MiB", name, st.Bad[traces.ProblemTooLong].Rows, alloc>>20)
		}
		// Strict: the long line is the error, named by its line.
		if _, _, err := importLong(t, c.format, c.in(size/10), withLimit(traces.DefaultOpenOptions(), true)); traces.ProblemOf(err) != traces.ProblemTooLong ||
			!strings.Contains(fmt.Sprint(err), fmt.Sprintf("long:%d: ", c.line)) {
			t.Errorf("%s --strict with a 10 MB line: %v, want line %d too long", name, err, c.line)
		}
	}
}

// TestImportOnlyALongLine: a file whose one line (or JSON document) is
// over the limit is a file with one bad row, too long, in every importer
// of JSON: not an empty file, and not an error of its own (the command
// then says all its rows are too long). A CSV's one line is its header.
func TestImportOnlyALongLine(t *testing.T) {
	for _, c := range longInputs() {
		if c.sample != "" && strings.HasSuffix(c.sample, ".csv") {
			continue
		}
		in := io.MultiReader(strings.NewReader(`{"hash_ids":[`), &repeat{pattern: []byte("1,"), n: 4 << 20}, strings.NewReader("1]}\n"))
		if c.format == "sglang-agentic" { // its one document's one conversation is too long
			in = io.MultiReader(strings.NewReader(`{"conversations":[[{"messages":[{"role":"user","content":"`),
				&repeat{pattern: []byte("ab"), n: 4 << 20}, strings.NewReader(`"}]}]]}`+"\n"))
		}
		got, st, err := importLong(t, c.format, in, withLimit(traces.DefaultOpenOptions(), false))
		long := st.Bad[traces.ProblemTooLong]
		if err != nil || got != 0 || long.Rows != 1 || !strings.Contains(fmt.Sprint(long.First), "long:1: too long: ") {
			t.Errorf("%s, one line of 4 MiB over a 1 MiB limit: %d rows, %v, %d too long (first %v); want line 1 too long and no error", c.format, got, err, long.Rows, long.First)
		}
	}
}

// withLimit is the defaults with a 1 MiB line limit, strict or not.
func withLimit(o traces.OpenOptions, strict bool) traces.OpenOptions {
	o.MaxLineBytes, o.Strict = 1<<20, strict
	return o
}
