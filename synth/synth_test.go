package synth

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/internal/golden"
	"github.com/tokentrace/tokentrace/traces"
)

// synthetic builds a small deterministic trace: two classes, three
// categories (one below the pooling threshold), sessions, a diurnal-ish
// rate and output correlated with input.
func synthetic(n int, seed uint64) []traces.Record {
	rng := rand.New(rand.NewPCG(seed, 1))
	var recs []traces.Record
	t := int64(0)
	var sess int64
	for i := 0; i < n; i++ {
		rate := 5 + 4*math.Sin(float64(t)/float64(10*time.Minute)) // req/s
		t += int64(rng.ExpFloat64() / rate * 1e9)
		r := traces.NewRecord()
		r.Seq = int64(i)
		r.ArrivalNs = t
		r.Class = "interactive"
		if i%5 == 0 {
			r.Class = "batch"
		}
		switch {
		case i%7 == 0:
			r.Category, r.PrefixTokens = "sys-a", 300
		case i%11 == 0:
			r.Category, r.PrefixTokens = "sys-b", 800
		case i == 13:
			r.Category, r.PrefixTokens = "rare", 100
		}
		r.InputTokens = r.PrefixTokens + int32(50+rng.IntN(3000))
		r.OutputTokens = int32(1 + int(r.InputTokens)/20 + rng.IntN(100))
		r.Model = "m1"
		r.API = traces.APIChat
		if i%9 == 0 {
			sess++
			r.Session, r.Turn = sess, 1
		}
		recs = append(recs, r)
	}
	// follow-up turns
	for i := range recs {
		if recs[i].Session != 0 && i+3 < len(recs) && recs[i+3].Session == 0 {
			recs[i+3].Session, recs[i+3].Turn, recs[i+3].Class = recs[i].Session, 2, recs[i].Class
		}
	}
	return recs
}

// inArrivalOrder sorts recs by arrival (stably: same-instant rows keep
// their order) and numbers their seq in that order, as a trace file holds
// them.
func inArrivalOrder(recs []traces.Record) {
	slices.SortStableFunc(recs, func(a, b traces.Record) int { return cmp.Compare(a.ArrivalNs, b.ArrivalNs) })
	for i := range recs {
		recs[i].Seq = int64(i)
	}
}

func fitModel(t testing.TB, recs []traces.Record) *Model {
	t.Helper()
	return fitModelMeta(t, recs, traces.NewMeta("test"))
}

// fitModelMeta fits recs with the default options and their trace's meta.
func fitModelMeta(t testing.TB, recs []traces.Record, meta traces.Meta) *Model {
	t.Helper()
	m, err := Fit(context.Background(), recs, fitMeta(meta))
	if err != nil {
		t.Fatalf("Fit: %v", err)
	}
	return m
}

func gen(t testing.TB, m *Model, o GenOptions) []traces.Record {
	t.Helper()
	var w memWriter
	if _, err := m.Generate(context.Background(), o, &w); err != nil {
		t.Fatalf("Generate: %v", err)
	}
	return w.recs
}

func genBytes(t testing.TB, m *Model, o GenOptions) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := traces.NewJSONLWriter(&buf, m.GenMeta(o))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Generate(context.Background(), o, w); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestGenerateDeterministic(t *testing.T) {
	m := fitModel(t, synthetic(5000, 1))
	for _, o := range []GenOptions{
		genSeed(3),
		with(genSeed(3), func(o *GenOptions) { o.RateScale, o.LengthScale, o.Mix = 1.5, 0.5, map[string]float64{"sys-a": 0.5} }),
		with(genSeed(3), func(o *GenOptions) { o.Gaps, o.Duration = GapsFitted, 3*time.Minute }),
	} {
		a, b := genBytes(t, m, o), genBytes(t, m, o)
		if !bytes.Equal(a, b) {
			t.Errorf("Generate(%+v) twice gave different bytes", o)
		}
		o2 := o
		o2.Seed = 4
		if bytes.Equal(a, genBytes(t, m, o2)) {
			t.Errorf("Generate with seeds 3 and 4 gave the same bytes")
		}
	}
}

func TestFitDeterministic(t *testing.T) {
	recs := synthetic(3000, 2)
	var a, b bytes.Buffer
	fitModel(t, recs).WriteTo(&a)
	fitModel(t, recs).WriteTo(&b)
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("Fit twice gave different models")
	}
}

