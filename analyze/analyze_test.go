package analyze

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/internal/golden"
	"github.com/tokentrace/tokentrace/traces"
)

// small is a hand-checkable run: four successes and one failure.
func small() []traces.Record {
	return []traces.Record{
		// sent 0, on time, TTFT 100 ms, E2E 1 s, 10 tokens in chunks of 3.
		rec(0, 0, 0, 100*ms, 1000*ms, 200, 10, 3),
		// sent 200 ms, 50 ms late, TTFT 300 ms, E2E 500 ms, 5 tokens.
		rec(1, 200*ms, 50*ms, 300*ms, 500*ms, 400, 5, 1),
		// sent 600 ms: overlaps the first; a single output token (no TPOT).
		rec(2, 600*ms, 0, 200*ms, 200*ms, 100, 1, 1),
		// sent 1.5 s, alone.
		rec(3, 1500*ms, 0, 150*ms, 1500*ms, 300, 28, 4),
		failed(4, 1600*ms, traces.StatusHTTPError),
	}
}

func TestSummaryOfSmallRun(t *testing.T) {
	o := DefaultOptions()
	o.SLO = traces.SLO{TTFT: 250 * ms}
	rep := mustAnalyze(t, small(), o)
	check := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9*max(1, math.Abs(want)) {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	if rep.Requests != 5 || rep.Completed != 4 || rep.Failed != 1 || rep.ByStatus["http_error"] != 1 {
		t.Errorf("counts = %d/%d/%d %v, want 5/4/1 with one http_error", rep.Requests, rep.Completed, rep.Failed, rep.ByStatus)
	}
	// First send at −50 ms scheduled? No: duration runs from the first send
	// (0) to the last token (1.5 s + 1.5 s = 3 s).
	check("duration_s", rep.DurationS, 3)
	check("requests_per_s", rep.Throughput.RequestsPerS, 4.0/3)
	check("output_tokens_per_s", rep.Throughput.OutputTokensPerS, 44.0/3)
	// [0,1), [0.2,0.7), [0.6,0.8): three overlap at 0.6 s.
	if rep.PeakConcurrency != 3 {
		t.Errorf("peak concurrency = %d, want 3", rep.PeakConcurrency)
	}
	// TTFT 100, 300, 200, 150 → sorted 100,150,200,300: p50 = 175.
	check("ttft p50", rep.TTFT.P50, 175)
	// Scheduled view adds the 50 ms lateness of request 1: 100,150,200,350.
	check("ttft_scheduled max", rep.TTFTScheduled.Max, 350)
	check("lateness max", rep.Lateness.Max, 50)
	// TPOT: (1000−100)/9 = 100, (500−300)/4 = 50, (1500−150)/27 = 50; the
	// single-token request has none.
	if rep.TPOT.Count != 3 {
		t.Errorf("tpot count = %d, want 3", rep.TPOT.Count)
	}
	check("tpot max", rep.TPOT.Max, 100)
	// Chunks: 4 (10 tokens by 3), 5, 1 and 7 (28 by 4) → gaps 3+4+0+6 = 13.
	if rep.ITL.Count != 13 || rep.ITLPerToken.Count != 13 {
		t.Errorf("itl counts = %d, %d, want 13, 13", rep.ITL.Count, rep.ITLPerToken.Count)
	}
	// Goodput: TTFT ≤ 250 ms holds for 3 of 4 successes (and not the failure).
	if rep.Goodput == nil || *rep.GoodRequests != 3 {
		t.Fatalf("goodput = %v, want 3 good requests", rep.GoodRequests)
	}
	check("goodput", *rep.Goodput, 1)
	check("goodput ratio", *rep.GoodRatio, 0.6)
}

// With server timings, every request's components are exactly the server's,
// lateness is sent − scheduled and other is the E2E remainder.
func TestServerAttributionIsExact(t *testing.T) {
	recs := []traces.Record{
		withServer(rec(0, 10*ms, 5*ms, 100*ms, 1000*ms, 200, 10, 1), 20*ms, 70*ms, 880*ms, 0),
		withServer(rec(1, 100*ms, 0, 400*ms, 900*ms, 200, 10, 1), 350*ms, 40*ms, 490*ms, 100),
		withServer(rec(2, 200*ms, 1*ms, 50*ms, 2000*ms, 50, 100, 5), 0, 45*ms, 1940*ms, -1),
	}
	o := DefaultOptions()
	o.KeepRequests = true
	rep := mustAnalyze(t, recs, o)
	want := []RequestAttribution{
		{Seq: 0, RequestID: recs[0].RequestID, Lateness: int64(5 * ms), Queue: int64(20 * ms), Prefill: int64(70 * ms), Decode: int64(880 * ms), Other: int64(30 * ms), Source: SourceServer},
		{Seq: 1, RequestID: recs[1].RequestID, Queue: int64(350 * ms), Prefill: int64(40 * ms), Decode: int64(490 * ms), Other: int64(20 * ms), Source: SourceServer},
		{Seq: 2, RequestID: recs[2].RequestID, Lateness: int64(1 * ms), Prefill: int64(45 * ms), Decode: int64(1940 * ms), Other: int64(15 * ms), Source: SourceServer, Tail: true},
	}
	var got []RequestAttribution
	for r, err := range rep.PerRequest() {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	if len(got) != len(want) {
		t.Fatalf("got %d requests, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("request %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if a := rep.Attribution; a.Source != SourceServer || a.Dominant != "decode" || a.TailRequests != 1 {
		t.Errorf("attribution = %s/%s/%d, want server/decode/1", a.Source, a.Dominant, a.TailRequests)
	}
	// TTFT tail: request 1 (400 ms) is the tail, dominated by its queue.
	o.TailMetric = MetricTTFT
	rep = mustAnalyze(t, recs, o)
	if a := rep.Attribution; a.Dominant != "queue" || math.Abs(a.Share.Queue-350.0/400) > 1e-9 {
		t.Errorf("ttft attribution = %s share %+v, want queue 87.5%%", a.Dominant, a.Share)
	}
}

func TestBadInput(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	write := func(name string, m traces.Meta, recs []traces.Record) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := traces.WriteAll(p, m, recs); err != nil {
			t.Fatal(err)
		}
		return p
	}
	empty := write("empty.jsonl", traces.NewMeta("replay"), nil)
	trace := write("trace.jsonl", traces.NewMeta("synth"), []traces.Record{traces.NewRecord(), traces.NewRecord()})
	onlyFailed := write("failed.jsonl", traces.NewMeta("replay"), []traces.Record{failed(0, 0, traces.StatusTimeout), failed(1, ms, traces.StatusHTTPError)})
	m11 := traces.NewMeta("replay")
	m11.SchemaVersion = "1.1"
	minor := write("v11.jsonl", m11, small()[:2])
	m2 := traces.NewMeta("replay")
	m2.SchemaVersion = "2.0"
	major := write("v2.jsonl", m2, small()[:2])
	good := write("good.jsonl", traces.NewMeta("replay"), small())

	// An empty file: a clear error naming it.
	_, err := AnalyzeFiles(ctx, []string{empty}, DefaultOptions())
	if !errors.Is(err, ErrNoRequests) || !strings.Contains(err.Error(), "empty.jsonl") {
		t.Errorf("empty file: err = %v, want ErrNoRequests naming the file", err)
	}
	// A trace that was never replayed.
	_, err = AnalyzeFiles(ctx, []string{trace}, DefaultOptions())
	if !errors.Is(err, ErrNoOutcomes) {
		t.Errorf("trace without outcomes: err = %v, want ErrNoOutcomes", err)
	}
	// Only failures: a report with the counts, empty latencies and a warning.
	rep, err := AnalyzeFiles(ctx, []string{onlyFailed}, DefaultOptions())
	if err != nil {
		t.Fatalf("only failures: %v", err)
	}
	if rep.Failed != 2 || rep.Completed != 0 || rep.TTFT.Count != 0 || len(rep.Warnings) == 0 {
		t.Errorf("only failures: failed %d completed %d ttft %d warnings %q", rep.Failed, rep.Completed, rep.TTFT.Count, rep.Warnings)
	}
	for _, render := range []func(*bytes.Buffer) error{
		func(b *bytes.Buffer) error { return rep.WriteText(b) },
		func(b *bytes.Buffer) error { return rep.WriteJSON(b) },
		func(b *bytes.Buffer) error { return rep.WriteVLLM(b, DefaultVLLMOptions()) },
		func(b *bytes.Buffer) error { return rep.WriteVLLMJSON(b, DefaultVLLMOptions()) },
		func(b *bytes.Buffer) error { return rep.WriteHTML(b) },
	} {
		var b bytes.Buffer
		if err := render(&b); err != nil {
			t.Errorf("only failures: render: %v", err)
		}
	}
	// Mixed minor schema versions are read together with a warning.
	rep, err = AnalyzeFiles(ctx, []string{good, minor}, DefaultOptions())
	if err != nil || rep.Requests != 7 || !strings.Contains(strings.Join(rep.Warnings, " "), "schema versions") {
		t.Errorf("mixed minor versions: err %v, requests %v, warnings %q", err, rep, rep.Warnings)
	}
	// An unknown major version is refused with the file's name.
	_, err = AnalyzeFiles(ctx, []string{good, major}, DefaultOptions())
	if !errors.Is(err, traces.ErrSchemaVersion) || !strings.Contains(err.Error(), "v2.jsonl") {
		t.Errorf("major version 2: err = %v, want ErrSchemaVersion naming v2.jsonl", err)
	}
	// A missing file.
	_, err = AnalyzeFiles(ctx, []string{filepath.Join(dir, "nope.parquet")}, DefaultOptions())
	if err == nil || !strings.Contains(err.Error(), "nope.parquet") {
		t.Errorf("missing file: err = %v", err)
	}
	// Bad options name the option.
	bad := DefaultOptions()
	bad.By = "user"
	if _, err := New(bad); err == nil || !strings.Contains(err.Error(), "Options.By") {
		t.Errorf("bad --by: err = %v", err)
	}
}

// A million rows (in a Parquet file) analyze without trouble.
func TestMillionRowFile(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("a million rows: skipped with -short and -race (see BenchmarkAnalyze10M)")
	}
	p := filepath.Join(t.TempDir(), "million.parquet")
	w, err := traces.Create(p, traces.NewMeta("replay"))
	if err != nil {
		t.Fatal(err)
	}
	batch := make([]traces.Record, 0, 10000)
	for i := range 1_000_000 {
		batch = append(batch, rec(int64(i), time.Duration(i)*ms, 0, time.Duration(50+i%97)*ms, time.Duration(500+i%991)*ms, int32(100+i%1000), 20, 4))
		if len(batch) == cap(batch) {
			if _, err := w.Write(batch); err != nil {
				t.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rep := mustAnalyzeFiles(t, []string{p}, DefaultOptions())
	if rep.Completed != 1_000_000 || rep.Attribution.TailRequests < 10_000 {
		t.Errorf("completed %d tail %d", rep.Completed, rep.Attribution.TailRequests)
	}
}

func TestVLLMFormatGolden(t *testing.T) {
	o := DefaultOptions()
	o.SLO = traces.SLO{TTFT: 250 * ms, E2E: 2 * time.Second}
	rep := mustAnalyze(t, small(), o)
	var b bytes.Buffer
	if err := rep.WriteVLLM(&b, DefaultVLLMOptions()); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "vllm_default.golden"), b.Bytes())
	b.Reset()
	vo := DefaultVLLMOptions()
	vo.PercentileMetrics, vo.MetricPercentiles = []string{"ttft", "tpot", "itl", "e2el"}, []float64{50, 90, 99, 99.9}
	vo.MaxConcurrency, vo.RequestRate = 8, 2.5
	if err := rep.WriteVLLM(&b, vo); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "vllm_all.golden"), b.Bytes())
	// Every line is "{:<40} {:<10}" or a 50-wide rule, as vLLM prints.
	for _, line := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
		if len(line) != 50 && len(line) < 51 {
			t.Errorf("line %q is %d wide, want 50 (rule) or ≥ 51", line, len(line))
		}
	}
	b.Reset()
	vo.Date = "20260101-000000"
	if err := rep.WriteVLLMJSON(&b, vo); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "vllm_save_result.golden"), b.Bytes())
	var m map[string]any
	if err := json.Unmarshal(b.Bytes(), &m); err != nil {
		t.Fatalf("save-result JSON does not parse: %v", err)
	}
	for _, k := range []string{"date", "duration", "completed", "failed", "request_throughput", "request_goodput", "output_throughput",
		"total_token_throughput", "latencies", "max_concurrent_requests", "mean_ttft_ms", "median_ttft_ms", "std_ttft_ms", "p99_ttft_ms", "p99.9_itl_ms", "p50_e2el_ms"} {
		if _, ok := m[k]; !ok {
			t.Errorf("save-result JSON lacks %q", k)
		}
	}
}

