package analyze

import (
	"bytes"
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

func TestCountsQuantileMatchesQuantile(t *testing.T) {
	x := []float64{1, 2, 2, 3, 7, 7, 7, 10}
	uniq := []float64{1, 2, 3, 7, 10}
	counts := []int32{1, 2, 1, 3, 1}
	for _, p := range []float64{0, 0.1, 0.5, 0.9, 0.99, 1} {
		if got, want := countsQuantile(uniq, counts, p), Quantile(x, p); math.Abs(got-want) > 1e-12 {
			t.Errorf("countsQuantile(p=%v) = %v, want %v", p, got, want)
		}
	}
}

// run makes a light-load run whose TTFT is scaled by f.
func run(seed uint64, n int, f float64) []traces.Record {
	rng := rand.New(rand.NewPCG(seed, 3))
	var recs []traces.Record
	for i := range n {
		ttft := time.Duration(f * float64(50*ms+time.Duration(rng.ExpFloat64()*float64(30*ms))))
		e2e := ttft + time.Duration(20+rng.IntN(30))*10*ms
		recs = append(recs, rec(int64(i), time.Duration(i)*200*ms, 0, ttft, e2e, int32(100+rng.IntN(500)), 30, 1))
	}
	return recs
}

func TestCompare(t *testing.T) {
	ctx := context.Background()
	base, err := Analyze(ctx, run(1, 2000, 1), DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	same, _ := Analyze(ctx, run(2, 2000, 1), DefaultOptions())
	slow, _ := Analyze(ctx, run(3, 2000, 1.5), DefaultOptions())
	base.Sources = []Source{{File: "a.parquet", Meta: traces.Meta{SchemaVersion: "1.0", Source: "replay", Extra: map[string]string{"target": "sim"}}}}
	slow.Sources = []Source{{File: "b.parquet", Meta: traces.Meta{SchemaVersion: "1.0", Source: "replay", Extra: map[string]string{"target": "vllm"}}}}
	verdict := func(c *Comparison, name string) MetricChange {
		for _, m := range c.Metrics {
			if m.Name == name {
				return m
			}
		}
		t.Fatalf("no metric %s", name)
		return MetricChange{}
	}
	fast := fastCompare(200, 1000)
	// Same process, different sample: no significant change in p50/p99.
	c := mustCompare(t, base, same, fast)
	for _, n := range []string{"ttft_ms.p50", "ttft_ms.p99", "e2e_ms.p50"} {
		if m := verdict(c, n); m.Verdict != VerdictSame || m.CILow == nil {
			t.Errorf("same process: %s verdict %s (CI %v..%v), want %s", n, m.Verdict, deref(m.CILow), deref(m.CIHigh), VerdictSame)
		}
	}
	// TTFT 1.5× slower: worse, with a CI above zero.
	fast.LabelA, fast.LabelB = "sim", "vllm"
	c = mustCompare(t, base, slow, fast)
	for _, n := range []string{"ttft_ms.p50", "ttft_ms.p99"} {
		if m := verdict(c, n); m.Verdict != VerdictWorse || *m.CILow <= 0 {
			t.Errorf("1.5× slower: %s verdict %s (CI %v..%v), want worse", n, m.Verdict, deref(m.CILow), deref(m.CIHigh))
		}
	}
	// The other way round it is better.
	if m := verdict(mustCompare(t, slow, base, fast), "ttft_ms.p50"); m.Verdict != VerdictBetter {
		t.Errorf("reverse: verdict %s, want better", m.Verdict)
	}
	// Seeded: the same inputs give the same intervals.
	c2 := mustCompare(t, base, slow, fast)
	if *verdict(c2, "ttft_ms.p99").CILow != *verdict(c, "ttft_ms.p99").CILow {
		t.Errorf("bootstrap is not deterministic for a fixed seed")
	}
	var b bytes.Buffer
	if err := c.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if !strings.HasPrefix(out, "Conclusion: vllm against sim: worse on ttft_ms.p50 +") || !strings.Contains(out, "\nMetadata that differs") || !strings.Contains(out, "  target  sim | vllm") {
		t.Errorf("compare text does not start with the conclusion, or lacks the metadata difference:\n%s", out)
	}
	if strings.Index(out, "Metadata that differs") < strings.Index(out, "Tail attribution") {
		t.Errorf("compare text puts the metadata before the tables:\n%s", out)
	}
	if !strings.Contains(out, "Tail attribution") {
		t.Errorf("compare text lacks the attribution:\n%s", out)
	}
	b.Reset()
	if err := c.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	if page := b.String(); strings.Count(page, "<svg") != 4 || strings.Contains(page, "<script") || !strings.Contains(page, "extra.target") || !strings.Contains(page, `<p class="conclusion">vllm against sim: worse on`) {
		t.Errorf("compare HTML: %d charts, want 4, no script, the metadata difference and the conclusion", strings.Count(page, "<svg"))
	}
	if p := os.Getenv("TOKENTRACE_HTML_OUT"); p != "" {
		os.WriteFile(p+".compare.html", b.Bytes(), 0o644)
	}
	t.Log("\n" + out)
}

func deref(p *float64) float64 {
	if p == nil {
		return math.NaN()
	}
	return *p
}

// TestCompareFidelity checks the synthetic-vs-real mode: a synthetic run
// drawn from the same process as the real one is "same" on every key
// metric and the conclusion says it reproduces the real run; one whose TTFT
// is 1.5× the real one "differs" on TTFT and the conclusion names it; a
// sub-millisecond lateness move is never a finding; long labels are printed
// whole.
func TestCompareFidelity(t *testing.T) {
	ctx := context.Background()
	real, _ := Analyze(ctx, run(1, 2000, 1), DefaultOptions())
	twin, _ := Analyze(ctx, run(2, 2000, 1), DefaultOptions())
	slow, _ := Analyze(ctx, run(3, 2000, 1.5), DefaultOptions())
	o := fastCompare(200, 1000)
	o.Mode, o.LabelA, o.LabelB = ModeFidelity, "demo/real.results.parquet", "demo/synth.results.parquet"
	c := mustCompare(t, real, twin, o)
	for _, m := range c.Metrics {
		if slices.Contains(conclusionMetrics, m.Name) && m.Verdict != VerdictSameWithin && m.Verdict != VerdictClose {
			t.Errorf("same process: %s %s (%+.3f)", m.Name, m.Verdict, m.Change)
		}
		if strings.HasPrefix(m.Name, "lateness_ms.") && m.Verdict != VerdictNA {
			t.Errorf("lateness %s judged %s in fidelity mode", m.Name, m.Verdict)
		}
		if m.Verdict == VerdictBetter || m.Verdict == VerdictWorse {
			t.Errorf("%s: change-mode verdict %s in fidelity mode", m.Name, m.Verdict)
		}
	}
	if !strings.HasPrefix(c.Conclusion, "demo/synth.results.parquet reproduces demo/real.results.parquet") {
		t.Errorf("same process: conclusion %q", c.Conclusion)
	}
	c = mustCompare(t, real, slow, o)
	for _, n := range []string{"ttft_ms.p50", "ttft_ms.p99"} {
		for _, m := range c.Metrics {
			if m.Name == n && m.Verdict != VerdictDiffers {
				t.Errorf("1.5× TTFT: %s %s, want differs", n, m.Verdict)
			}
		}
	}
	if !strings.Contains(c.Conclusion, "differs on ttft_ms.p50 +") {
		t.Errorf("1.5× TTFT: conclusion %q does not name TTFT", c.Conclusion)
	}
	var b bytes.Buffer
	c.WriteText(&b)
	if !strings.Contains(b.String(), "demo/synth.results.parquet") || strings.Contains(b.String(), "…") {
		t.Errorf("labels cut in the text:\n%s", b.String())
	}
	// Noise: a 0.02 ms move is no finding in either mode.
	for _, mode := range []string{ModeChange, ModeFidelity} {
		m := MetricChange{Name: "lateness_ms.p90", A: 0.05, B: 0.07, Change: 0.02, LowerIsBetter: true}
		o := DefaultCompareOptions()
		o.Mode = mode
		if v := o.verdict(&m, false); v != VerdictSame && v != VerdictClose {
			t.Errorf("%s mode: a 0.02 ms change is %q", mode, v)
		}
	}
}

// Options.Class keeps one class's rows; the others are counted in a
// warning, and a class with no row is ErrNoRequests naming it.
func TestOptionsClass(t *testing.T) {
	var recs []traces.Record
	for i := range 10 {
		r := rec(int64(i), time.Duration(i)*100*ms, 0, 50*ms, 100*ms, 10, 5, 1)
		r.Class = []string{"interactive", "batch"}[i%2]
		if i%2 == 1 {
			r.FirstTokenNs += int64(time.Second)
			r.LastTokenNs += int64(time.Second)
			for k := range r.ChunkNs {
				r.ChunkNs[k] += int64(time.Second)
			}
		}
		recs = append(recs, r)
	}
	o := DefaultOptions()
	o.Class = "interactive"
	rep := mustAnalyze(t, recs, o)
	if rep.Requests != 5 || rep.TTFT.Max != 50 || len(rep.Warnings) != 1 || !strings.Contains(rep.Warnings[0], "5 row(s) of other classes") {
		t.Errorf("class interactive: %d requests, TTFT max %v, warnings %q", rep.Requests, rep.TTFT.Max, rep.Warnings)
	}
	o.Class = "nope"
	if _, err := Analyze(context.Background(), recs, o); !errors.Is(err, ErrNoRequests) || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("class nope: %v", err)
	}
}

// compare warns when a run failed its lateness check (two of the demo's
// replays exited 3 and compare said nothing), and puts the metadata that
// differs after the tables, shortened: a JSON option value as the sub-keys
// that differ, long values cut, per-run bookkeeping by name only (the
// whole replay.options JSON and every start time led the page).
func TestCompareLatenessAndMetadata(t *testing.T) {
	run := func(lateness time.Duration, opts, target string) *Report {
		var recs []traces.Record
		for i := range 40 {
			recs = append(recs, rec(int64(i), time.Duration(i)*50*ms, lateness, 40*ms, 300*ms, 100, 10, 1))
		}
		a := mustNew(t, DefaultOptions())
		for i := range recs {
			a.Add(&recs[i])
		}
		m := traces.NewMeta("replay")
		m.Command = "tokentrace replay --out results.parquet --metadata team=serving-platform-latency trace.parquet " + target
		m.Extra = map[string]string{"replay.options": opts, "replay.started_at": "2026-11-28T13:38:" + target,
			"replay.target": "http://127.0.0.1:" + target, "run.meta.note": "a long note about this run that nobody needs whole here: " + target}
		a.AddSource(Source{File: target + ".parquet", Rows: 40, Meta: m})
		rep := mustClose(t, a)
		return rep
	}
	a := run(100*time.Microsecond, `{"api":"completions","speed":1,"sessions":"open","block_size":512}`, "34331")
	b := run(20*ms, `{"api":"completions","speed":4,"window_from":"30s","sessions":"open","block_size":512}`, "37241")
	o := fastCompare(50, DefaultMaxBootstrapSample)
	o.LabelA, o.LabelB = "before", "after"
	c := mustCompare(t, a, b, o)
	if len(c.Warnings) != 1 || !strings.HasPrefix(c.Warnings[0], "after did not keep its recorded timing: its client lateness p99 is 20.00 ms, over 5ms") {
		t.Errorf("warnings %q; want one, for after's 20 ms lateness p99", c.Warnings)
	}
	if !strings.HasPrefix(c.Conclusion, "unreliable (after: its client sent late (lateness p99 20.00 ms > 5ms)); as measured: after against before: ") {
		t.Errorf("conclusion %q: want it to begin by saying after is unreliable", c.Conclusion)
	}
	if same := mustCompare(t, a, a, fastCompare(50, DefaultMaxBootstrapSample)); len(same.Warnings) != 0 || strings.Contains(same.Conclusion, "unreliable") {
		t.Errorf("two runs that kept their timing: warnings %q, conclusion %q", same.Warnings, same.Conclusion)
	}
	var buf bytes.Buffer
	if err := c.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	warn, table, meta := strings.Index(out, "Warning: after did not keep"), strings.Index(out, "\nmetric "), strings.Index(out, "\nMetadata that differs")
	if warn < 0 || table < 0 || meta < 0 || !(warn < table && table < meta) {
		t.Fatalf("want the warning, then the table, then the metadata:\n%s", out)
	}
	tail := out[meta:]
	for _, want := range []string{"replay.options.speed        1 | 4", "replay.options.window_from  - | 30s", "run.meta.note               a long note about this run that nobody needs wh… | a long note",
		"per-run bookkeeping also differs: command, replay.started_at, replay.target"} {
		if !strings.Contains(tail, want) {
			t.Errorf("metadata section lacks %q:\n%s", want, tail)
		}
	}
	for _, not := range []string{`{"api"`, "127.0.0.1"} {
		if strings.Contains(tail, not) {
			t.Errorf("metadata section shows %q whole:\n%s", not, tail)
		}
	}
}
