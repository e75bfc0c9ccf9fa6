package validate

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/traces"
)

// Every option that cannot run is refused, naming it, a zero included;
// DefaultOptions holds every default, and a zero with a meaning of its
// own (no combination search, no minimum effect) is a value.
func TestOptionsValidate(t *testing.T) {
	d := DefaultOptions()
	if d.CombinationBudget != DefaultCombinationBudget || d.MinEffect != DefaultMinEffect || d.Explain != ExplainAuto || len(d.Metrics) != 6 {
		t.Errorf("defaults %+v", d)
	}
	slo, _ := traces.ParseSLO("ttft=1s")
	if ms := DefaultMetricsFor(slo); ms[len(ms)-1].Kind != kindGoodput {
		t.Errorf("an SLO adds goodput to the default metrics: %+v", ms)
	}
	for name, set := range map[string]func(o *Options){
		"no combination search": func(o *Options) { o.CombinationBudget = 0 },
		"no minimum effect":     func(o *Options) { o.MinEffect = 0 },
		"no magnitude slack":    func(o *Options) { o.MagnitudeTolerance = 0 },
	} {
		o := targeted(t, "a=sim", "b=sim:max-num-seqs=8")
		set(&o)
		if err := o.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	for _, tc := range []struct {
		name   string
		set    func(o *Options)
		option string
	}{
		{"one target", func(o *Options) { o.Targets = o.Targets[:1] }, "Options.Targets"},
		{"a negative speed", func(o *Options) { o.Speed = -1 }, "Options.Speed"},
		{"a zero speed", func(o *Options) { o.Speed = 0 }, "Options.Speed"},
		{"no repeat", func(o *Options) { o.Repeat = 0 }, "Options.Repeat"},
		{"no metrics", func(o *Options) { o.Metrics = nil }, "Options.Metrics"},
		{"no way to explain", func(o *Options) { o.Explain = "" }, "Options.Explain"},
		{"a negative budget", func(o *Options) { o.CombinationBudget = -1 }, "Options.CombinationBudget"},
		{"too many repeats", func(o *Options) { o.Repeat = 101 }, "Options.Repeat"},
		{"too few resamples", func(o *Options) { o.Resamples = 99 }, "Options.Resamples"},
		{"a confidence of 1", func(o *Options) { o.Confidence = 1 }, "Options.Confidence"},
		{"a negative minimum effect", func(o *Options) { o.MinEffect = -0.1 }, "Options.MinEffect, Options.MagnitudeTolerance"},
		{"an unknown way to explain", func(o *Options) { o.Explain = "why" }, "Options.Explain"},
		{"goodput without an SLO", func(o *Options) { o.Metrics = mustMetrics("goodput") }, "Options.Metrics"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := targeted(t, "a=sim", "b=sim:max-num-seqs=8")
			tc.set(&o)
			err := o.Validate()
			var oe *traces.OptionError
			if !errors.As(err, &oe) || oe.Option != tc.option {
				t.Errorf("error %v, want an option error naming %s", err, tc.option)
			}
		})
	}
	o := targeted(t, "a=sim", "b=sim")
	o.Targets[1].Sim = nil
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "want a URL or a simulator configuration") {
		t.Errorf("a target with neither a URL nor a simulator: %v", err)
	}
}

// What validate keeps of a row goes back into a row unchanged (its
// request columns), and a loaded workload is in arrival order.
func TestRequestRoundTrip(t *testing.T) {
	r := traces.NewRecord()
	r.Seq, r.ArrivalNs, r.Session, r.Turn, r.Category = 7, 1e9, 3, 2, "support"
	r.PrefixTokens, r.PrefixBlocks, r.InputTokens, r.OutputTokens = 512, []int64{1, 2}, 900, 64
	r.Model, r.API, r.Class, r.ThinkNs, r.ParentSeq, r.AfterSeqs = "m", "chat", "c", 5e8, 6, []int64{4, 5}
	r.Status, r.FirstTokenNs = traces.StatusOK, 12345 // an outcome, which validate drops
	q := requestOf(&r, interner{})
	var back traces.Record
	q.record(&back)
	want := r
	want.ClearOutcome()
	if back.Seq != want.Seq || back.Category != want.Category || back.InputTokens != want.InputTokens || back.ThinkNs != want.ThinkNs ||
		back.ParentSeq != want.ParentSeq || len(back.PrefixBlocks) != 2 || len(back.AfterSeqs) != 2 || back.Status != want.Status || back.FirstTokenNs != want.FirstTokenNs {
		t.Errorf("round trip:\n got %+v\nwant %+v", back, want)
	}
	r.PrefixBlocks[0] = 99
	if q.blocks[0] != 1 {
		t.Error("the request shares its blocks with the reader's row")
	}
	w := Workload{Name: "w", Records: []traces.Record{{Seq: 1, ArrivalNs: 30}, {Seq: 0, ArrivalNs: 10}, {Seq: 2, ArrivalNs: 10}}}
	w, err := w.load()
	if err != nil || w.Records != nil || len(w.reqs) != 3 || w.reqs[0].seq != 0 || w.reqs[1].seq != 2 || w.reqs[2].seq != 1 {
		t.Errorf("loaded %+v, %v; want requests 0, 2, 1 by arrival then seq", w.reqs, err)
	}
	if lo, hi, err := w.span(); err != nil || lo != 10 || hi != 30 {
		t.Errorf("span %d–%d, %v", lo, hi, err)
	}
}