func TestModelRoundTrip(t *testing.T) {
	m := fitModel(t, synthetic(3000, 2))
	var buf bytes.Buffer
	if _, err := m.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(buf.Bytes(), []byte(`"seq"`)) || bytes.Contains(buf.Bytes(), []byte(`"prefix_blocks"`)) {
		t.Error("model JSON looks like it holds records")
	}
	m2, err := LoadModel(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatalf("LoadModel(WriteTo(m)): %v", err)
	}
	o := genSeed(9)
	if !bytes.Equal(genBytes(t, m, o), genBytes(t, m2, o)) {
		t.Error("a reloaded model generates different bytes")
	}
	if m2.FittedOn.Records != 3000 || m2.FittedOn.Source != "test" {
		t.Errorf("fitted_on = %+v, want 3000 records from source test", m2.FittedOn)
	}
}

func TestLoadModelErrors(t *testing.T) {
	m := fitModel(t, synthetic(2000, 3))
	var buf bytes.Buffer
	m.WriteTo(&buf)
	good := buf.String()
	ver := fmt.Sprintf(`"version": %d`, m.Version)
	cases := []struct {
		name string // what the file is
		data string
		want string // substring of the error
		is   error
	}{
		{"an empty file", "", "empty file", ErrBadModel},
		{"a file truncated in the middle", good[:len(good)/2], "truncated", ErrBadModel},
		{"a file truncated at the last brace", good[:strings.LastIndex(good, "}")], "truncated", ErrBadModel},
		{"another version", strings.Replace(good, ver, `"version": 4`, 1), "version 4", ErrModelVersion},
		{"no version", strings.Replace(good, ver+",", ``, 1), "no version", ErrBadModel},
		{"follow-up turns in a version-1 file", strings.Replace(good, ver, `"version": 1`, 1), "needs model version 2", ErrBadModel},
		{"another format", strings.Replace(good, ModelFormat, "something-else", 1), "format", ErrBadModel},
		{"a trace instead of a model", `{"tokentrace_meta":{"schema_version":"1.0"}}`, "is a tokentrace trace, not a synth model: fit one to it with tokentrace synth fit", ErrBadModel},
		{"gateway logs instead of a model", `{"request":{"model":"m","messages":[]}}`, "looks like gateway logs (OpenAI-style JSON lines), not a synth model", ErrBadModel},
		{"a negative histogram count", negBin(good), "negative count", ErrBadModel},
		{"a negative arrival count", strings.Replace(good, `"counts_per_bin": [`, `"counts_per_bin": [-3, `, 1), "negative", ErrBadModel},
		{"an unknown field", strings.Replace(good, ver+",", ver+`, "bogus": 1,`, 1), "bogus", ErrBadModel},
	}
	for _, c := range cases {
		_, err := LoadModel(strings.NewReader(c.data))
		if err == nil {
			t.Errorf("LoadModel(%s) = nil error, want %q", c.name, c.want)
			continue
		}
		if !strings.Contains(err.Error(), c.want) || !errors.Is(err, c.is) {
			t.Errorf("LoadModel(%s) = %v, want an error containing %q wrapping %v", c.name, err, c.want, c.is)
		}
	}
}

// negBin makes the first input-token histogram bin's count negative.
func negBin(s string) string {
	i := strings.Index(s, `"input_tokens": {`)
	j := i + strings.Index(s[i:], `"bins": [`) + len(`"bins": [`)
	k := j + strings.Index(s[j:], "]")
	parts := strings.Split(s[j:k], ",")
	parts[len(parts)-1] = " -5"
	return s[:j] + strings.Join(parts, ",") + s[k:]
}

