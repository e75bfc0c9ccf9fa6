package analyze

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// WriteText writes the human-readable report: counts, throughput, goodput,
// the latency table, the tail attribution and diagnosis, per-group tables
// with --by, and the timeline when a window was asked for.
func (rep *Report) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	p := func(format string, a ...any) { fmt.Fprintf(bw, format, a...) }
	var st []string
	for _, k := range slices.Sorted(maps.Keys(rep.ByStatus)) {
		st = append(st, fmt.Sprintf("%s %d", k, rep.ByStatus[k]))
	}
	p("Requests      %d (%s)\n", rep.Requests, strings.Join(st, ", "))
	p("Duration      %.2f s\n", rep.DurationS)
	t := rep.Throughput
	p("Throughput    %.2f req/s, %.1f output tok/s (peak %.0f tok/s), %.1f total tok/s\n",
		t.RequestsPerS, t.OutputTokensPerS, t.PeakOutputTokensPerS, t.TotalTokensPerS)
	switch {
	case rep.Completed > 0 && rep.Sampling != nil && slices.Contains(rep.Sampling.Sampled, "peak_concurrency"):
		p("Concurrency   peak ~%d (estimated on the sample: the rows were not in send order)\n", rep.PeakConcurrency)
	case rep.Completed > 0:
		p("Concurrency   peak %d\n", rep.PeakConcurrency)
	default:
		p("Concurrency   peak - (measured over successful requests; there are none)\n")
	}
	if s := rep.Sampling; s != nil {
		p("Approximate   %s\n", s.Note())
	}
	if rep.Goodput != nil {
		p("Goodput       %.2f req/s (%d of %d requests, %.1f%%, meet %s)\n", *rep.Goodput, *rep.GoodRequests, rep.Requests, 100**rep.GoodRatio, rep.SLO)
	}
	p("\n")
	writeDistTable(bw, &rep.Summary)
	at := &rep.Attribution
	if at.TailRequests > 0 {
		metric := strings.ToUpper(at.TailMetric)
		p("\nTail attribution: p%s %s (incl. lateness) ≥ %s, %d request(s), %s timings\n",
			fmtPct(at.TailPercentile), metric, fmtMs(at.TailThresholdMs), at.TailRequests, at.Source)
		ks := at.shownIndices()
		nw := nameWidth(ks)
		p("  %-*s %8s %12s   %8s %12s\n", nw, "component", "tail", "tail mean", "all", "all mean")
		sh, mm, sa, ma := at.Share.Array(), at.MeanMs.Array(), at.ShareAll.Array(), at.MeanAllMs.Array()
		tm, am := fmtMsColumn(mm[:]), fmtMsColumn(ma[:])
		for _, k := range ks {
			p("  %-*s %7.1f%% %12s   %7.1f%% %12s\n", nw, ComponentNames[k], 100*sh[k], tm[k], 100*sa[k], am[k])
		}
		p("  dominant: %s (the largest component of %.0f%% of tail requests)\n", at.Dominant, 100*at.DominantAgreement)
	}
	if len(at.Diagnosis) > 0 {
		p("\nDiagnosis\n")
		for _, d := range at.Diagnosis {
			p("  - %s\n", d)
		}
	}
	if len(rep.Notes) > 0 {
		p("\nNot in this report\n")
		for _, n := range rep.Notes {
			p("  - %s\n", n)
		}
	}
	if len(rep.Groups) > 0 {
		p("\nBy %s\n", rep.Groups[0].By)
		p("  %-20s %8s %8s %7s %10s %10s %10s %10s %10s %10s\n", "value", "requests", "ok", "failed",
			"ttft p50", "ttft p99", "tpot p50", "e2e p50", "e2e p99", "goodput")
		for _, g := range rep.Groups {
			gp := "-"
			if g.Goodput != nil {
				gp = fmt.Sprintf("%.2f/s", *g.Goodput)
			}
			p("  %-20s %8d %8d %7d %10s %10s %10s %10s %10s %10s\n", trunc(g.label(), 20), g.Requests, g.Completed, g.Failed,
				distCell(g.TTFT, g.TTFT.P50), distCell(g.TTFT, g.TTFT.P99), distCell(g.TPOT, g.TPOT.P50), distCell(g.E2E, g.E2E.P50), distCell(g.E2E, g.E2E.P99), gp)
		}
	}
	rep.writeGroupAttributionText(p) // capacity.go
	rep.writeCapacityText(p)         // capacity.go
	rep.writeSessionsText(p)         // sessions.go
	rep.writePrefixCacheText(p)      // prefixcache.go
	rep.writeFleetText(p)            // fleet.go
	rep.writeInstancesText(p)        // instances.go
	rep.writeCrossCheckText(p)       // crosscheck.go
	if rep.opts.Window > 0 && len(rep.Windows) > 0 {
		clock := ""
		if c := rep.ReplayClock; c != nil {
			clock = fmt.Sprintf("; start s is run time, the trace's %s + start × %g", fmtS(c.WindowFromS), c.Speed)
		}
		p("\nTimeline (%.3gs windows; latency ms of requests sent in the window%s)\n", rep.Windows[0].EndS-rep.Windows[0].StartS, clock)
		p("  %8s %6s %5s %5s %9s %9s %9s %9s %8s %9s %8s %8s %9s %5s\n", "start s", "sent", "ok", "fail",
			"ttft p50", "ttft p99", "e2e p50", "e2e p99", "req/s", "out tok/s", "in-fl", "in-max", "late p99", "tail")
		for _, x := range rep.Windows {
			// A window with no successful request has no latency: "-", not 0.0.
			lat := func(v float64) string {
				if x.Completed == 0 {
					return "-"
				}
				return fmt.Sprintf("%.1f", v)
			}
			late := "-"
			if x.Sent > 0 {
				late = fmt.Sprintf("%.1f", x.LatenessP99Ms)
			}
			p("  %8.1f %6d %5d %5d %9s %9s %9s %9s %8.2f %9.1f %8.1f %8d %9s %5d\n", x.StartS, x.Sent, x.Completed, x.Failed,
				lat(x.TTFTP50Ms), lat(x.TTFTP99Ms), lat(x.E2EP50Ms), lat(x.E2EP99Ms), x.RequestsPerS, x.OutputTokensPerS, x.InFlightMean, x.InFlightMax, late, x.TailRequests)
		}
	}
	if rep.ShardClocks != nil {
		p("\n%s\n", rep.ShardClocks.line())
	}
	if len(rep.Warnings) > 0 {
		p("\nWarnings\n")
		for _, s := range rep.Warnings {
			p("  - %s\n", s)
		}
	}
	return bw.Flush()
}

