package analyze

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
)

// Metadata keys a replay writes about its own CPU (see replay/cpu.go): the
// cgroup's throttled time in all and per second with any.
const (
	metaThrottledNs      = "replay.throttled_ns"
	metaThrottledWindows = "replay.throttled_windows"
	metaCPUQuota         = "replay.cpu_quota"
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
	type span struct{ from, to int64 } // ns from the run's start
	var spans []span
	for _, s := range rep.Sources {
		ns, _ := strconv.ParseInt(s.Meta.Get(metaThrottledNs), 10, 64)
		ct.ThrottledMs += float64(ns) / 1e6
		if q := s.Meta.Get(metaCPUQuota); q != "" {
			ct.CPUQuota = q
		}
		var w [][2]int64 // [start ms, throttled µs]
		if json.Unmarshal([]byte(s.Meta.Get(metaThrottledWindows)), &w) != nil {
			continue
		}
		for _, x := range w {
			// the throttled time fell somewhere in the second that ended
			// at the sample; a send up to a second after it can still be
			// catching up
			spans = append(spans, span{x[0] * 1e6, (x[0] + 2000) * 1e6})
		}
	}
	if ct.ThrottledMs <= 0 {
		return nil
	}
	slices.SortFunc(spans, func(a, b span) int { return int(a.from - b.from) })
	in := func(t int64) bool {
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
		ct.LateRequests++
		if in(r.sent) {
			ct.LateInThrottled++
		}
	}
	ct.LateRequests *= rep.oneIn()
	ct.LateInThrottled *= rep.oneIn()
	return &ct
}

// note is the diagnosis line for the throttling.
func (ct *ClientThrottling) note() string {
	if ct.LateRequests == 0 {
		return fmt.Sprintf("The replayer's cgroup was throttled for %s by its CPU quota (%s), but no request was sent more than 1 ms late.", fmtMs(ct.ThrottledMs), ct.CPUQuota)
	}
	return fmt.Sprintf("Client CPU quota: the replayer's cgroup was throttled for %s (quota %s); %d of the %d requests sent more than 1 ms late were due in or just after a throttled second, so that lateness is the client's quota, not the server: give the replayer a larger CPU limit (or none) or more shards.",
		fmtMs(ct.ThrottledMs), ct.CPUQuota, ct.LateInThrottled, ct.LateRequests)
}
