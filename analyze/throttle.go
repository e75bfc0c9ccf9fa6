package analyze

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
)

// Metadata keys a replay writes about its own CPU (see replay/cpu.go): the
// cgroup's throttled time and the hypervisor's steal of its CPUs, in all
// and per second with any.
const (
	metaThrottledNs      = "replay.throttled_ns"
	metaThrottledWindows = "replay.throttled_windows"
	metaCPUQuota         = "replay.cpu_quota"
	metaStealNs          = "replay.steal_ns"
	metaStealWindows     = "replay.steal_windows"
)

// lateThresholdNs is the lateness from which a send counts as late for
// the throttling check.
const lateThresholdNs = 1e6

// ClientThrottling is what the replayer's cgroup did to its sends: when
// the CPU quota throttles the process, every thread stalls, and requests
// due then are sent late whatever the server does.
type ClientThrottling struct {
	// ThrottledMs is the time the replayer's cgroup was throttled.
	ThrottledMs float64 `json:"throttled_ms"`
	// CPUQuota is the quota as the replay recorded it.
	CPUQuota string `json:"cpu_quota,omitempty"`
	// LateRequests is the requests sent more than 1 ms late;
	// LateInThrottled those of them sent in a second when the cgroup was
	// throttled (scaled from the sample past Options.ExactRows).
	LateRequests    int64 `json:"late_requests"`
	LateInThrottled int64 `json:"late_in_throttled_seconds"`
}

// throttling reads the sources' throttling windows and counts the late
// requests sent in them (nil when no source was throttled).
func (rep *Report) throttling() *ClientThrottling {
	var ct ClientThrottling
	for _, s := range rep.Sources {
		if q := s.Meta.Get(metaCPUQuota); q != "" {
			ct.CPUQuota = q
		}
	}
	var ok bool
	if ct.ThrottledMs, ct.LateRequests, ct.LateInThrottled, ok = rep.lateInTaken(metaThrottledNs, metaThrottledWindows); !ok {
		return nil
	}
	return &ct
}

// steal reads the sources' steal windows and counts the late requests
// sent in them (nil when the hypervisor took nothing from any source).
func (rep *Report) steal() *ClientSteal {
	var cs ClientSteal
	var ok bool
	if cs.StealMs, cs.LateRequests, cs.LateInSteal, ok = rep.lateInTaken(metaStealNs, metaStealWindows); !ok {
		return nil
	}
	return &cs
}

// lateInTaken sums the time the sources' metadata says was taken from the
// replayer's CPUs (nsKey: in all; windowsKey: per second with any, as
// [start ms, µs] pairs) and counts the requests sent more than 1 ms late,
// in all and in or just after such a second; ok is false when nothing was
// taken.
func (rep *Report) lateInTaken(nsKey, windowsKey string) (takenMs float64, late, in int64, ok bool) {
	type span struct{ from, to int64 } // ns from the run's start
	var spans []span
	for _, s := range rep.Sources {
		ns, _ := strconv.ParseInt(s.Meta.Get(nsKey), 10, 64)
		takenMs += float64(ns) / 1e6
		var w [][2]int64 // [start ms, taken µs]
		if json.Unmarshal([]byte(s.Meta.Get(windowsKey)), &w) != nil {
			continue
		}
		for _, x := range w {
			// the time was taken somewhere in the second that ended at
			// the sample; a send up to a second after it can still be
			// catching up
			spans = append(spans, span{x[0] * 1e6, (x[0] + 2000) * 1e6})
		}
	}
	if takenMs <= 0 {
		return 0, 0, 0, false
	}
	slices.SortFunc(spans, func(a, b span) int { return int(a.from - b.from) })
	inSpan := func(t int64) bool {
		i, _ := slices.BinarySearchFunc(spans, t, func(s span, t int64) int {
			switch {
			case s.to <= t:
				return -1
			case s.from > t:
				return 1
			}
			return 0
		})
		return i < len(spans) && spans[i].from <= t && t < spans[i].to
	}
	for i := range rep.rows.n {
		r := rep.rows.at(i)
		if l, ok := r.lateness(); !ok || l <= lateThresholdNs {
			continue
		}
		late++
		if inSpan(r.sent) {
			in++
		}
	}
	return takenMs, late * rep.oneIn(), in * rep.oneIn(), true
}

// note is the diagnosis line for the throttling.
func (ct *ClientThrottling) note() string {
	if ct.LateRequests == 0 {
		return fmt.Sprintf("The replayer's cgroup was throttled for %s by its CPU quota (%s), but no request was sent more than 1 ms late.", fmtMs(ct.ThrottledMs), ct.CPUQuota)
	}
	return fmt.Sprintf("Client CPU quota: the replayer's cgroup was throttled for %s (quota %s); %d of the %d requests sent more than 1 ms late were due in or just after a throttled second, so that lateness is the client's quota, not the server: give the replayer a larger CPU limit (or none) or more shards.",
		fmtMs(ct.ThrottledMs), ct.CPUQuota, ct.LateInThrottled, ct.LateRequests)
}

// ClientSteal is what the hypervisor did to the replayer's sends: while it
// runs other guests on a virtual CPU, no thread of this machine runs on
// it, and requests due then are sent late whatever the server and the
// replayer do.
type ClientSteal struct {
	// StealMs is the time the hypervisor took the CPUs the replayer could
	// run on (in 10 ms steps).
	StealMs float64 `json:"steal_ms"`
	// LateRequests is the requests sent more than 1 ms late; LateInSteal
	// those of them sent in or just after a second with steal (scaled from
	// the sample past Options.ExactRows).
	LateRequests int64 `json:"late_requests"`
	LateInSteal  int64 `json:"late_in_steal_seconds"`
}

// note is the diagnosis line for the steal.
func (cs *ClientSteal) note() string {
	if cs.LateRequests == 0 {
		return fmt.Sprintf("The hypervisor took %s of the replayer's CPUs (steal), but no request was sent more than 1 ms late.", fmtMs(cs.StealMs))
	}
	return fmt.Sprintf("Host steal: the hypervisor took %s of the replayer's CPUs; %d of the %d requests sent more than 1 ms late were due in or just after a second with steal, so that lateness is the host's, not the server's: replay from a machine with dedicated CPUs, or at quieter hours.",
		fmtMs(cs.StealMs), cs.LateInSteal, cs.LateRequests)
}
