package synth

import (
	"bytes"
	"context"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/stat"
)

// bigLimits keep every multiset, block and category exact on the test
// traces, so the streaming fitter must reproduce the in-memory one.
var bigLimits = fitLimits{values: 1 << 30, lengths: 1 << 30, blocks: 1 << 30, categories: 1 << 30, logMem: 1 << 30}

func modelJSON(t testing.TB, m *Model) string {
	t.Helper()
	var b bytes.Buffer
	if _, err := m.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// refView is m's JSON without what the in-memory reference fitter
// (fitref_test.go) predates: follow-up turns (and so version 2), how they
// resend their blocks (Model.BlockK, version 3) and the sessions' starts
// per bin.
func refView(t testing.TB, m *Model) string {
	t.Helper()
	c, err := LoadModel(strings.NewReader(modelJSON(t, m)))
	if err != nil {
		t.Fatal(err)
	}
	c.Version, c.BlockK = modelVersionNoFollowUps, 0
	for ci := range c.Classes {
		if s := c.Classes[ci].Sessions; s != nil {
			*s = Sessions{Share: s.Share, Turns: s.Turns, GapS: s.GapS}
		}
		for gi := range c.Classes[ci].Groups {
			g := &c.Classes[ci].Groups[gi]
			g.FollowUp, g.SessionStarts, g.FollowUps = nil, 0, 0
		}
	}
	return modelJSON(t, c)
}

// streamFit runs the streaming path over seq with the given limits.
func streamFit(t testing.TB, seq func(func(traces.Record, error) bool), opts FitOptions, lim fitLimits) (*Model, error) {
	t.Helper()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	f := newFitter(opts, lim)
	defer f.close()
	return fitSeq(context.Background(), f, seq)
}

// writeTrace writes recs to a trace file of the extension's format.
func writeTrace(t testing.TB, name string, recs []traces.Record, meta traces.Meta) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	w, err := traces.Create(path, meta)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := traces.Copy(w, traces.Values(recs)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// jiggle returns recs in an order at most d places from sorted.
func jiggle(recs []traces.Record, d int, seed uint64) []traces.Record {
	sorted := slices.Clone(recs)
	slices.SortStableFunc(sorted, func(a, b traces.Record) int { return compareArrival(&a, &b) })
	rng := rand.New(rand.NewPCG(seed, 9))
	key := make([]float64, len(sorted))
	for i := range key {
		key[i] = float64(i) + rng.Float64()*float64(d)
	}
	idx := make([]int, len(sorted))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		switch {
		case key[a] < key[b]:
			return -1
		case key[a] > key[b]:
			return 1
		}
		return 0
	})
	out := make([]traces.Record, len(sorted))
	for i, k := range idx {
		out[i] = sorted[k]
	}
	return out
}

// quantized is a trace on a 3 s grid with 1 ms jitter, ~10 arrivals per
// instant (as TestQuantumDetected).
func quantized() []traces.Record {
	rng := rand.New(rand.NewPCG(1, 2))
	var recs []traces.Record
	for k := 0; k < 400; k++ {
		at := max(int64(k)*3e9-int64(rng.IntN(2))*1e6, 0)
		for j := 0; j < 5+rng.IntN(10); j++ {
			r := traces.NewRecord()
			r.Seq = int64(len(recs))
			r.ArrivalNs = at
			r.InputTokens, r.OutputTokens = int32(100+rng.IntN(50)), int32(10+rng.IntN(9))
			recs = append(recs, r)
		}
	}
	return recs
}

// generated draws a trace of about the given duration from a model fitted
// on recs.
func generated(t testing.TB, recs []traces.Record, meta traces.Meta, o GenOptions) []traces.Record {
	t.Helper()
	_, out := fitGen(t, recs, meta, o)
	for i := range out {
		out[i] = out[i].Clone()
	}
	return out
}

