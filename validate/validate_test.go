package validate

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/sim"
	"github.com/tokentrace/tokentrace/traces"
)

// workload makes n requests at rate req/s (Poisson, seeded). With shared
// set, every prompt starts with one of four 1536-token system prompts (a
// category prefix), as a real chat service's do; without it the prompts
// have the same lengths and share nothing, like a benchmark matrix row.
func workload(name string, n int, rate float64, shared bool, seed uint64) Workload {
	rng := rand.New(rand.NewPCG(seed, 7))
	return poisson(name, n, rate, rng, func(_ int, r *traces.Record) {
		r.InputTokens = int32(1536 + 100 + rng.IntN(300))
		r.OutputTokens = int32(64 + rng.IntN(128))
		if shared {
			r.Category = []string{"support", "search", "code", "mail"}[rng.IntN(4)]
			r.PrefixTokens = 1536
		}
	})
}

// poisson is a workload of n requests at rate req/s, their gaps drawn
// from rng (exponential), each request's seq and arrival set before fill
// sets the rest, so that fill's draws from rng follow its gap's.
func poisson(name string, n int, rate float64, rng *rand.Rand, fill func(i int, r *traces.Record)) Workload {
	w := Workload{Name: name}
	at := 0.0
	for i := range n {
		at += rng.ExpFloat64() / rate
		r := traces.NewRecord()
		r.Seq, r.ArrivalNs = int64(i), int64(at*1e9)
		fill(i, &r)
		w.Records = append(w.Records, r)
	}
	return w
}

// workloads are a real workload of n requests at rate per second, whose
// prompts share system prompts, and a synthetic one that shares none.
func workloads(n int, rate float64) (real, syn Workload) {
	return workload("real", n, rate, true, 1), workload("synthetic", n, rate, false, 2)
}

// runLogged validates the workloads of n requests at rate on the targets
// of specs and logs the text report.
func runLogged(t *testing.T, n int, rate float64, specs ...string) *Result {
	t.Helper()
	real, syn := workloads(n, rate)
	return validateLogged(t, real, syn, targeted(t, specs...))
}

func targets(t *testing.T, specs ...string) []Target {
	t.Helper()
	var ts []Target
	for _, s := range specs {
		tg, err := ParseTarget(s, sim.DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, tg)
	}
	return ts
}

