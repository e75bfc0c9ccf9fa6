package twin

import (
	"context"
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/traces"
)

// asLogged is rows as a gateway's log keeps them: send, first and last
// token, lengths; no chunks, no server timings or usage.
func asLogged(rows []traces.Record) []traces.Record {
	out := make([]traces.Record, len(rows))
	for i, r := range rows {
		l := traces.NewRecord()
		l.Seq, l.ArrivalNs, l.Session, l.Category, l.PrefixTokens = r.Seq, r.ArrivalNs, r.Session, r.Category, r.PrefixTokens
		l.InputTokens, l.OutputTokens = r.InputTokens, r.OutputTokens
		l.Run, l.Status, l.HTTPStatus = "production", r.Status, r.HTTPStatus
		l.ScheduledNs, l.SentNs, l.FirstTokenNs, l.LastTokenNs = r.SentNs, r.SentNs, r.FirstTokenNs, r.LastTokenNs
		out[i] = l
	}
	return out
}

// TestFitFromLoggedLatencies fits a twin from a production log's
// latencies alone (no chunks, no server timings or usage, no metrics, one
// load) and checks it against the replay it came from: the step costs come
// from whole requests' decodes, the batch limit from simulating the rows,
// the report names what stayed at the prior (prefix caching, the token
// budget) and what the data lacked, and the twin predicts the run within
// the check's bounds.
func TestFitFromLoggedLatencies(t *testing.T) {
	hidden := mustConfig(t, "step-fixed=4ms,prefill-per-token=30us,decode-per-seq=150us,attn-per-context-token=300ns,max-num-seqs=24")
	rows := measure(t, hidden, workload(sized(3000), 8, 9))
	res, err := Fit(context.Background(), []Input{{Name: "log", Rows: traces.Values(asLogged(rows))}}, DefaultFitOptions())
	if err != nil {
		t.Fatal(err)
	}
	var rep strings.Builder
	res.Report.WriteText(&rep, "")
	t.Log(rep.String())
	for _, want := range []string{"no row has per-chunk times", "requests' decodes", "max-num-seqs=24  fitted: simulation",
		"prefix-caching=true  kept: prior", "max-num-batched-tokens=8192  kept: prior", "no per-request server timings", "one load level"} {
		if !strings.Contains(rep.String(), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	chk, err := Check(context.Background(), res.Options, []Input{{Name: "replay", Rows: traces.Values(rows)}}, DefaultCheckOptions())
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	chk.WriteText(&out)
	t.Log(out.String())
	for _, r := range chk.Traces[0].Rows {
		if (r.Metric == "ttft" || r.Metric == "e2e") && !r.Pass {
			t.Errorf("%s %s off by %s", r.Metric, r.Percentile, fmtErr(r.Error))
		}
	}
}
