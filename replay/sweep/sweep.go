// Package sweep finds how much faster than recorded a trace can run before
// its SLOs break: it replays the trace at several speeds (or bisects for the
// highest passing one), judges every step against a traces.SLO at a
// percentile, and reports the knee as a table, JSON, a chart and one
// sentence.
//
// A step runs against Options.Replay.URL, or against a fresh in-process
// simulator when the URL is empty. Throughput and latency percentiles of a
// step come from Options.Measure, so this package stays independent of the
// analyzer; the SLO verdict itself needs only traces.
package sweep

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"github.com/tokentrace/tokentrace/replay"
	"github.com/tokentrace/tokentrace/sim"
	"github.com/tokentrace/tokentrace/traces"
)

// Defaults shared by the CLI flags and Options.
const (
	DefaultSpeeds     = "0.5,1,1.5,2,3"
	DefaultPercentile = 99.0
	DefaultOutDir     = "sweep"
	DefaultExt        = ".parquet"
)

// Options configure one sweep. Start from DefaultOptions: a field's zero
// is a value of its own, never its default.
type Options struct {
	// Replay is the base replay options; Speed, Run and Journal are set per
	// step. URL "" starts a fresh simulator (Sim) for every step. Defaults
	// to replay.DefaultOptions().
	Replay replay.Options
	// Sim configures the built-in simulator when Replay.URL is "" (one
	// engine or a fleet, see package sim). Defaults to
	// sim.DefaultOptions().
	Sim sim.Options
	// SLO are the bounds every step is judged against. Required. Defaults
	// to none.
	SLO traces.SLO
	// Percentile is where the SLO is judged (0 < p < 100). Defaults to
	// DefaultPercentile.
	Percentile float64
	// Speeds are evaluated in order unless Search is set. Defaults to
	// DefaultSpeeds.
	Speeds []float64
	// Search bisects [Low, High] down to Tolerance instead of running
	// Speeds. Defaults to false.
	Search bool
	// Low, High and Tolerance bound the search. Default to
	// DefaultSearchLow, DefaultSearchHigh and DefaultSearchTolerance.
	Low, High, Tolerance float64
	// Repeat replays every speed this many times (1 to 100). A speed meets
	// the SLOs only if every run does; its step reports the worst run.
	// Defaults to 1.
	Repeat int
	// OutDir receives one results file per step (speed-<s><Ext>); ""
	// writes none. Defaults to "".
	OutDir string
	// Ext is the results files' extension, which names their codec.
	// Defaults to DefaultExt.
	Ext string
	// Log receives one line per step (nil: quiet). Defaults to nil.
	Log io.Writer
	// Measure fills a step's throughput and latency percentiles from its
	// results (nil: those fields stay zero; the verdict does not need
	// them). Defaults to nil.
	Measure func(ctx context.Context, recs []traces.Record, slo traces.SLO) (Measures, error)
}

// DefaultOptions returns every option's default, the values the field docs
// name; set SLO before use.
func DefaultOptions() Options {
	speeds, err := ParseSpeeds(DefaultSpeeds)
	if err != nil {
		panic(err) // DefaultSpeeds parses
	}
	return Options{
		Replay:     replay.DefaultOptions(),
		Sim:        sim.DefaultOptions(),
		Percentile: DefaultPercentile,
		Speeds:     speeds,
		Low:        DefaultSearchLow,
		High:       DefaultSearchHigh,
		Tolerance:  DefaultSearchTolerance,
		Repeat:     1,
		Ext:        DefaultExt,
	}
}

// Measures are the throughput and latency figures of one step.
type Measures struct {
	RPS, OutTokPerS      float64
	TTFTP50Ms, TTFTP99Ms float64
	TPOTP50Ms, TPOTP99Ms float64
	E2EP99Ms             float64
	GoodRatio            float64
}

