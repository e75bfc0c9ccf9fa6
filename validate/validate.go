// Package validate answers "does the conclusion we drew from a synthetic
// benchmark hold on our real traffic?". It runs a real and a synthetic
// workload against two or more server configurations (running servers, or
// the built-in simulator configured per target), measures each
// configuration's difference from the first (the baseline) on the metrics
// asked for, with bootstrap intervals, under each workload, and judges each
// conclusion: holds, reversed, magnitude off, or not significant on one
// side, headlined as the decision (does the direction and significance
// carry over). Where a conclusion breaks it proves why by ablation: the
// synthetic workload rerun with one property of the real one transplanted
// at a time (lengths, arrivals, prefix reuse, sessions; transplant.go,
// ablate.go), or, without one, gives a prior from what the configuration
// change acts through (reasons.go); and it says what to change in the
// synthetic workload (nextsteps.go).
//
// Workloads stream through: each is read once and kept as what validate
// needs of each request (request.go), and each run's rows are reduced as
// they come to the figures they feed (cell.go).
//
// validate sits above the products, like the CLI: it wires replay (and its
// simulator), synth and analyze; none of them imports it.
//
// Simulator targets run offline by default (in virtual time, with the very
// prompts replay would send; a target may be a fleet, see package sim):
// deterministic and as fast as the CPU allows. Options.Realtime replays
// them through the HTTP client instead, as URL targets always are.
package validate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/tokentrace/tokentrace/analyze"
	"github.com/tokentrace/tokentrace/replay"
	"github.com/tokentrace/tokentrace/sim"
	"github.com/tokentrace/tokentrace/synth"
	"github.com/tokentrace/tokentrace/traces"
)

// Defaults shared by the CLI flags and Options.
const (
	// DefaultMetrics are the metrics judged by default (DefaultMetricsFor
	// adds goodput when an SLO is set).
	DefaultMetrics = "ttft_p50,ttft_p99,tpot_p50,tpot_p99,e2e_p50,e2e_p99"
	// DefaultResamples is the number of bootstrap resamples.
	DefaultResamples = 1000
	// DefaultConfidence is the level of the bootstrap intervals.
	DefaultConfidence = 0.95
	// DefaultSeed seeds the bootstrap.
	DefaultSeed = 1
	// DefaultMinEffect is the relative difference under which an effect
	// counts as none even when its interval excludes zero.
	DefaultMinEffect = 0.02
	// DefaultMagnitudeTolerance is how far (relative to the real effect)
	// the synthetic effect may be and still agree in magnitude when the
	// intervals do not overlap.
	DefaultMagnitudeTolerance = 0.5
	// DefaultCombinationBudget is the most extra runs the ablation's
	// combination search takes: the five complements and three pairs on
	// a baseline and two targets.
	DefaultCombinationBudget = 24
)

// Workload is a named trace: Records in memory, or a Source read once as
// a stream. Either way validate keeps of each request only what it runs
// and compares (about 180 bytes and its prefix blocks, none of its
// outcome), in arrival order, and every configuration runs all of them.
type Workload struct {
	Name string
	// Records is the workload in memory; when nil, Source is read.
	Records []traces.Record
	// Source reads the workload as a stream (replay.Source: a file opened
	// when validate starts); its metadata is the reader's unless Meta is
	// set.
	Source replay.Source
	Meta   traces.Meta
	// File is where the workload was read from, as given: the next steps'
	// commands name it ("" = a placeholder in capitals).
	File string

	reqs []request // what validate keeps, in arrival order (load)
}

