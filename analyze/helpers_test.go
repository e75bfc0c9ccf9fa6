package analyze

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// tailAt is DefaultOptions with the tail at percentile p: tests start
// from the defaults and change what they mean.
func tailAt(p float64) Options {
	o := DefaultOptions()
	o.TailPercentile = p
	return o
}

// fastCompare is DefaultCompareOptions with resamples bootstrap
// resamples over at most maxSample values a side.
func fastCompare(resamples, maxSample int) CompareOptions {
	o := DefaultCompareOptions()
	o.Resamples, o.MaxSample = resamples, maxSample
	return o
}

// mustCompare is Compare of a and b with o; an error fails the test.
func mustCompare(t testing.TB, a, b *Report, o CompareOptions) *Comparison {
	t.Helper()
	c, err := Compare(a, b, o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// mustAnalyze is Analyze of recs with o; an error fails the test.
func mustAnalyze(t *testing.T, recs []traces.Record, o Options) *Report {
	t.Helper()
	rep, err := Analyze(context.Background(), recs, o)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// mustAnalyzeFiles is AnalyzeFiles of paths with o; an error fails the
// test.
func mustAnalyzeFiles(t *testing.T, paths []string, o Options) *Report {
	t.Helper()
	rep, err := AnalyzeFiles(context.Background(), paths, o)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// analyzeWithSamples is an Analyzer's report of recs and the metrics
// series samples, with o; an error fails the test.
func analyzeWithSamples(t *testing.T, recs []traces.Record, samples []traces.MetricsSample, o Options) *Report {
	t.Helper()
	a := mustNew(t, o)
	for i := range recs {
		a.Add(&recs[i])
	}
	a.AddSamples(samples)
	return mustClose(t, a)
}

// mustNew is New(o); an error fails the test.
func mustNew(t *testing.T, o Options) *Analyzer {
	t.Helper()
	a, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// mustClose is a's report; an error fails the test.
func mustClose(t *testing.T, a *Analyzer) *Report {
	t.Helper()
	rep, err := a.Close(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// textOf is rep's text report.
func textOf(t *testing.T, rep *Report) string {
	t.Helper()
	var b bytes.Buffer
	if err := rep.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// htmlOf is rep's HTML report, also written to the file
// TOKENTRACE_HTML_OUT names, if set, to look at in a browser (run the one
// test with it).
func htmlOf(t *testing.T, rep *Report) string {
	t.Helper()
	var b bytes.Buffer
	if err := rep.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	if p := os.Getenv("TOKENTRACE_HTML_OUT"); p != "" {
		if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

// chartSVG is the SVG element of page whose title starts with title ("" when
// the page has none).
func chartSVG(page, title string) string {
	i := strings.Index(page, title)
	if i < 0 {
		return ""
	}
	s := strings.LastIndex(page[:i], "<svg")
	e := strings.Index(page[i:], "</svg>")
	return page[s : i+e+len("</svg>")]
}

// rec builds a successful result row: sent at sent (scheduled late by
// lateness), first token after ttft, last token after e2e, out output tokens
// streamed in chunks of tokPerChunk evenly spaced from first to last.
func rec(seq int64, sent, lateness, ttft, e2e time.Duration, in, out, tokPerChunk int32) traces.Record {
	r := traces.NewRecord()
	r.Seq, r.InputTokens, r.OutputTokens = seq, in, out
	r.ArrivalNs = int64(sent - lateness)
	r.Status, r.HTTPStatus = traces.StatusOK, 200
	r.ScheduledNs, r.SentNs = int64(sent-lateness), int64(sent)
	r.FirstTokenNs, r.LastTokenNs = int64(sent+ttft), int64(sent+e2e)
	r.ServerPromptTokens, r.ServerOutputTokens = in, out
	if tokPerChunk <= 0 {
		tokPerChunk = 1
	}
	n := int((out + tokPerChunk - 1) / tokPerChunk)
	left := out
	for i := range n {
		t := r.FirstTokenNs
		if n > 1 {
			t += int64(e2e-ttft) * int64(i) / int64(n-1)
		}
		k := min(tokPerChunk, left)
		if i == 0 {
			k = 1 // the first chunk carries the first token
			if n == 1 {
				k = left
			}
		}
		left -= k
		r.ChunkNs = append(r.ChunkNs, t)
		r.ChunkTokens = append(r.ChunkTokens, k)
	}
	if left > 0 {
		r.ChunkTokens[len(r.ChunkTokens)-1] += left
	}
	r.RequestID = "req-" + time.Duration(seq).String()
	return r
}

// failed builds a failed row.
func failed(seq int64, sent time.Duration, status string) traces.Record {
	r := traces.NewRecord()
	r.Seq, r.InputTokens, r.OutputTokens = seq, 100, 10
	r.Status, r.HTTPStatus, r.Error = status, 503, "service unavailable"
	r.ScheduledNs, r.SentNs = int64(sent), int64(sent)
	return r
}

// withServer sets server timings.
func withServer(r traces.Record, queue, prefill, decode time.Duration, cached int32) traces.Record {
	r.ServerQueueNs, r.ServerPrefillNs, r.ServerDecodeNs = int64(queue), int64(prefill), int64(decode)
	r.ServerCachedTokens = cached
	return r
}

const ms = time.Millisecond