// TestFitStreamMatchesInMemory fits each trace four ways — the in-memory
// fitter as it was before streaming (refFit), Fit, FitReader over a Parquet
// file and FitSeq over a stream out of order by up to 100 places — and
// requires byte-identical model JSON.
func TestFitStreamMatchesInMemory(t *testing.T) {
	type tc struct {
		name string
		why  string
		recs func(t *testing.T) ([]traces.Record, traces.Meta)
		opts func(*FitOptions) // changes of the defaults, if any
		lim  fitLimits
	}
	cases := []tc{
		{name: "synthetic", why: "two classes, pooled categories, sessions and a varying rate",
			recs: func(*testing.T) ([]traces.Record, traces.Meta) { return synthetic(5000, 3), traces.NewMeta("test") }},
		{name: "synthetic-min-category-1", why: "no pooling: every category is its own group",
			recs: func(*testing.T) ([]traces.Record, traces.Meta) { return synthetic(3000, 4), traces.NewMeta("test") },
			opts: func(o *FitOptions) { o.MinCategoryRecords = 1; o.LengthBins = 40; o.JointBins = 3 }},
		{name: "synthetic-options", why: "no quantum, no clustering, one gap level, coarse bins",
			recs: func(*testing.T) ([]traces.Record, traces.Meta) { return synthetic(3000, 5), traces.NewMeta("test") },
			opts: func(o *FitOptions) { o.Quantum = -1; o.ClusterGap = 0; o.GapLevels = 1; o.Bin = time.Minute }},
		{name: "quantized", why: "the grid is detected and arrivals are spread over their cell with the seeded generator",
			recs: func(*testing.T) ([]traces.Record, traces.Meta) { return quantized(), traces.NewMeta("test") }},
		{name: "one-record", why: "a single record fits",
			recs: func(*testing.T) ([]traces.Record, traces.Meta) { return synthetic(1, 1), traces.NewMeta("test") }},
		{name: "same-instant", why: "ties on arrival and seq keep their order",
			recs: func(*testing.T) ([]traces.Record, traces.Meta) {
				recs := synthetic(200, 6)
				for i := range recs {
					recs[i].ArrivalNs, recs[i].Seq = int64(i/7)*1e6, int64(i/3)
				}
				return recs, traces.NewMeta("test")
			}},
		{name: "generated-synthetic", why: "200k rows drawn from a model of the synthetic trace, at limits that keep everything exact",
			recs: func(t *testing.T) ([]traces.Record, traces.Meta) {
				return generated(t, synthetic(5000, 7), traces.NewMeta("test"), with(genSeed(3), func(o *GenOptions) { o.RateScale = 40; o.Duration = 20 * time.Minute })), traces.NewMeta("test")
			}, lim: bigLimits},
	}
	cases = append(cases, tc{name: "conversations", why: "sessions whose follow-ups resend their context, with prefix blocks: the reuse model is fitted on first turns and single-shot rows",
		recs: func(t *testing.T) ([]traces.Record, traces.Meta) { return chats(300, 2, 5) }})
	for _, p := range publicTraces {
		cases = append(cases, tc{name: p.name, why: "a shared public trace, at the default limits",
			recs: func(t *testing.T) ([]traces.Record, traces.Meta) { return loadPublic(t, p) }})
	}
	for _, p := range []publicTrace{
		{"mooncake-synthetic", "mooncake", "mooncake/synthetic_trace.jsonl"},
		{"splitwise-code", "splitwise", "vidur_processed/splitwise_code.csv"},
	} {
		cases = append(cases, tc{name: p.name, why: "a shared public trace, at the default limits",
			recs: func(t *testing.T) ([]traces.Record, traces.Meta) { return loadPublic(t, p) }})
	}
	cases = append(cases, tc{name: "generated-mooncake", why: "100k rows with prefix-block chains drawn from a model of the Mooncake trace",
		recs: func(t *testing.T) ([]traces.Record, traces.Meta) {
			recs, meta := loadPublic(t, publicTraces[2])
			return generated(t, recs, meta, with(genSeed(5), func(o *GenOptions) { o.RateScale = 8; o.Duration = 20 * time.Minute })), meta
		}, lim: bigLimits})

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			recs, meta := c.recs(t)
			lim := c.lim
			if lim == (fitLimits{}) {
				lim = defaultFitLimits
			}
			opts := fitMeta(meta)
			if c.opts != nil {
				c.opts(&opts)
			}
			ref, err := refFit(context.Background(), recs, opts)
			if err != nil {
				t.Fatalf("refFit: %v", err)
			}
			want := modelJSON(t, ref)

			got := map[string]*Model{}
			sortedFit := func(recs []traces.Record) (*Model, error) {
				f := newFitter(opts, lim)
				defer f.close()
				return fitSorted(context.Background(), f, recs)
			}
			if got["Fit"], err = sortedFit(recs); err != nil {
				t.Fatalf("Fit: %v", err)
			}
			jig := jiggle(recs, 100, 1)
			if got["Fit(out of order)"], err = sortedFit(jig); err != nil {
				t.Fatalf("Fit(out of order): %v", err)
			}
			path := writeTrace(t, "trace.parquet", recs, meta)
			r, err := traces.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if got["FitReader(parquet)"], err = streamFit(t, traces.All(r), opts, lim); err != nil {
				t.Fatalf("FitReader: %v", err)
			}
			o := opts
			o.ReorderWindow = 128
			if got["FitSeq(out of order)"], err = streamFit(t, traces.Values(jig), o, lim); err != nil {
				t.Fatalf("FitSeq: %v", err)
			}
			full := modelJSON(t, got["Fit"])
			for way, m := range got {
				if len(m.FittedOn.Approximations) > 0 {
					t.Errorf("%s: approximations %q on an exact fit", way, m.FittedOn.Approximations)
				}
				if s := refView(t, m); s != want {
					t.Errorf("%s (%s): model differs from the in-memory fitter's:\n%s", way, c.why, firstDiff(want, s))
				}
				if s := modelJSON(t, m); s != full {
					t.Errorf("%s (%s): follow-up turns differ from Fit's:\n%s", way, c.why, firstDiff(full, s))
				}
			}
			if lim == defaultFitLimits {
				// The exported entry points, as the CLI calls them.
				if m, err := Fit(context.Background(), recs, opts); err != nil || modelJSON(t, m) != full {
					t.Errorf("Fit: err %v or model differs", err)
				}
				r2, err := traces.Open(path)
				if err != nil {
					t.Fatal(err)
				}
				defer r2.Close()
				if m, err := FitReader(context.Background(), r2, opts); err != nil || modelJSON(t, m) != full {
					t.Errorf("FitReader: err %v or model differs", err)
				}
			}
		})
	}
}