// Step is one speed of the sweep.
type Step struct {
	Speed       float64 `json:"speed"`
	OfferedRPS  float64 `json:"offered_rps"`
	RPS         float64 `json:"achieved_rps"`
	OutTokPerS  float64 `json:"output_tokens_per_s"`
	Requests    int     `json:"requests"`
	Failed      int     `json:"failed"`
	TTFTP50Ms   float64 `json:"ttft_p50_ms"`
	TTFTP99Ms   float64 `json:"ttft_p99_ms"`
	TPOTP50Ms   float64 `json:"tpot_p50_ms"`
	TPOTP99Ms   float64 `json:"tpot_p99_ms"`
	E2EP99Ms    float64 `json:"e2e_p99_ms"`
	LatenessP99 float64 `json:"lateness_p99_ms"`
	GoodRatio   float64 `json:"goodput_ratio"`
	// AtPct is each SLO metric ("ttft", "tpot", "e2e") at the SLO
	// percentile, in ms; failed requests count as +Inf.
	AtPct  map[string]float64 `json:"at_percentile_ms"`
	OK     bool               `json:"meets_slo"`
	Broken string             `json:"broken,omitempty"` // the SLO metric furthest over its bound
	File   string             `json:"file,omitempty"`
	// Runs and PassedRuns count the replays of this speed (Options.Repeat)
	// and those that met the SLOs; the other fields are the worst run's.
	Runs       int `json:"runs"`
	PassedRuns int `json:"passed_runs"`
	// severity is the worst SLO metric over its bound (value/bound; +Inf
	// for failures), which picks the worst run.
	severity float64
}

// Result is a whole sweep.
type Result struct {
	BaseRPS    float64  `json:"base_rps"`
	Steps      []Step   `json:"steps"`      // by speed
	Knee       float64  `json:"knee_speed"` // highest passing speed (0 = none passed)
	NextFailed *Step    `json:"-"`          // the step right above the knee, if any
	Warnings   []string `json:"warnings,omitempty"`
	// opts are the options the sweep ran with, for its reports.
	opts Options
}

// Validate reports the first option that cannot run as given (a zero is
// a value like any other, never the default), naming it in a
// *traces.OptionError.
func (o *Options) Validate() error {
	switch {
	case o.SLO.IsZero():
		return traces.OptionErrorf("sweep", "Options.SLO", "required (e.g. ttft=1s)")
	case !(o.Percentile > 0 && o.Percentile < 100):
		return traces.OptionErrorf("sweep", "Options.Percentile", "want 0 < p < 100, got %g", o.Percentile)
	case o.Repeat < 1 || o.Repeat > 100:
		return traces.OptionErrorf("sweep", "Options.Repeat", "want 1 to 100 runs per speed, got %d", o.Repeat)
	case o.Search && (!(o.Low > 0) || !(o.High > o.Low) || math.IsInf(o.High, 0)):
		return traces.OptionErrorf("sweep", "Options.Low, Options.High", "want 0 < Low < High, got %g, %g", o.Low, o.High)
	case o.Search && (!(o.Tolerance > 0) || o.Tolerance >= 1):
		return traces.OptionErrorf("sweep", "Options.Tolerance", "want 0 < tol < 1, got %g", o.Tolerance)
	case !o.Search && len(o.Speeds) == 0:
		return traces.OptionErrorf("sweep", "Options.Speeds", "want at least one speed")
	}
	if _, err := traces.FormatOf("speed-1" + o.Ext); o.OutDir != "" && err != nil {
		return traces.OptionErrorf("sweep", "Options.Ext", "%q: %w", o.Ext, err)
	}
	if err := o.Replay.ValidateWithoutURL(); err != nil {
		return err
	}
	if o.Replay.URL == "" {
		return o.Sim.Validate()
	}
	return nil
}

// traceRate is the trace's mean arrival rate (requests per second).
func traceRate(recs []traces.Record) float64 {
	if len(recs) < 2 {
		return 0
	}
	lo, hi := recs[0].ArrivalNs, recs[0].ArrivalNs
	for i := range recs {
		lo, hi = min(lo, recs[i].ArrivalNs), max(hi, recs[i].ArrivalNs)
	}
	if hi <= lo {
		return 0
	}
	return float64(len(recs)-1) / (float64(hi-lo) / 1e9)
}

