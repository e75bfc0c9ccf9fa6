package analyze

import (
	"math"
	"slices"
	"time"
)

// Window is one slice of the run's timeline. Latencies are of the requests
// sent in the window; throughput counts the requests that finished in it.
type Window struct {
	StartS float64 `json:"start_s"`
	EndS   float64 `json:"end_s"`
	// Sent, Completed and Failed count the requests sent in the window.
	Sent      int     `json:"sent"`
	Completed int     `json:"completed"`
	Failed    int     `json:"failed"`
	TTFTP50Ms float64 `json:"ttft_p50_ms"`
	TTFTP99Ms float64 `json:"ttft_p99_ms"`
	E2EP50Ms  float64 `json:"e2e_p50_ms"`
	E2EP99Ms  float64 `json:"e2e_p99_ms"`
	// RequestsPerS and OutputTokensPerS count requests that finished
	// (last token) in the window.
	RequestsPerS     float64 `json:"requests_per_s"`
	OutputTokensPerS float64 `json:"output_tokens_per_s"`
	// InFlightMean is the time-weighted mean of successful requests in
	// flight; InFlightMax the most in flight at any moment of the window
	// (exact sweep over [sent, last token)).
	InFlightMean float64 `json:"in_flight_mean"`
	InFlightMax  int     `json:"in_flight_max"`
	// PromptTokensInFlight is the mean prompt tokens in flight at sends.
	PromptTokensInFlight float64 `json:"prompt_tokens_in_flight"`
	LatenessMeanMs       float64 `json:"lateness_mean_ms"`
	LatenessP99Ms        float64 `json:"lateness_p99_ms"`
	// TailRequests is how many tail requests were sent in the window.
	TailRequests int `json:"tail_requests"`
	// ServerWaitingMean/Max and KVCacheUsageMean come from the scraped
	// server metrics (null without them).
	ServerWaitingMean *float64 `json:"server_waiting_mean"`
	ServerWaitingMax  *float64 `json:"server_waiting_max"`
	KVCacheUsageMean  *float64 `json:"kv_cache_usage_mean"`
}

// niceWindows are the automatic window widths.
var niceWindows = []time.Duration{
	100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute, time.Hour,
}

// maxWindows caps the timeline length; a smaller --window is widened.
const maxWindows = 5000

// windowWidth picks the width: the option, widened to at most maxWindows,
// or about 30 windows over the run.
func windowWidth(o time.Duration, span int64) time.Duration {
	if o > 0 {
		if span/int64(o) >= maxWindows {
			return time.Duration(span/maxWindows + 1)
		}
		return o
	}
	target := time.Duration(span / 30)
	for _, w := range niceWindows {
		if w >= target {
			return w
		}
	}
	return time.Duration(int64(math.Ceil(float64(target)/float64(time.Hour)))) * time.Hour
}

// windows fills rep.Windows and the tail's When.
func (rep *Report) windows() {
	tl, ok := rep.timeline()
	if !ok {
		return
	}
	rep.windowT0, rep.windowW = tl.t0, tl.w
	ws := make([]Window, tl.n)
	for k := range ws {
		ws[k].StartS = float64(int64(k)*tl.w) / 1e9
		ws[k].EndS = float64(int64(k+1)*tl.w) / 1e9
	}
	acc := newWindowSamples(tl.n)
	for i := range rep.rows.n {
		acc.add(rep, tl, ws, i)
	}
	acc.summarise(ws, tl.w)
	for _, i := range rep.tail {
		ws[tl.idx(rep.rows.at(int(i)).start())].TailRequests++
	}
	rep.windowPeaks(ws, tl.t0, tl.w)
	rep.scaleWindows(ws)
	rep.Windows = ws
	rep.tailWhen(ws, tl.t0)
}

// timeline is the windows' grid: n windows of w ns from t0.
type timeline struct {
	t0, w int64
	n     int
}

// idx is the window of time t (the first or last for times outside).
func (tl timeline) idx(t int64) int { return min(max(int((t-tl.t0)/tl.w), 0), tl.n-1) }

// timeline spans the run, from the first request sent to the last event,
// in windows of the option's width (or a nice one); false for a run with
// nothing sent.
func (rep *Report) timeline() (timeline, bool) {
	t0, t1 := int64(math.MaxInt64), int64(math.MinInt64)
	for i := range rep.rows.n {
		r := rep.rows.at(int(i))
		if s := r.start(); s >= 0 {
			t0 = min(t0, s)
		}
		t1 = max(t1, r.end(), r.sent)
	}
	if t0 == math.MaxInt64 || t1 < t0 {
		return timeline{}, false
	}
	w := int64(windowWidth(rep.opts.Window, t1-t0))
	if w <= 0 {
		w = int64(time.Second)
	}
	return timeline{t0: t0, w: w, n: int((t1-t0)/w) + 1}, true
}

// windowSamples are the per-window samples the windows' percentiles and
// means come from. float32 nanoseconds (7 significant digits) keep the
// per-window percentiles precise enough for a timeline at half the
// memory.
type windowSamples struct {
	ttft, e2e, late    [][]float32
	inflSum, promptSum []float64
	inflN              []int
	outTok             []float64
	done               []int
}

func newWindowSamples(n int) *windowSamples {
	return &windowSamples{
		ttft: make([][]float32, n), e2e: make([][]float32, n), late: make([][]float32, n),
		inflSum: make([]float64, n), promptSum: make([]float64, n), inflN: make([]int, n),
		outTok: make([]float64, n), done: make([]int, n),
	}
}

