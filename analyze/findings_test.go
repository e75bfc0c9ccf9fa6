package analyze

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// findingsRun analyzes recs with the series s (p90 of tail).
func findingsRun(t *testing.T, metric string, recs []traces.Record, s []traces.MetricsSample) *Report {
	t.Helper()
	o := DefaultOptions()
	o.TailMetric, o.TailPercentile = metric, 90
	return analyzeWithSamples(t, recs, s, o)
}

// instanceSeries is a series of one row per 500 ms over 12 s for each
// instance (with its role), waiting(instance, t) requests waiting and
// KV pulls kv(instance, t) (mean ns, count; nil for none), and the
// pooled rows.
func instanceSeries(roles map[string]string, waiting func(in string, t time.Duration) int64, kv func(in string, t time.Duration) (int64, int64)) []traces.MetricsSample {
	return perInstanceSeries(slices.Sorted(maps.Keys(roles)), func(x *traces.MetricsSample, in string, at time.Duration) {
		x.Role, x.Waiting, x.KVCacheUsage = roles[in], waiting(in, at), 0.5
		if kv != nil {
			x.KVTransferTimeMeanNs, x.KVTransfers = kv(in, at)
		}
	})
}

// perInstanceSeries is a series of one row per 500 ms over 12 s for each
// instance, 2 running and the rest as fill(row, instance, t) sets it,
// and the pooled rows: 4 running, the instances' waiting requests.
func perInstanceSeries(instances []string, fill func(x *traces.MetricsSample, in string, at time.Duration)) []traces.MetricsSample {
	var s []traces.MetricsSample
	for k := range 24 {
		at := time.Duration(k) * 500 * ms
		pooled := traces.NewMetricsSample(int64(at))
		pooled.Waiting, pooled.Running = 0, 4
		for _, in := range instances {
			x := traces.NewMetricsSample(int64(at))
			x.Instance, x.Running = in, 2
			fill(&x, in, at)
			pooled.Waiting += x.Waiting
			s = append(s, x)
		}
		s = append(s, pooled)
	}
	return s
}

// count is how many of the sentences contain any of subs.
func count(sentences []string, subs ...string) int {
	n := 0
	for _, s := range sentences {
		for _, sub := range subs {
			if strings.Contains(s, sub) {
				n++
				break
			}
		}
	}
	return n
}

