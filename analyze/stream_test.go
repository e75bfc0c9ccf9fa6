package analyze

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// streamRun is n varied result rows in send order: two classes, 3 %
// failures, lateness both early and late, TTFT and E2E spread over three
// decades, a few single-token outputs (no TPOT).
func streamRun(n int) []traces.Record {
	rng := rand.New(rand.NewPCG(7, 9))
	recs := make([]traces.Record, 0, n)
	for i := range n {
		sent := time.Duration(i)*2*ms + ms // after the latest negative lateness: no time before the run start
		if i%33 == 5 {
			recs = append(recs, failed(int64(i), sent, traces.StatusHTTPError))
			continue
		}
		late := time.Duration(rng.IntN(4000)-1000) * time.Microsecond
		ttft := time.Duration(20e6 * math.Exp(2*rng.NormFloat64()*0.6))
		if ttft < time.Millisecond {
			ttft = time.Millisecond
		}
		out := int32(1 + rng.IntN(60))
		e2e := ttft + time.Duration(out)*time.Duration(15+rng.IntN(30))*ms
		r := rec(int64(i), sent, late, ttft, e2e, int32(100+rng.IntN(2000)), out, 4)
		r.Class = []string{"interactive", "batch"}[i%2]
		recs = append(recs, r)
	}
	return recs
}

func analyzeWith(t *testing.T, recs []traces.Record, exactRows int) *Report {
	t.Helper()
	o := DefaultOptions()
	o.SLO = traces.SLO{TTFT: 40 * ms, E2E: 900 * ms}
	o.By = ByClass
	o.ExactRows = exactRows
	rep := mustAnalyze(t, recs, o)
	return rep
}

func jsonOf(t *testing.T, rep *Report) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := rep.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestExactRowsBudgetNotReached: a budget the input fits leaves the report
// exactly as without one.
func TestExactRowsBudgetNotReached(t *testing.T) {
	recs := streamRun(3000)
	want := jsonOf(t, analyzeWith(t, recs, DefaultExactRows))
	for _, budget := range []int{len(recs), len(recs) + 1} {
		rep := analyzeWith(t, recs, budget)
		if rep.Sampling != nil {
			t.Errorf("budget %d: sampling %+v for %d rows", budget, rep.Sampling, len(recs))
		}
		if got := jsonOf(t, rep); !bytes.Equal(got, want) {
			t.Errorf("budget %d: report differs from the default one", budget)
		}
	}
}

