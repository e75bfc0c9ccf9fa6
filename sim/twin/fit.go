package twin

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"time"

	"github.com/tokentrace/tokentrace/sim"
	"github.com/tokentrace/tokentrace/traces"
)

// Defaults of FitOptions.
const (
	DefaultSeed        = 1
	DefaultChunkJitter = 300 * time.Microsecond
	DefaultSampleSteps = 1 << 16
	DefaultSimRows     = 20000
)

// Input is one measured run to fit: its rows (a replay's results, or a
// captured trace with latencies) and the server's metrics series over it
// (a replay's scrape, or postmortem's Prometheus history; nil when none).
type Input struct {
	// Name names the input in the report (its file).
	Name    string
	Rows    iter.Seq2[traces.Record, error]
	Samples []traces.MetricsSample
}

// FitOptions configure Fit. Start from DefaultFitOptions: a zero field is
// a value like any other, which Validate refuses where Fit cannot use it.
type FitOptions struct {
	// Prior is the simulator a parameter keeps when the data cannot
	// identify it, and the fleet's shape when the rows do not name one.
	// Defaults to sim.DefaultOptions().
	Prior sim.Options
	// Seed chooses the sampled steps. Defaults to DefaultSeed.
	Seed uint64
	// ChunkJitter is the widest spread at the client of the chunks one
	// engine step published (network and client delays); 0: a step's
	// chunks arrive at one instant. Defaults to DefaultChunkJitter (300µs).
	ChunkJitter time.Duration
	// SampleSteps bounds the observed steps each replica keeps for the
	// regression (a uniform sample, drawn from Seed). Defaults to
	// DefaultSampleSteps.
	SampleSteps int
	// SimRows is how many rows of each input (its first) are kept to
	// confirm the limits by simulating them, and to report the fit's
	// residuals per metric; 0 or negative: none. Defaults to
	// DefaultSimRows.
	SimRows int
	// Prompt builds the simulated requests' prompts. Defaults to
	// DefaultPrompt.
	Prompt PromptFunc
	// ReorderWindow is how far out of send order rows may come (ns); 0:
	// rows come in send order. Defaults to DefaultReorderWindow.
	ReorderWindow int64
	// Terms say the command the twin's file names (how to check it: a
	// caller's command line); nil says it by the libraries' names
	// (traces.LibraryTerms). Defaults to nil.
	Terms traces.Terms
}

// DefaultFitOptions returns every FitOptions default.
func DefaultFitOptions() FitOptions {
	return FitOptions{
		Prior:         sim.DefaultOptions(),
		Seed:          DefaultSeed,
		ChunkJitter:   DefaultChunkJitter,
		SampleSteps:   DefaultSampleSteps,
		SimRows:       DefaultSimRows,
		Prompt:        DefaultPrompt,
		ReorderWindow: DefaultReorderWindow,
		Terms:         nil,
	}
}

// Validate reports the first option Fit cannot use, naming it in a
// *traces.OptionError.
func (o FitOptions) Validate() error {
	prior := o.Prior
	if err := prior.Validate(); err != nil {
		return traces.OptionErrorf("twin", "FitOptions.Prior", "%w", err)
	}
	switch {
	case o.ChunkJitter < 0:
		return traces.OptionErrorf("twin", "FitOptions.ChunkJitter", "must be >= 0, got %v", o.ChunkJitter)
	case o.SampleSteps <= 0:
		return traces.OptionErrorf("twin", "FitOptions.SampleSteps", "must be > 0, got %d", o.SampleSteps)
	case o.Prompt == nil:
		return traces.OptionErrorf("twin", "FitOptions.Prompt", "must be set (DefaultPrompt, or a replay's prompts)")
	case o.ReorderWindow < 0:
		return traces.OptionErrorf("twin", "FitOptions.ReorderWindow", "must be >= 0 (0 holds none), got %d", o.ReorderWindow)
	}
	return nil
}

// predictOptions are the options of the fit's simulations.
func (o FitOptions) predictOptions() PredictOptions {
	po := DefaultPredictOptions()
	po.Prompt, po.ReorderWindow = o.Prompt, o.ReorderWindow
	return po
}

// Result is a fitted twin: the simulator's options and the report of how
// they were obtained.
type Result struct {
	Options sim.Options
	Report  Report
	terms   traces.Terms // FitOptions.Terms
}

// Config is the twin's configuration string (sim.FormatConfig).
func (r *Result) Config() string { return sim.FormatConfig(r.Options) }