// firstDiff shows where two texts part.
func firstDiff(a, b string) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	lo := max(0, i-200)
	return "want …" + a[lo:min(len(a), i+200)] + "\n got …" + b[lo:min(len(b), i+200)]
}

// TestFitSeqOrder: records within the reorder window are put in order;
// one further out is an error naming it and the option.
func TestFitSeqOrder(t *testing.T) {
	recs := synthetic(2000, 8)
	// Record 900 arrives 600 records late.
	late := slices.Clone(recs)
	moved := late[900]
	late = slices.Delete(late, 900, 901)
	late = slices.Insert(late, 1500, moved)
	cases := []struct {
		name    string
		why     string
		recs    []traces.Record
		window  int
		wantErr string
	}{
		{"sorted-no-window", "a sorted trace needs no window", recs, 0, ""},
		{"late-within-window", "600 places late fits in the default window", late, DefaultReorderWindow, ""},
		{"late-beyond-window", "600 places late does not fit in 100", late, 100, "record seq 900"},
		{"late-no-window", "with no window any late record is an error", late, 0, "FitOptions.ReorderWindow"},
	}
	want := modelJSON(t, fitModel(t, recs))
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := FitSeq(context.Background(), traces.Values(c.recs), with(fitMeta(traces.NewMeta("test")), func(o *FitOptions) { o.ReorderWindow = c.window }))
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("%s: err = %v, want one containing %q", c.why, err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s: %v", c.why, err)
			}
			if modelJSON(t, m) != want {
				t.Errorf("%s: model differs from Fit's", c.why)
			}
		})
	}
}