// TestExactRowsStreaming: past the budget, the counts, tokens and goodput
// stay exact, every percentile is within the stated relative error of the
// exact one, the report says it is approximate (JSON, text, HTML), and the
// sample never holds more rows than the budget.
func TestExactRowsStreaming(t *testing.T) {
	recs := streamRun(20000)
	exact := analyzeWith(t, recs, DefaultExactRows)
	const budget = 1000
	rep := analyzeWith(t, recs, budget)

	s := rep.Sampling
	if s == nil {
		t.Fatal("no sampling past the budget")
	}
	if s.Rows != int64(len(recs)) || s.Kept > budget || s.Kept < budget/4 || s.OneIn < 16 || s.ExactRows != budget {
		t.Errorf("sampling %+v: want %d rows, at most %d kept (at least a quarter), one in ≥ 16", s, len(recs), budget)
	}
	if s.RelativeError != logHistRelErr || logHistRelErr > 0.0005 {
		t.Errorf("relative error %v", s.RelativeError)
	}
	checkSummary(t, "run", exact.Summary, rep.Summary)
	if len(rep.Groups) != len(exact.Groups) {
		t.Fatalf("groups %d, want %d", len(rep.Groups), len(exact.Groups))
	}
	for i := range rep.Groups {
		checkSummary(t, "group "+rep.Groups[i].Value, exact.Groups[i].Summary, rep.Groups[i].Summary)
	}
	// In send order, the peak concurrency stays exact.
	if rep.PeakConcurrency != exact.PeakConcurrency {
		t.Errorf("peak concurrency %d, want %d", rep.PeakConcurrency, exact.PeakConcurrency)
	}
	// Sampled sections: counts scaled back to the run's size.
	var sent int
	for _, w := range rep.Windows {
		sent += w.Sent
	}
	if math.Abs(float64(sent)/float64(len(recs))-1) > 0.2 {
		t.Errorf("windows count %d sends, want about %d", sent, len(recs))
	}
	wantTail := float64(exact.Attribution.TailRequests)
	if got := float64(rep.Attribution.TailRequests); got < wantTail/3 || got > wantTail*3 {
		t.Errorf("tail requests %v, want about %v", got, wantTail)
	}
	if rep.Attribution.Dominant == "" || len(rep.Attribution.Diagnosis) == 0 {
		t.Errorf("no attribution on the sample: %+v", rep.Attribution)
	}
	if c := rep.CapacityCheck(); c != nil {
		t.Errorf("capacity without options: %+v", c)
	}
	if g, w := rep.goodOutputTokens(), exact.goodOutputTokens(); g != w || g == 0 {
		t.Errorf("goodput output tokens %d, want %d", g, w)
	}
	var vj bytes.Buffer
	if err := rep.WriteVLLMJSON(&vj, DefaultVLLMOptions()); err != nil || !strings.Contains(vj.String(), `"num_prompts": 20000`) {
		t.Errorf("vllm JSON past the budget: %v %.200s", err, vj.String())
	}
	var ct bytes.Buffer
	if err := mustCompare(t, exact, rep, fastCompare(50, DefaultMaxBootstrapSample)).WriteText(&ct); err != nil || !strings.Contains(ct.String(), "Approximate B:") || strings.Contains(ct.String(), "Approximate A:") {
		t.Errorf("compare does not say which run is approximate (%v):\n%.300s", err, ct.String())
	}

	js := string(jsonOf(t, rep))
	for _, want := range []string{`"approx": true`, `"sampling": {`, `"one_in": `, `"relative_error": `} {
		if !strings.Contains(js, want) {
			t.Errorf("JSON lacks %s", want)
		}
	}
	var txt, html bytes.Buffer
	if err := rep.WriteText(&txt); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"TTFT~", "E2E~", "lateness~", "Approximate ", "1-in-"} {
		if !strings.Contains(txt.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, txt.String())
		}
	}
	if err := rep.WriteHTML(&html); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(html.String(), "Approximate:") || !strings.Contains(html.String(), "TTFT ~") {
		t.Errorf("HTML does not say it is approximate")
	}
	// Per-request attribution past the budget is refused with one error
	// that names the option (the library knows no flags).
	var errs []error
	for _, err := range rep.PerRequest() {
		errs = append(errs, err)
	}
	var oe *traces.OptionError
	if len(errs) != 1 || !errors.As(errs[0], &oe) || oe.Option != "Options.ExactRows" || strings.Contains(errs[0].Error(), "--") {
		t.Errorf("per-request attribution past the budget: %v, want one option error naming Options.ExactRows and no flag", errs)
	}
	// vLLM percentiles come from the sketch, any percentile.
	m := rep.vllmMetric(VLLMTTFT)
	p75 := Quantile(exact.samples.ttft, 0.75) * msPerNs
	if got := m.percentile(75); math.Abs(got-p75) > 2*logHistRelErr*p75 {
		t.Errorf("vllm p75 TTFT %v, want %v", got, p75)
	}
}

// checkSummary compares a streamed Summary with the exact one.
func checkSummary(t *testing.T, what string, want, got Summary) {
	t.Helper()
	if got.Requests != want.Requests || got.Completed != want.Completed || got.Failed != want.Failed ||
		got.InputTokens != want.InputTokens || got.OutputTokens != want.OutputTokens {
		t.Errorf("%s: counts %d/%d/%d tokens %d/%d, want %d/%d/%d %d/%d", what, got.Requests, got.Completed, got.Failed,
			got.InputTokens, got.OutputTokens, want.Requests, want.Completed, want.Failed, want.InputTokens, want.OutputTokens)
	}
	for k, v := range want.ByStatus {
		if got.ByStatus[k] != v {
			t.Errorf("%s: by status %v, want %v", what, got.ByStatus, want.ByStatus)
		}
	}
	if got.DurationS != want.DurationS || got.Throughput != want.Throughput {
		t.Errorf("%s: duration %v throughput %+v, want %v %+v", what, got.DurationS, got.Throughput, want.DurationS, want.Throughput)
	}
	if got.GoodRequests == nil || *got.GoodRequests != *want.GoodRequests || *got.Goodput != *want.Goodput || *got.GoodRatio != *want.GoodRatio {
		t.Errorf("%s: goodput differs", what)
	}
	dists := []struct {
		name      string
		want, got Dist
		approx    bool
	}{
		{"ttft", want.TTFT, got.TTFT, true}, {"ttft_sched", want.TTFTScheduled, got.TTFTScheduled, true},
		{"tpot", want.TPOT, got.TPOT, true}, {"e2e", want.E2E, got.E2E, true}, {"e2e_sched", want.E2EScheduled, got.E2EScheduled, true},
		{"lateness", want.Lateness, got.Lateness, true}, {"itl", want.ITL, got.ITL, false}, {"itl_tok", want.ITLPerToken, got.ITLPerToken, false},
	}
	for _, d := range dists {
		if d.want.Count == 0 { // the group of failures only
			if d.got != (Dist{}) {
				t.Errorf("%s %s: %+v, want empty", what, d.name, d.got)
			}
			continue
		}
		if d.got.Approx != d.approx || d.got.Count != d.want.Count {
			t.Errorf("%s %s: approx %v count %d, want approx %v count %d", what, d.name, d.got.Approx, d.got.Count, d.approx, d.want.Count)
		}
		close := func(f string, g, w, rel float64) {
			if math.Abs(g-w) > rel*math.Abs(w)+1e-9 {
				t.Errorf("%s %s.%s = %v, want %v (relative error %.2g > %.2g)", what, d.name, f, g, w, math.Abs(g-w)/math.Abs(w), rel)
			}
		}
		close("min", d.got.Min, d.want.Min, 0)
		close("max", d.got.Max, d.want.Max, 0)
		close("mean", d.got.Mean, d.want.Mean, 1e-9)
		close("std", d.got.Std, d.want.Std, 1e-6)
		// the bound, relative to the larger of the interpolated order
		// statistics (lateness changes sign).
		for _, p := range []struct {
			n    string
			g, w float64
		}{{"p50", d.got.P50, d.want.P50}, {"p90", d.got.P90, d.want.P90}, {"p95", d.got.P95, d.want.P95}, {"p99", d.got.P99, d.want.P99}, {"p999", d.got.P999, d.want.P999}} {
			if math.Abs(p.g-p.w) > logHistRelErr*math.Max(math.Abs(p.w), 0.001)+1e-9 {
				t.Errorf("%s %s.%s = %v, want %v within %.2g relative", what, d.name, p.n, p.g, p.w, logHistRelErr)
			}
		}
	}
}

