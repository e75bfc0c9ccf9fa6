package analyze

import (
	"fmt"
	"math"
	"strings"

	"github.com/tokentrace/tokentrace/traces"
)

// CrossCheck compares the attribution with the server's own histograms
// (vLLM's request_queue/prefill/decode_time_seconds, as the Δsum/Δcount
// means of the metrics series). Like is compared with like: the histograms
// cover every request that finished in each step, so their means are
// weighted by the requests finished in the step, and the attribution side
// is every successful request of the trace that finished in the same
// window, not only the tail. Shares are of queue + prefill + decode.
type CrossCheck struct {
	// Source is the attribution's source over the compared requests:
	// "server" (exact timings), "estimated" or "mixed".
	Source string `json:"source"`
	// Requests is how many of the trace's requests finished in the
	// window (estimated from the sample past Options.ExactRows);
	// ServerRequests how many the server counted finishing in it
	// (requests_finished; more when other clients used the server too).
	Requests       int   `json:"requests"`
	ServerRequests int64 `json:"server_requests"`
	// StartS and EndS bound the window, seconds from the trace's start.
	StartS float64 `json:"start_s"`
	EndS   float64 `json:"end_s"`
	// Attribution and Server are the shares of queue, prefill and decode;
	// AttributionMeanMs and ServerMeanMs the mean per request.
	Attribution       Split `json:"attribution"`
	Server            Split `json:"server"`
	AttributionMeanMs Split `json:"attribution_mean_ms"`
	ServerMeanMs      Split `json:"server_mean_ms"`
	// MaxDiffPoints is the largest difference of a share, in percentage
	// points, on the component Worst; Disagree is set past
	// CrossCheckTolerancePoints.
	MaxDiffPoints float64 `json:"max_diff_points"`
	Worst         string  `json:"worst"`
	Disagree      bool    `json:"disagree"`
	// Missing lists the histogram columns the series does not have (the
	// check is then not made); SkippedSteps counts steps with finished
	// requests but a missing mean (gaps), left out of both sides' weights.
	Missing      []string `json:"missing,omitempty"`
	SkippedSteps int      `json:"skipped_steps,omitempty"`
}

// Split is queue, prefill and decode (shares or milliseconds).
type Split struct {
	Queue   float64 `json:"queue"`
	Prefill float64 `json:"prefill"`
	Decode  float64 `json:"decode"`
}

func (s Split) array() [3]float64 { return [3]float64{s.Queue, s.Prefill, s.Decode} }

func splitOf(v [3]float64) Split { return Split{Queue: v[0], Prefill: v[1], Decode: v[2]} }

// CrossCheckTolerancePoints is how far (percentage points) a share of the
// attribution may be from the server's before the two are said to disagree.
const CrossCheckTolerancePoints = 10.0

var splitNames = [3]string{"queue", "prefill", "decode"}

// crossCheck fills rep.CrossCheck from the pooled metrics rows.
func (rep *Report) crossCheck(s []traces.MetricsSample) {
	if len(s) == 0 || rep.Completed == 0 {
		return
	}
	cc := &CrossCheck{}
	has := [4]bool{}
	for _, x := range s {
		has[0] = has[0] || x.QueueTimeMeanNs >= 0
		has[1] = has[1] || x.PrefillTimeMeanNs >= 0
		has[2] = has[2] || x.DecodeTimeMeanNs >= 0
		has[3] = has[3] || x.RequestsFinished >= 0
	}
	for k, name := range []string{"queue_time_mean_ns", "prefill_time_mean_ns", "decode_time_mean_ns", "requests_finished"} {
		if !has[k] {
			cc.Missing = append(cc.Missing, name)
		}
	}
	rep.CrossCheck = cc
	if len(cc.Missing) > 0 {
		return
	}
	// The server's side: the steps with finished requests.
	var srv [3]float64
	var skipped [][2]int64 // (from, to] of the steps left out
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for _, x := range s {
		if x.RequestsFinished <= 0 {
			continue
		}
		if x.QueueTimeMeanNs < 0 || x.PrefillTimeMeanNs < 0 || x.DecodeTimeMeanNs < 0 {
			cc.SkippedSteps++
			skipped = append(skipped, [2]int64{x.TimeNs - x.IntervalNs, x.TimeNs})
			continue
		}
		w := float64(x.RequestsFinished)
		srv[0] += w * float64(x.QueueTimeMeanNs)
		srv[1] += w * float64(x.PrefillTimeMeanNs)
		srv[2] += w * float64(x.DecodeTimeMeanNs)
		cc.ServerRequests += x.RequestsFinished
		lo, hi = min(lo, x.TimeNs-x.IntervalNs), max(hi, x.TimeNs)
	}
	if cc.ServerRequests == 0 {
		return
	}
	cc.StartS, cc.EndS = float64(lo)/1e9, float64(hi)/1e9
	// The attribution's side: every successful request that finished in
	// the window, outside the steps left out.
	var att [3]float64
	nServer := 0
rows:
	for i := range rep.rows.n {
		r := rep.rows.at(int(i))
		e := r.end()
		if !r.ok || e <= lo || e > hi {
			continue
		}
		for _, sk := range skipped {
			if e > sk[0] && e <= sk[1] {
				continue rows
			}
		}
		c, server, ok := rep.splitAll(r)
		if !ok {
			continue
		}
		for k := range c {
			att[k] += c[k]
		}
		cc.Requests++
		if server {
			nServer++
		}
	}
	switch {
	case nServer == cc.Requests:
		cc.Source = SourceServer
	case nServer == 0:
		cc.Source = SourceEstimated
	default:
		cc.Source = SourceMixed
	}
	if cc.Requests == 0 {
		return
	}
	var attSh, srvSh, attMs, srvMs [3]float64
	at, st := att[0]+att[1]+att[2], srv[0]+srv[1]+srv[2]
	for k := range att {
		if at > 0 {
			attSh[k] = att[k] / at
		}
		if st > 0 {
			srvSh[k] = srv[k] / st
		}
		attMs[k] = att[k] / float64(cc.Requests) * msPerNs
		srvMs[k] = srv[k] / float64(cc.ServerRequests) * msPerNs
		if d := 100 * math.Abs(attSh[k]-srvSh[k]); d > cc.MaxDiffPoints {
			cc.MaxDiffPoints, cc.Worst = d, splitNames[k]
		}
	}
	cc.Attribution, cc.Server = splitOf(attSh), splitOf(srvSh)
	cc.Requests *= int(rep.oneIn()) // a sample's count, scaled to the run
	cc.AttributionMeanMs, cc.ServerMeanMs = splitOf(attMs), splitOf(srvMs)
	cc.Disagree = cc.MaxDiffPoints > CrossCheckTolerancePoints
}

