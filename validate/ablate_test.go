package validate

import (
	"bytes"
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/sim"
	"github.com/tokentrace/tokentrace/traces"
)

// fixedLengths is a benchmark-matrix-like workload: n requests at rate
// req/s (Poisson), every prompt in and every output out tokens long, no
// shared prefix.
func fixedLengths(name string, n int, rate float64, in, out int32, seed uint64) Workload {
	rng := rand.New(rand.NewPCG(seed, 11))
	return poisson(name, n, rate, rng, func(_ int, r *traces.Record) { r.InputTokens, r.OutputTokens = in, out })
}

// bursty is n requests at rate req/s on average, arriving in bursts of
// size requests within 100 ms, with the lengths of workload().
func bursty(name string, n int, rate float64, size int, seed uint64) Workload {
	w := workload(name, n, rate, false, seed)
	rng := rand.New(rand.NewPCG(seed, 13))
	period := float64(size) / rate
	for i := range w.Records {
		burst := i / size
		w.Records[i].ArrivalNs = int64((float64(burst)*period + 0.1*rng.Float64()) * 1e9)
	}
	slices.SortFunc(w.Records, func(a, b traces.Record) int { return int(a.ArrivalNs - b.ArrivalNs) })
	for i := range w.Records {
		w.Records[i].Seq = int64(i)
	}
	return w
}

// mustRun is Run of the workloads with o; an error fails the test.
func mustRun(t *testing.T, real, syn Workload, o Options) *Result {
	t.Helper()
	res, err := Run(context.Background(), real, syn, o)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// validateLogged is mustRun, logging the text report.
func validateLogged(t *testing.T, real, syn Workload, o Options) *Result {
	t.Helper()
	res := mustRun(t, real, syn, o)
	var buf bytes.Buffer
	if err := res.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + buf.String())
	return res
}

func reason(res *Result, prop string) *Reason {
	for i := range res.Reasons {
		if res.Reasons[i].Property == prop {
			return &res.Reasons[i]
		}
	}
	return nil
}

func transplantOf(res *Result, prop string) *Transplant {
	if res.Ablation == nil {
		return nil
	}
	for i := range res.Ablation.Properties {
		if res.Ablation.Properties[i].Property == prop {
			return &res.Ablation.Properties[i]
		}
	}
	return nil
}

// Prefix caching on and off, with real prompts that share system prompts
// and a fixed-length synthetic workload of the same mean lengths that
// shares nothing: the synthetic workload sees no difference, the real one
// a large one. Prompt lengths differ most (a fixed length against a
// spread), yet the ablation names prefix reuse, proven: with the real
// prefixes the synthetic workload reaches the real conclusion (direction
// and significance), and the lengths close none of the gap.
func TestAblationNamesPrefixReuse(t *testing.T) {
	real := workload("real", 300, 6, true, 1)
	syn := fixedLengths("synthetic", 300, 6, 1786, 128, 2)
	res := validateLogged(t, real, syn, targeted(t, "a=sim", "b=sim:prefix-caching=false"))
	v := verdicts(res)
	if v["ttft_p50"] != VerdictNotSignificantSynthetic {
		t.Fatalf("ttft_p50 verdict %q, want %q (the setup no longer breaks the conclusion)", v["ttft_p50"], VerdictNotSignificantSynthetic)
	}
	if res.Ablation == nil || res.Ablation.Status != AblationRan || res.Ablation.Runs != 2*4 {
		t.Fatalf("ablation %+v, want it run: 4 properties built (no sessions) on 2 targets", res.Ablation)
	}
	if len(res.Reasons) == 0 || res.Reasons[0].Property != PropPrefixReuse || !res.Reasons[0].Proven || res.Reasons[0].Evidence != EvidenceAblation {
		t.Fatalf("first reason %+v, want prefix reuse, proven by ablation", res.Reasons)
	}
	tr := transplantOf(res, PropPrefixReuse)
	for _, e := range tr.Effects {
		if e.Metric == "ttft_p50" && (!e.Restores || !e.Effect.Significant || e.Effect.Change <= 0) {
			t.Errorf("prefix reuse transplant on ttft_p50: %+v, want a significant increase that restores the real conclusion", e)
		}
	}
	if r := reason(res, PropPromptLengths); r != nil {
		t.Errorf("prompt lengths named as a reason (%+v) though the transplant closes none of the gap", r)
	}
	if sev, _ := res.difference(PropPromptLengths); sev < 1 {
		t.Errorf("prompt lengths severity %.2f: the workloads should differ in lengths for this test to mean anything", sev)
	}
	if !strings.Contains(res.Conclusion, "Proven reason (ablation): prefix reuse") {
		t.Errorf("conclusion %q should name prefix reuse as proven", res.Conclusion)
	}
	// A change that made no difference on the synthetic workload ranks
	// the targets as a tie there.
	for _, rk := range res.Rankings {
		if rk.Metric == "ttft_p50" && (len(rk.Synthetic) != 1 || rankText(rk.Synthetic) != "a = b") {
			t.Errorf("synthetic ranking on ttft_p50 %v, want the tie a = b", rk.Synthetic)
		}
	}
	if len(res.NextSteps) == 0 || res.NextSteps[0].Property != PropPrefixReuse || len(res.NextSteps[0].Commands) == 0 {
		t.Errorf("next steps %+v, want a prefix reuse step with a command first", res.NextSteps)
	}
}

