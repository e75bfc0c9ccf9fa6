package twin

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/sim"
	"github.com/tokentrace/tokentrace/traces"
)

// incident is a moderate load of single requests plus, at 20 s, a burst
// of 150 requests in 3 s from one session (a tenant's batch job): session
// affinity keeps it on one replica, which it saturates.
func incident() []traces.Record {
	recs := workload(1200, 5, 33)
	x := uint64(99)
	burst := make([]traces.Record, 150)
	for i := range burst {
		x = splitmix(x)
		r := traces.NewRecord()
		r.ArrivalNs = 20e9 + int64(x%3e9)
		r.InputTokens, r.OutputTokens = int32(200+x%800), int32(32+x%96)
		r.Session = 1e6
		burst[i] = r
	}
	all := append(recs, burst...)
	for i := range all {
		all[i].Session = max(all[i].Session, 0)
	}
	slicesSortByArrival(all)
	for i := range all {
		all[i].Seq = int64(i)
	}
	return all
}

func slicesSortByArrival(recs []traces.Record) {
	for i := 1; i < len(recs); i++ {
		for j := i; j > 0 && recs[j].ArrivalNs < recs[j-1].ArrivalNs; j-- {
			recs[j], recs[j-1] = recs[j-1], recs[j]
		}
	}
}

// TestWhatIfOneMoreReplica: a twin fitted from an incident's own log (the
// gateway's latencies, the replica and route reason of each request, no
// chunks) answers "what would the p99 TTFT have been with one more
// replica" within 20 % of the simulator's own truth for that change (it
// would not have helped: the burst's session stays on one replica), and
// as closely for changes that would have (one more replica behind a
// least-outstanding router, a larger batch).
func TestWhatIfOneMoreReplica(t *testing.T) {
	hidden := "step-fixed=5ms,prefill-per-token=30us,decode-per-seq=200us,attn-per-context-token=150ns,max-num-seqs=16,replicas=2,router=session-affinity"
	recs := incident()
	rows := measure(t, mustConfig(t, hidden), recs)
	logged := asLogged(rows)
	for i := range logged {
		logged[i].Replica, logged[i].RouteReason = rows[i].Replica, rows[i].RouteReason
	}
	res, err := Fit(context.Background(), []Input{{Name: "incident", Rows: traces.Values(logged)}}, DefaultFitOptions())
	if err != nil {
		t.Fatal(err)
	}
	var rep strings.Builder
	res.Report.WriteText(&rep, "")
	t.Logf("twin %s\n%s", res.Config(), rep.String())
	changes := []string{"replicas=3", "replicas=3,router=least-outstanding", "max-num-seqs=48"}
	chk, err := Check(context.Background(), res.Options, []Input{{Name: "incident", Rows: traces.Values(logged)}}, checkWhatIfs(changes))
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	chk.WriteText(&out)
	t.Log(out.String())
	if !chk.Pass {
		t.Errorf("the twin does not reproduce the incident it was fitted on")
	}
	var before latencies
	for i := range rows {
		before.add(&rows[i])
	}
	t.Logf("incident: p99 TTFT %s", fmtNs(before[0].quantile(0.99)))
	for k, change := range changes {
		o := mustConfig(t, hidden)
		if err := sim.ApplyConfig(&o, change); err != nil {
			t.Fatal(err)
		}
		truth := measure(t, o, recs)
		var l latencies
		for i := range truth {
			l.add(&truth[i])
		}
		want, got := l[0].quantile(0.99), chk.Traces[0].WhatIfs[k].Predicted[0][2]
		t.Logf("%s: p99 TTFT truth %s, the twin's answer %s", change, fmtNs(want), fmtNs(got))
		if math.Abs(got-want) > 0.2*want {
			t.Errorf("%s: the twin's p99 TTFT is %s, the truth %s: off by %s", change, fmtNs(got), fmtNs(want), fmtErr(relErr(got, want)))
		}
	}
}