// TestFitSeqErrors: what Fit rejects, the stream rejects too.
func TestFitSeqErrors(t *testing.T) {
	bad := synthetic(10, 1)
	bad[3].InputTokens = -1
	readErr := func(yield func(traces.Record, error) bool) {
		if yield(synthetic(1, 1)[0], nil) {
			yield(traces.Record{}, os.ErrClosed)
		}
	}
	cases := []struct {
		name, why string
		seq       func(func(traces.Record, error) bool)
		opts      FitOptions
		wantErr   string
	}{
		{"empty", "an empty stream has nothing to fit", traces.Values(nil), DefaultFitOptions(), "no records"},
		{"negative", "a negative token count is named by seq", traces.Values(bad), DefaultFitOptions(), "record seq 3"},
		{"read-error", "a read error is wrapped", readErr, DefaultFitOptions(), "read trace: file already closed"},
		{"bad-option", "options are validated first", traces.Values(bad), with(DefaultFitOptions(), func(o *FitOptions) { o.Bin = -1 }), "Options.Bin"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := FitSeq(context.Background(), c.seq, c.opts); err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%s: err = %v, want %q", c.why, err, c.wantErr)
			}
		})
	}
}

// TestMultisetTruncation: past its limit a multiset holds exactly the
// values truncated to its final precision, whatever the order they came in.
func TestMultisetTruncation(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	cases := []struct {
		name, why string
		gen       func() float64
		limit     int
		wantExact bool
	}{
		{"few-values", "fewer distinct values than the limit stay exact", func() float64 { return float64(rng.IntN(100)) }, 200, true},
		{"gaps", "continuous gaps are truncated", func() float64 { return rng.ExpFloat64() * 0.01 }, 500, false},
		{"tokens", "token counts below 2^bits stay whole numbers", func() float64 { return float64(1 + rng.IntN(100000)) }, 1000, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var vals []float64
			for range 20000 {
				vals = append(vals, c.gen())
			}
			a, b := newValues(c.limit), newValues(c.limit)
			for _, v := range vals {
				addFloat(&a, v)
			}
			for _, v := range slices.Backward(vals) {
				addFloat(&b, v)
			}
			if (a.sig == 0) != c.wantExact {
				t.Fatalf("%s: precision %d bits", c.why, a.sig)
			}
			// Merged halves coarsen to the same precision as one pass.
			h1, h2 := newValues(c.limit), newValues(c.limit)
			for i, v := range vals {
				if i%2 == 0 {
					addFloat(&h1, v)
				} else {
					addFloat(&h2, v)
				}
			}
			h1.merge(&h2)
			want := map[float64]int64{}
			for _, v := range vals {
				want[truncFloat(v, a.sig)]++
			}
			for _, s := range []*multiset{&a, &b, &h1} {
				if s.len() > c.limit {
					t.Errorf("%s: %d distinct values, limit %d", c.why, s.len(), c.limit)
				}
				got := map[float64]int64{}
				s.each(func(k uint64, n int64) { got[math.Float64frombits(k)] = n })
				if s.sig != a.sig || len(got) != len(want) {
					t.Fatalf("%s: precision %d / %d values, want %d / %d", c.why, s.sig, len(got), a.sig, len(want))
				}
				for v, n := range want {
					if got[v] != n {
						t.Fatalf("%s: value %g counted %d times, want %d", c.why, v, got[v], n)
					}
				}
			}
			for v := range want {
				if c.name == "tokens" && v != math.Floor(v) {
					t.Fatalf("truncated token count %g is not whole", v)
				}
			}
		})
	}
}

// TestTruncComposes: truncating to 16 then 10 bits is truncating to 10,
// and a value loses at most a relative 2^-bits.
func TestTruncComposes(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	for range 10000 {
		v := rng.ExpFloat64() * math.Pow(10, float64(rng.IntN(12)-6))
		for _, sig := range truncLadder {
			got := truncFloat(v, sig)
			if got > v || (v-got)/v >= math.Ldexp(1, -sig) {
				t.Fatalf("truncFloat(%g, %d) = %g", v, sig, got)
			}
			if truncFloat(truncFloat(v, 16), sig) != truncFloat(v, min(sig, 16)) {
				t.Fatalf("truncation of %g to 16 then %d bits does not compose", v, sig)
			}
		}
		x := uint64(rng.Int64N(1 << 40))
		if truncUint(truncUint(x, 12), 8) != truncUint(x, 8) || truncUint(x, 8) != uint64(truncFloat(float64(x), 8)) {
			t.Fatalf("integer truncation of %d disagrees with float truncation", x)
		}
	}
}

