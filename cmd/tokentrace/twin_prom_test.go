package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/sim"
	"github.com/tokentrace/tokentrace/traces"
)

// TestTwinFromProduction is a twin with no replay at all: a simulated
// server with hidden settings serves a trace in real time while a real
// Prometheus scrapes it, its KV cache filling; what a gateway would have logged (send, first
// and last token, lengths: no chunks, no server timings) is kept as a
// production trace, postmortem stores the Prometheus history beside it,
// sim fit fits the twin from the two, and sim check finds it predicting
// the replay (with its chunks, and a second replay for the server's own
// run-to-run spread) within the check's bounds at TTFT and E2E; postmortem
// --what-if does the same fit itself and answers a change.
func TestTwinFromProduction(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Prometheus and replays in real time (~40 s)")
	}
	// Mostly waits on real time (replays, scrapes): it runs beside others,
	// but not beside a CPU-bound one: the fit reads the KV cache's size
	// off the run where the cache filled, and a starved run is not that
	// run.
	t.Parallel()
	heavyCPU(t)
	srv := startSimServer(t, "step-fixed=6ms,prefill-per-token=30us,decode-per-seq=250us,attn-per-context-token=200ns,max-num-seqs=12,num-gpu-blocks=700", func(so *sim.Options) { so.AnyModel = true })
	promURL := startScraping(t, srv)

	recs := twinTrace(300, 9, 5)
	res, start := replayScraped(t, promURL, srv.URL, recs)
	dir := t.TempDir()
	results := writeTrace(t, filepath.Join(dir, "replay.parquet"), res.Meta, res.Records)

	logged := make([]traces.Record, len(res.Records))
	for i, r := range res.Records {
		l := traces.NewRecord()
		l.Seq, l.ArrivalNs, l.InputTokens, l.OutputTokens = r.Seq, r.SentNs, r.InputTokens, r.OutputTokens
		l.Run, l.Status, l.HTTPStatus = "production", r.Status, r.HTTPStatus
		l.ScheduledNs, l.SentNs, l.FirstTokenNs, l.LastTokenNs = r.SentNs, r.SentNs, r.FirstTokenNs, r.LastTokenNs
		logged[i] = l
	}
	trace := writeTrace(t, filepath.Join(dir, "incident.parquet"), keptStart(res.Meta, start), logged)
	pm, _ := runMainChild(t, "", "postmortem", "--prometheus", promURL, "--step", "1s", "--what-if", "max-num-seqs=24", trace)
	if !strings.Contains(pm, "What if: the incident's requests on a twin") || !strings.Contains(pm, "what if max-num-seqs=24") {
		t.Errorf("postmortem --what-if does not answer:\n%s", pm)
	}
	if _, err := os.Stat(filepath.Join(dir, "incident.twin.conf")); err != nil {
		t.Errorf("postmortem --what-if kept no twin beside the trace: %v", err)
	}
	t.Logf("postmortem --what-if:\n%s", pm[strings.Index(pm, "What if"):])
	conf := filepath.Join(dir, "twin.conf")
	fit, _ := runMainChild(t, "", "sim", "fit", "--out", conf, trace)
	t.Logf("sim fit:\n%s", fit)
	if !strings.Contains(fit, "metrics samples") || strings.Contains(fit, " 0 metrics samples") {
		t.Errorf("sim fit did not read the Prometheus history beside the trace:\n%s", fit)
	}
	// The batch limit and the KV cache's size from the history: the
	// cache filled.
	if !strings.Contains(fit, "max-num-seqs=12  fitted: the server's metrics") {
		t.Errorf("sim fit did not read the batch limit off the metrics")
	}
	// The size is confirmed by simulating the rows with the fitted step
	// costs; where the machine slowed the real-time server's steps, those
	// costs absorb the slowdown and the prior's cache, never filling,
	// can match the latencies better, but the server's metrics say its
	// cache filled and a size that never fills it is not kept (a run
	// beside other packages' tests fitted step-fixed 21 % high).
	lateness := srv.Lateness()
	t.Logf("the server's steps against their model: slowdown %.3f (%+v)", lateness.Slowdown(), lateness)
	if i := strings.Index(fit, "num-gpu-blocks="); i < 0 || !strings.Contains(fit[i:], "  fitted: ") {
		t.Errorf("sim fit reports no fitted num-gpu-blocks")
	} else if v, err := strconv.Atoi(strings.Fields(fit[i+len("num-gpu-blocks="):])[0]); err != nil || v < 600 || v > 800 {
		t.Errorf("num-gpu-blocks = %d (%v), want 700 within 15 %%", v, err)
	}
	// The server's own run-to-run spread: the same trace replayed again
	// (after the postmortem's window). On a busy machine a real-time
	// server's steps run late by what the machine lets them, which a
	// twin cannot predict; the check's bound widens to 1.5× the spread.
	again := replaySim(t, srv.URL, recs)
	results2 := writeTrace(t, filepath.Join(dir, "replay2.parquet"), again.Meta, again.Records)
	_, out, stderr := runCLIChild(t, "", nil, "sim", "check", "--twin", conf, results, results2)
	t.Logf("sim check:\n%s%s", out, stderr)
	if !strings.Contains(out, "replay.parquet + ") {
		t.Errorf("the two replays of one trace are not one trace in the check:\n%s", out)
	}
	// TTFT and E2E within the bounds; the real-time server's chunk
	// spacing (ITL) carries the machine's timer jitter, which no twin
	// fitted from logged latencies sees.
	checked := 0
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && (f[0] == "ttft" || f[0] == "e2e") {
			checked++
			if f[len(f)-1] != "ok" {
				t.Errorf("the twin fitted from production is off: %s", line)
			}
		}
	}
	if checked != 6 {
		t.Errorf("sim check printed %d TTFT and E2E rows, want 6:\n%s", checked, out)
	}
}
