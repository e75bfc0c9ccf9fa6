package analyze

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/tokentrace/tokentrace/traces"
)

// InstanceLoad is one server instance's state around the tail, from the
// metrics rows of that instance (traces.MetricsSample.Instance; a series
// read from Prometheus with several instances behind one gateway has
// them). The trace does not say which instance served a request, so the
// state is read at the tail requests' send and first-token times, on every
// instance.
type InstanceLoad struct {
	Instance string `json:"instance"`
	Samples  int    `json:"samples"`
	// TailWaiting is the mean waiting queue at the tail's times;
	// AllWaiting the mean over the whole series, MaxWaiting its peak.
	TailWaiting *float64 `json:"tail_waiting"`
	AllWaiting  *float64 `json:"all_waiting"`
	MaxWaiting  *float64 `json:"max_waiting"`
	TailRunning *float64 `json:"tail_running"`
	// TailKVCacheUsage is the mean KV-cache usage at the tail's times.
	TailKVCacheUsage *float64 `json:"tail_kv_cache_usage"`
	// TailWaitingShare is this instance's share of the requests waiting
	// on all instances around the tail.
	TailWaitingShare float64 `json:"tail_waiting_share"`
	// ExplainsTail is set on the instances whose queue explains the tail
	// when the load was uneven (see unevenShare).
	ExplainsTail bool `json:"explains_tail"`
}

// Uneven load: the fewest instances that hold at least unevenShare of the
// waiting requests around the tail are named, when they are fewer than
// all instances and hold at least 1.5× their fair share; a tail with less
// than minTailWaiting waiting requests on average, or one that spent less
// than minQueueShare of its time queueing, names none (no queue to
// explain it).
const (
	unevenShare    = 0.75
	minTailWaiting = 1.0
	// minQueueShare is the least share of the tail's time spent queueing
	// for a queue to explain the tail at all.
	minQueueShare = 0.25
)

// splitSamples separates the pooled rows (Instance "") from each
// instance's rows.
func splitSamples(s []traces.MetricsSample) (pooled []traces.MetricsSample, byInstance map[string][]traces.MetricsSample) {
	for _, x := range s {
		if x.Instance == "" {
			pooled = append(pooled, x)
			continue
		}
		if byInstance == nil {
			byInstance = map[string][]traces.MetricsSample{}
		}
		byInstance[x.Instance] = append(byInstance[x.Instance], x)
	}
	return pooled, byInstance
}

// instanceLoad fills rep.Instances from each instance's rows.
func (rep *Report) instanceLoad(byInstance map[string][]traces.MetricsSample) {
	if len(byInstance) == 0 {
		return
	}
	names := make([]string, 0, len(byInstance))
	for in := range byInstance {
		names = append(names, in)
	}
	slices.Sort(names)
	var total float64
	for _, in := range names {
		s := byInstance[in]
		slices.SortFunc(s, func(x, y traces.MetricsSample) int { return cmp.Compare(x.TimeNs, y.TimeNs) })
		il := InstanceLoad{Instance: in, Samples: len(s)}
		var all, tW, tR, tKV meanAcc
		for _, x := range s {
			all.add(float64(x.Waiting))
		}
		rep.eachTailSample(s, func(k int) {
			x := s[k]
			tW.add(float64(x.Waiting))
			tR.add(float64(x.Running))
			tKV.add(x.KVCacheUsage)
		})
		il.TailWaiting, il.AllWaiting, il.MaxWaiting = tW.mean(), all.mean(), all.max()
		il.TailRunning, il.TailKVCacheUsage = tR.mean(), tKV.mean()
		total += deref0(il.TailWaiting)
		rep.Instances = append(rep.Instances, il)
	}
	if total <= 0 {
		return
	}
	for k := range rep.Instances {
		rep.Instances[k].TailWaitingShare = deref0(rep.Instances[k].TailWaiting) / total
	}
	if len(rep.Instances) < 2 || total < minTailWaiting {
		return
	}
	order := make([]int, len(rep.Instances))
	for k := range order {
		order[k] = k
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Compare(rep.Instances[b].TailWaitingShare, rep.Instances[a].TailWaitingShare)
	})
	share, k := 0.0, 0
	for k < len(order) && share < unevenShare {
		share += rep.Instances[order[k]].TailWaitingShare
		k++
	}
	n := len(rep.Instances)
	if k >= n || share < 1.5*float64(k)/float64(n) {
		return // even enough: no instance stands out
	}
	if rep.Attribution.Share.Queue < minQueueShare {
		return // a queue, but not what made the tail slow
	}
	for _, j := range order[:k] {
		rep.Instances[j].ExplainsTail = true
	}
}

// instanceSentence names the instances whose queue explains the tail, or
// is "" when the load was even or there are no per-instance series.
func (rep *Report) instanceSentence() string {
	var named, rest []InstanceLoad
	for _, il := range rep.Instances {
		if il.ExplainsTail {
			named = append(named, il)
		} else {
			rest = append(rest, il)
		}
	}
	if len(named) == 0 {
		return ""
	}
	var names []string
	var share, w, restW float64
	for _, il := range named {
		names = append(names, il.Instance)
		share += il.TailWaitingShare
		w += deref0(il.TailWaiting)
	}
	for _, il := range rest {
		restW += deref0(il.TailWaiting)
	}
	who := "instance " + names[0]
	if len(names) > 1 {
		who = "instances " + strings.Join(names, ", ")
	}
	return fmt.Sprintf("Uneven load: %s held %.0f%% of the requests waiting around the tail (%.1f waiting on average against %.1f on the other %d instance(s)); %s queue explains the tail.",
		who, 100*share, w/float64(len(named)), restW/float64(max(len(rest), 1)), len(rest), map[bool]string{true: "its", false: "their"}[len(named) == 1])
}

// writeInstancesText prints each instance's queue around the tail.
func (rep *Report) writeInstancesText(p func(string, ...any)) {
	if len(rep.Instances) == 0 {
		return
	}
	p("\nInstances (server metrics per instance; waiting requests)\n")
	p("  %-28s %12s %8s %8s %12s\n", "instance", "tail waiting", "share", "mean", "peak")
	f := func(v *float64) string {
		if v == nil {
			return "-"
		}
		return fmt.Sprintf("%.1f", *v)
	}
	for _, il := range rep.Instances {
		mark := ""
		if il.ExplainsTail {
			mark = "  ← explains the tail"
		}
		p("  %-28s %12s %7.0f%% %8s %12s%s\n", trunc(il.Instance, 28), f(il.TailWaiting), 100*il.TailWaitingShare, f(il.AllWaiting), f(il.MaxWaiting), mark)
	}
}