// The --percentile-metrics and --metric-percentiles lists: items are
// trimmed, empty ones skipped, and the first bad one named.
func TestParseVLLMLists(t *testing.T) {
	for _, c := range []struct {
		doc, metrics, percentiles string
		wantMetrics               []string
		wantPercentiles           []float64
		wantErr                   string
	}{
		{doc: "Both lists read their items in order.", metrics: "ttft,e2el", percentiles: "50,99.9",
			wantMetrics: []string{"ttft", "e2el"}, wantPercentiles: []float64{50, 99.9}},
		{doc: "Spaces around items and empty items are passed over.", metrics: " itl, ,tpot,", percentiles: " 90 ,,",
			wantMetrics: []string{"itl", "tpot"}, wantPercentiles: []float64{90}},
		{doc: "An empty list is no items.", wantMetrics: nil, wantPercentiles: nil},
		{doc: "An unknown metric is named.", metrics: "ttft,goodput", wantErr: `percentile metric "goodput"`},
		{doc: "A percentile outside (0, 100] is named.", percentiles: "50,100.5", wantErr: `percentile "100.5"`},
		{doc: "A percentile that is not a number is named.", percentiles: "p99", wantErr: `percentile "p99"`},
	} {
		ms, err1 := ParseVLLMMetrics(c.metrics)
		ps, err2 := ParsePercentiles(c.percentiles)
		if err := errors.Join(err1, err2); c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%s got error %v, want one containing %s", c.doc, err, c.wantErr)
			}
			continue
		} else if err != nil {
			t.Errorf("%s got error %v", c.doc, err)
			continue
		}
		if !slices.Equal(ms, c.wantMetrics) || !slices.Equal(ps, c.wantPercentiles) {
			t.Errorf("%s got %q and %v, want %q and %v", c.doc, ms, ps, c.wantMetrics, c.wantPercentiles)
		}
	}
}