// The batch cap (max-num-seqs 32 against 256) matters under bursts of 48
// requests, not under Poisson arrivals at the same mean rate and the same
// lengths: the ablation names the arrivals (burstiness), and says that it
// cannot build prefix reuse or sessions, which neither workload has,
// before going on.
func TestAblationNamesBurstiness(t *testing.T) {
	real := bursty("real", 288, 4, 48, 1)
	syn := workload("synthetic", 288, 4, false, 1)
	res := validateLogged(t, real, syn, targeted(t, "a=sim:max-num-seqs=256", "b=sim:max-num-seqs=32"))
	if v := verdicts(res); v["ttft_p99"] != VerdictNotSignificantSynthetic {
		t.Fatalf("ttft_p99 verdict %q, want %q", v["ttft_p99"], VerdictNotSignificantSynthetic)
	}
	if len(res.Reasons) == 0 || res.Reasons[0].Property != PropArrivals || !res.Reasons[0].Proven {
		t.Fatalf("first reason %+v, want arrivals, proven", res.Reasons)
	}
	if !strings.Contains(res.Reasons[0].Detail, "CV") {
		t.Errorf("arrivals reason %q should give the burstiness (inter-arrival CV)", res.Reasons[0].Detail)
	}
	for _, prop := range []string{PropPromptLengths, PropOutputLengths} {
		if reason(res, prop) != nil {
			t.Errorf("%s named as a reason; the workloads share their lengths", prop)
		}
	}
	for prop, want := range map[string]string{PropPrefixReuse: "neither workload has shared prefixes", PropSessions: "no sessions"} {
		if tr := transplantOf(res, prop); tr == nil || !strings.Contains(tr.NotBuilt, want) {
			t.Errorf("%s: %+v, want not built: %q", prop, tr, want)
		}
	}
	if tr := transplantOf(res, PropOutputLengths); tr == nil || !strings.Contains(tr.NotBuilt, "already has the real output lengths") {
		t.Errorf("output lengths: %+v, want not built: the workloads have the same lengths", tr)
	}
}

// A property the ablation cannot build is reported as such, and the
// properties after it are still transplanted and measured: here the real
// workload has conversations but neither workload shares prefixes.
func TestAblationCannotBuildAPropertyContinues(t *testing.T) {
	real := bursty("real", 240, 4, 48, 1)
	for i := range real.Records {
		r := &real.Records[i]
		r.Session, r.Turn = int64(i/2+1), int32(i%2+1) // two-turn conversations
		if i%2 == 1 {
			prev := &real.Records[i-1]
			r.InputTokens = prev.InputTokens + prev.OutputTokens + 50
		}
	}
	syn := workload("synthetic", 240, 4, false, 2)
	res := validateLogged(t, real, syn, targeted(t, "a=sim:max-num-seqs=256", "b=sim:max-num-seqs=32"))
	if res.Ablation == nil || res.Ablation.Status != AblationRan {
		t.Fatalf("ablation %+v, want it run", res.Ablation)
	}
	if tr := transplantOf(res, PropPrefixReuse); tr == nil || !strings.Contains(tr.NotBuilt, "neither workload has shared prefixes") {
		t.Errorf("prefix reuse: %+v, want not built with the reason", tr)
	}
	tr := transplantOf(res, PropSessions)
	if tr == nil || tr.NotBuilt != "" || tr.Requests != len(syn.Records) || len(tr.Effects) != len(res.broken()) {
		t.Errorf("sessions after prefix reuse: %+v, want it built and measured on every broken conclusion", tr)
	}
	var buf bytes.Buffer
	res.WriteText(&buf)
	if !strings.Contains(buf.String(), "not built: prefix reuse: neither workload has shared prefixes") {
		t.Errorf("the text report does not say which property was not built:\n%s", buf.String())
	}
}

