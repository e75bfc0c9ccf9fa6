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
	// Role is the instance's pool in a fleet (traces.MetricsSample.Role),
	// "" when the series has no roles.
	Role    string `json:"role,omitempty"`
	Samples int    `json:"samples"`
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
	// RoutedShare is the share of its pool's requests (of all requests
	// without roles) the router sent this instance over the series, where
	// the router exports per-replica counts (traces.MetricsSample.Routed).
	RoutedShare *float64 `json:"routed_share,omitempty"`
	// TailKVTransferMs and AllKVTransferMs are the mean KV transfer time
	// (vLLM's NIXL histogram, on the pulling side) at the tail's times and
	// over the series, where the instance reports transfers.
	TailKVTransferMs *float64 `json:"tail_kv_transfer_ms,omitempty"`
	AllKVTransferMs  *float64 `json:"all_kv_transfer_ms,omitempty"`
}

// PoolLoad is one pool of a fleet around the tail: the instances that
// share a role (a prefill pool, a decode pool, aggregated replicas).
type PoolLoad struct {
	Role      string   `json:"role"`
	Instances []string `json:"instances"`
	// TailWaiting is the requests waiting in the pool (the sum of its
	// instances' means) at the tail's times; AllWaiting the same over the
	// series; TailWaitingShare the pool's share of the requests waiting
	// on every pool around the tail.
	TailWaiting      *float64 `json:"tail_waiting"`
	AllWaiting       *float64 `json:"all_waiting"`
	TailWaitingShare float64  `json:"tail_waiting_share"`
	// TailKVCacheUsage is its instances' mean KV-cache usage at the
	// tail's times.
	TailKVCacheUsage *float64 `json:"tail_kv_cache_usage"`
	// TailKVTransferMs and AllKVTransferMs are the mean KV transfer time
	// of its instances' transfers at the tail's times and over the
	// series (a decode pool's pulls); KVTransfers counts the transfers
	// over the series.
	TailKVTransferMs *float64 `json:"tail_kv_transfer_ms,omitempty"`
	AllKVTransferMs  *float64 `json:"all_kv_transfer_ms,omitempty"`
	KVTransfers      int64    `json:"kv_transfers,omitempty"`
	// Saturated is set on the pool whose queue explains the tail: it held
	// at least unevenShare of the requests waiting around the tail, more
	// per replica than the other pools by 1.5× or more, and the tail
	// spent at least minQueueShare of its time queueing.
	Saturated bool `json:"saturated"`
}

// slowKVTransfer: KV transfers around the tail are named as slow when
// their mean is at least slowKVTransferRatio× the series' and at least
// slowKVTransferMs.
const (
	slowKVTransferRatio = 2.0
	slowKVTransferMs    = 10.0
)

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

// kvAcc is a mean KV transfer time weighted by the transfers of each step.
type kvAcc struct {
	ns, n float64
}

func (k *kvAcc) add(x *traces.MetricsSample) {
	if x.KVTransferTimeMeanNs >= 0 && x.KVTransfers > 0 {
		k.ns += float64(x.KVTransferTimeMeanNs) * float64(x.KVTransfers)
		k.n += float64(x.KVTransfers)
	}
}

func (k *kvAcc) meanMs() *float64 {
	if k.n == 0 {
		return nil
	}
	v := k.ns / k.n * msPerNs
	return &v
}