func TestJSONKeysAreStable(t *testing.T) {
	o := DefaultOptions()
	o.SLO = traces.SLO{TTFT: 250 * ms}
	rep := mustAnalyze(t, small(), o)
	var b bytes.Buffer
	if err := rep.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	get := func(path string) any {
		var v any = m
		for _, k := range strings.Split(path, ".") {
			mm, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = mm[k]
		}
		return v
	}
	for _, k := range []string{"requests", "completed", "failed", "duration_s", "ttft_ms.mean", "ttft_ms.std", "ttft_ms.p50", "ttft_ms.p90",
		"ttft_ms.p95", "ttft_ms.p99", "ttft_ms.p999", "ttft_ms.max", "tpot_ms.p99", "itl_ms.p50", "e2e_ms.p99", "lateness_ms.max",
		"throughput.requests_per_s", "throughput.output_tokens_per_s", "goodput", "attribution.tail_percentile",
		"attribution.tail_requests", "attribution.source", "attribution.share.lateness", "attribution.share.queue",
		"attribution.share.prefill", "attribution.share.decode", "attribution.share.other", "attribution.dominant"} {
		if get(k) == nil {
			t.Errorf("JSON lacks %s", k)
		}
	}
}

func TestTextGolden(t *testing.T) {
	o := DefaultOptions()
	o.SLO = traces.SLO{TTFT: 250 * ms}
	o.By = ByModel
	o.Window = time.Second
	rep := mustAnalyze(t, small(), o)
	var b bytes.Buffer
	if err := rep.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "text.golden"), b.Bytes())
}