// TestMeanStdDevRunsBitIdentical: the statistics of runs equal gonum's of
// the slice they stand for, bit for bit, at every length (the lanes of the
// assembly sum, its tails) and over a wide range of magnitudes.
func TestMeanStdDevRunsBitIdentical(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	for n := 2; n < 80; n++ {
		for trial := range 20 {
			var inter, intra []float64
			for range n {
				v := rng.ExpFloat64() * math.Pow(10, float64(rng.IntN(8)-4))
				if trial%3 == 0 {
					v = math.Round(v*10) / 10 // repeats
				}
				if rng.IntN(3) == 0 {
					intra = append(intra, v)
				} else {
					inter = append(inter, v)
				}
			}
			slices.Sort(inter)
			slices.Sort(intra)
			all := append(slices.Clone(inter), intra...)
			wm, ws := stat.MeanStdDev(all, nil)
			gm, gs := meanStdDevRuns(runsOfSorted(inter), runsOfSorted(intra))
			if gm != wm || gs != ws {
				t.Fatalf("n=%d: meanStdDevRuns = %v, %v, gonum %v, %v (lanes %v, sum %v)", n, gm, gs, wm, ws, sumLanes, floats.Sum(all))
			}
		}
	}
}

// TestVarintLogSpills: past its memory limit a log moves to a file under
// TempDir, replays the same values on every pass and removes the file on
// close; a fit whose logs spill gives the same model and leaves nothing.
func TestVarintLogSpills(t *testing.T) {
	dir := t.TempDir()
	l := varintLog{what: "test values", dir: dir, memLimit: 64}
	var want []uint64
	for i := range 5000 {
		x := uint64(i%7) << (i % 40)
		want = append(want, x)
		l.put(x)
	}
	files, _ := os.ReadDir(dir)
	if len(files) != 1 {
		t.Fatalf("%d files in TempDir, want the spilled log", len(files))
	}
	for pass := range 2 {
		r, err := l.replay()
		if err != nil {
			t.Fatal(err)
		}
		var got []uint64
		for range l.n {
			got = append(got, r.next())
		}
		if r.err != nil || !slices.Equal(got, want) {
			t.Fatalf("pass %d replayed %d values (err %v), different from the %d put", pass, len(got), r.err, len(want))
		}
	}
	if err := l.close(); err != nil {
		t.Fatal(err)
	}
	if files, _ := os.ReadDir(dir); len(files) != 0 {
		t.Errorf("%d files left after close", len(files))
	}
	recs := synthetic(3000, 9)
	lim := defaultFitLimits
	lim.logMem = 16
	m, err := streamFit(t, traces.Values(recs), with(fitMeta(traces.NewMeta("test")), func(o *FitOptions) { o.TempDir = dir }), lim)
	if err != nil {
		t.Fatal(err)
	}
	if modelJSON(t, m) != modelJSON(t, fitModel(t, recs)) {
		t.Error("a fit with spilled logs differs")
	}
	if files, _ := os.ReadDir(dir); len(files) != 0 {
		t.Errorf("%d files left after the fit", len(files))
	}
	// An unusable TempDir is an error naming the option.
	_, err = streamFit(t, traces.Values(recs), with(DefaultFitOptions(), func(o *FitOptions) { o.TempDir = filepath.Join(dir, "missing") }), lim)
	if err == nil || !strings.Contains(err.Error(), "FitOptions.TempDir") {
		t.Errorf("fit with a missing TempDir: err = %v, want one naming FitOptions.TempDir", err)
	}
}