// loaded is w as Run holds it.
func loaded(t *testing.T, w Workload) Workload {
	t.Helper()
	w, err := w.load()
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// records are a loaded workload's requests as records, in arrival order.
func records(w Workload) []traces.Record {
	var out []traces.Record
	for r := range w.each() {
		out = append(out, *r)
	}
	return out
}

func verdicts(res *Result) map[string]string {
	v := map[string]string{}
	for _, c := range res.Conclusions {
		v[c.Metric] = c.Verdict
	}
	return v
}

// A change whose benefit is prefix caching: b turns caching off for a 25 %
// faster prefill. The matrix-like synthetic workload (no shared prefixes)
// says b is better on TTFT; real traffic, whose prompts share system
// prompts, says the opposite, and the reason named is prefix reuse.
func TestPrefixCachingConclusionBreaks(t *testing.T) {
	res := runLogged(t, 600, 8, "a=sim", "b=sim:prefix-caching=false,prefill-per-token=30us")
	v := verdicts(res)
	for _, m := range []string{"ttft_p50", "ttft_p99"} {
		if v[m] != VerdictReversed && v[m] != VerdictMagnitudeOff {
			t.Errorf("%s: verdict %q, want reversed or magnitude off", m, v[m])
		}
	}
	if res.Holds() {
		t.Error("Holds() = true for a conclusion that breaks")
	}
	if len(res.Reasons) == 0 || res.Reasons[0].Property != "prefix reuse" {
		t.Errorf("first reason %+v, want prefix reuse", res.Reasons)
	}
	if !strings.Contains(res.Conclusion, "does not carry over") || !strings.Contains(res.Conclusion, "prefix reuse") {
		t.Errorf("conclusion %q should say the decision does not carry over and name prefix reuse", res.Conclusion)
	}
}

// A change that is better under any traffic (a GPU twice as fast in every
// part of the step): every conclusion holds. (At 8 req/s the synthetic
// workload, which caches nothing, nears saturation and overstates the gain;
// TestPrefixCachingConclusionBreaks runs there.)
func TestFasterEverywhereHolds(t *testing.T) {
	res := runLogged(t, 300, 3, "a=sim", "b=sim:step-fixed=3ms,prefill-per-token=20us,decode-per-seq=22us,attn-per-context-token=22ns")
	for m, v := range verdicts(res) {
		if v != VerdictHolds {
			t.Errorf("%s: verdict %q, want holds", m, v)
		}
	}
	if !res.Holds() || len(res.Conclusions) != 6 {
		t.Errorf("Holds() = %v over %d conclusions, want true over 6", res.Holds(), len(res.Conclusions))
	}
	for _, rk := range res.Rankings {
		if !rk.Same || rk.Real[0][0] != "b" {
			t.Errorf("%s ranking real %v synthetic %v, want b first in both", rk.Metric, rk.Real, rk.Synthetic)
		}
	}
}

// The same inputs give the same answer, byte for byte (offline
// simulation, seeded bootstrap), but for the ablation's wall time.
func TestDeterministic(t *testing.T) {
	real, syn := workloads(200, 8)
	var out [2]string
	for i := range out {
		o := targeted(t, "a=sim", "b=sim:max-num-seqs=8")
		res := mustRun(t, real, syn, o)
		if res.Ablation == nil || res.Ablation.Runs == 0 {
			t.Fatalf("ablation %+v: the test wants one run", res.Ablation)
		}
		res.Ablation.Seconds = 0
		var buf bytes.Buffer
		res.WriteJSON(&buf)
		out[i] = buf.String()
	}
	if out[0] != out[1] {
		t.Error("two runs of the same validation differ")
	}
}

func TestBadInput(t *testing.T) {
	real, syn := workloads(20, 8)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	l.Close()
	for _, tc := range []struct {
		name    string
		targets []string
		metrics string
		want    string
	}{
		{"a target nobody listens on stops the run before anything runs", []string{"a=sim", "b=" + dead}, "", "target b (" + dead + ") is not reachable"},
		{"two targets with one name", []string{"a=sim", "a=sim:max-num-seqs=8"}, "", `two targets are named "a"`},
		{"one target is nothing to compare", []string{"a=sim"}, "", "at least two"},
		{"goodput without an SLO", []string{"a=sim", "b=sim"}, "goodput", "goodput needs Options.SLO"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := targeted(t, tc.targets...)
			if tc.metrics != "" {
				o.Metrics, _ = ParseMetrics(tc.metrics)
			}
			var log bytes.Buffer
			o.Log = &log
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err := Run(ctx, real, syn, o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
			if log.Len() > 0 {
				t.Errorf("runs happened before the error: %s", log.String())
			}
		})
	}
}

func TestParseTarget(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"an unknown simulator key lists the known ones", "b=sim:max-seqs=8", `unknown key "max-seqs" (keys: preset, attn-per-context-token`},
		{"a value of the wrong type names the key", "b=sim:max-num-seqs=lots", "max-num-seqs: want a whole number"},
		{"an unknown preset lists the presets", "b=sim:preset=a100", `preset "a100" isn't one of`},
		{"a bare name is not a target", "b", "want NAME=URL or NAME=sim"},
		{"neither a URL nor sim", "b=localhost:8000", "neither a URL"},
		{"a bad name", "b c=sim", "name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseTarget(tc.in, sim.DefaultOptions())
			var oe *traces.OptionError
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.As(err, &oe) || oe.Option != "Options.Targets" {
				t.Fatalf("ParseTarget(%q) = %v, want an option error on Options.Targets containing %q", tc.in, err, tc.want)
			}
		})
	}
	tg, err := ParseTarget("b=sim:prefix-caching=false,preset=tiny,max-num-seqs=4", sim.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if !tg.Sim.DisablePrefixCaching || tg.Sim.MaxNumSeqs != 4 || tg.Sim.Preset != "tiny" || tg.Sim.MaxNumBatchedTokens != 512 {
		t.Errorf("preset applied first, keys over it: got %+v", tg.Sim)
	}
	tg, err = ParseTarget("prod=http://user:secret@127.0.0.1:8000", sim.DefaultOptions())
	if err != nil || tg.URL == "" || strings.Contains(tg.Config, "secret") {
		t.Errorf("URL target: %+v, %v (the config shown must not carry the password)", tg, err)
	}
}

