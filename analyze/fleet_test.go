package analyze

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// onReplica is r served by replica rep (and prefilled by pre, when not
// "").
func onReplica(r traces.Record, rep, pre string) traces.Record {
	r.Replica, r.PrefillReplica = rep, pre
	return r
}

// TestFleetLoadAtSend: the in-flight requests on a request's own replica
// and on the rest of its pool at its send, from the rows alone: a row
// occupies its serving replica from send to last token, its prefill
// replica from send to first token.
func TestFleetLoadAtSend(t *testing.T) {
	recs := []traces.Record{
		// three requests on a, overlapping; one on b; c idle
		onReplica(rec(0, 0, 0, 10*ms, 100*ms, 100, 10, 1), "a", "p0"),
		onReplica(rec(1, 10*ms, 0, 10*ms, 100*ms, 100, 10, 1), "a", "p0"),
		onReplica(rec(2, 20*ms, 0, 50*ms, 100*ms, 100, 10, 1), "b", "p1"),
		onReplica(rec(3, 30*ms, 0, 10*ms, 100*ms, 100, 10, 1), "a", "p0"),
		// after everything ended
		onReplica(rec(4, 500*ms, 0, 10*ms, 100*ms, 100, 10, 1), "c", "p1"),
	}
	rep := mustAnalyze(t, recs, DefaultOptions())
	fs := rep.fleet
	if fs == nil || fs.nServing != 3 || fs.nPrefill != 2 {
		t.Fatalf("fleet state %+v: want 3 serving and 2 prefill replicas", fs)
	}
	for i, want := range []struct{ in, oth, min, pin, poth float32 }{
		{0, 0, 0, 0, 0},
		{1, 0, 0, 0, 0},   // a holds seq 0; p0 ended seq 0's prefill at 10 ms
		{0, 1, 0, 0, 0},   // b: the others hold 2 and 0 (mean 1); p1 idle, p0 holds seq 1 until 20 ms
		{2, 0.5, 0, 0, 1}, // a: 0 and 1; p0 idle again (seq 1's first token at 20 ms), p1 holds seq 2
		{0, 0, 0, 0, 0},   // all ended
	} {
		got := struct{ in, oth, min, pin, poth float32 }{fs.repIn[i], fs.repOth[i], fs.repMin[i], fs.preIn[i], fs.preOth[i]}
		if got != want {
			t.Errorf("row %d: got %+v, want %+v", i, got, want)
		}
	}
	if got := rep.Attribution.Components; !slices.Contains(got, "kv_transfer") || slices.Contains(got, "decode_queue") {
		t.Errorf("components %q: want kv_transfer (disaggregated rows) and no decode_queue (no server timings of it)", got)
	}
}

// A request whose first and last token came at its send occupies its
// replicas for no time: nothing is counted for it, nothing taken off.
func TestFleetLoadZeroLength(t *testing.T) {
	recs := []traces.Record{
		onReplica(rec(0, 10*ms, 0, 0, 0, 100, 1, 1), "a", "p"),
		onReplica(rec(1, 10*ms, 0, 0, 0, 100, 1, 1), "b", "p"),
		onReplica(rec(2, 20*ms, 0, 5*ms, 9*ms, 100, 1, 1), "a", "p"),
	}
	rep := mustAnalyze(t, recs, DefaultOptions())
	if fs := rep.fleet; slices.Max(fs.repIn) != 0 || slices.Max(fs.repOth) != 0 || slices.Max(fs.preIn) != 0 || slices.Min(fs.repIn) != 0 {
		t.Errorf("in flight %v, others %v, prefill %v", fs.repIn, fs.repOth, fs.preIn)
	}
}

func TestMinCount(t *testing.T) {
	m := newMinCount(3)
	cnt := []int32{0, 0, 0}
	inc := func(i int) { m.inc(cnt[i]); cnt[i]++ }
	dec := func(i int) { m.dec(cnt[i]); cnt[i]-- }
	check := func(step string) {
		t.Helper()
		if want := slices.Min(cnt); m.min != want {
			t.Fatalf("%s: min %d, want %d (counts %v)", step, m.min, want, cnt)
		}
	}
	inc(0)
	check("one busy")
	inc(1)
	inc(2)
	check("all busy")
	inc(0)
	inc(0)
	dec(1)
	check("one freed")
	dec(2)
	dec(0)
	check("two freed")
}