// TestFitLimits: what happens past each limit, against the in-memory
// fitter.
func TestFitLimits(t *testing.T) {
	mooncake, meta := loadPublic(t, publicTraces[2])
	cases := []struct {
		name, why string
		recs      []traces.Record
		lim       func(l *fitLimits)
		exact     bool
		note      string
	}{
		{"derived-categories-collapse", "past the category limit, categories derived from blocks are pooled: exact, they form one group anyway",
			mooncake, func(l *fitLimits) { l.categories = 100 }, true, ""},
		{"plain-categories-overflow", "past the category limit, new plain categories are pooled into tail and the model says so",
			synthetic(3000, 10), func(l *fitLimits) { l.categories = 2 }, false, "pooled into tail"},
		{"blocks-forgotten", "past the block limit, old blocks are forgotten and the model says so",
			mooncake, func(l *fitLimits) { l.blocks = 5000 }, false, "prefix blocks not seen"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lim := defaultFitLimits
			c.lim(&lim)
			opts := fitMeta(meta)
			m, err := streamFit(t, traces.Values(c.recs), opts, lim)
			if err != nil {
				t.Fatalf("%s: %v", c.why, err)
			}
			ref, err := refFit(context.Background(), c.recs, opts)
			if err != nil {
				t.Fatal(err)
			}
			if same := refView(t, m) == modelJSON(t, ref); same != c.exact {
				t.Errorf("%s: model equal to the in-memory one = %v", c.why, same)
			}
			if notes := strings.Join(m.FittedOn.Approximations, "; "); !strings.Contains(notes, c.note) || (c.note == "") != (notes == "") {
				t.Errorf("%s: approximations %q, want a note containing %q", c.why, notes, c.note)
			}
		})
	}
}

// TestFitTruncatedWithinTolerance: a fit past the distinct-value limits
// keeps every count, share and per-bin arrival count exact, and every
// histogram within the stated tolerance: the bin holding rank r holds the
// r-th value truncated to the reported bits, so its range reaches within a
// relative 2^-bits of the exact histogram's bin of the same rank.
func TestFitTruncatedWithinTolerance(t *testing.T) {
	recs := generated(t, synthetic(5000, 11), traces.NewMeta("test"), with(genSeed(2), func(o *GenOptions) { o.RateScale = 10; o.Duration = 20 * time.Minute }))
	opts := fitMeta(traces.NewMeta("test"))
	lim := defaultFitLimits
	lim.values, lim.lengths = 300, 300
	f := newFitter(opts, lim)
	defer f.close()
	m, err := fitSeq(context.Background(), f, traces.Values(recs))
	if err != nil {
		t.Fatal(err)
	}
	ref, err := refFit(context.Background(), recs, opts)
	if err != nil {
		t.Fatal(err)
	}
	bits := f.approx.bits
	if bits == 0 || len(m.FittedOn.Approximations) == 0 {
		t.Fatalf("no truncation at limit %d (notes %q)", lim.values, m.FittedOn.Approximations)
	}
	tol := math.Ldexp(1, -bits)
	t.Logf("%d records, truncated to %d bits (tolerance %.2g): %q", len(recs), bits, tol, m.FittedOn.Approximations)
	checkHist := func(what string, got, want Hist) {
		t.Helper()
		if got.Total() != want.Total() {
			t.Errorf("%s: %g values, want %g", what, got.Total(), want.Total())
			return
		}
		n := want.Total()
		for _, p := range []float64{0, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 1} {
			r := math.Min(math.Floor(p*n), n-1)
			g, w := binAtRank(got, r), binAtRank(want, r)
			if g.Lo > w.Hi || g.Hi < w.Lo*(1-tol) {
				t.Errorf("%s: rank %g in [%g, %g], exact [%g, %g]: beyond relative %.2g", what, r, g.Lo, g.Hi, w.Lo, w.Hi, tol)
			}
		}
	}
	m.FittedOn.Approximations = nil
	if !reflect.DeepEqual(m.FittedOn, ref.FittedOn) || m.SpanNs != ref.SpanNs || m.BinNs != ref.BinNs || m.QuantumNs != ref.QuantumNs || len(m.Classes) != len(ref.Classes) {
		t.Fatalf("fitted_on or grid differ: %+v vs %+v", m.FittedOn, ref.FittedOn)
	}
	for ci := range ref.Classes {
		c, w := m.Classes[ci], ref.Classes[ci]
		if c.Records != w.Records || !slices.Equal(c.Arrival.CountsPerBin, w.Arrival.CountsPerBin) || len(c.Groups) != len(w.Groups) || len(c.Arrival.Levels) != len(w.Arrival.Levels) {
			t.Fatalf("class %q: records, counts per bin, groups or levels differ", w.Name)
		}
		if w.Sessions != nil {
			if c.Sessions.Share != w.Sessions.Share {
				t.Errorf("class %q: session share %g, want %g", w.Name, c.Sessions.Share, w.Sessions.Share)
			}
			checkHist(w.Name+" turns", c.Sessions.Turns, w.Sessions.Turns)
			checkHist(w.Name+" inter-turn gaps", c.Sessions.GapS, w.Sessions.GapS)
		}
		for li := range w.Arrival.Levels {
			cl, wl := c.Arrival.Levels[li], w.Arrival.Levels[li]
			if cl.MaxCount != wl.MaxCount || cl.Gap.Samples != wl.Gap.Samples || cl.Gap.ZeroShare != wl.Gap.ZeroShare {
				t.Errorf("class %q level %d: max count, samples or zero share differ", w.Name, li)
			}
			checkHist(w.Name+" gaps", cl.Gap.Empirical, wl.Gap.Empirical)
			checkHist(w.Name+" intra-cluster gaps", cl.IntraGapS, wl.IntraGapS)
			checkHist(w.Name+" cluster sizes", cl.ClusterSizes, wl.ClusterSizes)
			// Truncation lowers each gap by at most a relative tol, so the
			// mean, 1/rate of the exponential fit, too.
			if len(cl.Gap.Fits) > 0 && len(wl.Gap.Fits) > 0 {
				gr, wr := cl.Gap.Fits[0].Params["rate"], wl.Gap.Fits[0].Params["rate"]
				if gr < wr || 1/gr < (1-tol)/wr {
					t.Errorf("class %q level %d: exponential rate %g, exact %g", w.Name, li, gr, wr)
				}
			}
		}
		for gi := range w.Groups {
			g, wg := c.Groups[gi], w.Groups[gi]
			if g.Name != wg.Name || g.Records != wg.Records || g.Share != wg.Share || g.Blocks != wg.Blocks {
				t.Errorf("class %q group %q: name, records, share or blocks differ", w.Name, wg.Name)
			}
			checkHist(wg.Name+" input", g.InputTokens, wg.InputTokens)
			checkHist(wg.Name+" prefix", g.PrefixTokens, wg.PrefixTokens)
			var gOut, wOut float64
			for _, j := range g.Joint {
				gOut += j.OutputTokens.Total()
			}
			for _, j := range wg.Joint {
				wOut += j.OutputTokens.Total()
			}
			if gOut != wOut {
				t.Errorf("class %q group %q: %g output values, want %g", w.Name, wg.Name, gOut, wOut)
			}
		}
	}
}

