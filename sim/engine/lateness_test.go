package engine

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// A real-time engine whose steps are far shorter than a timer can wait
// on any machine (20 µs, against the runtime's and the kernel's timer
// slack of tens of microseconds to a millisecond, more on a loaded
// machine) falls behind its model: it says so in Lateness, in /metrics
// and in its truth's metadata. A Virtual engine, whose clock waits for
// its steps, records none.
func TestStepLatenessReported(t *testing.T) {
	truth := t.TempDir() + "/truth.jsonl"
	s := startSim(t, func(o *Options) {
		o.StepFixed, o.PrefillPerToken, o.DecodePerSeq, o.AttnPerContextToken = 20*time.Microsecond, 0, 0, 0
		o.TruthOut = truth
	})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			post(t, s.URL+"/v1/completions", fmt.Sprintf(`{"prompt":[%d,300,301],"max_tokens":100,"ignore_eos":true}`, 400+i), nil)
		}()
	}
	wg.Wait()
	l := s.Meter().Lateness()
	sum := l.Summary()
	t.Logf("steps %d, modelled %v, late %v (p99 %.3f ms, max %.3f ms): slowdown %.1f×", l.Steps, time.Duration(l.ModelNs), time.Duration(l.LateNs), sum.StepP99Ms, sum.StepMaxMs, sum.Slowdown())
	if l.Steps < 100 || l.ModelNs != l.Steps*int64(20*time.Microsecond) {
		t.Errorf("%d steps modelled %v: want ≥ 100 steps of 20 µs each", l.Steps, time.Duration(l.ModelNs))
	}
	if !sum.FellBehind() || sum.StepMaxMs <= 0 || sum.StepP99Ms > sum.StepMaxMs {
		t.Errorf("lateness %+v: want fallen behind, p99 ≤ max", sum)
	}
	fams := scrape(t, s.URL)
	h := fams[StepLatenessFamily].GetMetric()[0].GetHistogram()
	model := fams[StepModelFamily].GetMetric()[0].GetCounter().GetValue()
	if h.GetSampleCount() < uint64(l.Steps) || model < float64(l.ModelNs)/1e9 {
		t.Errorf("/metrics: %d steps, %g s modelled; want at least %d and %g", h.GetSampleCount(), model, l.Steps, float64(l.ModelNs)/1e9)
	}
	s.Close()
	_, m, err := traces.ReadAll(truth)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := traces.SimLatenessOf(m); !ok || got.Steps < l.Steps || !got.FellBehind() {
		t.Errorf("truth metadata %s = %q: want the lateness", traces.MetaSimLateness, m.Get(traces.MetaSimLateness))
	}

	v := startSim(t, func(o *Options) { o.Virtual = true })
	post(t, v.URL+"/v1/completions", `{"prompt":[1,2,3],"max_tokens":20,"ignore_eos":true}`, nil)
	if l := v.Meter().Lateness(); l.Steps != 0 {
		t.Errorf("virtual engine: %d steps with lateness", l.Steps)
	}
	if _, ok := scrape(t, v.URL)[StepLatenessFamily]; ok {
		t.Errorf("virtual engine exposes %s", StepLatenessFamily)
	}
}

// Lateness adds replicas' histograms and reads a quantile in its bucket.
func TestLatenessQuantile(t *testing.T) {
	st := newStats(4096)
	for range 98 {
		st.stepLate(int64(time.Millisecond), int64(30*time.Microsecond)) // the 5e-05 bucket
	}
	st.stepLate(int64(time.Millisecond), int64(3*time.Millisecond)) // 0.005
	st.stepLate(int64(time.Millisecond), int64(40*time.Millisecond))
	a := st.lateness()
	l := a.Add(a)
	sum := l.Summary()
	if l.Steps != 200 || l.LateNs != 2*(98*30e3+3e6+40e6) || sum.StepMaxMs != 40 {
		t.Fatalf("added %+v", l)
	}
	// rank 198 of 200 falls in the (2 ms, 5 ms] bucket, which holds 2.
	if sum.StepP99Ms <= 2 || sum.StepP99Ms > 5 {
		t.Errorf("p99 %.3f ms, want within (2, 5]", sum.StepP99Ms)
	}
	if want := (0.2 + 2*(98*30e-6+3e-3+40e-3)) / 0.2; fmt.Sprintf("%.6f", sum.Slowdown()) != fmt.Sprintf("%.6f", want) {
		t.Errorf("slowdown %g, want %g", sum.Slowdown(), want)
	}
	if !strings.Contains(sum.String(), "slower than its model") {
		t.Errorf("String %q", sum.String())
	}
}