// Tails with and without server timings report source "mixed"; without any,
// "estimated"; --ignore-server-timings forces "estimated".
func TestAttributionSource(t *testing.T) {
	recs := []traces.Record{
		withServer(rec(0, 0, 0, 100*ms, 3000*ms, 200, 10, 1), 20*ms, 70*ms, 2900*ms, 0),
		rec(1, 10*ms, 0, 100*ms, 2500*ms, 200, 10, 1),
		rec(2, 20*ms, 0, 100*ms, 500*ms, 200, 10, 1),
		rec(3, 30*ms, 0, 100*ms, 400*ms, 200, 10, 1),
	}
	for _, tt := range []struct {
		name   string
		o      Options
		recs   []traces.Record
		source string
	}{
		{"mixed", tailAt(50), recs, SourceMixed},
		{"estimated", tailAt(50), recs[1:], SourceEstimated},
		{"ignored", func() Options { o := tailAt(50); o.IgnoreServerTimings = true; return o }(), recs, SourceEstimated},
		{"server", tailAt(90), recs, SourceServer},
	} {
		rep := mustAnalyze(t, tt.recs, tt.o)
		if rep.Attribution.Source != tt.source {
			t.Errorf("%s: source = %s, want %s", tt.name, rep.Attribution.Source, tt.source)
		}
	}
}