// Run sweeps recs. Every step replays the whole trace, so the records are
// held in memory for the sweep's duration.
func Run(ctx context.Context, recs []traces.Record, meta traces.Meta, opts Options) (*Result, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	inWindow := recs
	if opts.Replay.WindowFrom > 0 || opts.Replay.WindowTo > 0 {
		inWindow = nil
		for i := range recs {
			a := time.Duration(recs[i].ArrivalNs)
			if a >= opts.Replay.WindowFrom && (opts.Replay.WindowTo == 0 || a < opts.Replay.WindowTo) {
				inWindow = append(inWindow, recs[i])
			}
		}
	}
	res := &Result{BaseRPS: traceRate(inWindow), opts: opts}
	if opts.OutDir != "" {
		if err := os.MkdirAll(opts.OutDir, 0o755); err != nil {
			return nil, traces.OptionErrorf("sweep", "Options.OutDir", "%w", err)
		}
	}
	// Progress: a counter line when each point starts and when it ends, so
	// a sweep whose steps take a minute each is not silent meanwhile.
	point, total := 0, fmt.Sprint(len(opts.Speeds))
	if opts.Search {
		total = fmt.Sprintf("≤%d", maxSearchSteps(opts.Low, opts.High, opts.Tolerance))
	}
	eval := func(ctx context.Context, speed float64) (bool, error) {
		point++
		counter := fmt.Sprintf("[%d/%s]", point, total)
		start := time.Now()
		var runs []*Step
		for rep := 0; rep < opts.Repeat; rep++ {
			if opts.Log != nil {
				run := ""
				if opts.Repeat > 1 {
					run = fmt.Sprintf(" run %d/%d", rep+1, opts.Repeat)
				}
				fmt.Fprintf(opts.Log, "sweep: %s %s×%s: rate %.2f req/s offered, replaying\n", counter, fmtSpeed(speed), run, res.BaseRPS*speed)
			}
			one, err := runOne(ctx, opts, recs, meta, speed, rep)
			if err != nil {
				return false, err
			}
			runs = append(runs, one)
		}
		st := worstRun(runs)
		if passed := st.PassedRuns; passed > 0 && passed < st.Runs {
			res.Warnings = append(res.Warnings, fmt.Sprintf("%s× met the SLO in %d of %d runs: the result at this speed is not stable; it counts as missed", fmtSpeed(speed), passed, st.Runs))
		}
		st.OfferedRPS = res.BaseRPS * speed
		res.Steps = append(res.Steps, *st)
		if opts.Log != nil {
			verdict := "meets SLO"
			if !st.OK {
				verdict = "misses " + st.Broken
			}
			if st.Runs > 1 {
				verdict += fmt.Sprintf(" (%d of %d runs met it; worst run shown)", st.PassedRuns, st.Runs)
			}
			fmt.Fprintf(opts.Log, "sweep: %s %s×: %d requests, %.2f req/s, TTFT p50 %.1f ms p99 %.1f ms: %s (%.0f s)\n",
				counter, fmtSpeed(speed), st.Requests, st.RPS, st.TTFTP50Ms, st.TTFTP99Ms, verdict, time.Since(start).Seconds())
		}
		return st.OK, nil
	}
	if opts.Search {
		best, _, err := Search(ctx, opts.Low, opts.High, opts.Tolerance, eval)
		if err != nil {
			return res, err
		}
		res.Knee = best
	} else {
		for _, s := range opts.Speeds {
			if _, err := eval(ctx, s); err != nil {
				return res, fmt.Errorf("speed %g: %w", s, err)
			}
		}
	}
	sort.SliceStable(res.Steps, func(i, j int) bool { return res.Steps[i].Speed < res.Steps[j].Speed })
	if !opts.Search {
		// The knee: the highest speed that meets every SLO.
		for i := range res.Steps {
			if res.Steps[i].OK {
				res.Knee = res.Steps[i].Speed
			}
		}
	}
	for i := range res.Steps {
		if s := res.Steps[i]; !s.OK && s.Speed < res.Knee {
			res.Warnings = append(res.Warnings, fmt.Sprintf("%s× missed the SLO (%s) although %s× met it: the results are not monotone (a loaded client or server, warm-up, or a trace whose bursts line up differently); rerun that step", fmtSpeed(s.Speed), s.Broken, fmtSpeed(res.Knee)))
		}
	}
	for i := range res.Steps {
		if res.Steps[i].Speed > res.Knee && !res.Steps[i].OK {
			res.NextFailed = &res.Steps[i]
			break
		}
	}
	return res, nil
}

// worstRun combines the runs of one speed: the worst run (highest
// severity) with Runs and PassedRuns set, meeting the SLOs only if every
// run did. A capacity claim should hold every time, not on average.
func worstRun(runs []*Step) *Step {
	var st *Step
	passed := 0
	for _, r := range runs {
		if r.OK {
			passed++
		}
		if st == nil || r.severity > st.severity {
			st = r
		}
	}
	st.Runs, st.PassedRuns = len(runs), passed
	st.OK = passed == len(runs)
	return st
}