// Fit fits the simulator's engine model (and a fleet's shape, where the
// rows name replicas) to the measured runs. A parameter the data does not
// identify keeps the prior's value and the report says why.
func Fit(ctx context.Context, inputs []Input, o FitOptions) (*Result, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if len(inputs) == 0 {
		return nil, traces.OptionErrorf("twin", "inputs", "no measured run to fit")
	}
	f := newFitter(o)
	for _, in := range inputs {
		if err := f.read(ctx, in); err != nil {
			return nil, err
		}
	}
	res, err := f.estimate()
	if err != nil {
		return nil, err
	}
	if err := f.confirm(ctx, res); err != nil {
		return nil, err
	}
	res.terms = o.Terms
	return res, nil
}

// rowGroup is one replica's share of the rows: the engine whose steps its
// chunks show.
type rowGroup struct {
	name, pool string
	steps      *steps
	requests   *requests // rows without chunks: whole requests
	sample     *reservoir
	prefill    *schedSteps // a prefill replica's steps, from server timings

	// What the inputs' steps showed (endInput).
	decodeSteps, idleSteps, schedSteps int64
	wholeRequests                      int64
	maxDecoding                        int // the most requests decoding at once (whole requests)
	maxBatch, maxTokens                int
	waited                             int64 // steps that held maxBatch while a request waited
}

// endInput ends one input's steps (the next input has its own clock) and
// keeps what they showed.
func (g *rowGroup) endInput(o FitOptions) {
	s := g.steps
	s.flush()
	g.decodeSteps += s.decodeSteps
	g.maxTokens = max(g.maxTokens, s.maxTokens)
	g.idleSteps += s.idleSteps
	if s.maxBatch > g.maxBatch {
		g.maxBatch, g.waited = s.maxBatch, 0
	}
	if s.maxBatch == g.maxBatch {
		g.waited += s.waitedAt[s.maxBatch]
	}
	g.steps = newSteps(int64(o.ChunkJitter), g.sample.add)
	g.requests.flush()
	g.wholeRequests += g.requests.kept
	g.maxDecoding = max(g.maxDecoding, g.requests.maxB)
	g.idleSteps += g.requests.idle
	g.requests = newRequests(g.sample.add)
	if g.prefill != nil {
		g.schedSteps += g.prefill.steps
		g.prefill = nil
	}
}

// fitter holds what the rows showed, per replica and pool.
type fitter struct {
	o       FitOptions
	groups  map[string]*rowGroup // by pool + "/" + replica
	order   []string
	kv      *reservoir // KV pulls: (1, tokens)
	inputs  []InputReport
	windows [][]traces.Record // the first SimRows rows of each input
	// windowSamples are each input's metrics series; samples all of them.
	windowSamples [][]traces.MetricsSample
	samples       []traces.MetricsSample
	routes        map[string]int64 // route reasons seen
	notes         []string
	counts        rowCounts
	params        []Param    // the report's, once estimated
	meas          *latencies // the kept rows' metrics (measured)
}

// rowCounts counts what the rows carried.
type rowCounts struct {
	rows, ok, chunked, coarse, timed, cached, late, whole int64
	// shared counts the rows with a shared prefix whose cached tokens
	// the server reported, sharedHits those with some.
	shared, sharedHits int64
	// sharing counts the rows with a shared prefix, reported or not.
	sharing int64
	// preempted counts rows the server says it preempted.
	preempted int64
}

func newFitter(o FitOptions) *fitter {
	return &fitter{o: o, groups: map[string]*rowGroup{}, kv: newReservoir(o.SampleSteps, o.Seed^0x6b76), routes: map[string]int64{}}
}

// group is the rows' group for pool and replica name.
func (f *fitter) group(pool, name string) *rowGroup {
	key := pool + "/" + name
	g := f.groups[key]
	if g == nil {
		seed := f.o.Seed ^ uint64(len(f.groups)+1)*0x9E3779B97F4A7C15
		g = &rowGroup{name: name, pool: pool, sample: newReservoir(f.o.SampleSteps, seed)}
		g.steps = newSteps(int64(f.o.ChunkJitter), g.sample.add)
		g.requests = newRequests(g.sample.add)
		f.groups[key] = g
		f.order = append(f.order, key)
	}
	return g
}