// Options configure a validation. Start from DefaultOptions: a field's
// zero is a value of its own, never its default.
type Options struct {
	// Targets are the configurations; the first is the baseline every other
	// one is compared with. At least two, with distinct names. Defaults to
	// none.
	Targets []Target
	// Metrics are judged (ParseMetrics; at least one). Defaults to
	// DefaultMetrics (DefaultMetricsFor adds goodput for an SLO).
	Metrics []Metric
	// SLO defines goodput. Defaults to none.
	SLO traces.SLO
	// Speed scales both workloads' arrival times (2 = twice as fast).
	// Defaults to 1.
	Speed float64
	// Repeat runs every (workload, target) pair this many times; the
	// intervals pool all runs. Offline simulations are deterministic and
	// run once whatever Repeat says. Defaults to 1.
	Repeat int
	// Realtime replays simulator targets in real time through the HTTP
	// client instead of simulating offline. Defaults to false.
	Realtime bool
	// Replay is the base of every replay (URL targets, and simulator
	// targets with Realtime): model, API, timeouts, headers. URL, Speed,
	// Run and Journal are set per run. Defaults to replay.DefaultOptions().
	Replay replay.Options
	// Resamples is the number of bootstrap resamples (at least 100).
	// Defaults to DefaultResamples (1000).
	Resamples int
	// Confidence is the level of the bootstrap intervals (0 < c < 1).
	// Defaults to DefaultConfidence (0.95).
	Confidence float64
	// Seed seeds the bootstrap. Defaults to DefaultSeed (1).
	Seed uint64
	// MinEffect is the relative difference under which an effect is none
	// (0: any difference is one). Defaults to DefaultMinEffect (2 %).
	MinEffect float64
	// MagnitudeTolerance: same-direction effects whose intervals do not
	// overlap still agree when |synthetic − real| ≤ MagnitudeTolerance ·
	// |real| (0: only overlapping intervals agree). Defaults to
	// DefaultMagnitudeTolerance (0.5).
	MagnitudeTolerance float64
	// MaxLateness is the replay validity gate: a replayed run whose
	// lateness p99 is above it gets a warning. Defaults to
	// replay.DefaultMaxLateness.
	MaxLateness time.Duration
	// Explain is how a conclusion that does not hold is explained:
	// ExplainAuto (ablation when every target simulates offline, else its
	// cost and a prior), ExplainNone (the prior only) or ExplainAblation
	// (ablation even on replayed targets). Defaults to ExplainAuto.
	Explain string
	// CombinationBudget is the most extra runs (simulations, or replays)
	// the ablation may take to search what restores the conclusions no
	// single transplant restores: the complements first (the real workload
	// with one property of the synthetic one: is the real property
	// necessary?), then pairs of the properties that came nearest; 0: no
	// search. Defaults to DefaultCombinationBudget (24).
	CombinationBudget int
	// OutDir receives every run's results (WORKLOAD-TARGET[-rN].parquet);
	// "" keeps them in memory only. Defaults to "".
	OutDir string
	// Log receives one line per run (nil: quiet). Defaults to nil.
	Log io.Writer
	// Terms say the options and commands that the result's notes and next
	// steps name (a caller's flags and command lines); nil says them by
	// the libraries' names (traces.LibraryTerms). Defaults to nil.
	Terms traces.Terms
}

// DefaultOptions returns every option's default, the values the field docs
// name; set Targets before use.
func DefaultOptions() Options {
	return Options{
		Metrics:            DefaultMetricsFor(traces.SLO{}),
		Speed:              1,
		Repeat:             1,
		Replay:             replay.DefaultOptions(),
		Resamples:          DefaultResamples,
		Confidence:         DefaultConfidence,
		Seed:               DefaultSeed,
		MinEffect:          DefaultMinEffect,
		MagnitudeTolerance: DefaultMagnitudeTolerance,
		MaxLateness:        replay.DefaultMaxLateness,
		Explain:            ExplainAuto,
		CombinationBudget:  DefaultCombinationBudget,
	}
}

// DefaultMetricsFor are the metrics judged by default under slo:
// DefaultMetrics, and goodput when slo is set.
func DefaultMetricsFor(slo traces.SLO) []Metric {
	spec := DefaultMetrics
	if !slo.IsZero() {
		spec += "," + kindGoodput
	}
	ms, err := ParseMetrics(spec)
	if err != nil {
		panic(err) // DefaultMetrics parses
	}
	return ms
}