// splitAll is a successful row's queue, prefill and decode (ns): the
// server's timings where the row has all three (unless ignored), else the
// estimate (queue = TTFT − estimated prefill, decode = E2E − TTFT).
func (rep *Report) splitAll(r *row) (c [3]float64, server, ok bool) {
	ttft, okT := r.ttft()
	e2e, okE := r.e2e()
	if !okT || !okE {
		return c, false, false
	}
	if !rep.opts.IgnoreServerTimings && r.sq >= 0 && r.sp >= 0 && r.sd >= 0 {
		return [3]float64{float64(r.sq), float64(r.sp), float64(r.sd)}, true, true
	}
	pre := min(rep.est.prefill(r.uncached()), max(ttft, 0))
	return [3]float64{max(ttft-pre, 0), pre, max(e2e-ttft, 0)}, false, true
}

// crossCheckSentence states a disagreement or why the check was not made
// ("" when the two agree or there is no series).
func (rep *Report) crossCheckSentence() string {
	cc := rep.CrossCheck
	switch {
	case cc == nil:
		return ""
	case len(cc.Missing) > 0:
		return fmt.Sprintf("No cross-check against the server's own histograms: the metrics series has no %s (not reported).", strings.Join(cc.Missing, ", "))
	case !cc.Disagree:
		return ""
	}
	why := "the trace may not hold every request the server finished (other clients), or the server's phases are defined differently"
	if cc.Source != SourceServer {
		why = "the attribution is estimated: client ↔ server time counts as queueing and prefill follows a fitted model; " + why
	}
	return fmt.Sprintf("The attribution and the server's own histograms disagree by %.0f points on %s over %.1f–%.1f s: queue/prefill/decode %s against the server's %s (%d requests in the trace, %d finished per the server); %s.",
		cc.MaxDiffPoints, cc.Worst, cc.StartS, cc.EndS, fmtSplit(cc.Attribution), fmtSplit(cc.Server), cc.Requests, cc.ServerRequests, why)
}

func fmtSplit(s Split) string {
	return fmt.Sprintf("%.0f/%.0f/%.0f%%", 100*s.Queue, 100*s.Prefill, 100*s.Decode)
}

// writeCrossCheckText prints both splits side by side.
func (rep *Report) writeCrossCheckText(p func(string, ...any)) {
	cc := rep.CrossCheck
	if cc == nil || len(cc.Missing) > 0 || cc.Requests == 0 {
		return
	}
	p("\nCross-check: all requests finished in %.1f–%.1f s, %s attribution (%d requests) against the server's histograms (%d finished)\n",
		cc.StartS, cc.EndS, cc.Source, cc.Requests, cc.ServerRequests)
	p("  %-10s %12s %12s   %12s %12s\n", "component", "attribution", "mean", "server", "mean")
	a, s, am, sm := cc.Attribution.array(), cc.Server.array(), cc.AttributionMeanMs.array(), cc.ServerMeanMs.array()
	for k, n := range splitNames {
		p("  %-10s %11.1f%% %12s   %11.1f%% %12s\n", n, 100*a[k], fmtMs(am[k]), 100*s[k], fmtMs(sm[k]))
	}
	verdict := "agree"
	if cc.Disagree {
		verdict = "DISAGREE"
	}
	p("  %s: largest difference %.1f points (%s; tolerance %.0f)\n", verdict, cc.MaxDiffPoints, cc.Worst, CrossCheckTolerancePoints)
}
