package analyze

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"slices"

	"github.com/tokentrace/tokentrace/traces"
)

// AddSamples adds points of the server metrics time series replay scraped
// (vLLM's /metrics: waiting queue, KV cache usage, ...). TimeNs shares the
// results' run-start origin. The report then shows the server's waiting
// queue and KV usage around the tail, per window and in the HTML timeline.
func (a *Analyzer) AddSamples(s []traces.MetricsSample) {
	for _, x := range s {
		if x.ScrapeError == "" {
			a.samples = append(a.samples, x)
		}
	}
}

// addSamplesFor loads the metrics series beside a results file (see
// traces.SamplesPathFor), if there is one.
func (a *Analyzer) addSamplesFor(name string) {
	if name == "-" {
		return
	}
	p := traces.SamplesPathFor(name)
	s, _, err := traces.ReadSamples(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		a.Warnf("server metrics %s ignored: %v", p, err)
	default:
		a.AddSamples(s)
	}
}

// ServerLoad is the scraped server state: means over the samples nearest
// to the tail requests' sends against means over the whole run.
type ServerLoad struct {
	Samples           int      `json:"samples"`
	TailWaiting       *float64 `json:"tail_waiting"`
	AllWaiting        *float64 `json:"all_waiting"`
	MaxWaiting        *float64 `json:"max_waiting"`
	TailRunning       *float64 `json:"tail_running"`
	AllRunning        *float64 `json:"all_running"`
	TailKVCacheUsage  *float64 `json:"tail_kv_cache_usage"`
	AllKVCacheUsage   *float64 `json:"all_kv_cache_usage"`
	MaxKVCacheUsage   *float64 `json:"max_kv_cache_usage"`
	TailPreemptions   int64    `json:"tail_preemptions"`
	AllPreemptions    int64    `json:"all_preemptions"`
	TailPrefixHitRate *float64 `json:"tail_prefix_hit_rate"`
	AllPrefixHitRate  *float64 `json:"all_prefix_hit_rate"`
}

// nearestSample is the index of the sample closest in time to t (samples
// sorted by TimeNs, non-empty).
func nearestSample(s []traces.MetricsSample, t int64) int {
	i, _ := slices.BinarySearchFunc(s, t, func(x traces.MetricsSample, t int64) int {
		switch {
		case x.TimeNs < t:
			return -1
		case x.TimeNs > t:
			return 1
		}
		return 0
	})
	if i == len(s) || (i > 0 && t-s[i-1].TimeNs < s[i].TimeNs-t) {
		i--
	}
	return i
}

// eachTailSample calls fn with the index of the sample of s (sorted by
// TimeNs, non-empty) nearest to each tail request's send and the one
// nearest to its first token: the server's state when it was sent and
// while it waited.
func (rep *Report) eachTailSample(s []traces.MetricsSample, fn func(k int)) {
	for _, i := range rep.tail {
		r := rep.rows.at(int(i))
		for _, t := range []int64{r.sent, r.first} {
			if t >= 0 {
				fn(nearestSample(s, t))
			}
		}
	}
}

type meanAcc struct {
	sum float64
	n   int
	mx  float64
}

func (m *meanAcc) add(v float64) {
	if v < 0 {
		return
	}
	m.sum += v
	if m.n == 0 || v > m.mx {
		m.mx = v
	}
	m.n++
}

func (m *meanAcc) mean() *float64 {
	if m.n == 0 {
		return nil
	}
	v := m.sum / float64(m.n)
	return &v
}

func (m *meanAcc) max() *float64 {
	if m.n == 0 {
		return nil
	}
	v := m.mx
	return &v
}

// serverLoad fills Attribution.ServerLoad and the windows' server columns.
func (rep *Report) serverLoad(s []traces.MetricsSample) {
	if len(s) == 0 {
		return
	}
	slices.SortFunc(s, func(x, y traces.MetricsSample) int { return cmp.Compare(x.TimeNs, y.TimeNs) })
	var allW, allR, allKV, allHit, tW, tR, tKV, tHit meanAcc
	sl := &ServerLoad{Samples: len(s)}
	for _, x := range s {
		allW.add(float64(x.Waiting))
		allR.add(float64(x.Running))
		allKV.add(x.KVCacheUsage)
		allHit.add(x.PrefixHitRate)
		sl.AllPreemptions += max(x.Preemptions, 0)
	}
	seen := map[int]bool{}
	rep.eachTailSample(s, func(k int) {
		x := s[k]
		tW.add(float64(x.Waiting))
		tR.add(float64(x.Running))
		tKV.add(x.KVCacheUsage)
		tHit.add(x.PrefixHitRate)
		if !seen[k] {
			seen[k] = true
			sl.TailPreemptions += max(x.Preemptions, 0)
		}
	})
	sl.TailWaiting, sl.AllWaiting, sl.MaxWaiting = tW.mean(), allW.mean(), allW.max()
	sl.TailRunning, sl.AllRunning = tR.mean(), allR.mean()
	sl.TailKVCacheUsage, sl.AllKVCacheUsage, sl.MaxKVCacheUsage = tKV.mean(), allKV.mean(), allKV.max()
	sl.TailPrefixHitRate, sl.AllPrefixHitRate = tHit.mean(), allHit.mean()
	rep.Attribution.ServerLoad = sl
	if len(rep.Windows) == 0 {
		return
	}
	w := rep.windowW
	accW := make([]meanAcc, len(rep.Windows))
	accKV := make([]meanAcc, len(rep.Windows))
	for _, x := range s {
		k := int((x.TimeNs - rep.windowT0) / max(w, 1))
		if k < 0 || k >= len(rep.Windows) {
			continue
		}
		accW[k].add(float64(x.Waiting))
		accKV[k].add(x.KVCacheUsage)
	}
	for k := range rep.Windows {
		rep.Windows[k].ServerWaitingMean, rep.Windows[k].ServerWaitingMax = accW[k].mean(), accW[k].max()
		rep.Windows[k].KVCacheUsageMean = accKV[k].mean()
	}
}

// serverSentence adds the scraped server state to a cause, when known.
func (rep *Report) serverSentence() string {
	sl := rep.Attribution.ServerLoad
	if sl == nil || sl.TailWaiting == nil || sl.AllWaiting == nil {
		return ""
	}
	s := fmt.Sprintf(" The server's waiting queue held %.1f requests around the tail against %.1f on average (peak %.0f)",
		*sl.TailWaiting, *sl.AllWaiting, deref0(sl.MaxWaiting))
	if sl.TailKVCacheUsage != nil && sl.AllKVCacheUsage != nil {
		s += fmt.Sprintf("; KV cache usage %.0f%% against %.0f%%", 100**sl.TailKVCacheUsage, 100**sl.AllKVCacheUsage)
	}
	if sl.TailPreemptions > 0 {
		s += fmt.Sprintf("; %d preemptions near the tail (%d in the run)", sl.TailPreemptions, sl.AllPreemptions)
	}
	return s + "."
}

func deref0(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}