func TestParseMetrics(t *testing.T) {
	ms, err := ParseMetrics("ttft_p99, e2e_p99.9,goodput")
	if err != nil || len(ms) != 3 || ms[1].Percentile != 99.9 || ms[2].Kind != "goodput" {
		t.Fatalf("got %+v, %v", ms, err)
	}
	for _, bad := range []string{"ttft", "itl_p99", "ttft_p100", "ttft_p99,ttft_p99", ""} {
		if _, err := ParseMetrics(bad); err == nil {
			t.Errorf("ParseMetrics(%q) accepted", bad)
		}
	}
	// An error quotes the item as the list's other items are read: trimmed
	// of the white space after the comma.
	want := `metric "itl_p99": want ttft_pN, tpot_pN, e2e_pN (e.g. ttft_p99) or goodput`
	if _, err := ParseMetrics("ttft_p99, itl_p99"); err == nil || err.Error() != want {
		t.Errorf("ParseMetrics with a bad second item: %v, want %s", err, want)
	}
}

// FuzzParseMetrics checks that accepted metrics are known kinds with a
// percentile strictly between 0 and 100, lower-case and each given once,
// and that an error about one metric quotes it trimmed.
func FuzzParseMetrics(f *testing.F) {
	for _, s := range []string{"ttft_p99, e2e_p99.9,goodput", "TTFT_P50", " itl_p99 ", "ttft_p99,ttft_p99", ",,", "e2e_pNaN"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ms, err := ParseMetrics(s)
		if err != nil {
			if rest, ok := strings.CutPrefix(err.Error(), "metric "); ok {
				q, qerr := strconv.QuotedPrefix(rest)
				item, _ := strconv.Unquote(q)
				if qerr != nil || item == "" || strings.TrimSpace(item) != item {
					t.Errorf("ParseMetrics(%q): %v: the metric is not quoted trimmed", s, err)
				}
			}
			return
		}
		if len(ms) == 0 {
			t.Fatalf("ParseMetrics(%q) = no metrics without an error", s)
		}
		seen := map[string]bool{}
		for _, m := range ms {
			if seen[m.Name] || m.Name != strings.ToLower(m.Name) {
				t.Errorf("ParseMetrics(%q) = %+v: %q repeated or not lower-case", s, ms, m.Name)
			}
			seen[m.Name] = true
			switch m.Kind {
			case kindGoodput:
			case traces.MetricTTFT, traces.MetricTPOT, traces.MetricE2E:
				if !(m.Percentile > 0 && m.Percentile < 100) {
					t.Errorf("ParseMetrics(%q) = %+v: percentile out of (0, 100)", s, m)
				}
			default:
				t.Errorf("ParseMetrics(%q) = %+v: unknown kind", s, m)
			}
		}
	})
}

// URL targets (and, with Realtime, simulator targets) are replayed through
// the HTTP client; every run's results land in OutDir.
func TestReplayedTargets(t *testing.T) {
	so := sim.DefaultOptions()
	so.PerRequestMetrics = true
	srv, err := sim.Start(context.Background(), so)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	real, syn := workloads(40, 40)
	for _, w := range []Workload{real, syn} { // short requests: a second per run
		for i := range w.Records {
			r := &w.Records[i]
			r.InputTokens, r.OutputTokens, r.PrefixTokens = r.InputTokens/16, r.OutputTokens/8, r.PrefixTokens/16
		}
	}
	dir := t.TempDir()
	var log bytes.Buffer
	o := with(targeted(t, "a="+srv.URL, "b=sim:max-num-seqs=4"), func(o *Options) { o.Realtime = true; o.OutDir = dir; o.Log = &log })
	o.Replay.Model = so.Model
	o.Replay.NoPreflight = true
	res := mustRun(t, real, syn, o)
	if len(res.Cells) != 4 || len(res.Conclusions) != 6 {
		t.Fatalf("%d cells, %d conclusions; want 4 and 6", len(res.Cells), len(res.Conclusions))
	}
	for _, c := range res.Cells {
		if c.Requests != 40 || c.Failed != 0 || len(c.Files) != 1 {
			t.Errorf("%s on %s: %d requests, %d failed, files %v; want 40, 0, one file", c.Workload, c.Target, c.Requests, c.Failed, c.Files)
			continue
		}
		recs, _, err := traces.ReadAll(c.Files[0])
		if err != nil || len(recs) != 40 {
			t.Errorf("%s: %d rows, %v", c.Files[0], len(recs), err)
		}
	}
	if got := strings.Count(log.String(), "validate: "); got != 4 {
		t.Errorf("log has %d run lines, want 4:\n%s", got, log.String())
	}
}