// A faster decode holds on any traffic: no ablation runs and no reason is
// named.
func TestAblationNotRunWhenConclusionsHold(t *testing.T) {
	real, syn := workload("real", 300, 3, false, 1), workload("synthetic", 300, 3, false, 2)
	res := validateLogged(t, real, syn, targeted(t, "a=sim", "b=sim:decode-per-seq=20us,step-fixed=3ms"))
	if !res.Holds() {
		t.Fatalf("verdicts %v, want every conclusion to hold", verdicts(res))
	}
	if res.Ablation == nil || res.Ablation.Status != AblationNotNeeded || res.Ablation.Runs != 0 {
		t.Errorf("ablation %+v, want not needed and no runs", res.Ablation)
	}
	if len(res.Reasons) > 0 || len(res.NextSteps) > 0 {
		t.Errorf("reasons %+v, next steps %+v: none is wanted when every conclusion holds", res.Reasons, res.NextSteps)
	}
}

// A synthetic workload with other lengths (prompts 1.5 times, outputs
// half as long) reaches the same conclusion about a GPU that is faster in
// every part of the step: no reason is invented for it.
func TestNoReasonInventedWhenLengthsDifferButHold(t *testing.T) {
	real := workload("real", 300, 3, false, 1)
	syn := workload("synthetic", 300, 3, false, 2)
	for i := range syn.Records {
		r := &syn.Records[i]
		r.InputTokens, r.OutputTokens = r.InputTokens*3/2, r.OutputTokens/2
	}
	res := validateLogged(t, real, syn, targeted(t, "a=sim", "b=sim:step-fixed=3ms,prefill-per-token=20us,decode-per-seq=22us,attn-per-context-token=22ns"))
	if sev, _ := res.difference(PropPromptLengths); sev < 1 {
		t.Fatalf("prompt length severity %.2f: the workloads should differ in lengths", sev)
	}
	if !res.Holds() {
		t.Fatalf("verdicts %v, want every conclusion to hold", verdicts(res))
	}
	if len(res.Reasons) > 0 || strings.Contains(res.Conclusion, "reason") {
		t.Errorf("reasons %+v, conclusion %q: no reason when the conclusion holds", res.Reasons, res.Conclusion)
	}
}

// When every direction and significance agree and only the sizes differ,
// the headline says the decision carries over; it does not read as a
// failure.
func TestHeadlineDecisionCarriesOver(t *testing.T) {
	// Both workloads share system prompts, the synthetic one in every
	// request, the real one in every other: turning the cache off hurts
	// both, the synthetic workload more.
	real := workload("real", 250, 4, true, 1)
	for i := range real.Records {
		if i%2 == 1 {
			real.Records[i].Category, real.Records[i].PrefixTokens = "", 0
		}
	}
	syn := workload("synthetic", 250, 4, true, 2)
	res := validateLogged(t, real, syn, targeted(t, "a=sim", "b=sim:prefix-caching=false"))
	off := 0
	for _, c := range res.Conclusions {
		if !carriesOver(c) {
			t.Fatalf("%s: verdict %q; the test wants every decision to carry over", c.Metric, c.Verdict)
		}
		if c.Verdict == VerdictMagnitudeOff {
			off++
		}
	}
	if off == 0 {
		t.Fatal("no conclusion is magnitude off; the test wants sizes that differ")
	}
	if !strings.HasPrefix(res.Conclusion, "The decision carries over: all 6 conclusions have the same direction and significance") ||
		!strings.Contains(res.Conclusion, "b is worse than a") || strings.Contains(res.Conclusion, "do not") {
		t.Errorf("conclusion %q, want it to say the decision carries over (b worse than a)", res.Conclusion)
	}
}

