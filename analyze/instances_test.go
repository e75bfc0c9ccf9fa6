package analyze

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// queueBurstRun is 100 requests, one every 100 ms, of which the ten sent
// at 5.0–5.9 s wait a second in the queue (the p90 E2E tail; with
// slowDecode they wait 100 ms but decode for 3 s instead), with a metrics
// series of one row per 500 ms: the pooled rows, and for each instance its
// rows with waiting(instance, t) requests waiting.
func queueBurstRun(t *testing.T, instances []string, waiting func(instance string, t time.Duration) int64, slowDecode bool) *Report {
	t.Helper()
	o := DefaultOptions()
	o.TailMetric, o.TailPercentile = MetricE2E, 90
	a, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	var s []traces.MetricsSample
	for k := range 24 {
		at := time.Duration(k) * 500 * ms
		pooled := traces.NewMetricsSample(int64(at))
		pooled.Waiting, pooled.Running = 0, 4
		for _, in := range instances {
			x := traces.NewMetricsSample(int64(at))
			x.Instance, x.Waiting, x.Running = in, waiting(in, at), 2
			pooled.Waiting += x.Waiting
			s = append(s, x)
		}
		s = append(s, pooled)
	}
	a.AddSamples(s)
	for i := range 100 {
		sent := time.Duration(i) * 100 * ms
		queue, decode := 10*ms, 200*ms
		if sent >= 5000*ms && sent < 6000*ms {
			queue = 1000 * ms
			if slowDecode {
				queue, decode = 100*ms, 3000*ms
			}
		}
		r := withServer(rec(int64(i), sent, 0, queue+50*ms, queue+50*ms+decode, 200, 20, 1), queue, 50*ms, decode, 0)
		a.Add(&r)
	}
	rep, err := a.Close(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestInstancesNamedWhenUneven: the diagnosis names the instance(s) whose
// waiting queue explains the tail when the load was uneven across
// instances, and says nothing of the kind when it was even or when the
// series has no per-instance rows.
func TestInstancesNamedWhenUneven(t *testing.T) {
	burst := func(t time.Duration) bool { return t >= 4500*ms && t < 7500*ms }
	for _, c := range []struct {
		why        string
		instances  []string
		waiting    func(in string, t time.Duration) int64
		slowDecode bool
		named      []string // instances the diagnosis must name ("" none)
	}{
		{"a burst queued on one of two instances names that one", []string{"a:8000", "b:8000"},
			func(in string, t time.Duration) int64 {
				if in == "a:8000" && burst(t) {
					return 30
				}
				return 1
			}, false, []string{"a:8000"}},
		{"an uneven queue beside a tail made slow by decoding, not queueing, names none", []string{"a:8000", "b:8000"},
			func(in string, t time.Duration) int64 {
				if in == "a:8000" && burst(t) {
					return 30
				}
				return 1
			}, true, nil},
		{"the same queue spread evenly over both instances names none", []string{"a:8000", "b:8000"},
			func(in string, t time.Duration) int64 {
				if burst(t) {
					return 15
				}
				return 1
			}, false, nil},
		{"two of four instances holding the queue are both named", []string{"a:8000", "b:8000", "c:8000", "d:8000"},
			func(in string, t time.Duration) int64 {
				if (in == "b:8000" || in == "d:8000") && burst(t) {
					return 20
				}
				return 0
			}, false, []string{"b:8000", "d:8000"}},
		{"no queue anywhere names none, however uneven the crumbs", []string{"a:8000", "b:8000"},
			func(in string, t time.Duration) int64 {
				if in == "a:8000" && burst(t) && t < 5000*ms {
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
