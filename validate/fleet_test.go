package validate

import (
	"context"
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/replay"
	"github.com/tokentrace/tokentrace/traces"
)

// TestFleetTargetsSimulateOffline: a fleet is a target like any other; its
// offline simulation keeps the workload's rows in order and names the
// replica and the router's reason in each, and a disaggregated fleet's
// rows carry the KV transfer.
func TestFleetTargetsSimulateOffline(t *testing.T) {
	w := workload("real", 200, 8, true, 3)
	ts := targets(t, "rr=sim:replicas=4,router=round-robin", "pd=sim:prefill-replicas=1,decode-replicas=2,router=prefix-aware")
	o := &Options{Targets: ts, Speed: 1, Replay: replay.DefaultOptions()}
	for _, tg := range ts {
		rows, err := simulate(context.Background(), w, tg, o, "real-"+tg.Name)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != len(w.Records) {
			t.Fatalf("%s: %d rows for %d requests", tg.Name, len(rows), len(w.Records))
		}
		replicas := map[string]bool{}
		for i, r := range rows {
			if r.Seq != w.Records[i].Seq || r.Status != traces.StatusOK || r.Replica == "" || r.RouteReason == "" {
				t.Fatalf("%s row %d: seq %d status %s replica %q reason %q", tg.Name, i, r.Seq, r.Status, r.Replica, r.RouteReason)
			}
			replicas[r.Replica] = true
			if pd := strings.HasPrefix(r.Replica, "decode-"); pd != (r.ServerKVTransferNs >= 0) || pd != (r.PrefillReplica != "") {
				t.Fatalf("%s row %d: replica %s, prefill %q, KV transfer %d", tg.Name, i, r.Replica, r.PrefillReplica, r.ServerKVTransferNs)
			}
		}
		if want := map[string]int{"rr": 4, "pd": 2}[tg.Name]; len(replicas) != want {
			t.Errorf("%s: served by %v, want %d replicas", tg.Name, replicas, want)
		}
	}
}
