package main

// sweep: capacity search. The generic bisection lives in replay.Search (it
// takes an evaluate callback); this file orchestrates it, because a sweep
// step needs both replay (run the trace at a speed, against --url or a
// fresh built-in simulator) and analyze (throughput, percentiles, goodput).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tokentrace/tokentrace/analyze"
	"github.com/tokentrace/tokentrace/replay"
	"github.com/tokentrace/tokentrace/replay/sim"
	"github.com/tokentrace/tokentrace/traces"
	"github.com/urfave/cli/v2"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

func init() { register(90, sweepCommand) }

// Sweep defaults shared by flags and sweepConfig.
const (
	defaultSweepSpeeds     = "0.5,1,1.5,2,3"
	defaultSweepPercentile = 99.0
	defaultSweepOutDir     = "sweep"
	defaultSweepExt        = ".parquet"
)

// sweepConfig is one capacity sweep.
type sweepConfig struct {
	// Replay is the base replay options; Speed, Run and Journal are set per
	// step. URL "" starts a fresh simulator (Sim) for every step.
	Replay replay.Options
	// Sim configures the built-in simulator when Replay.URL is "".
	Sim sim.Options
	// SLO are the bounds every step is judged against, at Percentile.
	SLO        traces.SLO
	Percentile float64
	// Speeds are evaluated in order unless Search is set; Search bisects
	// [Low, High] down to Tolerance.
	Speeds               []float64
	Search               bool
	Low, High, Tolerance float64
	// Repeat replays every speed this many times (0 or 1: once). A speed
	// meets the SLOs only if every run does; its step reports the worst run.
	Repeat int
	// OutDir receives one results file per step (speed-<s><Ext>); "" writes none.
	OutDir, Ext string
	// Log receives one line per step (nil = quiet).
	Log io.Writer
}

// sweepStep is one replay of the sweep.
type sweepStep struct {
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
	// Runs and PassedRuns count the replays of this speed (--repeat) and
	// those that met the SLOs; the other fields are the worst run's.
	Runs       int `json:"runs"`
	PassedRuns int `json:"passed_runs"`
	// severity is the worst SLO metric over its bound (value/bound; +Inf
	// for failures), which picks the worst run.
	severity float64
}

// sweepResult is a whole sweep.
type sweepResult struct {
	BaseRPS    float64     `json:"base_rps"`
	Steps      []sweepStep `json:"steps"`      // by speed
	Knee       float64     `json:"knee_speed"` // highest passing speed (0 = none passed)
	NextFailed *sweepStep  `json:"-"`          // the step right above the knee, if any
	Warnings   []string    `json:"warnings,omitempty"`
}