// Validate reports the first option that cannot run as given (a zero is a
// value like any other, never the default), naming it.
func (o *Options) Validate() error {
	if len(o.Targets) < 2 {
		return traces.OptionErrorf("validate", "Options.Targets", "want at least two configurations to compare, got %d", len(o.Targets))
	}
	seen := map[string]bool{}
	for _, t := range o.Targets {
		if seen[t.Name] {
			return traces.OptionErrorf("validate", "Options.Targets", "two targets are named %q", t.Name)
		}
		seen[t.Name] = true
		if (t.URL == "") == (t.Sim == nil) {
			return fmt.Errorf("validate: target %s: want a URL or a simulator configuration, not both or neither", t.Name)
		}
	}
	if len(o.Metrics) == 0 {
		return traces.OptionErrorf("validate", "Options.Metrics", "want at least one metric (e.g. %s)", DefaultMetrics)
	}
	for _, m := range o.Metrics {
		if m.Kind == kindGoodput && o.SLO.IsZero() {
			return traces.OptionErrorf("validate", "Options.Metrics", "goodput needs %w (e.g. ttft=500ms,tpot=50ms)", traces.OptionRef("Options.SLO"))
		}
	}
	switch {
	case !(o.Speed > 0):
		return traces.OptionErrorf("validate", "Options.Speed", "want > 0, got %g", o.Speed)
	case o.Repeat < 1 || o.Repeat > 100:
		return traces.OptionErrorf("validate", "Options.Repeat", "want 1 to 100 runs, got %d", o.Repeat)
	case o.Resamples < 100:
		return traces.OptionErrorf("validate", "Options.Resamples", "want at least 100, got %d", o.Resamples)
	case !(o.Confidence > 0 && o.Confidence < 1):
		return traces.OptionErrorf("validate", "Options.Confidence", "want 0 < c < 1, got %g", o.Confidence)
	case o.MinEffect < 0 || o.MagnitudeTolerance < 0:
		return traces.OptionErrorf("validate", "Options.MinEffect, Options.MagnitudeTolerance", "want >= 0")
	case o.MaxLateness < 0:
		return traces.OptionErrorf("validate", "Options.MaxLateness", "want >= 0, got %v", o.MaxLateness)
	case !slices.Contains(ExplainModes, o.Explain):
		return traces.OptionErrorf("validate", "Options.Explain", "want one of %s, got %q", strings.Join(ExplainModes, ", "), o.Explain)
	case o.CombinationBudget < 0:
		return traces.OptionErrorf("validate", "Options.CombinationBudget", "want >= 0 (0: no search), got %d", o.CombinationBudget)
	}
	return o.Replay.ValidateWithoutURL()
}

// Run validates the synthetic workload's conclusions against the real
// one. Every URL target is checked before anything runs; a run that fails
// later stops the validation with an error that names it (and the results
// already written to OutDir, if any, stay).
func Run(ctx context.Context, real, synthetic Workload, o Options) (*Result, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	var err error
	for _, w := range []*Workload{&real, &synthetic} {
		if *w, err = w.load(); err != nil {
			return nil, fmt.Errorf("validate: %w", err)
		}
		if len(w.reqs) == 0 {
			return nil, fmt.Errorf("validate: the %s workload has no requests", w.Name)
		}
	}
	for _, t := range o.Targets {
		if t.URL != "" {
			if err := reachable(ctx, t, &o.Replay); err != nil {
				return nil, err
			}
		}
	}
	if o.OutDir != "" {
		if err := os.MkdirAll(o.OutDir, 0o755); err != nil {
			return nil, traces.OptionErrorf("validate", "Options.OutDir", "%w", err)
		}
	}
	res := &Result{Baseline: o.Targets[0].Name, Workloads: [2]string{real.Name, synthetic.Name}, Speed: o.Speed,
		Confidence: o.Confidence, MinEffect: o.MinEffect, Metrics: o.Metrics, opts: o}
	for _, t := range o.Targets {
		res.Targets = append(res.Targets, TargetInfo{Name: t.Name, Config: t.Config})
	}
	fid := synth.CheckSeq(real.each(), synthetic.each(), synth.DefaultThresholds())
	res.Fidelity = &fid

	samples := map[[2]string]sample{}
	total, done := 2*len(o.Targets), 0
	for _, w := range []Workload{real, synthetic} {
		for _, t := range o.Targets {
			c, s, err := runCell(ctx, w, t, &o, res)
			if err != nil {
				return res, fmt.Errorf("validate: %s workload on target %s: %w", w.Name, t.Name, err)
			}
			done++
			res.Cells = append(res.Cells, *c)
			samples[[2]string{w.Name, t.Name}] = s
			if o.Log != nil {
				fmt.Fprintf(o.Log, "validate: %s on %s: %d requests, %d failed, %s (%d/%d)\n",
					w.Name, t.Name, c.Requests, c.Failed, c.headline(o.Metrics), done, total)
			}
		}
	}
	res.judge(samples, real.Name, synthetic.Name)
	clear(samples) // the ablation measures its own runs
	if err := res.ablate(ctx, real, synthetic); err != nil {
		return res, fmt.Errorf("validate: %w", err)
	}
	res.explain()
	res.NextSteps = res.nextSteps(real, synthetic)
	res.Conclusion = res.conclude()
	return res, nil
}

