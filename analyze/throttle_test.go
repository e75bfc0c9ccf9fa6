package analyze

import (
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// TestClientThrottling counts the late sends that fall in (or just after)
// the seconds the replayer's cgroup was throttled, or the hypervisor took
// its CPUs (steal), from the metadata the replay wrote; one case per
// situation.
func TestClientThrottling(t *testing.T) {
	// 80 requests, one every 100 ms; those sent at 1.0–1.9 s and 7.0–7.4 s
	// are 20 ms late, the rest on time.
	var recs []traces.Record
	for i := range 80 {
		sent := time.Duration(i) * 100 * time.Millisecond
		late := time.Duration(0)
		if (sent >= time.Second && sent < 2*time.Second) || (sent >= 7*time.Second && sent < 7500*time.Millisecond) {
			late = 20 * time.Millisecond
		}
		recs = append(recs, rec(int64(i), sent, late, 50*time.Millisecond, 200*time.Millisecond, 100, 10, 1))
	}
	for _, tc := range []struct {
		name     string
		meta     map[string]string
		wantNil  bool
		steal    bool // the case is about steal, not throttling
		late, in int64
		wantNote string
	}{
		{name: "no throttling recorded: nothing to say", meta: nil, wantNil: true},
		{name: "throttled in the second that covers the first late burst only",
			meta: map[string]string{metaThrottledNs: "35000000", metaThrottledWindows: "[[1000,35000]]", metaCPUQuota: "0.10 CPU (cgroup v1)"},
			late: 15, in: 10, wantNote: "10 of the 15 requests sent more than 1 ms late"},
		{name: "throttled around both bursts",
			meta: map[string]string{metaThrottledNs: "50000000", metaThrottledWindows: "[[1000,35000],[6000,15000]]", metaCPUQuota: "0.10 CPU (cgroup v1)"},
			late: 15, in: 15, wantNote: "15 of the 15"},
		{name: "throttled at a quiet time: no late send is blamed on it",
			meta: map[string]string{metaThrottledNs: "5000000", metaThrottledWindows: "[[3000,5000]]"},
			late: 15, in: 0, wantNote: "0 of the 15"},
		{name: "the hypervisor's steal in the second of the first late burst is the host's",
			meta:  map[string]string{metaStealNs: "30000000", metaStealWindows: "[[1000,30000]]"},
			steal: true, late: 15, in: 10, wantNote: "Host steal: the hypervisor took 30.0 ms of the replayer's CPUs; 10 of the 15"},
		{name: "steal recorded as none: nothing to say",
			meta:  map[string]string{metaStealNs: "0"},
			steal: true, wantNil: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := mustNew(t, DefaultOptions())
			m := traces.NewMeta("replay")
			for k, v := range tc.meta {
				m.Set(k, v)
			}
			a.AddSource(Source{File: "r.parquet", Meta: m})
			for i := range recs {
				a.Add(&recs[i])
			}
			rep := mustClose(t, a)
			found, late, in := rep.ClientThrottling != nil, int64(0), int64(0)
			if found {
				late, in = rep.ClientThrottling.LateRequests, rep.ClientThrottling.LateInThrottled
			}
			if tc.steal {
				found = rep.ClientSteal != nil
				if found {
					late, in = rep.ClientSteal.LateRequests, rep.ClientSteal.LateInSteal
				}
			}
			if tc.wantNil {
				if found {
					t.Fatalf("found %d late, %d in the seconds taken; want nothing", late, in)
				}
				return
			}
			if !found || late != tc.late || in != tc.in {
				t.Fatalf("found %v: %d late, %d in the seconds taken; want %d, %d", found, late, in, tc.late, tc.in)
			}
			var b strings.Builder
			if err := rep.WriteText(&b); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(b.String(), tc.wantNote) {
				t.Errorf("report does not say %q:\n%s", tc.wantNote, b.String())
			}
		})
	}
}