func trunc(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

func writeDistTable(w io.Writer, s *Summary) {
	fmt.Fprintf(w, "%-18s %9s %9s %9s %9s %9s %9s %9s %9s %9s\n", "latency (ms)", "count", "mean", "std", "p50", "p90", "p95", "p99", "p99.9", "max")
	row := func(name string, d Dist) {
		if d.Count == 0 {
			fmt.Fprintf(w, "%-18s %9d %9s\n", name, 0, "-")
			return
		}
		if d.Approx {
			name += "~"
		}
		fmt.Fprintf(w, "%-18s %9d %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f\n", name, d.Count, d.Mean, d.Std, d.P50, d.P90, d.P95, d.P99, d.P999, d.Max)
	}
	row("TTFT", s.TTFT)
	row("TTFT (scheduled)", s.TTFTScheduled)
	row("TPOT", s.TPOT)
	switch {
	case itlChunkIsToken(s):
		row("ITL (chunk=token)", s.ITL)
	case s.ITLPerTokenEstimated > 0:
		row("ITL (per chunk)", s.ITL)
		row("ITL (token, est.)", s.ITLPerToken) // chunk counts estimated from usage totals
	default:
		row("ITL (per chunk)", s.ITL)
		row("ITL (per token)", s.ITLPerToken)
	}
	row("E2E", s.E2E)
	row("E2E (scheduled)", s.E2EScheduled)
	row("lateness", s.Lateness)
}

// itlChunkIsToken reports that the ITL per chunk and per token are one
// distribution (every chunk carried one token, as the chunk counts say,
// not estimated): reports say it in one row instead of two identical ones.
func itlChunkIsToken(s *Summary) bool {
	return s.ITL.Count > 0 && s.ITLPerTokenEstimated == 0 && s.ITL == s.ITLPerToken
}

// fmtMsColumn formats a column of durations (ms) in one unit and precision,
// chosen by its largest value the way fmtMs chooses for one value, so a
// column never mixes "16.5 s" with "4210 ms".
func fmtMsColumn(vals []float64) []string {
	var top float64
	for _, v := range vals {
		if !math.IsNaN(v) {
			top = max(top, math.Abs(v))
		}
	}
	unit, div, prec := "ms", 1.0, 2
	switch {
	case top >= 10000:
		unit, div, prec = "s", 1000, 1
	case top >= 100:
		prec = 0
	case top >= 10:
		prec = 1
	}
	out := make([]string, len(vals))
	for i, v := range vals {
		out[i] = strconv.FormatFloat(v/div, 'f', prec, 64) + " " + unit
	}
	return out
}

// distCell is a statistic of d with two decimals, or "-" when d is empty
// (a group whose requests all failed has no latency, not 0.00).
func distCell(d Dist, v float64) string {
	if d.Count == 0 {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}