// reachable asks a URL target for its models, so that an unreachable
// server stops the validation before any run.
func reachable(ctx context.Context, t Target, ro *replay.Options) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	u := strings.TrimSuffix(strings.TrimSuffix(t.URL, "/"), "/v1") + "/v1/models"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("validate: target %s (%s): %w", t.Name, t.Config, err)
	}
	for k, v := range ro.Headers {
		req.Header[k] = v
	}
	if ro.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+ro.APIKey)
	}
	resp, err := replay.NewHTTPClient().Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL may carry credentials; t.Config is redacted
		}
		return fmt.Errorf("validate: target %s (%s) is not reachable: %w; nothing was run", t.Name, t.Config, err)
	}
	resp.Body.Close()
	if resp.StatusCode >= 400 {
		return fmt.Errorf("validate: target %s (%s): GET /v1/models answered HTTP %d; nothing was run", t.Name, t.Config, resp.StatusCode)
	}
	return nil
}

// runCell runs workload w on target t (Options.Repeat times unless
// offline) and reduces the results, row by row, to the cell's figures and
// its sample; with Options.OutDir every run's rows are written as they
// come.
func runCell(ctx context.Context, w Workload, t Target, o *Options, res *Result) (*Cell, sample, error) {
	c := &Cell{Workload: w.Name, Target: t.Name}
	runs := runsOf(t, o)
	acc, err := newCellAcc(o, runs*len(w.reqs))
	if err != nil {
		return nil, sample{}, err
	}
	for rep := range runs {
		name := runName(w, t, rep, runs)
		if o.OutDir == "" {
			if err := runOnce(ctx, w, t, o, name, res, acc.add); err != nil {
				return nil, sample{}, err
			}
			continue
		}
		f := filepath.Join(o.OutDir, name+".parquet")
		meta := w.Meta
		meta.Extra = maps.Clone(meta.Extra)
		meta.Set("validate.workload", w.Name)
		meta.Set("validate.target", t.Name)
		meta.Set("validate.target_config", t.Config)
		out, err := newRowWriter(f, meta)
		if err != nil {
			return nil, sample{}, err
		}
		err = runOnce(ctx, w, t, o, name, res, func(r *traces.Record) {
			acc.add(r)
			out.add(r)
		})
		if cerr := out.close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, sample{}, err
		}
		c.Files = append(c.Files, f)
	}
	c.Runs = runs
	s, err := acc.close(ctx, c, o.Metrics)
	if err != nil {
		return nil, sample{}, err
	}
	return c, s, nil
}

// rowWriter writes result rows as they come, in batches.
type rowWriter struct {
	name string
	w    traces.Writer
	buf  []traces.Record
	err  error
}

func newRowWriter(name string, meta traces.Meta) (*rowWriter, error) {
	w, err := traces.Create(name, meta)
	if err != nil {
		return nil, fmt.Errorf("write results %s: %w", name, err)
	}
	return &rowWriter{name: name, w: w}, nil
}

func (w *rowWriter) add(r *traces.Record) {
	if w.err != nil {
		return
	}
	w.buf = append(w.buf, *r)
	if len(w.buf) == 4096 {
		w.flush()
	}
}