// A request longer than the simulator preset's context length (8192) is
// served, offline and replayed, because a simulated target takes the
// workload's longest request; without that it gets vLLM's 400.
func TestSimTargetTakesLongestRequest(t *testing.T) {
	w := workload("real", 3, 20, false, 3)
	w.Records[1].InputTokens, w.Records[1].OutputTokens = 9000, 8
	w = loaded(t, w)
	tg := targets(t, "a=sim")[0]
	o := DefaultOptions()
	o.Replay.NoPreflight = true
	var recs []traces.Record
	if _, err := simulate(context.Background(), w, tg, &o, "offline", func(r *traces.Record) { recs = append(recs, *r) }); err != nil {
		t.Fatal(err)
	}
	run, err := replayOnce(context.Background(), w, tg, &o, "replayed")
	if err != nil {
		t.Fatal(err)
	}
	for how, rows := range map[string][]traces.Record{"offline": recs, "replayed": run.Records} {
		for _, r := range rows {
			if r.Status != traces.StatusOK {
				t.Errorf("%s: request %d (%d input tokens): status %q, want ok", how, r.Seq, r.InputTokens, r.Status)
			}
		}
	}
}

// A workload read as a stream from a file (prefix blocks, sessions) gives
// the validation the same workload held in memory gives, byte for byte.
// (More rows than a reader's batch: a reader reuses its rows' lists.)
func TestWorkloadFromSourceIsWorkloadInMemory(t *testing.T) {
	real, syn := workloads(1500, 20)
	for i := range real.Records {
		r := &real.Records[i]
		r.PrefixBlocks = []int64{int64(1 + i%4), int64(100 + i)} // a shared first block, one of its own
		r.Session = int64(1 + i/3)
	}
	real.Meta.BlockSize = 512
	file := t.TempDir() + "/real.parquet"
	if err := traces.WriteAll(file, real.Meta, real.Records); err != nil {
		t.Fatal(err)
	}
	var out [2]string
	for k, w := range []Workload{real, {Name: "real", Source: func() (traces.Reader, error) { return traces.Open(file) }}} {
		res := mustRun(t, w, syn, with(targeted(t, "a=sim", "b=sim:prefix-caching=false"), func(o *Options) { o.Explain = ExplainNone }))
		var buf bytes.Buffer
		res.WriteJSON(&buf)
		out[k] = buf.String()
	}
	if out[0] != out[1] {
		t.Errorf("from a file:\n%s\nin memory:\n%s", out[1], out[0])
	}
}

// A workload that overloads a target is said to: its latencies measure
// the target's queue, and the simulation holds the queue in memory.
func TestOverloadedTargetWarns(t *testing.T) {
	real, syn := workload("real", 1500, 3000, false, 1), workload("synthetic", 1500, 3, false, 2)
	res := mustRun(t, real, syn, with(targeted(t, "a=sim", "b=sim:max-num-seqs=8"), func(o *Options) { o.Explain = ExplainNone }))
	var warned []string
	for _, w := range res.Warnings {
		if strings.Contains(w, "it was overloaded") {
			warned = append(warned, w[:strings.Index(w, ":")])
		}
	}
	if !slices.Equal(warned, []string{"real-a", "real-b"}) {
		t.Errorf("overload warnings for %v, want the real workload's two runs (1500 requests in half a second) only: %q", warned, res.Warnings)
	}
}