// read streams one input's rows through the step reconstructions.
func (f *fitter) read(ctx context.Context, in Input) error {
	rep := InputReport{Name: in.Name, Samples: int64(len(in.Samples))}
	var window []traces.Record
	last := int64(-1)
	n := int64(0)
	for r, err := range bySent(in.Rows, f.o.ReorderWindow, &f.counts.late) {
		if err != nil {
			return fmt.Errorf("twin: read %s: %w", in.Name, err)
		}
		if n++; n%4096 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		rep.observe(&r)
		if !r.OK() || r.FirstTokenNs < 0 {
			continue
		}
		t := sentAt(&r)
		last = max(last, t)
		if f.o.SimRows > 0 && len(window) < f.o.SimRows {
			window = append(window, r)
		}
		f.take(&r, t)
	}
	for _, key := range f.order {
		f.groups[key].endInput(f.o)
	}
	rep.finish()
	f.inputs = append(f.inputs, rep)
	f.windows = append(f.windows, window)
	f.windowSamples = append(f.windowSamples, in.Samples)
	f.samples = append(f.samples, in.Samples...)
	return nil
}

// take adds one successful row, sent at t, to its replica's groups.
func (f *fitter) take(r *traces.Record, t int64) {
	c := &f.counts
	c.ok++
	if r.RouteReason != "" {
		f.routes[r.RouteReason]++
	}
	prompt := int(r.InputTokens)
	if r.ServerPromptTokens > 0 {
		prompt = int(r.ServerPromptTokens)
	}
	cached := 0
	if r.Category != "" || len(r.PrefixBlocks) > 0 {
		c.sharing++
	}
	if r.ServerCachedTokens >= 0 {
		cached = int(r.ServerCachedTokens)
		c.cached++
		if r.Category != "" || len(r.PrefixBlocks) > 0 {
			c.shared++
			if cached > 0 {
				c.sharedHits++
			}
		}
	}
	pool := ""
	if r.PrefillReplica != "" {
		pool = "decode"
		f.prefillSide(r, t, prompt, cached)
	}
	g := f.group(pool, r.Replica)
	coarse := false
	for _, k := range r.ChunkTokens {
		coarse = coarse || k > 1
	}
	switch {
	case len(r.ChunkNs) == 0 || coarse:
		if coarse {
			c.coarse++
		}
		if r.LastTokenNs >= r.FirstTokenNs && pool == "" {
			g.requests.add(&reqRow{sent: t, first: r.FirstTokenNs, last: r.LastTokenNs, prompt: prompt, fresh: max(prompt-cached, 1), out: outputTokens(r)})
			c.whole++
		}
	default:
		c.chunked++
		row := &stepRow{sent: t, chunks: slices.Clone(r.ChunkNs), prompt: prompt, fresh: max(prompt-cached, 1)}
		if pool == "decode" {
			// The decode replica computes the last prompt token; the
			// request reached it when its queue there began.
			row.fresh, row.remote = 1, true
			row.sent = r.ChunkNs[0] - max(r.ServerDecodeQueueNs, 0) - 1
		}
		g.steps.add(row)
	}
	if r.ServerQueueNs >= 0 {
		c.timed++
	}
	if r.ServerPreemptions > 0 {
		c.preempted++
	}
	for _, key := range f.order {
		g := f.groups[key]
		g.steps.advance(t)
		g.requests.advance(t)
	}
}

// prefillSide takes what a disaggregated row shows of its prefill
// replica: the step its prompt was scheduled in (from the server's queue
// time) and its KV pull.
func (f *fitter) prefillSide(r *traces.Record, t int64, prompt, cached int) {
	if r.ServerKVTransferNs >= 0 {
		var x [nFeat]float64
		x[featFixed], x[featPrefill] = 1, float64(max(prompt-1-cached, 0))
		f.kv.add(obs{y: float64(r.ServerKVTransferNs), x: x})
	}
	if r.ServerQueueNs < 0 {
		return
	}
	g := f.group("prefill", r.PrefillReplica)
	if g.prefill == nil {
		g.prefill = &schedSteps{keep: g.sample.add}
	}
	g.prefill.add(t+r.ServerQueueNs, r.ServerQueueNs > 0, max(prompt-cached, 1), prompt)
}

// schedSteps reconstructs a prefill replica's steps from when its requests
// were scheduled (arrival + the server's queue time): requests scheduled
// at one time start one step, which lasts until the next schedule if a
// request waited for it (the engine was busy all along).
type schedSteps struct {
	keep   func(obs)
	at     int64
	x      [nFeat]float64
	open   bool
	steps  int64
	sorted bool
}

func (s *schedSteps) add(at int64, waited bool, fresh, prompt int) {
	switch {
	case s.open && at == s.at:
		s.x[featPrefill] += float64(fresh)
		s.x[featAttn] += float64(prompt)
		return
	case s.open && at > s.at && waited:
		s.keep(obs{y: float64(at - s.at), x: s.x})
		s.steps++
	}
	s.at, s.open = at, true
	s.x = [nFeat]float64{featFixed: 1, featPrefill: float64(fresh), featAttn: float64(prompt)}
}