// TestExactRowsSampleBounded: the kept rows never pass the budget while
// rows stream in, and the sample is chosen by content, not order: the same
// rows shuffled keep the same sample and percentiles. Out of send order the
// peak concurrency is estimated on the sample, and says so.
func TestExactRowsSampleBounded(t *testing.T) {
	recs := streamRun(5000)
	const budget = 300
	o := DefaultOptions()
	o.ExactRows, o.KeepRequests = budget, true
	a := mustNew(t, o)
	for i := range recs {
		a.Add(&recs[i])
		if a.rows.n > budget || len(a.reqIDs) != a.rows.n {
			t.Fatalf("after %d rows: %d kept, %d ids (budget %d)", i+1, a.rows.n, len(a.reqIDs), budget)
		}
	}
	for i := range a.rows.n {
		if r := a.rows.at(i); a.reqIDs[i] != recs[r.seq].RequestID || !inSample(r, a.level) {
			t.Fatalf("kept row %d: id %q, seq %d, in sample %v", i, a.reqIDs[i], r.seq, inSample(r, a.level))
		}
	}
	rep := mustClose(t, a)
	if strings.Contains(strings.Join(rep.Sampling.Sampled, ","), "peak") {
		t.Errorf("in send order the peak is exact, sampling says %v", rep.Sampling.Sampled)
	}
	shuf := append([]traces.Record(nil), recs...)
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(shuf), func(i, j int) { shuf[i], shuf[j] = shuf[j], shuf[i] })
	o.KeepRequests = false
	rep2 := mustAnalyze(t, shuf, o)
	if rep2.Sampling.Kept != rep.Sampling.Kept || rep2.Sampling.OneIn != rep.Sampling.OneIn {
		t.Errorf("shuffled: kept %d of 1 in %d, want %d of 1 in %d", rep2.Sampling.Kept, rep2.Sampling.OneIn, rep.Sampling.Kept, rep.Sampling.OneIn)
	}
	if rep2.TTFT.P99 != rep.TTFT.P99 || rep2.E2E.P50 != rep.E2E.P50 || rep2.Attribution.TailThresholdMs != rep.Attribution.TailThresholdMs {
		t.Errorf("shuffled: p99 TTFT %v, p50 E2E %v, tail ≥ %v; want %v, %v, %v", rep2.TTFT.P99, rep2.E2E.P50, rep2.Attribution.TailThresholdMs,
			rep.TTFT.P99, rep.E2E.P50, rep.Attribution.TailThresholdMs)
	}
	if !strings.Contains(strings.Join(rep2.Sampling.Sampled, ","), "peak_concurrency") {
		t.Errorf("shuffled: the estimated peak is not flagged: %v", rep2.Sampling.Sampled)
	}
	var txt bytes.Buffer
	rep2.WriteText(&txt)
	if !strings.Contains(txt.String(), "peak ~") {
		t.Errorf("text does not flag the estimated peak")
	}
	var back struct {
		Sampling *Sampling `json:"sampling"`
	}
	if err := json.Unmarshal(jsonOf(t, rep2), &back); err != nil || back.Sampling == nil || back.Sampling.Kept != rep2.Sampling.Kept {
		t.Errorf("sampling JSON round trip: %v %+v", err, back.Sampling)
	}
}