// URL targets are replayed in real time: the ablation is not started
// unless asked, and the result says what it would cost; asked, it runs
// exactly that many replays.
func TestAblationOnReplayedTargetsOnlyWhenAsked(t *testing.T) {
	// Short requests close together: a fraction of a second per replay.
	real := workload("real", 24, 80, true, 1)
	syn := fixedLengths("synthetic", 24, 80, 446, 4, 2)
	for i := range real.Records {
		r := &real.Records[i]
		r.InputTokens, r.PrefixTokens, r.OutputTokens = r.InputTokens/4, r.PrefixTokens/4, 4
	}
	// Fresh servers for each validation: a server's prefix cache keeps
	// the prompts of the runs before.
	run := func(explain string, budget int) *Result {
		var specs []string
		for _, cfg := range []string{"a=", "b=prefix-caching=false"} {
			name, conf, _ := strings.Cut(cfg, "=")
			so := sim.DefaultOptions()
			so.PerRequestMetrics = true
			if err := sim.ApplyConfig(&so, conf); err != nil {
				t.Fatal(err)
			}
			srv, err := sim.Start(context.Background(), so)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { srv.Close() })
			specs = append(specs, name+"="+srv.URL)
		}
		o := with(targeted(t, specs...), func(o *Options) { o.Explain = explain; o.CombinationBudget = budget })
		o.Replay.Model = sim.DefaultModel
		o.Replay.NoPreflight = true
		return validateLogged(t, real, syn, o)
	}
	res := run(ExplainAuto, DefaultCombinationBudget)
	if len(res.broken()) == 0 {
		t.Fatal("every conclusion holds; the test needs one that does not")
	}
	a := res.Ablation
	if a == nil || a.Status != AblationSkipped || a.Runs != 0 || !strings.Contains(a.Note, "would take 6 more runs") ||
		!strings.Contains(a.Note, "up to 24 more (Options.CombinationBudget)") || !strings.Contains(a.Note, "run it with Options.Explain ablation") {
		t.Fatalf("ablation %+v, want it skipped, saying it would take 6 more runs (and up to 24 for combinations) and how to ask", a)
	}
	if len(res.Reasons) == 0 || res.Reasons[0].Evidence == EvidenceAblation {
		t.Errorf("reasons %+v, want the differences (a URL's configuration is unknown)", res.Reasons)
	}
	// Asked, without the combination search (replays take their time):
	// exactly the 6 single transplants' runs.
	res = run(ExplainAblation, 0)
	if a := res.Ablation; a == nil || a.Status != AblationRan || a.Runs != 6 || a.Seconds <= 0 {
		t.Errorf("asked: ablation %+v, want 6 replays run and their time", a)
	}
}

// Without an ablation the reasons are a prior: what the configuration
// change acts through comes first, and says it is a prior.
func TestPriorFromTheConfigurationChange(t *testing.T) {
	real := workload("real", 300, 6, true, 1)
	syn := fixedLengths("synthetic", 300, 6, 1786, 128, 2)
	res := validateLogged(t, real, syn, with(targeted(t, "a=sim", "b=sim:prefix-caching=false"), func(o *Options) { o.Explain = ExplainNone }))
	if res.Ablation == nil || res.Ablation.Status != AblationOff || res.Ablation.Runs != 0 {
		t.Errorf("ablation %+v, want off", res.Ablation)
	}
	if len(res.Reasons) == 0 || res.Reasons[0].Property != PropPrefixReuse || res.Reasons[0].Evidence != EvidencePrior || res.Reasons[0].Proven {
		t.Fatalf("reasons %+v, want prefix reuse first as a prior", res.Reasons)
	}
	if !strings.Contains(res.Conclusion, "a prior, not proven") {
		t.Errorf("conclusion %q should say the reason is a prior", res.Conclusion)
	}
}

func TestChangedKeysAndPrior(t *testing.T) {
	for _, tc := range []struct {
		name, base, target string
		want               []string // properties, most direct first
	}{
		{"prefix caching acts through prefix reuse", "sim", "sim:prefix-caching=false", []string{PropPrefixReuse, PropSessions}},
		{"the batch cap acts through the arrivals", "sim:max-num-seqs=256", "sim:max-num-seqs=32", []string{PropArrivals}},
		{"a faster prefill acts through the prompt lengths", "sim", "sim:prefill-per-token=20us", []string{PropPromptLengths}},
		{"a faster decode acts through the output lengths", "sim", "sim:decode-per-seq=20us", []string{PropOutputLengths}},
		{"routing acts through prefix reuse, sessions and the length mix", "sim:replicas=2", "sim:replicas=2,router=prefix-aware", []string{PropPrefixReuse, PropSessions, PropPromptLengths, PropOutputLengths}},
		{"a KV transfer key counts as disaggregation", "sim", "sim:kv-transfer-latency=2ms", []string{PropPromptLengths, PropPrefixReuse, PropSessions}},
		{"a key scoped to one pool acts as the key", "sim:prefill-replicas=2,decode-replicas=6", "sim:prefill-replicas=2,decode-replicas=6,decode.max-num-seqs=512", []string{PropArrivals}},
		{"a preset changes everything", "sim", "sim:preset=tiny", Properties},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keys, ok := changedKeys(tc.base, tc.target)
			if !ok || len(keys) == 0 {
				t.Fatalf("changedKeys = %v, %v", keys, ok)
			}
			var got []string
			for _, k := range keys {
				for _, p := range propertiesOf(k) {
					if !slices.Contains(got, p) {
						got = append(got, p)
					}
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("acts through %v, want %v", got, tc.want)
			}
		})
	}
	if _, ok := changedKeys("sim", "http://127.0.0.1:8000"); ok {
		t.Error("a URL target's configuration is unknown: no prior")
	}
}
