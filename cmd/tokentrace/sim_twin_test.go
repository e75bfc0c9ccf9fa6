package main

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/sim"
	"github.com/tokentrace/tokentrace/sim/twin"
	"github.com/tokentrace/tokentrace/traces"
)

// measuredRun writes the results of recs on a hidden simulator (offline:
// what a streaming replay of them would record) to path.
func measuredRun(t *testing.T, path, hidden string, recs []traces.Record) string {
	t.Helper()
	o := sim.DefaultOptions()
	if err := sim.ApplyConfig(&o, hidden); err != nil {
		t.Fatal(err)
	}
	var rows []traces.Record
	if _, err := twin.Predict(context.Background(), o, traces.Values(recs), measuredPredict(), func(r traces.Record) error {
		rows = append(rows, r)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return writeTrace(t, path, traces.NewMeta("replay"), rows)
}

// twinTrace is n requests at rate per second (seeded).
func twinTrace(n int, rate float64, seed uint64) []traces.Record {
	rng := rand.New(rand.NewPCG(seed, 11))
	recs := make([]traces.Record, n)
	at := 0.0
	for i := range recs {
		at += rng.ExpFloat64() / rate
		r := traces.NewRecord()
		r.Seq, r.ArrivalNs = int64(i), int64(at*1e9)
		r.InputTokens, r.OutputTokens = int32(64+rng.IntN(1500)), int32(8+rng.IntN(160))
		recs[i] = r
	}
	return recs
}

// TestSimFitAndCheckCommands: sim fit writes a twin that every simulator
// target reads (sim --config, sim:config=FILE); sim check compares it
// with a run at twice the load, records its verdict in the file, and
// fails (exit 1) for a twin that is off; validate on the twin prints the
// last check; a twin file with an unknown key is refused naming it.
func TestSimFitAndCheckCommands(t *testing.T) {
	t.Parallel() // the commands run in child processes
	heavyCPU(t)
	dir := t.TempDir()
	hidden := "step-fixed=5ms,prefill-per-token=25us,decode-per-seq=120us,attn-per-context-token=200ns,max-num-seqs=8"
	low := measuredRun(t, filepath.Join(dir, "low.jsonl"), hidden, twinTrace(1500, 6, 1))
	high := measuredRun(t, filepath.Join(dir, "high.jsonl"), hidden, twinTrace(1500, 12, 2))
	conf := filepath.Join(dir, "twin.conf")
	stdout, _ := runMainChild(t, "", "sim", "fit", "--out", conf, low)
	for _, want := range []string{"twin: sim:config=" + conf, "step-fixed=5ms", "max-num-seqs=8", "fit report", "fitted:"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("sim fit output lacks %q:\n%s", want, stdout)
		}
	}
	o := sim.DefaultOptions()
	if err := sim.ApplyConfig(&o, "config="+conf+",replicas=4,router=prefix-aware"); err != nil || o.MaxNumSeqs != 8 || o.Fleet.Replicas != 4 {
		t.Fatalf("the twin as a fleet: %v (max-num-seqs %d, replicas %d)", err, o.MaxNumSeqs, o.Fleet.Replicas)
	}
	// The twin's file and its trust lines name the check as its command
	// line (the library's traces.Command said with sim check's flags).
	if body, err := os.ReadFile(conf); err != nil || !strings.Contains(string(body), "\n# tokentrace sim check --twin FILE RESULTS (against a run it was not fitted on).\n") {
		t.Errorf("the twin file's header does not say how to check it: %v\n%s", err, body)
	}
	untested := "twin " + conf + " was never checked against a measured run (tokentrace sim check --twin " + shellWord(conf) + " RESULTS): its answers are untested"
	if got := twin.TrustLines(&o, cliTerms{}); len(got) != 1 || got[0] != untested {
		t.Errorf("trust lines of an unchecked twin: %q, want %q", got, untested)
	}

	stdout, _ = runMainChild(t, "", "sim", "check", "--twin", conf, "--out", filepath.Join(dir, "pred.jsonl"), high)
	if !strings.Contains(stdout, "verdict: the twin holds") {
		t.Errorf("sim check at twice the load:\n%s", stdout)
	}
	if pred, _, err := traces.ReadAll(filepath.Join(dir, "pred.jsonl")); err != nil || len(pred) != 1500 || len(pred[0].ChunkNs) == 0 {
		t.Errorf("predicted rows: %v, %d rows", err, len(pred))
	}
	if last, err := twin.LastCheck(conf); err != nil || len(last) < 2 || !strings.Contains(strings.Join(last, "\n"), "verdict: the twin holds") {
		t.Errorf("last check in the twin file: %v %q", err, last)
	}

	real, syn := validateTraces(t, dir)
	stdout, _ = runMainChild(t, "", "validate", "-q", "--explain", "none", "--target", "a=sim:config="+conf, "--target", "b=sim:config="+conf+",max-num-seqs=40", real, syn)
	if !strings.Contains(stdout, "twin "+conf+":") || !strings.Contains(stdout, "verdict: the twin holds") {
		t.Errorf("validate on the twin does not print its last check:\n%s", stdout)
	}

	body, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	slow := filepath.Join(dir, "slow.conf")
	if err := os.WriteFile(slow, []byte(strings.Replace(string(body), "step-fixed=5ms", "step-fixed=9ms", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLIChild(t, "", nil, "sim", "check", "--twin", slow, high)
	if code != exitFailure || !strings.Contains(stdout, "does NOT hold") || !strings.Contains(stderr, "beyond --tolerance") {
		t.Errorf("an off twin: exit %d\n%s\n%s", code, stdout, stderr)
	}

	bad := filepath.Join(dir, "bad.conf")
	if err := os.WriteFile(bad, []byte("step-fixed=5ms\nmax-num-seq=20\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"sim", "--config", bad}, {"sim", "check", "--twin", bad, high}, {"replay", "--target", "sim:config=" + bad, high}} {
		code, _, stderr := runCLIChild(t, "", nil, args...)
		if code != exitUsage || !strings.Contains(stderr, `bad.conf:2: unknown key "max-num-seq"`) {
			t.Errorf("%v: exit %d, %s", args, code, stderr)
		}
	}
}

// measuredPredict are the prediction's options with its rows labelled as a
// measured run's.
func measuredPredict() twin.PredictOptions {
	po := twin.DefaultPredictOptions()
	po.Run = "measured"
	return po
}