// sloMetrics lists the SLO's metrics with their bounds, in a fixed order.
func sloMetrics(s traces.SLO) (names []string, bounds []time.Duration) {
	for _, b := range s.Bounds() {
		names, bounds = append(names, b.Metric), append(bounds, b.Bound)
	}
	return names, bounds
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

// runSweep runs the sweep over recs.
func runSweep(ctx context.Context, cfg sweepConfig, recs []traces.Record, meta traces.Meta) (*sweepResult, error) {
	inWindow := recs
	if cfg.Replay.WindowFrom > 0 || cfg.Replay.WindowTo > 0 {
		inWindow = nil
		for i := range recs {
			a := time.Duration(recs[i].ArrivalNs)
			if a >= cfg.Replay.WindowFrom && (cfg.Replay.WindowTo == 0 || a < cfg.Replay.WindowTo) {
				inWindow = append(inWindow, recs[i])
			}
		}
	}
	res := &sweepResult{BaseRPS: traceRate(inWindow)}
	if cfg.OutDir != "" {
		if err := os.MkdirAll(cfg.OutDir, 0o755); err != nil {
			return nil, fmt.Errorf("--out-dir: %w", err)
		}
	}
	eval := func(ctx context.Context, speed float64) (bool, error) {
		var runs []*sweepStep
		for rep := 0; rep < max(cfg.Repeat, 1); rep++ {
			one, err := sweepOne(ctx, cfg, recs, meta, speed, rep)
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
		if cfg.Log != nil {
			verdict := "meets SLO"
			if !st.OK {
				verdict = "misses " + st.Broken
			}
			if st.Runs > 1 {
				verdict += fmt.Sprintf(" (%d of %d runs met it; worst run shown)", st.PassedRuns, st.Runs)
			}
			fmt.Fprintf(cfg.Log, "sweep: %s×: %d requests, %.2f req/s, TTFT p50 %.1f ms p99 %.1f ms: %s\n",
				fmtSpeed(speed), st.Requests, st.RPS, st.TTFTP50Ms, st.TTFTP99Ms, verdict)
		}
		return st.OK, nil
	}
	if cfg.Search {
		best, _, err := replay.Search(ctx, cfg.Low, cfg.High, cfg.Tolerance, eval)
		if err != nil {
			return res, err
		}
		res.Knee = best
	} else {
		for _, s := range cfg.Speeds {
			if _, err := eval(ctx, s); err != nil {
				return res, fmt.Errorf("speed %g: %w", s, err)
			}
		}
	}
	sort.SliceStable(res.Steps, func(i, j int) bool { return res.Steps[i].Speed < res.Steps[j].Speed })
	if !cfg.Search {
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
func worstRun(runs []*sweepStep) *sweepStep {
	var st *sweepStep
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

// sweepOne replays recs once at speed (repetition rep, from 0) and judges
// the outcome.
func sweepOne(ctx context.Context, cfg sweepConfig, recs []traces.Record, meta traces.Meta, speed float64, rep int) (*sweepStep, error) {
	o := cfg.Replay
	o.Speed = speed
	name := "speed-" + fmtSpeed(speed)
	o.Run = fmt.Sprintf("sweep-%s", fmtSpeed(speed))
	if cfg.Repeat > 1 {
		name += fmt.Sprintf("-r%d", rep+1)
		o.Run += fmt.Sprintf("-r%d", rep+1)
	}
	o.Journal = ""
	if o.URL == "" {
		so := cfg.Sim
		longest := 0
		for i := range recs {
			longest = max(longest, int(recs[i].InputTokens)+int(recs[i].OutputTokens))
		}
		so.MaxModelLen = min(max(so.MaxModelLen, longest), so.NumGPUBlocks*so.BlockSize)
		srv, err := sim.Start(ctx, so)
		if err != nil {
			return nil, fmt.Errorf("start simulator: %w", err)
		}
		defer srv.Close()
		o.URL = srv.URL
		if o.Model == "" {
			// The trace's production model names are not served by the
			// simulator: send its own (--model-map entries still win).
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
	st := judgeStep(run.Records, cfg.SLO, cfg.Percentile)
	st.Speed = speed
	st.LatenessP99 = float64(run.Summary.LatenessP99) / 1e6
	ao := analyze.DefaultOptions()
	ao.SLO = cfg.SLO
	if rep, err := analyze.Analyze(ctx, run.Records, ao); err == nil {
		st.RPS, st.OutTokPerS = rep.Throughput.RequestsPerS, rep.Throughput.OutputTokensPerS
		st.TTFTP50Ms, st.TTFTP99Ms = rep.TTFT.P50, rep.TTFT.P99
		st.TPOTP50Ms, st.TPOTP99Ms = rep.TPOT.P50, rep.TPOT.P99
		st.E2EP99Ms = rep.E2E.P99
		if rep.GoodRatio != nil {
			st.GoodRatio = *rep.GoodRatio
		}
	}
	if cfg.OutDir != "" {
		m := run.Meta
		m.Set("sweep.speed", strconv.FormatFloat(speed, 'g', -1, 64))
		m.Set("sweep.slo", cfg.SLO.String())
		m.Set("sweep.slo_percentile", strconv.FormatFloat(cfg.Percentile, 'g', -1, 64))
		m.Set("sweep.meets_slo", strconv.FormatBool(st.OK))
		m.Set("sweep.repeat", strconv.Itoa(rep+1))
		st.File = filepath.Join(cfg.OutDir, name+cfg.Ext)
		if err := traces.WriteAll(st.File, m, run.Records); err != nil {
			return nil, fmt.Errorf("write results %s: %w", st.File, err)
		}
	}
	return st, nil
}

// judgeStep computes each SLO metric at the percentile over every sent
// request (failures count as +Inf, so an erroring server never passes) and
// whether all are within their bounds.
func judgeStep(recs []traces.Record, slo traces.SLO, pct float64) *sweepStep {
	st := &sweepStep{Requests: len(recs), AtPct: map[string]float64{}, OK: true}
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

func fmtSpeed(s float64) string { return strconv.FormatFloat(s, 'g', 4, 64) }

// metricLabel is the display name of an SLO metric.
func metricLabel(n string) string { return strings.ToUpper(n) }

// answer is the sweep's one-line verdict.
func (res *sweepResult) answer(cfg sweepConfig) string {
	names, bounds := sloMetrics(cfg.SLO)
	bound := func(n string) string {
		for i, m := range names {
			if m == n {
				return fmtBound(bounds[i])
			}
		}
		return "?"
	}
	pct := "p" + strconv.FormatFloat(cfg.Percentile, 'g', -1, 64)
	if len(res.Steps) == 0 {
		return "no step ran"
	}
	if res.Knee == 0 {
		first := res.Steps[0]
		return fmt.Sprintf("this trace misses %s %s ≤ %s even at %s× its recorded rate (%s = %s)",
			pct, metricLabel(first.Broken), bound(first.Broken), fmtSpeed(first.Speed), pct, fmtMs(first.AtPct[first.Broken]))
	}
	if res.NextFailed == nil {
		return fmt.Sprintf("this trace meets every SLO (%s %s) at %s× its recorded rate, the highest speed tried", pct, cfg.SLO, fmtSpeed(res.Knee))
	}
	n := res.NextFailed.Broken
	return fmt.Sprintf("this trace can run at %s× its recorded rate (%.2f req/s) before %s %s exceeds %s (%s at %s×)",
		fmtSpeed(res.Knee), res.BaseRPS*res.Knee, pct, metricLabel(n), bound(n), fmtMs(res.NextFailed.AtPct[n]), fmtSpeed(res.NextFailed.Speed))
}

func fmtBound(d time.Duration) string {
	if d >= time.Second && d%time.Second == 0 {
		return fmt.Sprintf("%d s", d/time.Second)
	}
	if d >= time.Second {
		return fmt.Sprintf("%g s", d.Seconds())
	}
	return fmt.Sprintf("%g ms", float64(d)/1e6)
}

func fmtMs(ms float64) string {
	switch {
	case math.IsInf(ms, 1):
		return "failed requests"
	case ms >= 1000:
		return fmt.Sprintf("%.2f s", ms/1000)
	default:
		return fmt.Sprintf("%.1f ms", ms)
	}
}

// writeTable prints the steps.
func (res *sweepResult) writeTable(w io.Writer, cfg sweepConfig) {
	names, _ := sloMetrics(cfg.SLO)
	pct := "p" + strconv.FormatFloat(cfg.Percentile, 'g', -1, 64)
	fmt.Fprintf(w, "%7s %9s %9s %10s %6s %10s %10s %10s %10s", "speed", "offered", "req/s", "out tok/s", "failed", "ttft p50", "ttft p99", "tpot p50", "tpot p99")
	for _, n := range names {
		fmt.Fprintf(w, " %12s", "slo "+n+"@"+pct)
	}
	fmt.Fprintf(w, " %8s  %s\n", "goodput", "verdict")
	for _, s := range res.Steps {
		mark := ""
		if s.Speed == res.Knee {
			mark = "  ← knee"
		}
		v := "ok"
		if !s.OK {
			v = "misses " + s.Broken
		}
		if s.Runs > 1 {
			v += fmt.Sprintf(" (%d/%d runs ok, worst shown)", s.PassedRuns, s.Runs)
		}
		fmt.Fprintf(w, "%6s× %9.2f %9.2f %10.1f %6d %10.1f %10.1f %10.1f %10.1f", fmtSpeed(s.Speed), s.OfferedRPS, s.RPS, s.OutTokPerS, s.Failed,
			s.TTFTP50Ms, s.TTFTP99Ms, s.TPOTP50Ms, s.TPOTP99Ms)
		for _, n := range names {
			x := s.AtPct[n]
			if math.IsInf(x, 1) {
				fmt.Fprintf(w, " %12s", "inf")
			} else {
				fmt.Fprintf(w, " %12.1f", x)
			}
		}
		fmt.Fprintf(w, " %7.1f%%  %s%s\n", 100*s.GoodRatio, v, mark)
	}
}

// writeChart draws throughput (output tok/s) against p50 and p99 latency of
// the first SLO metric, with the SLO bound and the knee marked; the format
// follows the extension (.svg, .png, .pdf).
func (res *sweepResult) writeChart(name string, cfg sweepConfig) error {
	names, bounds := sloMetrics(cfg.SLO)
	metric, bound := "ttft", time.Duration(0)
	if len(names) > 0 {
		metric, bound = names[0], bounds[0]
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Throughput vs %s latency (knee at %s×)", metricLabel(metric), fmtSpeed(res.Knee))
	p.X.Label.Text = "achieved output tokens/s"
	p.Y.Label.Text = metricLabel(metric) + " (ms)"
	var p50, p99 plotter.XYs
	var labels []string
	var lx, ly []float64
	maxY := 0.0
	for _, s := range res.Steps {
		a, b := s.TTFTP50Ms, s.TTFTP99Ms
		switch metric {
		case "tpot":
			a, b = s.TPOTP50Ms, s.TPOTP99Ms
		case "e2e":
			a, b = math.NaN(), s.E2EP99Ms
		}
		if !math.IsNaN(a) {
			p50 = append(p50, plotter.XY{X: s.OutTokPerS, Y: a})
		}
		p99 = append(p99, plotter.XY{X: s.OutTokPerS, Y: b})
		labels = append(labels, fmtSpeed(s.Speed)+"×")
		lx, ly = append(lx, s.OutTokPerS), append(ly, b)
		maxY = max(maxY, b)
	}
	add := func(xy plotter.XYs, c color.Color, legend string, dashed bool) error {
		if len(xy) == 0 {
			return nil
		}
		l, pts, err := plotter.NewLinePoints(xy)
		if err != nil {
			return err
		}
		l.Color, pts.Color = c, c
		l.Width = vg.Points(1.5)
		if dashed {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
		p.Add(l, pts)
		p.Legend.Add(legend, l, pts)
		return nil
	}
	if err := add(p50, color.RGBA{R: 31, G: 119, B: 180, A: 255}, metricLabel(metric)+" p50", false); err != nil {
		return err
	}
	if err := add(p99, color.RGBA{R: 214, G: 39, B: 40, A: 255}, metricLabel(metric)+" p99", false); err != nil {
		return err
	}
	if bound > 0 && len(res.Steps) > 0 {
		x0, x1 := math.Inf(1), math.Inf(-1)
		for _, s := range res.Steps {
			x0, x1 = min(x0, s.OutTokPerS), max(x1, s.OutTokPerS)
		}
		bm := float64(bound) / 1e6
		if err := add(plotter.XYs{{X: x0, Y: bm}, {X: x1, Y: bm}}, color.Gray{Y: 90}, "SLO "+metricLabel(metric)+" "+fmtBound(bound), true); err != nil {
			return err
		}
	}
	for _, s := range res.Steps {
		if s.Speed == res.Knee && res.Knee > 0 {
			y := s.TTFTP99Ms
			switch metric {
			case "tpot":
				y = s.TPOTP99Ms
			case "e2e":
				y = s.E2EP99Ms
			}
			sc, err := plotter.NewScatter(plotter.XYs{{X: s.OutTokPerS, Y: y}})
			if err != nil {
				return err
			}
			sc.GlyphStyle.Shape = draw.RingGlyph{}
			sc.GlyphStyle.Radius = vg.Points(7)
			sc.GlyphStyle.Color = color.RGBA{G: 140, A: 255}
			p.Add(sc)
			p.Legend.Add(fmt.Sprintf("knee %s× (%.0f tok/s)", fmtSpeed(s.Speed), s.OutTokPerS), sc)
		}
	}
	if len(lx) > 0 {
		var xy plotter.XYs
		for i := range lx {
			xy = append(xy, plotter.XY{X: lx[i], Y: ly[i]})
		}
		if lb, err := plotter.NewLabels(plotter.XYLabels{XYs: xy, Labels: labels}); err == nil {
			lb.Offset = vg.Point{X: vg.Points(4), Y: vg.Points(4)}
			p.Add(lb)
		}
	}
	p.Legend.Top, p.Legend.Left = true, true
	// Latency spans orders of magnitude past the knee: a log axis keeps
	// the region below the SLO readable (all values are positive).
	minY := math.Inf(1)
	for _, xy := range append(append(plotter.XYs{}, p50...), p99...) {
		if xy.Y > 0 {
			minY = min(minY, xy.Y)
		}
	}
	if bound > 0 {
		minY = min(minY, float64(bound)/1e6)
		maxY = max(maxY, float64(bound)/1e6)
	}
	if maxY > 0 && !math.IsInf(minY, 1) && !math.IsInf(maxY, 1) && allPositive(p50) && allPositive(p99) {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
		p.Y.Min, p.Y.Max = minY/1.5, maxY*1.5
		p.Y.Label.Text += ", log scale"
	} else {
		p.Y.Min = 0
	}
	ext := strings.ToLower(filepath.Ext(name))
	if ext != ".svg" && ext != ".png" && ext != ".pdf" {
		return fmt.Errorf("--chart %s: want .svg, .png or .pdf", name)
	}
	return p.Save(8*vg.Inch, 5*vg.Inch, name)
}

// sweepSimFlags are the built-in simulator's flags (those of tokentrace
// sim, prefixed sim-), shared by sweep.
type sweepSimFlags struct {
	preset                           string
	maxSeqs, maxBatched, blocks      int
	stepFixed, prefill, decode, attn time.Duration
	perRequestMetrics                bool
}

func (f *sweepSimFlags) flags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "sim-preset", Value: sim.DefaultPreset, Destination: &f.preset, Usage: "built-in simulator: deployment preset (" + strings.Join(sim.PresetNames(), ", ") + ")"},
		&cli.IntFlag{Name: "sim-max-num-seqs", Destination: &f.maxSeqs, Usage: "built-in simulator: max running sequences (default: preset's)"},
		&cli.IntFlag{Name: "sim-max-num-batched-tokens", Destination: &f.maxBatched, Usage: "built-in simulator: token budget per step (default: preset's)"},
		&cli.IntFlag{Name: "sim-num-gpu-blocks", Destination: &f.blocks, Usage: "built-in simulator: KV cache blocks (default: preset's)"},
		&cli.DurationFlag{Name: "sim-step-fixed", Value: -1, Destination: &f.stepFixed, Usage: "built-in simulator: fixed cost per step (default: preset's)"},
		&cli.DurationFlag{Name: "sim-prefill-per-token", Value: -1, Destination: &f.prefill, Usage: "built-in simulator: cost per prefill token (default: preset's)"},
		&cli.DurationFlag{Name: "sim-decode-per-seq", Value: -1, Destination: &f.decode, Usage: "built-in simulator: cost per decoding sequence (default: preset's)"},
		&cli.DurationFlag{Name: "sim-attn-per-context-token", Value: -1, Destination: &f.attn, Usage: "built-in simulator: cost per context token read (default: preset's)"},
		&cli.BoolFlag{Name: "sim-per-request-metrics", Value: true, Destination: &f.perRequestMetrics, Usage: "built-in simulator: return vLLM's per-request metrics"},
	}
}

func (f *sweepSimFlags) options() (sim.Options, error) {
	o := sim.DefaultOptions()
	if err := sim.ApplyPreset(&o, f.preset); err != nil {
		return o, usageErrorf("--sim-preset: %v", err)
	}
	o.PerRequestMetrics = f.perRequestMetrics
	for _, x := range []struct {
		v   int
		dst *int
	}{{f.maxSeqs, &o.MaxNumSeqs}, {f.maxBatched, &o.MaxNumBatchedTokens}, {f.blocks, &o.NumGPUBlocks}} {
		if x.v != 0 {
			*x.dst = x.v
		}
	}
	for _, x := range []struct {
		v   time.Duration
		dst *time.Duration
	}{{f.stepFixed, &o.StepFixed}, {f.prefill, &o.PrefillPerToken}, {f.decode, &o.DecodePerSeq}, {f.attn, &o.AttnPerContextToken}} {
		if x.v >= 0 {
			*x.dst = x.v
		}
	}
	if err := o.Validate(); err != nil {
		return o, usageErrorf("sim: %v", err)
	}
	return o, nil
}

func sweepCommand() *cli.Command {
	o := replay.DefaultOptions()
	var (
		slo, speeds, pct, outDir, chart, window, searchRange, ext string
		search, quiet, asJSON                                     bool
		repeat                                                    = 1
		tol                                                       = replay.DefaultSearchTolerance
		modelMap                                                  headerFlag
		metadata                                                  headerFlag
		sf                                                        sweepSimFlags
	)
	flags := []cli.Flag{
		&cli.StringFlag{Name: "url", Usage: "server base URL (default: a fresh built-in simulator per step)", Destination: &o.URL},
		&cli.StringFlag{Name: "model", Usage: "model name for every request (default: each record's, else the server's first)", Destination: &o.Model},
		&cli.GenericFlag{Name: "model-map", Value: &modelMap, Usage: "prod-name=served-name (repeatable); unmapped names use --model"},
		&cli.StringFlag{Name: "slo", Usage: "SLOs every step must meet, e.g. ttft=1s,tpot=50ms (required)", Destination: &slo},
		&cli.StringFlag{Name: "slo-percentile", Value: "99", Usage: "percentile the SLOs are judged at (p99, 99.9, ...)", Destination: &pct},
		&cli.StringFlag{Name: "speeds", Value: defaultSweepSpeeds, Usage: "speeds to replay at (× the recorded rate)", Destination: &speeds},
		&cli.BoolFlag{Name: "search", Usage: "binary-search the highest speed meeting the SLOs instead of --speeds", Destination: &search},
		&cli.StringFlag{Name: "search-range", Value: fmt.Sprintf("%g,%g", replay.DefaultSearchLow, replay.DefaultSearchHigh), Usage: "--search: LOW,HIGH speeds", Destination: &searchRange},
		&cli.Float64Flag{Name: "search-tolerance", Value: tol, Usage: "--search: stop when HIGH/LOW ≤ 1+this", Destination: &tol},
		&cli.IntFlag{Name: "repeat", Value: repeat, Usage: "replay every speed N times; a speed meets the SLOs only if every run does, and its row shows the worst run", Destination: &repeat},
		&cli.StringFlag{Name: "out-dir", Value: defaultSweepOutDir, Usage: "directory for one results file per step and the chart", Destination: &outDir},
		&cli.StringFlag{Name: "ext", Value: defaultSweepExt, Usage: "results file extension (.parquet, .jsonl, .jsonl.zst, .csv)", Destination: &ext},
		&cli.StringFlag{Name: "chart", Usage: "chart file(s), .svg, .png or .pdf, comma-separated (default: OUT-DIR/sweep.svg; none = no chart)", Destination: &chart},
		&cli.StringFlag{Name: "window", Usage: "replay only arrivals in FROM,TO (e.g. 0s,60s)", Destination: &window},
		&cli.IntFlag{Name: "max-concurrency", Usage: "cap in-flight requests (0 = none)", Destination: &o.MaxConcurrency},
		&cli.DurationFlag{Name: "timeout", Value: o.Timeout, Usage: "per-request timeout", Destination: &o.Timeout},
		&cli.BoolFlag{Name: "json", Usage: "print the steps and the answer as JSON", Destination: &asJSON},
		&cli.StringFlag{Name: "label", Usage: "name of this sweep, stored in every step's metadata (run.label)", Destination: &o.Label},
		&cli.GenericFlag{Name: "metadata", Value: &metadata, Usage: "key=value stored in every step's metadata as run.meta.KEY (repeatable)"},
		&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no per-step lines on stderr", Destination: &quiet},
	}
	flags = append(flags, sf.flags()...)
	return &cli.Command{
		Name:  "sweep",
		Usage: "find how much faster than recorded a trace can run before the SLOs break",
		UsageText: `tokentrace sweep [flags] TRACE

Examples:
  tokentrace sweep --slo ttft=1s,tpot=50ms --speeds 0.5,1,1.5,2,3 trace.parquet           # built-in simulator
  tokentrace sweep --slo ttft=1s --search --slo-percentile 99 --url http://vllm:8000 trace.parquet
  tokentrace sweep --slo ttft=500ms --sim-preset tiny --out-dir sweep --chart sweep/knee.png trace.parquet`,
		Description: `sweep replays the same trace at several speeds (or binary-searches the
highest speed that still meets every SLO at --slo-percentile), against --url
or a fresh built-in simulator per step. Each step's results go to
OUT-DIR/speed-S.parquet. It prints a table (offered and achieved rate,
throughput, TTFT/TPOT percentiles, each SLO metric at the percentile,
goodput), draws throughput against p50/p99 latency with the knee marked, and
answers in one line: "this trace can run at 2.3× its recorded rate before
p99 TTFT exceeds 1 s". Failed requests count as infinitely slow.`,
		Flags: flags,
		Action: func(c *cli.Context) error {
			a, err := args(c, 1, 1, "TRACE")
			if err != nil {
				return err
			}
			cfg := sweepConfig{OutDir: outDir, Ext: ext, Search: search, Tolerance: tol, Repeat: repeat}
			if repeat < 1 || repeat > 100 {
				return usageErrorf("--repeat: want 1 to 100 runs per speed, got %d", repeat)
			}
			if cfg.SLO, err = traces.ParseSLO(slo); err != nil {
				return usageErrorf("--slo: %v", err)
			}
			if cfg.SLO.IsZero() {
				return usageErrorf("--slo: required, e.g. ttft=1s,tpot=50ms")
			}
			if cfg.Percentile, err = analyze.ParsePercentile(pct); err != nil {
				return usageErrorf("--slo-percentile: %v", err)
			}
			if cfg.Speeds, err = replay.ParseSpeeds(speeds); err != nil {
				return usageErrorf("%v", err)
			}
			if search {
				lo, hi, ok := strings.Cut(searchRange, ",")
				cfg.Low, err = strconv.ParseFloat(strings.TrimSpace(lo), 64)
				if err == nil && ok {
					cfg.High, err = strconv.ParseFloat(strings.TrimSpace(hi), 64)
				}
				if !ok || err != nil || !(cfg.Low > 0) || !(cfg.High > cfg.Low) || math.IsInf(cfg.High, 0) {
					return usageErrorf("--search-range: want LOW,HIGH with 0 < LOW < HIGH, got %q", searchRange)
				}
				if !(tol > 0) || tol >= 1 {
					return usageErrorf("--search-tolerance: want 0 < tol < 1, got %g", tol)
				}
			}
			if window != "" {
				if o.WindowFrom, o.WindowTo, err = replay.ParseWindow(window); err != nil {
					return usageErrorf("%v", err)
				}
			}
			if err := runRecordOptions(&o, nil, metadata.v, modelMap.v, true); err != nil {
				return err
			}
			if o.URL == "" {
				if cfg.Sim, err = sf.options(); err != nil {
					return err
				}
			} else {
				probe := o
				if err := probe.Validate(); err != nil {
					return usageErrorf("%v", err)
				}
			}
			if outDir == "" {
				cfg.OutDir = ""
			}
			if chart == "" && outDir != "" {
				chart = filepath.Join(outDir, "sweep.svg")
			}
			if chart == "none" {
				chart = ""
			}
			for _, ch := range strings.Split(chart, ",") {
				if ce := strings.ToLower(filepath.Ext(ch)); ch != "" && ce != ".svg" && ce != ".png" && ce != ".pdf" {
					return usageErrorf("--chart %s: want .svg, .png or .pdf", ch)
				}
			}
			recs, meta, err := traces.ReadAll(a[0])
			if err != nil && !(errors.Is(err, traces.ErrTruncated) && len(recs) > 0) {
				return fmt.Errorf("read trace %s: %w", a[0], err)
			}
			s := stdio(c)
			if !quiet {
				cfg.Log = s.err
			}
			cfg.Replay = o
			res, err := runSweep(c.Context, cfg, recs, meta)
			if err != nil {
				return err
			}
			for _, ch := range strings.Split(chart, ",") {
				if ch == "" || len(res.Steps) == 0 {
					continue
				}
				if err := os.MkdirAll(filepath.Dir(ch), 0o755); err != nil {
					return fmt.Errorf("--chart: %w", err)
				}
				if err := res.writeChart(ch, cfg); err != nil {
					return fmt.Errorf("write chart %s: %w", ch, err)
				}
				fmt.Fprintf(s.err, "wrote %s\n", ch)
			}
			if asJSON {
				return writeSweepJSON(s.out, res, cfg)
			}
			res.writeTable(s.out, cfg)
			for _, w := range res.Warnings {
				fmt.Fprintf(s.out, "warning: %s\n", w)
			}
			fmt.Fprintf(s.out, "\n%s\n", res.answer(cfg))
			return nil
		},
	}
}

// writeSweepJSON prints the sweep as JSON; a metric at the percentile that
// is infinite (failed requests) is written as -1.
func writeSweepJSON(w io.Writer, res *sweepResult, cfg sweepConfig) error {
	out := struct {
		*sweepResult
		SLO        string  `json:"slo"`
		Percentile float64 `json:"slo_percentile"`
		Answer     string  `json:"answer"`
	}{res, cfg.SLO.String(), cfg.Percentile, res.answer(cfg)}
	for i := range res.Steps {
		for k, v := range res.Steps[i].AtPct {
			if math.IsInf(v, 0) || math.IsNaN(v) {
				res.Steps[i].AtPct[k] = -1
			}
		}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// runRecordOptions fills the replay options of issue 9 (background loads,
// run label metadata, model map, server self-description) from their flags.
// Errors are usage errors naming the flag.
func runRecordOptions(o *replay.Options, background, metadata, modelMap []string, describe bool) error {
	for _, b := range background {
		bg, err := replay.ParseBackground(b)
		if err != nil {
			return usageErrorf("%v", err)
		}
		o.Background = append(o.Background, bg)
	}
	var err error
	if o.Metadata, err = replay.ParseMetadata(metadata); err != nil {
		return usageErrorf("%v", err)
	}
	if o.ModelMap, err = replay.ParseModelMap(modelMap); err != nil {
		return usageErrorf("%v", err)
	}
	o.DescribeServer = describe
	return nil
}

// capacityFlagValues are analyze's bandwidth and cost flags (issue 9).
type capacityFlagValues struct {
	modelBytes, bandwidth string
	costPerHour           float64
}

func capacityFlags(v *capacityFlagValues) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "model-bytes", Usage: "weight size, e.g. 16GB: with --bandwidth, print the decode floor (bytes/bandwidth per step) beside the unloaded TPOT", Destination: &v.modelBytes},
		&cli.StringFlag{Name: "bandwidth", Usage: "memory bandwidth, e.g. 3.35TB/s (with --model-bytes)", Destination: &v.bandwidth},
		&cli.Float64Flag{Name: "cost-per-hour", Usage: "deployment price per hour: print cost per million output tokens (and goodput tokens with --slo)", Destination: &v.costPerHour},
	}
}

func (v *capacityFlagValues) apply(o *analyze.Options) error {
	var err error
	if v.modelBytes != "" {
		if o.ModelBytes, err = analyze.ParseBytes(v.modelBytes); err != nil {
			return usageErrorf("--model-bytes: %v", err)
		}
	}
	if v.bandwidth != "" {
		if o.Bandwidth, err = analyze.ParseBandwidth(v.bandwidth); err != nil {
			return usageErrorf("--bandwidth: %v", err)
		}
	}
	if (o.ModelBytes > 0) != (o.Bandwidth > 0) {
		return usageErrorf("--model-bytes and --bandwidth: give both (e.g. --model-bytes 16GB --bandwidth 3.35TB/s)")
	}
	if v.costPerHour < 0 || math.IsNaN(v.costPerHour) || math.IsInf(v.costPerHour, 0) {
		return usageErrorf("--cost-per-hour: want a positive price, got %v", v.costPerHour)
	}
	o.CostPerHour = v.costPerHour
	return nil
}

// attributeGroups gives each --by group its own tail attribution (it reads
// the files again; only with --by).
func attributeGroups(ctx context.Context, rep *analyze.Report, names []string) error {
	if rep.Options().By == "" {
		return nil
	}
	var all []traces.Record
	for _, n := range names {
		recs, _, err := traces.ReadAll(n)
		if err != nil && !(errors.Is(err, traces.ErrTruncated) && len(recs) > 0) {
			return fmt.Errorf("read %s: %w", n, err)
		}
		all = append(all, recs...)
	}
	return analyze.AttributeGroups(ctx, rep, all)
}

// runRecordLine is inspect's "run" line: label and --metadata pairs.
func runRecordLine(m traces.Meta) string {
	var parts []string
	if l := m.Get(replay.MetaLabel); l != "" {
		parts = append(parts, "label "+l)
	}
	var keys []string
	for k := range m.Extra {
		if strings.HasPrefix(k, replay.MetaUserPrefix) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		parts = append(parts, strings.TrimPrefix(k, replay.MetaUserPrefix)+"="+m.Extra[k])
	}
	if b := m.Get(replay.MetaBackground); b != "" {
		parts = append(parts, "background "+b)
	}
	return strings.Join(parts, ", ")
}

// serverLine is inspect's "server" line: what the server said about itself.
func serverLine(m traces.Meta) string {
	var parts []string
	for _, k := range []string{replay.MetaServerVersion, replay.MetaServerModels, replay.MetaServerInfo} {
		if v := m.Get(k); v != "" {
			parts = append(parts, strings.TrimPrefix(k, "server.")+" "+v)
		}
	}
	return strings.Join(parts, ", ")
}

func allPositive(xy plotter.XYs) bool {
	for _, v := range xy {
		if !(v.Y > 0) || math.IsInf(v.Y, 1) {
			return false
		}
	}
	return true
}