// TestFleetFindingsSaidOnce: a fleet finding that the results (the
// replica columns) and the servers' per-instance series both support is
// one sentence of the diagnosis, citing both kinds of evidence; with one
// kind only it is said from that one. Three findings have both kinds: a
// burst that queues on the one prefill replica of a prefill/decode fleet
// (the prefill pool saturated), KV pulls that take long around the tail,
// and one replica of a round-robin fleet that queues while the others
// have room (routing imbalance, and the series' uneven load).
func TestFleetFindingsSaidOnce(t *testing.T) {
	pdRoles := map[string]string{"prefill-0": "prefill", "decode-0": "decode", "decode-1": "decode", "decode-2": "decode"}
	// fleetRecs is n requests, one every gap, made by row(i, sent), on
	// the replicas replica(i) names when replicas is set.
	fleetRecs := func(n int, gap time.Duration, row func(i int, sent time.Duration) traces.Record, replica func(i int) (string, string)) func(replicas bool) []traces.Record {
		return func(replicas bool) []traces.Record {
			var recs []traces.Record
			for i := range n {
				sent := time.Duration(i) * gap
				r := row(i, sent)
				if replicas {
					rep, pre := replica(i)
					r = onReplica(r, rep, pre)
				}
				recs = append(recs, r)
			}
			return recs
		}
	}
	// queued is a request that waits queue in its server's queue.
	queued := func(i int, sent, queue time.Duration) traces.Record {
		return withServer(rec(int64(i), sent, 0, queue+50*ms, queue+250*ms, 200, 20, 1), queue, 50*ms, 200*ms, 0)
	}
	pdReplica := func(i int) (string, string) { return fmt.Sprintf("decode-%d", i%3), "prefill-0" }
	// A P/D fleet: 100 requests every 100 ms through prefill-0, of which
	// the ten sent at 5.0–5.9 s wait a second there.
	pdRecs := fleetRecs(100, 100*ms, func(i int, sent time.Duration) traces.Record {
		queue := 10 * ms
		if sent >= 5000*ms && sent < 6000*ms {
			queue = 1000 * ms
		}
		return queued(i, sent, queue)
	}, pdReplica)
	prefillQueue := queueOn(30, 0, "prefill-0")
	// KV pulls: the burst's requests spend 600 ms in the transfer.
	kvRecs := fleetRecs(100, 100*ms, func(i int, sent time.Duration) traces.Record {
		kv := 5 * ms
		if sent >= 5000*ms && sent < 6000*ms {
			kv = 600 * ms
		}
		r := withServer(rec(int64(i), sent, 0, kv+60*ms, kv+260*ms, 200, 20, 1), 10*ms, 50*ms, 200*ms, 0)
		r.ServerKVTransferNs, r.ServerDecodeQueueNs = int64(kv), 0
		return r
	}, pdReplica)
	slowPulls := func(in string, t time.Duration) (int64, int64) {
		if in == "prefill-0" {
			return traces.NotReported, traces.NotReported
		}
		if inBurst(t) {
			return int64(600 * ms), 2
		}
		return int64(5 * ms), 2
	}
	// Round robin over four replicas, every 50 ms; replica-2's requests
	// from 4 s on wait 1.5 s in its queue.
	rrRoles := map[string]string{"replica-0": "", "replica-1": "", "replica-2": "", "replica-3": ""}
	rrRecs := fleetRecs(200, 50*ms, func(i int, sent time.Duration) traces.Record {
		queue := 10 * ms
		if i%4 == 2 && sent >= 4000*ms && sent < 8000*ms {
			queue = 1500 * ms
		}
		return queued(i, sent, queue)
	}, func(i int) (string, string) { return fmt.Sprintf("replica-%d", i%4), "" })
	hotReplica := func(in string, t time.Duration) int64 {
		if in == "replica-2" && t >= 4000*ms && t < 9500*ms {
			return 8
		}
		return 0
	}
	for _, c := range []struct {
		why              string
		metric           string
		recs             func(replicas bool) []traces.Record
		roles            map[string]string
		waiting          func(in string, t time.Duration) int64
		kv               func(in string, t time.Duration) (int64, int64)
		replicas, series bool
		finding          []string // a sentence says one of these; exactly one does
		say, notSay      []string
	}{
		{"the prefill pool saturated in both: one sentence with the load at the sends and the servers' waiting queues", MetricTTFT, pdRecs, pdRoles, prefillQueue, nil, true, true,
			[]string{"Prefill pool saturated", "Pool saturated"},
			[]string{"Prefill pool saturated: tail requests waited", "awaiting their first token", "so every prefill replica was busy, and the servers' own series agree: the prefill pool (1 replica(s): prefill-0) held 100% of the requests waiting around the tail", "its KV cache was 50% used: the prefill pool lacked capacity"},
			nil},
		{"the prefill pool saturated in the results only", MetricTTFT, pdRecs, pdRoles, prefillQueue, nil, true, false,
			[]string{"Prefill pool saturated", "Pool saturated"},
			[]string{"Prefill pool saturated: tail requests waited", "so every prefill replica was busy: the prefill pool lacked capacity"},
			[]string{"servers' own series"}},
		{"the prefill pool saturated in the series only", MetricTTFT, pdRecs, pdRoles, prefillQueue, nil, false, true,
			[]string{"Prefill pool saturated", "Pool saturated"},
			[]string{"Pool saturated: the prefill pool (1 replica(s): prefill-0) held 100% of the requests waiting around the tail"},
			[]string{"Prefill pool saturated"}},
		{"slow KV pulls in both: one sentence with the results' transfer times and the NIXL histogram's", MetricTTFT, kvRecs, pdRoles, func(string, time.Duration) int64 { return 0 }, slowPulls, true, true,
			[]string{"KV transfer slow", "KV transfers into"},
			[]string{"KV transfer slow: tail requests spent", ". The servers' own series: KV transfers into the decode pool took 600 ms on average around the tail against"},
			nil},
		{"slow KV pulls in the results only (no NIXL series)", MetricTTFT, kvRecs, pdRoles, nil, nil, true, false,
			[]string{"KV transfer slow", "KV transfers into"},
			[]string{"KV transfer slow: tail requests spent 600 ms"},
			[]string{"servers' own series"}},
		{"one hot replica in both: the routing imbalance cites the series' uneven load", MetricE2E, rrRecs, rrRoles, hotReplica, nil, true, true,
			[]string{"Routing imbalance", "Uneven load"},
			[]string{"Routing imbalance: ", "The servers' own series agree: instance replica-2 held 100% of the requests waiting around the tail"},
			[]string{"Uneven load"}},
		{"one hot replica in the series only: uneven load", MetricE2E, rrRecs, rrRoles, hotReplica, nil, false, true,
			[]string{"Routing imbalance", "Uneven load"},
			[]string{"Uneven load: instance replica-2 held 100% of the requests waiting around the tail"},
			[]string{"Routing imbalance"}},
	} {
		var s []traces.MetricsSample
		if c.series {
			s = instanceSeries(c.roles, c.waiting, c.kv)
		}
		rep := findingsRun(t, c.metric, c.recs(c.replicas), s)
		d := rep.Attribution.Diagnosis
		diag := strings.Join(d, "\n")
		t.Logf("%s:\n%s", c.why, diag)
		if n := count(d, c.finding...); n != 1 {
			t.Errorf("%s: %d sentences give the finding (%q), want 1:\n%s", c.why, n, c.finding, diag)
		}
		for _, w := range c.say {
			if !strings.Contains(diag, w) {
				t.Errorf("%s: diagnosis does not say %q", c.why, w)
			}
		}
		for _, w := range c.notSay {
			if strings.Contains(diag, w) {
				t.Errorf("%s: diagnosis says %q", c.why, w)
			}
		}
	}
}