// TestLogHistSigned: negative values keep the relative error bound, zero
// is exact, and the bucket order follows the value order.
func TestLogHistSigned(t *testing.T) {
	var h logHist
	var xs []float64
	rng := rand.New(rand.NewPCG(3, 4))
	for range 10000 {
		x := math.Round(rng.NormFloat64() * 1e6)
		xs = append(xs, x)
		h.add(x)
	}
	xs = append(xs, 0)
	h.add(0)
	sortFloat(xs)
	for _, p := range []float64{0, 0.001, 0.1, 0.25, 0.5, 0.75, 0.99, 1} {
		w := Quantile(xs, p)
		lo := xs[int(math.Floor(p*float64(len(xs)-1)))]
		hi := xs[min(int(math.Floor(p*float64(len(xs)-1)))+1, len(xs)-1)]
		if g := h.quantile(p); math.Abs(g-w) > logHistRelErr*math.Max(math.Abs(lo), math.Abs(hi)) {
			t.Errorf("p%v = %v, want %v within %.2g", p, g, w, logHistRelErr)
		}
	}
	for _, x := range []float64{-5e9, -1, -0.5, 0, 0.5, 1, 1.0001, 3, 5e9} {
		if v := h.value(h.bucket(x)); math.Abs(v-x) > logHistRelErr*math.Abs(x) && math.Abs(x) >= 1 {
			t.Errorf("value(bucket(%v)) = %v", x, v)
		}
	}
	if h.bucket(-3) >= h.bucket(-1) || h.bucket(-1) >= h.bucket(0) || h.bucket(0) >= h.bucket(1) {
		t.Errorf("buckets out of order")
	}
}

func sortFloat(v []float64) { s := sample{v: v}; s.sort() }

// TestAttributeGroupsFiles: the streaming per-group attribution matches
// the in-memory one.
func TestAttributeGroupsFiles(t *testing.T) {
	recs := streamRun(2000)
	p := t.TempDir() + "/r.jsonl"
	if err := traces.WriteAll(p, traces.NewMeta("replay"), recs); err != nil {
		t.Fatal(err)
	}
	o := DefaultOptions()
	o.By = ByClass
	rep := mustAnalyzeFiles(t, []string{p}, o)
	rep2, _ := AnalyzeFiles(context.Background(), []string{p}, o)
	if err := AttributeGroupsFiles(context.Background(), rep, []string{p}); err != nil {
		t.Fatal(err)
	}
	back, _, err := traces.ReadAll(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := AttributeGroups(context.Background(), rep2, back); err != nil {
		t.Fatal(err)
	}
	a, b := jsonOf(t, rep), jsonOf(t, rep2)
	if !bytes.Equal(a, b) || rep.Groups[0].Attribution == nil {
		t.Errorf("streamed group attribution differs from the in-memory one")
	}
}

// TestDrainAhead: records read a batch ahead keep their own lists (the
// reader reuses its own), every record once, and a canceled context stops
// the read.
func TestDrainAhead(t *testing.T) {
	recs := streamRun(20000)
	for _, ext := range []string{"jsonl", "parquet"} {
		p := t.TempDir() + "/r." + ext
		if err := traces.WriteAll(p, traces.NewMeta("replay"), recs); err != nil {
			t.Fatal(err)
		}
		rd, err := traces.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		// every record intact when fn sees it (Parquet sorts by arrival:
		// match by seq), each once
		seen := make([]bool, len(recs))
		k := 0
		err = drainAhead(context.Background(), rd, func(r *traces.Record) {
			w := &recs[r.Seq]
			if seen[r.Seq] || !slices.Equal(r.ChunkNs, w.ChunkNs) || !slices.Equal(r.ChunkTokens, w.ChunkTokens) || r.Status != w.Status {
				t.Fatalf("%s: record seq %d differs when added (or twice)", ext, r.Seq)
			}
			seen[r.Seq] = true
			k++
		})
		rd.Close()
		if err != nil || k != len(recs) {
			t.Fatalf("%s: %v after %d records", ext, err, k)
		}
		ctx, cancel := context.WithCancel(context.Background())
		rd, _ = traces.Open(p)
		n := 0
		err = drainAhead(ctx, rd, func(*traces.Record) {
			if n++; n == 10 {
				cancel()
			}
		})
		rd.Close()
		if err != context.Canceled || n >= len(recs) {
			t.Errorf("%s: canceled: %v after %d records", ext, err, n)
		}
	}
}