func FuzzLoadModel(f *testing.F) {
	m := fitModel(f, synthetic(800, 4))
	var buf bytes.Buffer
	m.WriteTo(&buf)
	f.Add(buf.Bytes())
	f.Add([]byte(`{"format":"tokentrace-synth-model","version":1}`))
	f.Add([]byte(`{"format":"tokentrace-synth-model","version":1,"bin_ns":1,"span_ns":1,"classes":[{"arrival":{"counts_per_bin":[1]},"categories":[{"input_tokens":{"bins":[[1,2,3]]},"output_given_input":[{"input_bins":1,"output_tokens":{"bins":[]}}]}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := LoadModel(bytes.NewReader(data))
		if err != nil {
			return
		}
		// A model that loads must generate without panicking (small
		// models only, to keep each run short).
		total := 0.0
		for _, c := range m.Classes {
			for _, v := range c.Arrival.CountsPerBin {
				total += v
			}
		}
		// Bound the work: arrivals × turns × blocks per request.
		turns, blocks := 1.0, 1.0
		for _, c := range m.Classes {
			if s := c.Sessions; s != nil && len(s.Turns.Bins) > 0 {
				turns = max(turns, s.Turns.Bins[len(s.Turns.Bins)-1].Hi)
			}
			for _, g := range c.Groups {
				for _, h := range []*Hist{&g.InputTokens, &g.PrefixTokens} {
					if n := len(h.Bins); n > 0 && m.BlockSize > 0 {
						blocks = max(blocks, h.Bins[n-1].Hi/float64(m.BlockSize))
					}
				}
			}
		}
		if total > 1e4 || total*turns*blocks > 1e5 || len(m.Classes[0].Arrival.CountsPerBin) > 1e5 {
			return
		}
		o := with(genSeed(1), func(o *GenOptions) { o.Duration = time.Duration(min(m.SpanNs, int64(time.Minute))) })
		if m.BinNs < int64(time.Millisecond) {
			o.Duration = time.Duration(min(int64(o.Duration), 1000*m.BinNs))
		}
		var w countWriter
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		m.Generate(ctx, o, &w)
	})
}

func TestRateScaleDoublesRateKeepsLengths(t *testing.T) {
	// Without sessions the per-minute counts scale exactly (follow-up
	// turns add their own randomness).
	recs := synthetic(20000, 5)
	for i := range recs {
		recs[i].Session, recs[i].Turn = 0, 0
	}
	m := fitModel(t, recs)
	base := gen(t, m, genSeed(1))
	double := gen(t, m, with(genSeed(1), func(o *GenOptions) { o.RateScale = 2 }))
	ratio := float64(len(double)) / float64(len(base))
	if math.Abs(ratio-2) > 0.02 {
		t.Errorf("rate-scale 2: %d records vs %d, ratio %.3f, want 2 ± 0.02", len(double), len(base), ratio)
	}
	// Per minute, too: the shape over time scales.
	rb := countsPer(statsOf(base).arrivals, int64(time.Minute), m.SpanNs)
	rd := countsPer(statsOf(double).arrivals, int64(time.Minute), m.SpanNs)
	for i := range rb {
		if rb[i] > 100 && math.Abs(rd[i]/rb[i]-2) > 0.05 {
			t.Errorf("minute %d: %v vs %v requests, want double", i, rd[i], rb[i])
		}
	}
	rep := Check(recs, double, DefaultThresholds())
	if rep.KS.InputTokens > DefaultKSLengths || rep.KS.OutputTokens > DefaultKSLengths {
		t.Errorf("rate-scale 2 changed lengths: ks input %.4f output %.4f, want <= %.2f", rep.KS.InputTokens, rep.KS.OutputTokens, DefaultKSLengths)
	}
	if rep.Pass {
		t.Error("a trace at twice the rate passes the fidelity check; rate_error should fail it")
	}
}

func TestLengthScale(t *testing.T) {
	m := fitModel(t, synthetic(5000, 6))
	a := gen(t, m, genSeed(2))
	b := gen(t, m, with(genSeed(2), func(o *GenOptions) { o.LengthScale = 2 }))
	ma, mb := statsOf(a).sum, statsOf(b).sum
	if r := mb.MeanInput / ma.MeanInput; math.Abs(r-2) > 0.1 {
		t.Errorf("length-scale 2: mean input %.1f vs %.1f (ratio %.2f), want 2", mb.MeanInput, ma.MeanInput, r)
	}
	if r := mb.MeanOutput / ma.MeanOutput; math.Abs(r-2) > 0.1 {
		t.Errorf("length-scale 2: mean output %.1f vs %.1f (ratio %.2f), want 2", mb.MeanOutput, ma.MeanOutput, r)
	}
	if math.Abs(float64(len(a)-len(b))) > 0.02*float64(len(a)) {
		t.Errorf("length-scale changed the request count: %d vs %d", len(b), len(a))
	}
}

func TestMix(t *testing.T) {
	m := fitModel(t, synthetic(8000, 7))
	out := gen(t, m, with(genSeed(2), func(o *GenOptions) { o.Mix = map[string]float64{"sys-a": 0.6, "none": 0.1} }))
	shares := statsOf(out).shares
	for _, c := range []struct {
		cat  string
		want float64
	}{{"sys-a", 0.6}, {"", 0.1}} {
		if math.Abs(shares[c.cat]-c.want) > 0.03 {
			t.Errorf("--mix: category %q share %.3f, want %.2f", c.cat, shares[c.cat], c.want)
		}
	}
	for _, bad := range []map[string]float64{{"nope": 0.5}, {"sys-a": 0.8, "sys-b": 0.5}, {"sys-a": -1}} {
		if _, err := m.Generate(context.Background(), with(DefaultGenOptions(), func(o *GenOptions) { o.Mix = bad }), &memWriter{}); err == nil {
			t.Errorf("Generate with --mix %v = nil error, want one", bad)
		}
	}
}

func TestCompactNumberArrays(t *testing.T) {
	in := "{\n  \"a\": [\n    1,\n    -2.5e+3\n  ],\n  \"s\": \"[1 2] \\\" [3 4]\",\n  \"b\": [\n    \"x\"\n  ]\n}"
	want := "{\n  \"a\": [1, -2.5e+3],\n  \"s\": \"[1 2] \\\" [3 4]\",\n  \"b\": [\n    \"x\"\n  ]\n}"
	if got := string(compactNumberArrays([]byte(in))); got != want {
		t.Errorf("compactNumberArrays =\n%s\nwant\n%s", got, want)
	}
}

func TestParseMix(t *testing.T) {
	got, err := ParseMix("sys-a=0.5, none=20%")
	if err != nil || got["sys-a"] != 0.5 || got["none"] != 0.2 {
		t.Errorf("ParseMix = %v, %v; want sys-a 0.5, none 0.2", got, err)
	}
	for _, bad := range []string{"sys-a", "=0.1", "a=x", "a=0.1,a=0.2"} {
		if _, err := ParseMix(bad); err == nil {
			t.Errorf("ParseMix(%q) = nil error, want one", bad)
		}
	}
}

func TestGenerateStructure(t *testing.T) {
	recs := synthetic(6000, 8)
	m := fitModel(t, recs)
	out := gen(t, m, genSeed(5))
	classes := map[string]int{}
	seenSess := map[int64]int32{}
	var maxSess int64
	for i, r := range out {
		if r.Seq != int64(i) {
			t.Fatalf("record %d has seq %d", i, r.Seq)
		}
		if i > 0 && r.ArrivalNs < out[i-1].ArrivalNs {
			t.Fatalf("record %d arrives before the one before it", i)
		}
		if r.InputTokens < r.PrefixTokens || r.OutputTokens < 1 {
			t.Fatalf("record %d: input %d prefix %d output %d", i, r.InputTokens, r.PrefixTokens, r.OutputTokens)
		}
		if r.ServerOutputTokens != traces.NotReported || r.Status != "" {
			t.Fatalf("record %d carries outcome columns", i)
		}
		classes[r.Class]++
		if r.Session != 0 {
			if _, ok := seenSess[r.Session]; !ok {
				if r.Session != maxSess+1 {
					t.Fatalf("session %d first appears after session %d: not renumbered in order", r.Session, maxSess)
				}
				maxSess = r.Session
			}
			if r.Turn <= seenSess[r.Session] {
				t.Fatalf("session %d turn %d after turn %d", r.Session, r.Turn, seenSess[r.Session])
			}
			seenSess[r.Session] = r.Turn
		}
		if strings.HasPrefix(r.Category, "rare") {
			t.Fatalf("a pooled category label leaked: %q", r.Category)
		}
	}
	if classes["batch"] == 0 || classes["interactive"] == 0 {
		t.Errorf("classes = %v, want batch and interactive", classes)
	}
	rep := Check(recs, out, DefaultThresholds())
	if rep.Sessions > 0.15 || rep.Turns > 0.15 {
		t.Errorf("sessions off by %.3f, turns by %.3f", rep.Sessions, rep.Turns)
	}
}

func TestDurationRepeatsProfile(t *testing.T) {
	m := fitModel(t, synthetic(4000, 9))
	span := time.Duration(m.SpanNs)
	out := gen(t, m, with(genSeed(1), func(o *GenOptions) { o.Duration = 2 * span }))
	one := gen(t, m, genSeed(1))
	if r := float64(len(out)) / float64(len(one)); math.Abs(r-2) > 0.05 {
		t.Errorf("twice the span gave %d records vs %d (ratio %.3f), want about 2", len(out), len(one), r)
	}
	if last := out[len(out)-1].ArrivalNs; last >= int64(2*span) {
		t.Errorf("last arrival %d beyond the duration %d", last, int64(2*span))
	}
}

func TestFitErrors(t *testing.T) {
	if _, err := Fit(context.Background(), nil, DefaultFitOptions()); err == nil {
		t.Error("Fit(no records) = nil error")
	}
	bad := synthetic(10, 1)
	bad[3].InputTokens = -1
	if _, err := Fit(context.Background(), bad, DefaultFitOptions()); err == nil {
		t.Error("Fit(negative tokens) = nil error")
	}
	if _, err := Fit(context.Background(), synthetic(10, 1), with(DefaultFitOptions(), func(o *FitOptions) { o.Bin = -time.Second })); err == nil || !strings.Contains(err.Error(), "Options.Bin") {
		t.Errorf("Fit(bin -1s) = %v, want an error naming Options.Bin", err)
	}
	// A single record fits and generates.
	m := fitModel(t, synthetic(1, 1))
	if out := gen(t, m, genSeed(1)); len(out) > 3 {
		t.Errorf("one-record model generated %d records", len(out))
	}
}

func TestQuantumDetected(t *testing.T) {
	// Arrivals on a 3 s grid with 1 ms jitter, ~10 per instant.
	rng := rand.New(rand.NewPCG(1, 2))
	var recs []traces.Record
	for k := 0; k < 400; k++ {
		at := max(int64(k)*3e9-int64(rng.IntN(2))*1e6, 0) // one stamp per instant
		for j := 0; j < 5+rng.IntN(10); j++ {
			r := traces.NewRecord()
			r.ArrivalNs = at
			r.InputTokens, r.OutputTokens = 100, 10
			recs = append(recs, r)
		}
	}
	m := fitModel(t, recs)
	if m.QuantumNs != 3e9 {
		t.Fatalf("quantum = %d, want 3e9", m.QuantumNs)
	}
	for _, r := range gen(t, m, genSeed(1)) {
		if r.ArrivalNs%3e9 != 0 {
			t.Fatalf("generated arrival %d is off the 3 s grid", r.ArrivalNs)
		}
	}
	// Poisson arrivals have no quantum.
	if m := fitModel(t, synthetic(2000, 1)); m.QuantumNs != 0 {
		t.Errorf("quantum of a Poisson trace = %d, want 0", m.QuantumNs)
	}
}

func TestGapFits(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var x []float64
	for range 5000 {
		x = append(x, rng.ExpFloat64()*2)
	}
	slices.Sort(x)
	g := fitGaps(x, DefaultFitOptions())
	if len(g.Fits) != 3 {
		t.Fatalf("fits = %+v, want exponential, gamma and weibull", g.Fits)
	}
	for _, f := range g.Fits {
		switch f.Family {
		case "exponential":
			if math.Abs(f.Params["rate"]-0.5) > 0.03 {
				t.Errorf("exponential rate %.3f, want 0.5", f.Params["rate"])
			}
		case "gamma", "weibull":
			if math.Abs(f.Params["shape"]-1) > 0.08 {
				t.Errorf("%s shape %.3f, want 1 for exponential data", f.Family, f.Params["shape"])
			}
		}
	}
	// Gamma(3) data: gamma wins.
	x = x[:0]
	for range 5000 {
		x = append(x, rng.ExpFloat64()+rng.ExpFloat64()+rng.ExpFloat64())
	}
	slices.Sort(x)
	g = fitGaps(x, DefaultFitOptions())
	if g.Best != "gamma" {
		t.Errorf("best fit of gamma(3) data = %s, want gamma (%+v)", g.Best, g.Fits)
	}
}

func TestHist(t *testing.T) {
	// An atom keeps its own exact bin next to sparse values.
	var v []float64
	v = append(v, 0)
	for range 1000 {
		v = append(v, 1)
	}
	for i := 2; i < 300; i++ {
		v = append(v, float64(i))
	}
	h := newHist(v, 16, 5, true)
	var atom bool
	for _, b := range h.Bins {
		if b.Count < 5 {
			t.Errorf("bin %+v holds fewer than 5 values", b)
		}
		if (b.Lo == 1 && b.Hi == 1) || (b.Mode == 1 && b.ModeCount == 1000) {
			atom = true
		}
	}
	if !atom {
		t.Errorf("the atom at 1 has neither its own bin nor a mode: %+v", h.Bins)
	}
	if h.Total() != float64(len(v)) {
		t.Errorf("total %g, want %d", h.Total(), len(v))
	}
	s := newSampler(&h)
	rng := rand.New(rand.NewPCG(1, 1))
	ones := 0
	for range 10000 {
		x, _ := s.sample(rng)
		if x < 0 || x > 299 || x != math.Floor(x) {
			t.Fatalf("sample %g outside the data or not an integer", x)
		}
		if x == 1 {
			ones++
		}
	}
	if f := float64(ones) / 10000; math.Abs(f-1000.0/1299) > 0.03 {
		t.Errorf("atom share %.3f, want %.3f", f, 1000.0/1299)
	}
	if h := newHist(nil, 8, 5, true); len(h.Bins) != 0 {
		t.Errorf("empty histogram has bins")
	}
}

func TestKSAndWasserstein(t *testing.T) {
	a := []float64{1, 2, 3, 4}
	if d := ks(a, a); d != 0 {
		t.Errorf("ks(a, a) = %g, want 0", d)
	}
	if d := wasserstein1(a, []float64{2, 3, 4, 5}); math.Abs(d-1) > 1e-12 {
		t.Errorf("W1 of a shift by 1 = %g, want 1", d)
	}
	if d := ks([]float64{1, 1, 1}, []float64{2, 2}); d != 1 {
		t.Errorf("ks of disjoint samples = %g, want 1", d)
	}
	if d := ks(nil, nil); d != 0 {
		t.Errorf("ks(nil, nil) = %g", d)
	}
}

func TestCheckIdentical(t *testing.T) {
	recs := synthetic(3000, 11)
	rep := Check(recs, recs, DefaultThresholds())
	if !rep.Pass || rep.KS.InputTokens != 0 || rep.RateError != 0 {
		t.Errorf("Check(x, x) = %+v, want a perfect pass", rep.Checks)
	}
	var buf bytes.Buffer
	rep.WriteJSON(&buf)
	for _, k := range []string{`"ks"`, `"input_tokens"`, `"output_tokens"`, `"interarrival"`, `"wasserstein"`, `"rate_error"`, `"dispersion"`, `"1s"`, `"10s"`, `"60s"`, `"cv"`, `"category_share_max_diff"`, `"prefix_reuse"`, `"sessions"`, `"turns"`, `"pass"`} {
		if !bytes.Contains(buf.Bytes(), []byte(k)) {
			t.Errorf("report JSON lacks key %s", k)
		}
	}
	// Disabled checks are left out.
	th := DefaultThresholds()
	th.CV = -1
	for _, c := range Check(recs, recs, th).Checks {
		if c.Name == "cv" {
			t.Error("a negative threshold did not disable the cv check")
		}
	}
}

func TestMatrix(t *testing.T) {
	recs, meta, err := Matrix(DefaultMatrixOptions())
	if err != nil {
		t.Fatal(err)
	}
	if meta.Source != "synth:matrix" {
		t.Errorf("meta source %q", meta.Source)
	}
	rows, _ := ParseRows(DefaultMatrixRows)
	byClass := map[string][]traces.Record{}
	var order []string
	for i, r := range recs {
		if i > 0 && r.ArrivalNs < recs[i-1].ArrivalNs {
			t.Fatal("matrix rows are not in sequence")
		}
		if _, ok := byClass[r.Class]; !ok {
			order = append(order, r.Class)
		}
		byClass[r.Class] = append(byClass[r.Class], r)
	}
	if len(order) != len(rows) {
		t.Fatalf("classes %v, want one per row %d", order, len(rows))
	}
	for i, row := range rows {
		got := byClass[row.Spec]
		if order[i] != row.Spec {
			t.Errorf("row %d is %q, want %q", i, order[i], row.Spec)
		}
		for _, r := range got {
			if r.InputTokens != row.InputTokens || r.OutputTokens != row.OutputTokens || r.PrefixTokens != row.PrefixTokens {
				t.Fatalf("row %s: record %d/%d prefix %d", row.Spec, r.InputTokens, r.OutputTokens, r.PrefixTokens)
			}
		}
		switch {
		case row.Saturation:
			if len(got) != DefaultSatRequests || got[0].ArrivalNs != got[len(got)-1].ArrivalNs {
				t.Errorf("saturation row %s: %d requests, want %d at one instant", row.Spec, len(got), DefaultSatRequests)
			}
		default:
			if n := len(got); n < 40 || n > 80 {
				t.Errorf("row %s: %d requests in a minute at 1 req/s", row.Spec, n)
			}
		}
	}
	if w := byClass["4096/256+2048w@1rps"]; len(w) == 0 || w[0].Category == "" || w[0].PrefixTokens != 2048 {
		t.Errorf("warm-prefix row lacks its shared category")
	}
	a, _, _ := Matrix(with(DefaultMatrixOptions(), func(o *MatrixOptions) { o.Seed = 2 }))
	b, _, _ := Matrix(with(DefaultMatrixOptions(), func(o *MatrixOptions) { o.Seed = 2 }))
	if len(a) != len(b) || a[len(a)-1].ArrivalNs != b[len(b)-1].ArrivalNs {
		t.Error("Matrix is not deterministic")
	}
}

func TestParseRows(t *testing.T) {
	cases := []struct {
		in   string
		want Row
	}{
		{"256/128@1rps", Row{Spec: "256/128@1rps", InputTokens: 256, OutputTokens: 128, RatePerS: 1}},
		{"2048/1024@sat", Row{Spec: "2048/1024@sat", InputTokens: 2048, OutputTokens: 1024, Saturation: true}},
		{"4096/256+2048w@0.5rps", Row{Spec: "4096/256+2048w@0.5rps", InputTokens: 4096, OutputTokens: 256, RatePerS: 0.5, PrefixTokens: 2048, Warm: true}},
		{"4096/256@2rps+2048c", Row{Spec: "4096/256@2rps+2048c", InputTokens: 4096, OutputTokens: 256, RatePerS: 2}},
	}
	for _, c := range cases {
		got, err := ParseRows(c.in)
		if err != nil || len(got) != 1 || got[0] != c.want {
			t.Errorf("ParseRows(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "256/128", "256@1rps", "a/b@1rps", "256/128@fast", "256/128@0rps", "256/128+512w@1rps", "256/128+10x@1rps", "-1/5@1rps"} {
		if _, err := ParseRows(bad); err == nil {
			t.Errorf("ParseRows(%q) = nil error, want one", bad)
		}
	}
	// A list: rows in order, trimmed, empty items passed over; a bad row
	// is named with the option.
	got, err := ParseRows(" 256/128@1rps , ,2048/1024@sat,")
	if err != nil || len(got) != 2 || got[0].Spec != "256/128@1rps" || got[1].Spec != "2048/1024@sat" {
		t.Errorf("ParseRows of a two-row list = %+v, %v; want rows 256/128@1rps and 2048/1024@sat", got, err)
	}
	var oe *traces.OptionError
	if _, err := ParseRows("256/128@1rps, 256@1rps"); !errors.As(err, &oe) || oe.Option != "Options.Rows" || !strings.Contains(err.Error(), `Options.Rows: "256@1rps"`) {
		t.Errorf("ParseRows with a bad second row: error %v, want an option error for Options.Rows naming \"256@1rps\"", err)
	}
}

func TestGoldenModelLoads(t *testing.T) {
	// testdata/model.golden.json is a model written by this version; it
	// must keep loading (the format is versioned). Regenerate with -update.
	path := filepath.Join("testdata", "model.golden.json")
	m := fitModel(t, synthetic(600, 12))
	if golden.Update() {
		var buf bytes.Buffer
		m.WriteTo(&buf)
		golden.Write(t, path, buf.Bytes())
	}
	got, err := ReadModelFile(path)
	if err != nil {
		t.Fatalf("ReadModelFile(golden): %v", err)
	}
	var a, b bytes.Buffer
	got.WriteTo(&a)
	m.WriteTo(&b)
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("Fit output differs from testdata/model.golden.json; if intended, run go test ./synth -run Golden -update")
	}
}

// countWriter counts records.
type countWriter struct{ n int }

func (w *countWriter) Write(r []traces.Record) (int, error) { w.n += len(r); return len(r), nil }
func (w *countWriter) Close() error                         { return nil }