// TestSingleEngineHasNoFleet: results that name no replica keep the
// single engine's report: no fleet section, no fleet components in the
// JSON shares, five components in the text table.
func TestSingleEngineHasNoFleet(t *testing.T) {
	var recs []traces.Record
	for i := range 40 {
		recs = append(recs, withServer(rec(int64(i), time.Duration(i)*100*ms, 0, 60*ms, 400*ms, 100, 10, 1), 10*ms, 50*ms, 340*ms, 0))
	}
	rep := mustAnalyze(t, recs, DefaultOptions())
	var b bytes.Buffer
	if err := rep.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	if s := b.String(); strings.Contains(s, `"fleet"`) || strings.Contains(s, "kv_transfer") || strings.Contains(s, "decode_queue") {
		t.Errorf("single-engine JSON mentions the fleet:\n%s", s)
	}
	if got := rep.Attribution.Components; !slices.Equal(got, []string{"lateness", "queue", "prefill", "decode", "other"}) {
		t.Errorf("components %q", got)
	}
	if out := textOf(t, rep); strings.Contains(out, "Replicas (") || strings.Contains(out, "kv_transfer") {
		t.Errorf("single-engine text shows the fleet:\n%s", out)
	}
}

// fleetRecs is a round-robin fleet of 4 replicas with server timings
// (exact), where replica-2 holds its requests 5× longer.
func fleetRecs() []traces.Record {
	var recs []traces.Record
	for i := range 400 {
		e2e := 400 * ms
		rep := "replica-" + string(rune('0'+i%4))
		if i%4 == 2 {
			e2e = 2000 * ms
		}
		r := withServer(rec(int64(i), time.Duration(i)*50*ms, 0, 60*ms, e2e, 100, 10, 1), 10*ms, 50*ms, e2e-60*ms, 0)
		recs = append(recs, onReplica(r, rep, ""))
	}
	return recs
}

// TestFleetReportOutputs: the per-replica table in text, JSON, HTML and
// the per-request file, and --by replica.
func TestFleetReportOutputs(t *testing.T) {
	o := DefaultOptions()
	o.TailPercentile = 90
	o.By = ByReplica
	rep := mustAnalyze(t, fleetRecs(), o)
	fl := rep.Fleet
	if fl == nil || len(fl.Replicas) != 4 || fl.Requests != 400 {
		t.Fatalf("fleet %+v", fl)
	}
	slow := fl.Replicas[2]
	if slow.Name != "replica-2" || slow.Requests != 100 || slow.TailShare < 0.99 || slow.TailInFlight == nil || *slow.TailInFlight < 3 {
		t.Errorf("replica-2: %+v", slow)
	}
	if !slices.Contains(fl.Findings, FindingRoutingImbalance) {
		t.Errorf("findings %q: want routing imbalance", fl.Findings)
	}
	if len(rep.Groups) != 4 || rep.Groups[2].Value != "replica-2" {
		t.Errorf("groups by replica: %+v", rep.Groups)
	}
	if out := textOf(t, rep); !strings.Contains(out, "Replicas (p90 E2E tail") || !strings.Contains(out, "findings: routing imbalance") {
		t.Errorf("text report:\n%s", out)
	}
	var b bytes.Buffer
	if err := rep.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var j struct {
		Fleet *Fleet `json:"fleet"`
	}
	if err := json.Unmarshal(b.Bytes(), &j); err != nil || j.Fleet == nil || len(j.Fleet.Replicas) != 4 || j.Fleet.Imbalance[0].Hot[0] != "replica-2" {
		t.Errorf("JSON fleet %+v (%v)", j.Fleet, err)
	}
	if page := htmlOf(t, rep); !strings.Contains(page, "<h2>Replicas</h2>") || !strings.Contains(page, "<td>replica-2</td>") {
		t.Errorf("HTML report has no replica table")
	}
	b.Reset()
	if err := rep.WriteRequests(&b, RequestsCSV); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if want := append(slices.Clone(RequestsColumns), FleetRequestsColumns...); !slices.Equal(rows[0], want) || rows[3][11] != "replica-2" {
		t.Errorf("requests CSV header %q, row 2 %q", rows[0], rows[3])
	}
}

// TestFleetStreamingKeepsFindings: past ExactRows the fleet section comes
// from the sample, its request counts stay exact, and the finding and the
// hot replica are the exact analysis'.
func TestFleetStreamingKeepsFindings(t *testing.T) {
	recs := fleetRecs()
	o := DefaultOptions()
	o.TailPercentile = 90
	exact := mustAnalyze(t, recs, o)
	o.ExactRows = 100
	st := mustAnalyze(t, recs, o)
	if st.Sampling == nil {
		t.Fatal("no sampling past ExactRows")
	}
	for i, r := range st.Fleet.Replicas {
		if r.Requests != exact.Fleet.Replicas[i].Requests {
			t.Errorf("%s: %d requests streaming, %d exact", r.Name, r.Requests, exact.Fleet.Replicas[i].Requests)
		}
	}
	if !slices.Equal(st.Fleet.Findings, exact.Fleet.Findings) || st.Fleet.Imbalance[0].Hot[0] != "replica-2" {
		t.Errorf("streaming findings %q (hot %q), exact %q", st.Fleet.Findings, st.Fleet.Imbalance[0].Hot, exact.Fleet.Findings)
	}
}