// The JSON-lines per-request file holds the CSV's columns, in its order,
// with the same values, the tail marked in both.
func TestRequestsJSONLMatchesCSV(t *testing.T) {
	rep := mustAnalyze(t, []traces.Record{
		withServer(rec(0, 0, 0, 100*ms, 3000*ms, 200, 10, 1), 20*ms, 70*ms, 2900*ms, 0),
		rec(1, 10*ms, 5*ms, 100*ms, 2500*ms, 200, 10, 1),
	}, tailAt(50))
	var csvOut, jsonOut bytes.Buffer
	if err := rep.WriteRequests(&csvOut, RequestsCSV); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteRequests(&jsonOut, RequestsJSONL); err != nil {
		t.Fatal(err)
	}
	rows := strings.Split(strings.TrimSpace(csvOut.String()), "\n")[1:]
	lines := strings.Split(strings.TrimSpace(jsonOut.String()), "\n")
	if len(rows) != 2 || len(lines) != 2 {
		t.Fatalf("%d CSV rows and %d JSON lines, want 2 and 2", len(rows), len(lines))
	}
	for i, line := range lines {
		var want strings.Builder
		for k, v := range strings.Split(rows[i], ",") {
			if k > 0 {
				want.WriteString(",")
			}
			if RequestsColumns[k] == "request_id" || RequestsColumns[k] == "source" {
				v = `"` + v + `"`
			}
			want.WriteString(`"` + RequestsColumns[k] + `":` + v)
		}
		if line != "{"+want.String()+"}" {
			t.Errorf("line %d = %s, want {%s}", i, line, want.String())
		}
	}
	// The p50 tail of two requests is the slower one, seq 0 (it was not
	// marked at all: every request came out alike).
	if !strings.HasSuffix(rows[0], ",true") || !strings.HasSuffix(rows[1], ",false") {
		t.Errorf("tail column: %q, %q; want seq 0 in the tail, seq 1 not", rows[0], rows[1])
	}
}

// Thousands of --by groups summarize in one pass, and the groups' exact ITL
// values share the ITLExactLimit budget.
func TestManyGroups(t *testing.T) {
	var recs []traces.Record
	for i := range 20000 {
		r := rec(int64(i), time.Duration(i)*ms, 0, 50*ms, 150*ms, 100, 11, 1)
		r.Category = "c" + time.Duration(i%4000).String()
		recs = append(recs, r)
	}
	o := DefaultOptions()
	o.By = ByCategory
	o.ITLExactLimit = 50000
	rep := mustAnalyze(t, recs, o)
	if len(rep.Groups) != 4000 {
		t.Fatalf("groups = %d, want 4000", len(rep.Groups))
	}
	approx := 0
	for _, g := range rep.Groups {
		if g.Requests != 5 || g.ITL.Count != 50 {
			t.Fatalf("group %s: %d requests, %d ITL values; want 5, 50", g.Value, g.Requests, g.ITL.Count)
		}
		if g.ITL.Approx {
			approx++
		}
	}
	// 20000 requests · 10 gaps · 2 pools = 400 k values against a 50 k budget.
	if approx == 0 || !rep.ITL.Approx {
		t.Errorf("no group switched to its histogram (%d approx), overall approx %v", approx, rep.ITL.Approx)
	}
	if math.Abs(rep.ITL.P50-10) > 0.02 {
		t.Errorf("ITL p50 = %v, want 10 ms (±0.1 %%)", rep.ITL.P50)
	}
}
