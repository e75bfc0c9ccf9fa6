package main

import (
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// TestSimulatorFallsBehind: a simulator run to overload reports its own
// lateness — in replay's summary, in the results' metadata — analyze's
// diagnosis begins with it, and analyze compare of the run against one
// that did not fall behind says "unreliable" in its Conclusion line. The
// simulator's steps here take 20 µs, shorter than a timer keeps on any
// machine: what a loaded machine does to the default model's
// millisecond steps (a busy neighbour taking the CPU when a step's timer
// fires), arranged so that it happens on every machine, loaded or not.
func TestSimulatorFallsBehind(t *testing.T) {
	dir := t.TempDir()
	recs := evenRecords(40, 5*time.Millisecond, 64, 100)
	trace := writeTrace(t, dir+"/trace.jsonl", traces.NewMeta("test"), recs)
	slow := dir + "/slow.parquet"
	stdout, _ := runMain(t, "replay", "--target", "sim:step-fixed=20us,prefill-per-token=0s,decode-per-seq=0s,attn-per-context-token=0s",
		"--quiet", "--max-lateness", "10s", "--out", slow, trace)
	if !strings.Contains(stdout, "simulator  FELL BEHIND: it ran ") {
		t.Errorf("replay's summary does not say the simulator fell behind:\n%s", stdout)
	}
	res, m, err := traces.ReadAll(slow)
	if err != nil {
		t.Fatal(err)
	}
	l, ok := traces.SimLatenessOf(m)
	if !ok || !l.FellBehind() || l.Steps < 100 {
		t.Fatalf("results metadata %s = %q: want the simulator's lateness, fallen behind", traces.MetaSimLateness, m.Get(traces.MetaSimLateness))
	}
	t.Logf("simulator %s", l)
	// The same rows without the simulator's word, each sent when it was
	// due: a run that kept up (the overloaded run's client may have sent
	// late too on a loaded machine).
	for i := range res {
		res[i].SentNs = res[i].ScheduledNs
	}
	base := writeTrace(t, dir+"/base.parquet", traces.NewMeta("replay"), res)

	stdout, _ = runMain(t, "analyze", slow)
	if !strings.Contains(stdout, "The simulator this run went against fell behind: it ran ") {
		t.Errorf("analyze does not say the simulator fell behind:\n%s", stdout)
	}
	stdout, _ = runMain(t, "analyze", "compare", "--label-a", "kept-up", "--label-b", "overloaded", base, slow)
	line, _, _ := strings.Cut(stdout, "\n")
	why, _, _ := strings.Cut(line, "); as measured: ")
	if !strings.HasPrefix(why, "Conclusion: unreliable (overloaded: its ") || !strings.Contains(why, "its simulator ran ") || strings.Contains(why, "kept-up:") {
		t.Errorf("compare's conclusion line does not say the overloaded run is unreliable (and only it): %s", line)
	}
}
