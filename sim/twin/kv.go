package twin

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/tokentrace/tokentrace/traces"
)

// kvFull is the KV cache usage from which the cache counts as filled.
const kvFull = 0.9

// kvCapacity fits the KV cache's size (num-gpu-blocks) of one engine
// where the cache filled (the metrics' usage reached kvFull, or the
// server preempted requests): at each metrics sample with the cache at
// least a third used, the blocks the requests in flight held (prompt and
// the tokens generated so far, each request at its steady pace, a shared
// prefix's blocks once), divided by the usage, is the cache's size; the
// median of those is confirmed by simulating the rows against the prior
// (kvConfirm). Elsewhere the prior stays and the report says how full the
// cache got.
func (f *fitter) kvCapacity(ctx context.Context, res *Result) error {
	o := &res.Options
	pr := Param{Key: "num-gpu-blocks", Value: strconv.Itoa(o.NumGPUBlocks)}
	peak, preempted := -1.0, max(f.counts.preempted, metricsPreemptions(f.samples))
	for i := range f.samples {
		if s := &f.samples[i]; s.ScrapeError == "" && s.KVCacheUsage >= 0 {
			peak = max(peak, s.KVCacheUsage)
		}
	}
	switch {
	case o.IsFleet():
		pr.From = "prior: not fitted for a fleet"
	case peak < kvFull && preempted == 0:
		pr.From = "prior: the cache never filled"
		if peak >= 0 {
			pr.From += fmt.Sprintf(" (its usage peaked at %.0f %%)", 100*peak)
		} else {
			pr.From += " as far as the data shows (no KV usage series, no preemption)"
		}
	default:
		est, n := f.kvEstimate(o.BlockSize)
		if n < 3 {
			pr.From = fmt.Sprintf("prior: the cache filled but only %d metrics samples with it at least a third used fall in the rows kept", n)
			break
		}
		c := *o
		c.NumGPUBlocks = est
		c.MaxModelLen = min(c.MaxModelLen, est*c.BlockSize)
		if c.Validate() != nil {
			pr.From = fmt.Sprintf("prior: the estimate of %d blocks is not a valid cache", est)
			break
		}
		runEst, err := f.simulateWindows(ctx, c)
		if err != nil {
			return err
		}
		runPrior, err := f.simulateWindows(ctx, *o)
		if err != nil {
			return err
		}
		read := fmt.Sprintf("%d blocks, read off %d metrics samples (the blocks the requests in flight held over the KV usage, which peaked at %.0f %%; at least %d preemptions)", est, n, 100*max(peak, 0), preempted)
		var keep bool
		keep, pr.From = kvConfirm(read, o.NumGPUBlocks, runEst, runPrior)
		if keep {
			*o = c
			pr.Value, pr.Fitted = strconv.Itoa(est), true
		}
	}
	res.Report.Params = append(res.Report.Params, pr)
	return nil
}

// kvConfirm decides between the cache size read off the metrics (read
// says how) and the prior's, from their simulations of the kept rows, and
// says which rule decided. The measured server's cache filled; a size
// whose simulation never fills it (usage below kvFull, no preemption) is
// contradicted by what the server reported about its own cache, so it
// loses to a size whose simulation does, whatever the latencies say: the
// step costs were fitted before the cache, and where they came out high
// (a server that ran slower than its model, a preempted request's
// recomputation read as decode time) a cache that never fills makes up
// for them in the latencies. Only where both sizes agree with the server
// (or neither does) the latencies decide, the prior kept unless the
// estimate fits them about as well.
func kvConfirm(read string, prior int, est, pri simRun) (keep bool, from string) {
	rms := func(l float64) float64 { return 100 * (math.Exp(math.Sqrt(l)) - 1) }
	sim := func(r simRun) string {
		return fmt.Sprintf("usage peaked at %.0f %%, %d preemptions, TTFT and E2E off by %.1f %% rms", 100*r.kvPeak, r.preemptions, rms(r.loss))
	}
	switch {
	case est.filled() && !pri.filled():
		return true, fmt.Sprintf("%s; simulating the rows fills the cache as the server's filled (%s), the prior's %d blocks never do (%s)", read, sim(est), prior, sim(pri))
	case !est.filled() && pri.filled():
		return false, fmt.Sprintf("prior: simulating the rows with %s never fills the cache (%s), the prior's does, as the server's did (%s)", read, sim(est), sim(pri))
	}
	both := "both fill the cache in simulation"
	if !est.filled() {
		both = "neither fills the cache in simulation"
	}
	if est.loss > pri.loss+minGain {
		return false, fmt.Sprintf("prior: %s simulate the rows worse than the prior's (%.1f %% against %.1f %% rms; %s)", read, rms(est.loss), rms(pri.loss), both)
	}
	return true, fmt.Sprintf("%s, confirmed by simulating the rows (%.1f %% rms against the prior's %.1f %%; %s)", read, rms(est.loss), rms(pri.loss), both)
}

// kvEstimate is the median over the usable metrics samples of held blocks
// over usage, and how many samples gave one.
func (f *fitter) kvEstimate(bs int) (int, int) {
	var ests []float64
	for w, rows := range f.windows {
		if len(rows) == 0 {
			continue
		}
		last := int64(0)
		for i := range rows {
			last = max(last, sentAt(&rows[i]))
		}
		for _, s := range f.windowSamples[w] {
			if s.ScrapeError != "" || s.Instance != "" || s.KVCacheUsage < 0.33 || s.TimeNs > last {
				continue
			}
			if held := heldBlocks(rows, s.TimeNs, bs); held > 0 {
				ests = append(ests, held/s.KVCacheUsage)
			}
		}
	}
	if len(ests) == 0 {
		return 0, 0
	}
	slices.Sort(ests)
	return int(math.Round(ests[len(ests)/2])), len(ests)
}

// heldBlocks is the KV blocks the requests of rows held at time t: from
// their first token to their last, the prompt and the tokens generated so
// far; a shared prefix (a category's) once.
func heldBlocks(rows []traces.Record, t int64, bs int) float64 {
	held := 0.0
	prefixes := map[string]int32{}
	for i := range rows {
		r := &rows[i]
		if r.FirstTokenNs < 0 || r.FirstTokenNs > t || r.LastTokenNs < t {
			continue
		}
		gen := 0.0
		if span := r.LastTokenNs - r.FirstTokenNs; span > 0 {
			gen = float64(outputTokens(r)) * float64(t-r.FirstTokenNs) / float64(span)
		}
		own := float64(r.InputTokens) + gen
		if r.Category != "" && r.PrefixTokens > 0 {
			own -= float64(r.PrefixTokens)
			prefixes[r.Category] = r.PrefixTokens
		}
		held += math.Ceil(own / float64(bs))
	}
	for _, p := range prefixes {
		held += math.Ceil(float64(p) / float64(bs))
	}
	return held
}
