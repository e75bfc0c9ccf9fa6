package analyze

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// burstRecs is 100 requests, one every 100 ms, of which the ten sent at
// 5.0–5.9 s wait a second in the queue (the p90 E2E tail; with slowDecode
// they wait 100 ms but decode for 3 s instead).
func burstRecs(slowDecode bool) []traces.Record {
	var recs []traces.Record
	for i := range 100 {
		sent := time.Duration(i) * 100 * ms
		queue, decode := 10*ms, 200*ms
		if sent >= 5000*ms && sent < 6000*ms {
			queue = 1000 * ms
			if slowDecode {
				queue, decode = 100*ms, 3000*ms
			}
		}
		recs = append(recs, withServer(rec(int64(i), sent, 0, queue+50*ms, queue+50*ms+decode, 200, 20, 1), queue, 50*ms, decode, 0))
	}
	return recs
}

// inBurst is when the burst runs' tail queued: the series' rows from 4.5 s
// to 7.5 s.
func inBurst(t time.Duration) bool { return t >= 4500*ms && t < 7500*ms }

// queueOn is a waiting function: n requests waiting on each of instances
// (on every instance when none is named) during the burst, otherwise
// outside it and on the other instances.
func queueOn(n, otherwise int64, instances ...string) func(in string, t time.Duration) int64 {
	return func(in string, t time.Duration) int64 {
		if inBurst(t) && (len(instances) == 0 || slices.Contains(instances, in)) {
			return n
		}
		return otherwise
	}
}

// queueBurstRun is burstRecs with a metrics series of one row per 500 ms:
// the pooled rows, and for each instance its rows with waiting(instance,
// t) requests waiting.
func queueBurstRun(t *testing.T, instances []string, waiting func(instance string, t time.Duration) int64, slowDecode bool) *Report {
	t.Helper()
	s := perInstanceSeries(instances, func(x *traces.MetricsSample, in string, at time.Duration) { x.Waiting = waiting(in, at) })
	return findingsRun(t, MetricE2E, burstRecs(slowDecode), s)
}

// TestInstancesNamedWhenUneven: the diagnosis names the instance(s) whose
// waiting queue explains the tail when the load was uneven across
// instances, and says nothing of the kind when it was even or when the
// series has no per-instance rows.
func TestInstancesNamedWhenUneven(t *testing.T) {
	for _, c := range []struct {
		why        string
		instances  []string
		waiting    func(in string, t time.Duration) int64
		slowDecode bool
		named      []string // instances the diagnosis must name ("" none)
	}{
		{"a burst queued on one of two instances names that one", []string{"a:8000", "b:8000"},
			queueOn(30, 1, "a:8000"), false, []string{"a:8000"}},
		{"an uneven queue beside a tail made slow by decoding, not queueing, names none", []string{"a:8000", "b:8000"},
			queueOn(30, 1, "a:8000"), true, nil},
		{"the same queue spread evenly over both instances names none", []string{"a:8000", "b:8000"},
			queueOn(15, 1), false, nil},
		{"two of four instances holding the queue are both named", []string{"a:8000", "b:8000", "c:8000", "d:8000"},
			queueOn(20, 0, "b:8000", "d:8000"), false, []string{"b:8000", "d:8000"}},
		{"no queue anywhere names none, however uneven the crumbs", []string{"a:8000", "b:8000"},
			func(in string, t time.Duration) int64 {
				if in == "a:8000" && inBurst(t) && t < 5000*ms {
					return 1
				}
				return 0
			}, false, nil},
		{"a series without per-instance rows (replay's scrape) has no instances", nil,
			func(string, time.Duration) int64 { return 0 }, false, nil},
	} {
		rep := queueBurstRun(t, c.instances, c.waiting, c.slowDecode)
		diag := strings.Join(rep.Attribution.Diagnosis, "\n")
		if len(rep.Instances) != len(c.instances) {
			t.Errorf("%s: %d instances in the report, want %d", c.why, len(rep.Instances), len(c.instances))
		}
		var got []string
		for _, il := range rep.Instances {
			if il.ExplainsTail {
				got = append(got, il.Instance)
			}
		}
		if strings.Join(got, ",") != strings.Join(c.named, ",") {
			t.Errorf("%s: instances explaining the tail %v, want %v", c.why, got, c.named)
		}
		if has := strings.Contains(diag, "Uneven load"); has != (len(c.named) > 0) {
			t.Errorf("%s: diagnosis mentions uneven load: %v, want %v:\n%s", c.why, has, len(c.named) > 0, diag)
		}
		for _, in := range c.named {
			if !strings.Contains(diag, in) {
				t.Errorf("%s: diagnosis does not name %s:\n%s", c.why, in, diag)
			}
		}
		for _, il := range rep.Instances {
			if !il.ExplainsTail && strings.Contains(diag, il.Instance) {
				t.Errorf("%s: diagnosis names %s, which did not hold the queue:\n%s", c.why, il.Instance, diag)
			}
		}
		// The pooled rows still drive the server-load sentence.
		if sl := rep.Attribution.ServerLoad; sl == nil || sl.Samples != 24 {
			t.Errorf("%s: server load %+v, want 24 pooled samples", c.why, sl)
		}
	}
}

// fleetRun is queueBurstRun for a fleet: each instance's rows carry its
// role, and kv (if set) gives each row's KV transfers (mean ns, count)
// and routed (if set) the requests routed to the instance per row.
func fleetRun(t *testing.T, roles map[string]string, waiting func(in string, t time.Duration) int64,
	kv func(in string, t time.Duration) (int64, int64), routed func(in string) int64, slowDecode bool) *Report {
	t.Helper()
	s := instanceSeries(roles, waiting, kv)
	if routed != nil {
		for i := range s {
			if s[i].Instance != "" { // not the pooled rows
				s[i].Routed = routed(s[i].Instance)
			}
		}
	}
	return findingsRun(t, MetricE2E, burstRecs(slowDecode), s)
}