// binAtRank is the bin holding the value of rank r (0-based).
func binAtRank(h Hist, r float64) Bin {
	acc := 0.0
	for _, b := range h.Bins {
		acc += b.Count
		if r < acc {
			return b
		}
	}
	return h.Bins[len(h.Bins)-1]
}

// TestDistinct: categories are counted exactly up to the limit, then
// estimated within a few standard errors, the same on every run; a union
// counts shared names once.
func TestDistinct(t *testing.T) {
	names := func(from, to int) []string {
		var out []string
		for i := from; i < to; i++ {
			out = append(out, "prefix-"+strconv.Itoa(i))
		}
		return out
	}
	cases := []struct {
		name, why string
		a, b      []string
		limit     int
		want      int64
		estimated bool
	}{
		{"exact", "below the limit the count is exact", names(0, 900), nil, 1000, 900, false},
		{"repeats", "a name counts once however often it comes", append(names(0, 500), names(0, 500)...), nil, 1000, 500, false},
		{"estimate", "past the limit the count is an estimate", names(0, 200000), nil, 1000, 200000, true},
		{"union-exact", "two exact counters share half their names", names(0, 600), names(300, 900), 1000, 900, false},
		{"union-estimate", "a sketch and an exact counter share half their names", names(0, 150000), names(75000, 225000), 100000, 225000, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			da, db := distinct{limit: c.limit}, distinct{limit: c.limit}
			for _, n := range c.a {
				da.add(n)
			}
			for _, n := range c.b {
				db.add(n)
			}
			got, est := unionCount(nil, []*distinct{&da, &db})
			if est != c.estimated {
				t.Fatalf("%s: estimated = %v", c.why, est)
			}
			if !est && got != c.want {
				t.Errorf("%s: %d, want %d", c.why, got, c.want)
			}
			if est && math.Abs(float64(got-c.want)) > 0.03*float64(c.want) {
				t.Errorf("%s: estimate %d, want %d within 3%%", c.why, got, c.want)
			}
		})
	}
}