// runOne replays recs once at speed (repetition rep, from 0) and judges
// the outcome.
func runOne(ctx context.Context, opts Options, recs []traces.Record, meta traces.Meta, speed float64, rep int) (*Step, error) {
	o := opts.Replay
	o.Speed = speed
	name := "speed-" + fmtSpeed(speed)
	o.Run = fmt.Sprintf("sweep-%s", fmtSpeed(speed))
	if opts.Repeat > 1 {
		name += fmt.Sprintf("-r%d", rep+1)
		o.Run += fmt.Sprintf("-r%d", rep+1)
	}
	o.Journal = ""
	if o.URL == "" {
		o.SimTarget = replay.FormatSimTarget(opts.Sim) // as configured, before the trace sizes it
		so := opts.Sim.AdmitLongest(sim.LongestRequest(recs))
		srv, err := sim.Start(ctx, so)
		if err != nil {
			return nil, fmt.Errorf("start simulator: %w", err)
		}
		defer srv.Close()
		o.URL = srv.URL
		if o.Model == "" {
			// The trace's production model names are not served by the
			// simulator: send its own (Options.Replay.ModelMap still wins).
			o.Model = so.Model
		}
	}
	run, err := replay.Run(ctx, recs, meta, o)
	if err != nil && run == nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	st := Judge(run.Records, opts.SLO, opts.Percentile)
	st.Speed = speed
	st.LatenessP99 = float64(run.Summary.LatenessP99) / 1e6
	if opts.Measure != nil {
		if m, err := opts.Measure(ctx, run.Records, opts.SLO); err == nil {
			st.RPS, st.OutTokPerS = m.RPS, m.OutTokPerS
			st.TTFTP50Ms, st.TTFTP99Ms = m.TTFTP50Ms, m.TTFTP99Ms
			st.TPOTP50Ms, st.TPOTP99Ms = m.TPOTP50Ms, m.TPOTP99Ms
			st.E2EP99Ms, st.GoodRatio = m.E2EP99Ms, m.GoodRatio
		}
	}
	if opts.OutDir != "" {
		m := run.Meta
		m.Set("sweep.speed", strconv.FormatFloat(speed, 'g', -1, 64))
		m.Set("sweep.slo", opts.SLO.String())
		m.Set("sweep.slo_percentile", strconv.FormatFloat(opts.Percentile, 'g', -1, 64))
		m.Set("sweep.meets_slo", strconv.FormatBool(st.OK))
		m.Set("sweep.repeat", strconv.Itoa(rep+1))
		st.File = filepath.Join(opts.OutDir, name+opts.Ext)
		if err := traces.WriteAll(st.File, m, run.Records); err != nil {
			return nil, fmt.Errorf("write results %s: %w", st.File, err)
		}
	}
	return st, nil
}

// Judge computes each SLO metric at the percentile pct over every sent
// request (failures count as +Inf, so an erroring server never passes) and
// whether all are within their bounds.
func Judge(recs []traces.Record, slo traces.SLO, pct float64) *Step {
	st := &Step{Requests: len(recs), AtPct: map[string]float64{}, OK: true}
	bounds := slo.Bounds()
	vals := make([][]float64, len(bounds))
	for i := range recs {
		r := &recs[i]
		if !r.OK() {
			st.Failed++
		}
		l := r.Latencies()
		if r.OK() && !l.HasTPOT {
			l.HasTPOT = true // single-token requests: TPOT 0, as in vLLM
		}
		for k, b := range bounds {
			x := math.Inf(1) // failures count as +Inf
			if v, ok := l.Get(b.Metric); ok && r.OK() {
				x = v / 1e6
			}
			vals[k] = append(vals[k], x)
		}
	}
	worst := 0.0
	for k, b := range bounds {
		n := b.Metric
		sort.Float64s(vals[k])
		q := traces.Quantile(vals[k], pct/100)
		st.AtPct[n] = q
		bound := float64(b.Bound) / 1e6
		if r := q / bound; r > st.severity || math.IsNaN(r) {
			st.severity = math.Inf(1)
			if !math.IsNaN(r) {
				st.severity = r
			}
		}
		if !(q <= bound) {
			st.OK = false
			if r := q / bound; r > worst || st.Broken == "" {
				worst, st.Broken = r, n
			}
		}
	}
	if len(recs) == 0 {
		st.OK = false
		st.Broken = "requests"
		st.severity = math.Inf(1)
	}
	return st
}