// TestPoolsNamedWhenSaturated: with roles on the instances' rows, the
// report has one pool per role, and the diagnosis names the pool whose
// queue explains the tail (a pool holding most of the waiting requests,
// more per replica than the others, spread over its replicas), not a pool
// whose one hot replica holds them (that replica is named instead, with
// the router's share of the pool's requests it got), nor any pool when the
// queue follows the pools' sizes or the tail decoded slowly; KV transfers
// slower around the tail are named with their times.
func TestPoolsNamedWhenSaturated(t *testing.T) {
	pd := func(prefill, decode int) map[string]string {
		m := map[string]string{}
		for i := range prefill {
			m[fmt.Sprintf("prefill-%d", i)] = "prefill"
		}
		for i := range decode {
			m[fmt.Sprintf("decode-%d", i)] = "decode"
		}
		return m
	}
	for _, c := range []struct {
		why        string
		roles      map[string]string
		waiting    func(in string, t time.Duration) int64
		kv         func(in string, t time.Duration) (int64, int64)
		routed     func(in string) int64
		slowDecode bool
		saturated  string   // the pool named saturated ("" none)
		say        []string // in the diagnosis
		notSay     []string // not in it
	}{
		{"a burst queued on the one-replica prefill pool names the pool (and not its one instance again)", pd(1, 3),
			queueOn(30, 0, "prefill-0"), nil, nil, false, "prefill",
			[]string{"Pool saturated: the prefill pool (1 replica(s): prefill-0) held 100% of the requests waiting around the tail", "its KV cache was 50% used"},
			[]string{"Uneven load"}},
		{"a queue spread over a three-replica prefill pool beside one decode replica names the prefill pool", pd(3, 1),
			func(in string, t time.Duration) int64 {
				if strings.HasPrefix(in, "prefill") && inBurst(t) {
					return 10
				}
				if inBurst(t) {
					return 1
				}
				return 0
			}, nil, nil, false, "prefill",
			[]string{"Pool saturated: the prefill pool (3 replica(s): prefill-0, prefill-1, prefill-2)", "10.0 per replica against 1.0 in the other pool(s) (decode (1))"},
			nil},
		{"a queue in proportion to the pools' sizes names none", pd(1, 3),
			queueOn(10, 0), nil, nil, false, "", nil, []string{"Pool saturated"}},
		{"a queue in the prefill pool while the tail was slow decoding names none", pd(1, 3),
			queueOn(30, 0, "prefill-0"), nil, nil, true, "", nil, []string{"Pool saturated"}},
		{"one hot replica of three in the decode pool is uneven load within the pool: the replica is named with its routed share, no pool", pd(1, 3),
			queueOn(30, 0, "decode-1"), nil,
			func(in string) int64 {
				if in == "decode-1" {
					return 2
				}
				return 1
			}, false, "",
			[]string{"Uneven load: instance decode-1 held 100%", "The router sent it 50% of its pool's requests."},
			[]string{"Pool saturated"}},
		{"KV transfers of 80 ms during the burst against 5 ms elsewhere are named with their times", pd(1, 3),
			func(in string, t time.Duration) int64 { return 0 },
			func(in string, t time.Duration) (int64, int64) {
				if !strings.HasPrefix(in, "decode") {
					return traces.NotReported, traces.NotReported
				}
				if inBurst(t) {
					return int64(80 * ms), 2
				}
				return int64(5 * ms), 2
			}, nil, false, "",
			[]string{"KV transfers into the decode pool took 80.0 ms on average around the tail against"},
			[]string{"Pool saturated", "prefill pool took"}},
		{"KV transfers as fast around the tail as elsewhere are not named", pd(1, 3),
			func(in string, t time.Duration) int64 { return 0 },
			func(in string, t time.Duration) (int64, int64) { return int64(5 * ms), 2 }, nil, false, "",
			nil, []string{"KV transfers"}},
	} {
		rep := fleetRun(t, c.roles, c.waiting, c.kv, c.routed, c.slowDecode)
		diag := strings.Join(rep.Attribution.Diagnosis, "\n")
		t.Logf("%s:\n%s", c.why, diag)
		if len(rep.Pools) != 2 {
			t.Errorf("%s: pools %+v, want prefill and decode", c.why, rep.Pools)
		}
		sat := ""
		for _, p := range rep.Pools {
			if p.Saturated {
				sat += p.Role
			}
		}
		if sat != c.saturated {
			t.Errorf("%s: saturated pool %q, want %q (pools %+v)", c.why, sat, c.saturated, rep.Pools)
		}
		for _, w := range c.say {
			if !strings.Contains(diag, w) {
				t.Errorf("%s: diagnosis does not say %q:\n%s", c.why, w, diag)
			}
		}
		for _, w := range c.notSay {
			if strings.Contains(diag, w) {
				t.Errorf("%s: diagnosis says %q:\n%s", c.why, w, diag)
			}
		}
		var b strings.Builder
		if err := rep.WriteText(&b); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), "Pools (instances by role") || !strings.Contains(b.String(), "role") {
			t.Errorf("%s: text report has no pools table:\n%s", c.why, b.String())
		}
	}
	// No roles, no pools.
	rep := queueBurstRun(t, []string{"a:8000", "b:8000"}, func(string, time.Duration) int64 { return 1 }, false)
	if len(rep.Pools) != 0 {
		t.Errorf("a series without roles has pools %+v", rep.Pools)
	}
}
