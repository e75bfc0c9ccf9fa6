package otlp_test

import (
	"context"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/replay"
	"github.com/tokentrace/tokentrace/replay/otlp"
	"github.com/tokentrace/tokentrace/sim"
	"github.com/tokentrace/tokentrace/traces"
)

// With per-request metrics off and OTLP export on instead, the simulator's
// llm_request spans reach the receiver, join their requests by request id,
// and give every request the simulator's true queue, prefill and decode
// times within 1 ms.
func TestOTLPJoinEqualsSimTruth(t *testing.T) {
	ctx := context.Background()
	rcv, err := otlp.NewReceiver(otlp.DefaultReceiverOptions())
	if err != nil {
		t.Fatal(err)
	}
	addr, err := rcv.Start(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	so := sim.DefaultOptions()
	so.Virtual = true
	so.PerRequestMetrics = false
	so.OTLPTracesEndpoint = "http://" + addr
	srv, err := sim.Start(ctx, so)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()

	// 30 requests in two bursts, so some queue and share the batch.
	var recs []traces.Record
	for i := 0; i < 30; i++ {
		r := traces.NewRecord()
		r.Seq = int64(i)
		r.ArrivalNs = int64(i/15) * int64(200*time.Millisecond)
		r.InputTokens = int32(200 + 37*i)
		r.OutputTokens = int32(5 + i%7)
		recs = append(recs, r)
	}
	o := replay.DefaultOptions()
	o.URL = srv.URL
	o.Model = sim.DefaultModel
	o.TraceParent = true
	o.Speed = 2
	res, err := replay.Run(ctx, recs, traces.NewMeta("test"), o)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(res.Records))
	for i := range res.Records {
		ids[i] = res.Records[i].RequestID
		if res.Records[i].ServerQueueNs != traces.NotReported {
			t.Fatalf("seq %d has server timings with per-request metrics off: they must come from OTLP only", res.Records[i].Seq)
		}
	}
	rcv.Expect(ids...)
	rcv.Wait(ctx, ids, 10*time.Second)
	matched, unmatched := rcv.JoinRecords(res.Records, false)
	if matched != len(recs) || unmatched != 0 {
		t.Fatalf("joined %d, unmatched %d, want %d, 0", matched, unmatched, len(recs))
	}
	truth := map[string]traces.Record{}
	for _, tr := range srv.Truth() {
		truth[tr.RequestID] = tr
	}
	const tol = int64(time.Millisecond)
	for _, r := range res.Records {
		tr, ok := truth[r.RequestID]
		if !ok {
			t.Fatalf("request %s is not in the simulator's truth", r.RequestID)
		}
		for _, c := range []struct {
			name      string
			got, want int64
		}{
			{"queue", r.ServerQueueNs, tr.ServerQueueNs},
			{"prefill", r.ServerPrefillNs, tr.ServerPrefillNs},
			{"decode", r.ServerDecodeNs, tr.ServerDecodeNs},
		} {
			if d := c.got - c.want; d > tol || d < -tol {
				t.Errorf("%s %s: OTLP %v, truth %v", r.RequestID, c.name, time.Duration(c.got), time.Duration(c.want))
			}
		}
	}
}