func (w *rowWriter) flush() {
	if w.err == nil && len(w.buf) > 0 {
		_, w.err = w.w.Write(w.buf)
	}
	w.buf = w.buf[:0]
}

func (w *rowWriter) close() error {
	w.flush()
	if err := w.w.Close(); w.err == nil {
		w.err = err
	}
	if w.err != nil {
		return fmt.Errorf("write results %s: %w", w.name, w.err)
	}
	return nil
}

// offline reports whether t runs as an offline simulation.
func offline(t Target, o *Options) bool { return t.Sim != nil && !o.Realtime }

// runsOf is how many times a workload runs on t: once offline (the
// simulation is deterministic), else Options.Repeat.
func runsOf(t Target, o *Options) int {
	if offline(t, o) {
		return 1
	}
	return o.Repeat
}

// runName names one run: WORKLOAD-TARGET[-rN] (a counterfactual
// workload's spaces become dashes: a run label has none).
func runName(w Workload, t Target, rep, runs int) string {
	name := strings.ReplaceAll(w.Name, " ", "-") + "-" + t.Name
	if runs > 1 {
		name += fmt.Sprintf("-r%d", rep+1)
	}
	return name
}

// runOnce runs w on t once, offline or replayed, and hands each result row
// to emit; a replay that could not keep its timing adds a warning to res.
func runOnce(ctx context.Context, w Workload, t Target, o *Options, name string, res *Result, emit func(*traces.Record)) error {
	if offline(t, o) {
		inFlight, err := simulate(ctx, w, t, o, name, emit)
		if n := len(w.reqs); err == nil && inFlight > max(overloaded, n/10) {
			res.Warnings = append(res.Warnings, fmt.Sprintf("%s: the target held up to %d of the %d requests at once: it was overloaded, so its latencies measure its queue (and the simulation's memory grows with the queue)", name, inFlight, n))
		}
		return err
	}
	run, err := replayOnce(ctx, w, t, o, name)
	if run == nil {
		return err
	}
	if l := run.Summary.LatenessP99; l > o.MaxLateness {
		res.Warnings = append(res.Warnings, fmt.Sprintf("%s: client lateness p99 %.2f ms is over the %v validity gate: its latencies include the client's delay", name, float64(l)/1e6, o.MaxLateness))
	}
	for i := range run.Records {
		emit(&run.Records[i])
	}
	return err
}

// measure runs w on t (Options.Repeat times unless offline) and keeps only
// what the bootstrap needs: an ablation's counterfactual runs.
func measure(ctx context.Context, w Workload, t Target, o *Options, res *Result) (sample, int, error) {
	runs := runsOf(t, o)
	sb := newSampleBuilder(o.SLO, runs*len(w.reqs))
	for rep := range runs {
		if err := runOnce(ctx, w, t, o, runName(w, t, rep, runs), res, sb.add); err != nil {
			return sample{}, rep, err
		}
	}
	return sb.sample(), runs, nil
}

func dominantShare(a analyze.Attribution) float64 {
	arr := a.Share.Array()
	for k, n := range analyze.ComponentNames {
		if n == a.Dominant {
			return arr[k]
		}
	}
	return 0
}