// instanceLoad fills rep.Instances from each instance's rows, and
// rep.Pools when they carry roles.
func (rep *Report) instanceLoad(byInstance map[string][]traces.MetricsSample) {
	defer rep.poolLoad(byInstance)
	if len(byInstance) == 0 {
		return
	}
	names := make([]string, 0, len(byInstance))
	for in := range byInstance {
		names = append(names, in)
	}
	slices.Sort(names)
	var total float64
	routed := map[string]int64{} // requests routed to each instance over the series, where reported
	for _, in := range names {
		s := byInstance[in]
		slices.SortFunc(s, func(x, y traces.MetricsSample) int { return cmp.Compare(x.TimeNs, y.TimeNs) })
		il := InstanceLoad{Instance: in, Role: s[0].Role, Samples: len(s)}
		var all, tW, tR, tKV meanAcc
		var allX, tailX kvAcc
		for k := range s {
			all.add(float64(s[k].Waiting))
			allX.add(&s[k])
			if r := s[k].Routed; r >= 0 {
				routed[in] += r
			}
		}
		rep.eachTailSample(s, func(k int) {
			x := s[k]
			tW.add(float64(x.Waiting))
			tR.add(float64(x.Running))
			tKV.add(x.KVCacheUsage)
			tailX.add(&x)
		})
		il.TailWaiting, il.AllWaiting, il.MaxWaiting = tW.mean(), all.mean(), all.max()
		il.TailRunning, il.TailKVCacheUsage = tR.mean(), tKV.mean()
		il.TailKVTransferMs, il.AllKVTransferMs = tailX.meanMs(), allX.meanMs()
		total += deref0(il.TailWaiting)
		rep.Instances = append(rep.Instances, il)
	}
	byRole := map[string]int64{}
	for k := range rep.Instances {
		if r, ok := routed[rep.Instances[k].Instance]; ok {
			byRole[rep.Instances[k].Role] += r
		}
	}
	for k := range rep.Instances {
		il := &rep.Instances[k]
		if r, ok := routed[il.Instance]; ok && byRole[il.Role] > 0 {
			v := float64(r) / float64(byRole[il.Role])
			il.RoutedShare = &v
		}
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

// poolLoad fills rep.Pools from the instances' roles (none when fewer than
// two instances carry a role) and names the saturated pool.
func (rep *Report) poolLoad(byInstance map[string][]traces.MetricsSample) {
	idx := map[string]int{}
	for _, il := range rep.Instances {
		if il.Role == "" {
			continue
		}
		k, ok := idx[il.Role]
		if !ok {
			k = len(rep.Pools)
			idx[il.Role] = k
			rep.Pools = append(rep.Pools, PoolLoad{Role: il.Role})
		}
		p := &rep.Pools[k]
		p.Instances = append(p.Instances, il.Instance)
		if il.TailWaiting != nil {
			p.TailWaiting = ptr(deref0(p.TailWaiting) + *il.TailWaiting)
		}
		if il.AllWaiting != nil {
			p.AllWaiting = ptr(deref0(p.AllWaiting) + *il.AllWaiting)
		}
	}
	if len(rep.Pools) == 0 {
		return
	}
	var total float64
	for k := range rep.Pools {
		p := &rep.Pools[k]
		var tKV meanAcc
		var allX, tailX kvAcc
		for _, in := range p.Instances {
			s := byInstance[in]
			for j := range s {
				allX.add(&s[j])
				p.KVTransfers += max(s[j].KVTransfers, 0)
			}
			rep.eachTailSample(s, func(j int) {
				tKV.add(s[j].KVCacheUsage)
				tailX.add(&s[j])
			})
		}
		p.TailKVCacheUsage = tKV.mean()
		p.TailKVTransferMs, p.AllKVTransferMs = tailX.meanMs(), allX.meanMs()
		total += deref0(p.TailWaiting)
	}
	slices.SortFunc(rep.Pools, func(a, b PoolLoad) int { return cmp.Compare(a.Role, b.Role) })
	if total <= 0 {
		return
	}
	for k := range rep.Pools {
		rep.Pools[k].TailWaitingShare = deref0(rep.Pools[k].TailWaiting) / total
	}
	if len(rep.Pools) < 2 || total < minTailWaiting || rep.Attribution.Share.Queue < minQueueShare {
		return
	}
	top := 0
	for k := range rep.Pools {
		if rep.Pools[k].TailWaitingShare > rep.Pools[top].TailWaitingShare {
			top = k
		}
	}
	p := &rep.Pools[top]
	n, others := len(p.Instances), 0
	for k := range rep.Pools {
		if k != top {
			others += len(rep.Pools[k].Instances)
		}
	}
	perReplica := p.TailWaitingShare / float64(n)
	othersPerReplica := (1 - p.TailWaitingShare) / float64(others)
	// A queue on some of the pool's replicas only is uneven load within
	// the pool (the instances are named), not a saturated pool.
	var named []string
	for _, il := range rep.Instances {
		if il.ExplainsTail {
			named = append(named, il.Instance)
		}
	}
	within := len(named) > 0 && len(named) < n
	for _, in := range named {
		within = within && slices.Contains(p.Instances, in)
	}
	if p.TailWaitingShare >= unevenShare && perReplica >= 1.5*othersPerReplica && !within {
		p.Saturated = true
	}
}

func ptr(v float64) *float64 { return &v }

// fleetSentences are the diagnosis' sentences on the fleet: the saturated
// pool, KV transfers slower around the tail, and the instances whose
// queue explains the tail (unless they are exactly the saturated pool).
func (rep *Report) fleetSentences() []string {
	var d []string
	var saturated *PoolLoad
	for k := range rep.Pools {
		if rep.Pools[k].Saturated {
			saturated = &rep.Pools[k]
		}
	}
	if p := saturated; p != nil {
		var rest []string
		var restW float64
		restN := 0
		for _, q := range rep.Pools {
			if q.Role != p.Role {
				rest = append(rest, fmt.Sprintf("%s (%d)", q.Role, len(q.Instances)))
				restW += deref0(q.TailWaiting)
				restN += len(q.Instances)
			}
		}
		kv := ""
		if p.TailKVCacheUsage != nil {
			kv = fmt.Sprintf("; its KV cache was %.0f%% used", 100**p.TailKVCacheUsage)
		}
		d = append(d, fmt.Sprintf("Pool saturated: the %s pool (%d replica(s): %s) held %.0f%% of the requests waiting around the tail, %.1f per replica against %.1f in the other pool(s) (%s)%s; its queue explains the tail.",
			p.Role, len(p.Instances), strings.Join(p.Instances, ", "), 100*p.TailWaitingShare,
			deref0(p.TailWaiting)/float64(len(p.Instances)), restW/float64(max(restN, 1)), strings.Join(rest, ", "), kv))
	}
	for _, p := range rep.Pools {
		if p.TailKVTransferMs != nil && p.AllKVTransferMs != nil && *p.TailKVTransferMs >= slowKVTransferMs && *p.TailKVTransferMs >= slowKVTransferRatio**p.AllKVTransferMs {
			d = append(d, fmt.Sprintf("KV transfers into the %s pool took %s on average around the tail against %s over the whole series (%d transfers; vLLM's NIXL transfer histogram).",
				p.Role, fmtMs(*p.TailKVTransferMs), fmtMs(*p.AllKVTransferMs), p.KVTransfers))
		}
	}
	if s := rep.instanceSentence(); s != "" {
		var named []string
		for _, il := range rep.Instances {
			if il.ExplainsTail {
				named = append(named, il.Instance)
			}
		}
		if saturated == nil || !slices.Equal(named, saturated.Instances) {
			d = append(d, s)
		}
	}
	return d
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
	routed := ""
	if len(named) == 1 && named[0].RoutedShare != nil {
		pool := "of all"
		if named[0].Role != "" {
			pool = "of its pool's"
		}
		routed = fmt.Sprintf(" The router sent it %.0f%% %s requests.", 100**named[0].RoutedShare, pool)
	}
	return fmt.Sprintf("Uneven load: %s held %.0f%% of the requests waiting around the tail (%.1f waiting on average against %.1f on the other %d instance(s)); %s queue explains the tail.%s",
		who, 100*share, w/float64(len(named)), restW/float64(max(len(rest), 1)), len(rest), map[bool]string{true: "its", false: "their"}[len(named) == 1], routed)
}

// writeInstancesText prints each pool's and each instance's queue around
// the tail, with the role, routing and KV-transfer columns where the
// series has them.
func (rep *Report) writeInstancesText(p func(string, ...any)) {
	if len(rep.Instances) == 0 {
		return
	}
	f := func(v *float64) string {
		if v == nil {
			return "-"
		}
		return fmt.Sprintf("%.1f", *v)
	}
	pct := func(v *float64) string {
		if v == nil {
			return "-"
		}
		return fmt.Sprintf("%.0f%%", 100**v)
	}
	ms := func(v *float64) string {
		if v == nil {
			return "-"
		}
		return fmtMs(*v)
	}
	var roles, routed, kv bool
	for _, il := range rep.Instances {
		roles = roles || il.Role != ""
		routed = routed || il.RoutedShare != nil
		kv = kv || il.AllKVTransferMs != nil
	}
	if len(rep.Pools) > 0 {
		p("\nPools (instances by role; waiting requests, KV cache and KV transfers around the tail)\n")
		p("  %-16s %8s %12s %8s %8s %9s %12s %12s\n", "pool", "replicas", "tail waiting", "share", "mean", "KV cache", "KV xfer tail", "KV xfer all")
		for _, pl := range rep.Pools {
			mark := ""
			if pl.Saturated {
				mark = "  ← saturated: its queue explains the tail"
			}
			p("  %-16s %8d %12s %7.0f%% %8s %9s %12s %12s%s\n", trunc(pl.Role, 16), len(pl.Instances), f(pl.TailWaiting), 100*pl.TailWaitingShare,
				f(pl.AllWaiting), pct(pl.TailKVCacheUsage), ms(pl.TailKVTransferMs), ms(pl.AllKVTransferMs), mark)
		}
	}
	p("\nInstances (server metrics per instance; waiting requests)\n")
	head := fmt.Sprintf("  %-28s", "instance")
	if roles {
		head += fmt.Sprintf(" %-16s", "role")
	}
	head += fmt.Sprintf(" %12s %8s %8s %12s", "tail waiting", "share", "mean", "peak")
	if routed {
		head += fmt.Sprintf(" %8s", "routed")
	}
	if kv {
		head += fmt.Sprintf(" %12s %12s", "KV xfer tail", "KV xfer all")
	}
	p("%s\n", head)
	for _, il := range rep.Instances {
		line := fmt.Sprintf("  %-28s", trunc(il.Instance, 28))
		if roles {
			line += fmt.Sprintf(" %-16s", trunc(il.Role, 16))
		}
		line += fmt.Sprintf(" %12s %7.0f%% %8s %12s", f(il.TailWaiting), 100*il.TailWaitingShare, f(il.AllWaiting), f(il.MaxWaiting))
		if routed {
			line += fmt.Sprintf(" %8s", pct(il.RoutedShare))
		}
		if kv {
			line += fmt.Sprintf(" %12s %12s", ms(il.TailKVTransferMs), ms(il.AllKVTransferMs))
		}
		if il.ExplainsTail {
			line += "  ← explains the tail"
		}
		p("%s\n", line)
	}
}
