package sweep

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// sloMetrics lists the SLO's metrics with their bounds, in a fixed order.
func sloMetrics(s traces.SLO) (names []string, bounds []time.Duration) {
	for _, b := range s.Bounds() {
		names, bounds = append(names, b.Metric), append(bounds, b.Bound)
	}
	return names, bounds
}

func fmtSpeed(s float64) string { return strconv.FormatFloat(s, 'g', 4, 64) }

// metricLabel is the display name of an SLO metric.
func metricLabel(n string) string { return strings.ToUpper(n) }

// Answer is the sweep's one-line verdict.
func (res *Result) Answer() string {
	cfg := res.opts
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

// WriteTable prints the steps, one row per speed, and marks the knee.
func (res *Result) WriteTable(w io.Writer) {
	cfg := res.opts
	names, _ := sloMetrics(cfg.SLO)
	pct := "p" + strconv.FormatFloat(cfg.Percentile, 'g', -1, 64)
	// Two header lines: what each column is, then its unit.
	fmt.Fprintf(w, "%7s %9s %9s %10s %6s %10s %10s %10s %10s", "speed", "offered", "achieved", "output", "failed", "ttft p50", "ttft p99", "tpot p50", "tpot p99")
	for _, n := range names {
		fmt.Fprintf(w, " %12s", "slo "+n+"@"+pct)
	}
	fmt.Fprintf(w, " %8s  %s\n", "goodput", "verdict")
	fmt.Fprintf(w, "%6s× %9s %9s %10s %6s %10s %10s %10s %10s", "", "req/s", "req/s", "tok/s", "reqs", "ms", "ms", "ms", "ms")
	for range names {
		fmt.Fprintf(w, " %12s", "ms")
	}
	fmt.Fprintf(w, " %8s\n", "% of req")
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

// WriteJSON prints the sweep as JSON; a metric at the percentile that is
// infinite (failed requests) is written as -1.
func (res *Result) WriteJSON(w io.Writer) error {
	cfg := res.opts
	out := struct {
		*Result
		SLO        string  `json:"slo"`
		Percentile float64 `json:"slo_percentile"`
		Answer     string  `json:"answer"`
	}{res, cfg.SLO.String(), cfg.Percentile, res.Answer()}
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