// simulate runs w through the simulator configured by t, offline: the
// prompts are the ones replay would send (so prefix caching sees the same
// shared prefixes), arrivals are scaled by Options.Speed, and the truth
// rows come back as results whose send time is their arrival (no client).
// It returns the most requests the target held at once.
func simulate(ctx context.Context, w Workload, t Target, o *Options, run string, emit func(*traces.Record)) (int, error) {
	so := t.Sim.AdmitLongest(longest(w))
	ro := o.runOptions(run)
	t0 := w.reqs[0].arrival
	// The simulation reads the requests in arrival order (the workload's),
	// one at a time, building each prompt as it goes; its rows come back
	// as requests finish.
	reqs := func(yield func(sim.Request, error) bool) {
		var r traces.Record
		for i := range w.reqs {
			q := &w.reqs[i]
			q.record(&r)
			out := max(int(q.out), 1)
			sq := sim.Request{
				ID:        fmt.Sprintf("%s-%d", run, q.seq),
				ArrivalNs: int64(float64(q.arrival-t0) / o.Speed),
				Prompt:    replay.PromptTokens(&r, ro, w.Meta.BlockSize),
				MaxTokens: out, MinTokens: out, IgnoreEOS: true,
				Session: q.session,
			}
			if !yield(sq, nil) {
				return
			}
		}
	}
	fr, err := sim.Simulate(ctx, so, reqs, func(r traces.Record) error {
		src := &w.reqs[r.Seq]
		r.Seq, r.Run, r.Category, r.Class = src.seq, run, src.category, src.class
		r.ScheduledNs, r.SentNs = r.ArrivalNs, r.ArrivalNs
		emit(&r)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("simulate: %w", err)
	}
	return fr.MaxInFlight, nil
}

// overloaded is the fewest requests in flight at once that can call a
// target overloaded (with a tenth of the workload's).
const overloaded = 1000

// longest is the workload's longest request (input + output tokens).
func longest(w Workload) int {
	n := 0
	for i := range w.reqs {
		n = max(n, int(w.reqs[i].in)+int(w.reqs[i].out))
	}
	return n
}

// runOptions are the replay options of the run named run: Replay's, with
// the run's name and Speed, and no journal (results stay in memory, or go
// to OutDir).
func (o *Options) runOptions(run string) replay.Options {
	ro := o.Replay
	ro.Speed, ro.Run, ro.Journal = o.Speed, run, ""
	return ro
}

// replayOnce replays w against t: its URL, or a fresh simulator.
func replayOnce(ctx context.Context, w Workload, t Target, o *Options, run string) (*replay.Result, error) {
	ro := o.runOptions(run)
	ro.URL = t.URL
	if t.Sim != nil {
		so := t.Sim.AdmitLongest(longest(w))
		srv, err := sim.Start(ctx, so)
		if err != nil {
			return nil, fmt.Errorf("start simulator: %w", err)
		}
		defer srv.Close()
		ro.URL = srv.URL
		if ro.Model == "" && ro.ModelMap == nil {
			ro.Model = so.Model
		}
	}
	if err := ro.Validate(); err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	plan, err := replay.Scan(ctx, w.source(), ro)
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	run2, err := plan.Run(ctx, w.Meta, ro)
	if err != nil {
		return run2, fmt.Errorf("replay: %w", err)
	}
	return run2, ctx.Err()
}

// requestWriter keeps what validate needs of generated records.
type requestWriter struct {
	reqs []request
	in   interner
}

func (w *requestWriter) Write(recs []traces.Record) (int, error) {
	for i := range recs {
		w.reqs = append(w.reqs, requestOf(&recs[i], w.in))
	}
	return len(recs), nil
}
func (w *requestWriter) Close() error { return nil }

// Generate draws a synthetic workload from a fitted model, covering the
// same span as like (the real workload) unless o.Duration is set. The
// workload keeps what validate needs of each generated request, not the
// records.
func Generate(ctx context.Context, name string, m *synth.Model, like Workload, o synth.GenOptions) (Workload, error) {
	if o.Duration == 0 {
		lo, hi, err := like.span()
		if err != nil {
			return Workload{}, fmt.Errorf("generate the %s workload: %w", name, err)
		}
		if hi > lo {
			o.Duration = time.Duration(hi - lo + 1)
		}
	}
	w := &requestWriter{in: interner{}}
	if _, err := m.Generate(ctx, o, w); err != nil {
		return Workload{}, fmt.Errorf("generate the %s workload: %w", name, err)
	}
	return Workload{Name: name, Meta: m.GenMeta(o)}.withRequests(w.reqs), nil
}

// withRequests returns w holding reqs (sorted by arrival if they are not).
func (w Workload) withRequests(reqs []request) Workload {
	w.Records, w.Source = nil, nil
	if !slices.IsSortedFunc(reqs, byArrival) {
		slices.SortStableFunc(reqs, byArrival)
	}
	w.reqs = reqs
	return w
}