// add counts row i in the window it was sent in (and the one it ended
// in), and spreads its time in flight over the windows it spans.
func (acc *windowSamples) add(rep *Report, tl timeline, ws []Window, i int) {
	r := rep.rows.at(int(i))
	s := r.start()
	if s < 0 {
		return
	}
	k := tl.idx(s)
	ws[k].Sent++
	if l, ok := r.lateness(); ok {
		acc.late[k] = append(acc.late[k], float32(l))
	}
	if !r.ok {
		ws[k].Failed++
		return
	}
	ws[k].Completed++
	if t, ok := r.ttft(); ok {
		acc.ttft[k] = append(acc.ttft[k], float32(t))
	}
	if e, ok := r.e2e(); ok {
		acc.e2e[k] = append(acc.e2e[k], float32(e))
	}
	if f := rep.load.inflight[i]; f >= 0 {
		acc.inflN[k]++
		acc.inflSum[k] += float64(f + 1)
		acc.promptSum[k] += rep.load.prompt[i]
		// time-weighted occupancy of [sent, end) over the windows it spans
		a, b := r.sent, r.end()
		for j := tl.idx(a); j < tl.n && a < b; j++ {
			we := tl.t0 + int64(j+1)*tl.w
			seg := min(b, we) - a
			ws[j].InFlightMean += float64(seg) / float64(tl.w)
			a = we
		}
	}
	if e := r.end(); e >= 0 {
		k := tl.idx(e)
		acc.done[k]++
		acc.outTok[k] += float64(r.out)
	}
}

// summarise sets the windows' percentiles, means and rates (windows of w
// ns) from the samples.
func (acc *windowSamples) summarise(ws []Window, w int64) {
	buf := make([]float64, 0, 1024)
	q := func(v32 []float32, p float64) float64 {
		if len(v32) == 0 {
			return 0
		}
		buf = buf[:0]
		for _, x := range v32 {
			buf = append(buf, float64(x))
		}
		slices.Sort(buf)
		return Quantile(buf, p) * msPerNs
	}
	for k := range ws {
		x := &ws[k]
		x.TTFTP50Ms, x.TTFTP99Ms = q(acc.ttft[k], 0.5), q(acc.ttft[k], 0.99)
		x.E2EP50Ms, x.E2EP99Ms = q(acc.e2e[k], 0.5), q(acc.e2e[k], 0.99)
		x.LatenessP99Ms = q(acc.late[k], 0.99)
		if len(acc.late[k]) > 0 {
			var sum float64
			for _, l := range acc.late[k] {
				sum += float64(l)
			}
			x.LatenessMeanMs = sum / float64(len(acc.late[k])) * msPerNs
		}
		if acc.inflN[k] > 0 {
			x.PromptTokensInFlight = acc.promptSum[k] / float64(acc.inflN[k])
		}
		sec := float64(w) / 1e9
		x.RequestsPerS = float64(acc.done[k]) / sec
		x.OutputTokensPerS = acc.outTok[k] / sec
	}
}

// scaleWindows scales a sample's counts to the run (nothing when every
// row was read).
func (rep *Report) scaleWindows(ws []Window) {
	f := rep.oneIn()
	if f <= 1 {
		return
	}
	fi, ff := int(f), float64(f)
	for k := range ws {
		x := &ws[k]
		x.Sent, x.Completed, x.Failed, x.TailRequests = x.Sent*fi, x.Completed*fi, x.Failed*fi, x.TailRequests*fi
		x.RequestsPerS, x.OutputTokensPerS = x.RequestsPerS*ff, x.OutputTokensPerS*ff
		x.InFlightMean, x.InFlightMax = x.InFlightMean*ff, x.InFlightMax*fi
	}
}

// tailWhen sets when the tail's requests were sent: the first and last,
// and the window with most of them.
func (rep *Report) tailWhen(ws []Window, t0 int64) {
	if len(rep.tail) == 0 {
		return
	}
	wh := &rep.Attribution.When
	first, last := int64(math.MaxInt64), int64(math.MinInt64)
	for _, i := range rep.tail {
		s := rep.rows.at(int(i)).start()
		first, last = min(first, s), max(last, s)
	}
	wh.FirstS, wh.LastS = float64(first-t0)/1e9, float64(last-t0)/1e9
	best := 0
	for k := range ws {
		if ws[k].TailRequests > ws[best].TailRequests {
			best = k
		}
	}
	wh.BusiestStartS, wh.BusiestEndS = ws[best].StartS, ws[best].EndS
	wh.BusiestShare = float64(ws[best].TailRequests) / float64(len(rep.tail)*int(rep.oneIn()))
}

// windowPeaks sets each window's InFlightMax by sweeping the successful
// requests' [sent, end) intervals in time order.
func (rep *Report) windowPeaks(ws []Window, t0, w int64) {
	var starts, ends []int64
	for i := range rep.rows.n {
		if rep.load.inflight[i] < 0 {
			continue
		}
		r := rep.rows.at(i)
		starts = append(starts, r.sent)
		ends = append(ends, r.end())
	}
	slices.Sort(starts)
	slices.Sort(ends)
	cur, si, ei := 0, 0, 0
	for k := range ws {
		we := t0 + int64(k+1)*w
		for ei < len(ends) && ends[ei] <= we-w && (si >= len(starts) || ends[ei] <= starts[si]) {
			cur-- // ended at or before the window's start
			ei++
		}
		peak := cur // carried over from the previous window
		for {
			// ends first at equal times: intervals are half-open
			if ei < len(ends) && ends[ei] < we && (si >= len(starts) || ends[ei] <= starts[si]) {
				cur--
				ei++
				continue
			}
			if si < len(starts) && starts[si] < we {
				cur++
				si++
				peak = max(peak, cur)
				continue
			}
			break
		}
		ws[k].InFlightMax = peak
	}
}
