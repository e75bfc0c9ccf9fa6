package twin

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/sim"
	"github.com/tokentrace/tokentrace/traces"
)

// param is the value of key in the fit's report.
func param(t *testing.T, res *Result, key string) Param {
	t.Helper()
	for _, p := range res.Report.Params {
		if p.Key == key {
			return p
		}
	}
	t.Fatalf("no parameter %s in the report: %+v", key, res.Report.Params)
	return Param{}
}

// TestFitIdentifiesHiddenSimulators replays a trace at moderate load on
// simulators whose settings the fit does not see (one engine, a member of
// an aggregated fleet, the prefill and decode replicas of a disaggregated
// one), fits the results, and recovers every step cost within 10 % and
// the concurrency limit exactly.
func TestFitIdentifiesHiddenSimulators(t *testing.T) {
	engine := "step-fixed=4ms,prefill-per-token=30us,decode-per-seq=150us,attn-per-context-token=300ns,max-num-seqs=24,max-num-batched-tokens=4096"
	for _, c := range []struct {
		name, hidden string
		rate         float64
		// want are the configuration keys the fit must recover; the
		// step costs within 10 %, the rest exactly.
		want map[string]string
	}{
		{"one engine", engine, 12, nil},
		{"fleet member", engine + ",replicas=3,router=least-outstanding,replica-1.step-fixed=6ms", 36,
			map[string]string{"replicas": "3", "router": "least-outstanding"}},
		{"prefill/decode", "step-fixed=4ms,prefill-per-token=30us,decode-per-seq=150us,attn-per-context-token=300ns,max-num-seqs=24,prefill-replicas=1,decode-replicas=2,prefill.step-fixed=8ms,prefill.prefill-per-token=20us,decode.max-num-seqs=16",
			20, map[string]string{"prefill-replicas": "1", "decode-replicas": "2"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			hidden := mustConfig(t, c.hidden)
			rows := measure(t, hidden, workload(sized(3000), c.rate, 7))
			res, err := Fit(context.Background(), []Input{{Name: "run", Rows: traces.Values(rows)}}, DefaultFitOptions())
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range res.Report.Params {
				t.Logf("%s = %s (%v) %s", p.Key, p.Value, p.Fitted, p.From)
			}
			for _, n := range res.Report.Notes {
				t.Logf("note: %s", n)
			}
			t.Logf("config: %s", res.Config())
			checkPool := func(scope string, want sim.Options, keys ...string) {
				for _, k := range keys {
					p := param(t, res, scope+k)
					got, err := time.ParseDuration(strings.Replace(p.Value, "us", "µs", 1))
					if err != nil {
						t.Fatal(err)
					}
					w := map[string]time.Duration{"step-fixed": want.StepFixed, "prefill-per-token": want.PrefillPerToken,
						"decode-per-seq": want.DecodePerSeq, "attn-per-context-token": want.AttnPerContextToken}[k]
					if !p.Fitted || !within(float64(got), float64(w), 0.10) {
						t.Errorf("%s%s = %v (fitted %v: %s), want %v within 10 %%", scope, k, got, p.Fitted, p.From, w)
					}
				}
			}
			all := []string{"step-fixed", "prefill-per-token", "decode-per-seq", "attn-per-context-token"}
			switch {
			case hidden.Disaggregated():
				specs, _ := hidden.ReplicaSpecs()
				checkPool("prefill.", sim.Options{Options: specs[0].Options}, "step-fixed", "prefill-per-token")
				checkPool("decode.", sim.Options{Options: specs[1].Options}, "step-fixed", "decode-per-seq", "attn-per-context-token")
				if p := param(t, res, "decode.max-num-seqs"); p.Value != "16" || !p.Fitted {
					t.Errorf("decode.max-num-seqs = %s (%s), want 16", p.Value, p.From)
				}
			case hidden.IsFleet():
				checkPool("", hidden, all...)
				if p := param(t, res, "replica-1.step-fixed"); p.Value != "6ms" {
					t.Errorf("replica-1.step-fixed = %s (%s), want 6ms", p.Value, p.From)
				}
				if p := param(t, res, "max-num-seqs"); p.Value != "24" || !p.Fitted {
					t.Errorf("max-num-seqs = %s (%s), want 24", p.Value, p.From)
				}
			default:
				checkPool("", hidden, all...)
				if p := param(t, res, "max-num-seqs"); p.Value != "24" || !p.Fitted {
					t.Errorf("max-num-seqs = %s (%s), want 24", p.Value, p.From)
				}
			}
			cfg := res.Config()
			for k, v := range c.want {
				if !strings.Contains(","+cfg+",", ","+k+"="+v+",") {
					t.Errorf("config %q lacks %s=%s", cfg, k, v)
				}
			}
		})
	}
}

// TestFitSeveralLoads fits one twin to two runs of a server at different
// loads (each on its own clock) and checks it at a third: the costs within
// 10 %, the batch limit exact, and the report without the one-load note.
func TestFitSeveralLoads(t *testing.T) {
	hidden := mustConfig(t, "step-fixed=5ms,prefill-per-token=25us,decode-per-seq=100us,attn-per-context-token=250ns,max-num-seqs=20")
	low := measure(t, hidden, workload(sized(1500), 3, 41))
	high := measure(t, hidden, workload(sized(1500), 9, 42))
	res, err := Fit(context.Background(), []Input{{Name: "low", Rows: traces.Values(low)}, {Name: "high", Rows: traces.Values(high)}}, DefaultFitOptions())
	if err != nil {
		t.Fatal(err)
	}
	o := res.Options
	for _, c := range []struct {
		got, want time.Duration
	}{{o.StepFixed, hidden.StepFixed}, {o.PrefillPerToken, hidden.PrefillPerToken}, {o.DecodePerSeq, hidden.DecodePerSeq}, {o.AttnPerContextToken, hidden.AttnPerContextToken}} {
		if !within(float64(c.got), float64(c.want), 0.1) {
			t.Errorf("fitted %v, want %v within 10 %%", c.got, c.want)
		}
	}
	if o.MaxNumSeqs != 20 || len(res.Report.Inputs) != 2 {
		t.Errorf("max-num-seqs %d, %d inputs", o.MaxNumSeqs, len(res.Report.Inputs))
	}
	var rep strings.Builder
	res.Report.WriteText(&rep, "")
	if strings.Contains(rep.String(), "one load level") {
		t.Errorf("two loads reported as one:\n%s", rep.String())
	}
	chk, err := Check(context.Background(), o, []Input{{Name: "mid", Rows: traces.Values(measure(t, hidden, workload(sized(1500), 6, 43)))}}, DefaultCheckOptions())
	if err != nil || !chk.Pass {
		t.Errorf("the twin of two loads does not hold at a third: %v", err)
	}
}