// A cell reduces its rows as they come: failures count and have no
// latency, a single-token answer has a TPOT of 0, the prefix cache's share
// is of the prompt tokens the server reported.
func TestSampleBuilder(t *testing.T) {
	slo, _ := traces.ParseSLO("ttft=100ms")
	b := newSampleBuilder(slo, 3)
	row := func(seq int64, status string, ttftMs int64, out int32) *traces.Record {
		r := traces.NewRecord()
		r.Seq, r.Status, r.OutputTokens = seq, status, out
		r.SentNs, r.FirstTokenNs, r.FinishNs = 0, ttftMs*1e6, ttftMs*1e6+int64(out)*1e7
		return &r
	}
	b.add(row(2, traces.StatusOK, 50, 10))
	b.add(row(0, traces.StatusOK, 200, 1))
	b.add(row(1, traces.StatusHTTPError, 0, 0))
	s := b.sample()
	if s.total != 3 || s.goodN != 1 || len(s.seq) != 3 || s.seq[0] != 0 || s.seq[2] != 2 {
		t.Fatalf("sample %+v: want 3 rows by seq, 1 within the SLO", s)
	}
	if !math.IsNaN(s.lat["ttft"][1]) || len(s.sorted["ttft"]) != 2 {
		t.Errorf("a failed request has a TTFT: %v", s.lat["ttft"])
	}
	if s.lat["tpot"][0] != 0 {
		t.Errorf("a single-token answer's TPOT is %g, want 0", s.lat["tpot"][0])
	}
	if v, ok := s.value(Metric{Kind: "ttft", Percentile: 50}); !ok || v != 125 { // between 50 and 200, the failure left out
		t.Errorf("ttft p50 %g, %v", v, ok)
	}
	if v, _ := s.value(Metric{Kind: kindGoodput}); v != 1.0/3 {
		t.Errorf("goodput %g, want 1/3 (failures never meet the SLO)", v)
	}
	// Past maxBootstrap requests the bootstrap keeps a hashed subset, the
	// same one in every cell of the workload, and every value for the
	// point estimates.
	big := newSampleBuilder(traces.SLO{}, 3*maxBootstrap)
	other := newSampleBuilder(traces.SLO{}, 3*maxBootstrap)
	for i := range 3 * maxBootstrap {
		big.add(row(int64(i), traces.StatusOK, 10, 2))
		other.add(row(int64(3*maxBootstrap-1-i), traces.StatusOK, 20, 2))
	}
	sb, so := big.sample(), other.sample()
	if len(sb.seq) > maxBootstrap || len(sb.seq) < maxBootstrap/2 || !paired(sb, so) || len(sb.sorted["ttft"]) != 3*maxBootstrap {
		t.Errorf("bootstrap subset of %d (paired %v), %d values for the estimates", len(sb.seq), paired(sb, so), len(sb.sorted["ttft"]))
	}
}

// The JSON result carries the counts, each transplant's evidence and the
// combination search, for tools that read it.
func TestJSONCarriesTheJudgement(t *testing.T) {
	real, syn, o := twoProperties()
	o.Targets = targets(t, "a=sim", "b=sim:num-gpu-blocks=800")
	res := validateLogged(t, real, syn, o)
	var b bytes.Buffer
	if err := res.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Counts   Counts `json:"counts"`
		Ablation struct {
			Properties  []Transplant `json:"properties"`
			Combination *Combination `json:"combination"`
		} `json:"ablation"`
		Reasons []Reason `json:"reasons"`
	}
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Counts.Judged != 2 || got.Counts.NotCarried != 2 || got.Ablation.Combination == nil || len(got.Ablation.Combination.Tried) == 0 {
		t.Errorf("counts %+v, combination %+v", got.Counts, got.Ablation.Combination)
	}
	for _, tr := range got.Ablation.Properties {
		if tr.NotBuilt == "" && tr.Evidence == "" {
			t.Errorf("transplant %s has no evidence", tr.Property)
		}
	}
	if len(got.Reasons) == 0 || len(got.Reasons[0].Properties) != 2 || len(got.Reasons[0].Conclusions) != 2 {
		t.Errorf("reasons %+v, want the pair first with the conclusions it restores", got.Reasons)
	}
}

// Over replayed targets the ablation is priced, the combination search's
// budget included.
func TestAblationCostCountsTheBudget(t *testing.T) {
	real, syn := workloads(20, 10)
	real, syn = loaded(t, real), loaded(t, syn)
	r := &Result{opts: targeted(t, "a=http://127.0.0.1:1", "b=http://127.0.0.1:2")}
	note := r.ablationCost(real, syn, r.opts.Targets)
	if !strings.Contains(note, "and up to 24 more (Options.CombinationBudget) where no single property restores a conclusion") {
		t.Errorf("note %q", note)
	}
	r.opts.CombinationBudget = -1
	if note := r.ablationCost(real, syn, r.opts.Targets); strings.Contains(note, "CombinationBudget") {
		t.Errorf("no search, yet: %q", note)
	}
}

// wholeConversations thins a trace by whole sessions: a kept follow-up
// keeps the turn before it.
func TestWholeConversations(t *testing.T) {
	var reqs []request
	for i := range 300 {
		reqs = append(reqs, request{seq: int64(i), session: int64(i/3 + 1)})
	}
	keep := wholeConversations(reqs, 100)
	if len(keep) < 90 || len(keep) > 110 {
		t.Errorf("kept %d of 300 for 100", len(keep))
	}
	per := map[int64]int{}
	for _, i := range keep {
		per[reqs[i].session]++
	}
	for s, n := range per {
		if n != 3 {
			t.Errorf("session %d kept %d of its 3 requests", s, n)
		}
	}
	if got := wholeConversations(reqs, 500); len(got) != 300 {
		t.Errorf("thinning to more than there is kept %d", len(got))
	}
}
