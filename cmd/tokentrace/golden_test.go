package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/capture"
	"github.com/tokentrace/tokentrace/internal/golden"
	"github.com/tokentrace/tokentrace/sim"
	"github.com/tokentrace/tokentrace/traces"
)

// goldenKey is a fixed capture key, so keyed hashes are the same every run.
const goldenKey = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

// TestGoldenPipeline pins the deterministic outputs of the whole pipeline to
// files under testdata/golden: capture and synth of seeded sample logs, and
// analyze of a fixed results file in text, JSON and vLLM formats. A change
// that alters any byte fails here; accept an intended change with
// go test ./cmd/tokentrace -run TestGoldenPipeline -update.
func TestGoldenPipeline(t *testing.T) {
	// Relative names in a fixed working directory keep the command lines
	// stored in the files' metadata the same on every run.
	goldenDir, err := filepath.Abs(filepath.Join("testdata", "golden"))
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	p := func(n string) string { return n }

	writeTestFile(t, p("gateway.jsonl"), sampleLogs(t, 20*time.Second, 3))
	writeTestFile(t, p("capture.key"), []byte(goldenKey+"\n"))

	run := func(args ...string) string {
		t.Helper()
		code, stdout, stderr := runCLI(nil, args...)
		if code != 0 {
			t.Fatalf("tokentrace %s: exit %d\n%s", strings.Join(args, " "), code, stderr)
		}
		return stdout
	}
	run("capture", "--key-file", p("capture.key"), "--out", p("trace.jsonl"), p("gateway.jsonl"))
	run("capture", "--key-file", p("capture.key"), "--out", p("trace.parquet"), p("gateway.jsonl"))
	run("synth", "fit", "--out", p("model.json"), p("trace.parquet"))
	run("synth", "gen", "--seed", "7", "--out", p("synth.jsonl"), p("model.json"))
	run("synth", "gen", "--seed", "7", "--out", p("synth.parquet"), p("model.json"))

	// A fixed results file: the captured trace served by the simulator in
	// virtual time (deterministic), with client times equal to the truth.
	recs, meta, err := traces.ReadAll(p("trace.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	reqs := make([]sim.Request, len(recs))
	for i, r := range recs {
		prompt := make([]int32, r.InputTokens)
		for k := range prompt {
			prompt[k] = int32(1000 + (int(r.Session)*7+k)%5000)
		}
		reqs[i] = sim.Request{ID: "g-" + strconv.FormatInt(r.Seq, 10), ArrivalNs: r.ArrivalNs, Prompt: prompt, MaxTokens: int(max(r.OutputTokens, 1)), MinTokens: int(max(r.OutputTokens, 1)), IgnoreEOS: true}
	}
	so2 := sim.DefaultOptions()
	so2.MaxNumSeqs = 8
	truth := make([]traces.Record, len(reqs))
	if _, err := sim.Simulate(context.Background(), so2, func(yield func(sim.Request, error) bool) {
		for _, q := range reqs {
			if !yield(q, nil) {
				return
			}
		}
	}, func(r traces.Record) error {
		truth[r.Seq] = r
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	out := make([]traces.Record, len(recs))
	for i, tr := range truth {
		r := recs[i]
		r.ClearOutcome()
		r.Run, r.Status, r.HTTPStatus, r.RequestID, r.Error = "golden", tr.Status, tr.HTTPStatus, tr.RequestID, tr.Error
		r.ScheduledNs, r.SentNs = r.ArrivalNs, r.ArrivalNs
		r.FirstTokenNs, r.LastTokenNs = tr.FirstTokenNs, tr.LastTokenNs
		r.ChunkNs, r.ChunkTokens = tr.ChunkNs, tr.ChunkTokens
		r.ServerPromptTokens, r.ServerOutputTokens, r.ServerCachedTokens = tr.ServerPromptTokens, tr.ServerOutputTokens, tr.ServerCachedTokens
		r.ServerQueueNs, r.ServerPrefillNs, r.ServerDecodeNs = tr.ServerQueueNs, tr.ServerPrefillNs, tr.ServerDecodeNs
		out[i] = r
	}
	meta.Source = "replay"
	writeTrace(t, p("results.jsonl"), meta, out)
	golden.Check(t, filepath.Join(goldenDir, "results.jsonl"), readFile(t, p("results.jsonl")))

	for _, n := range []string{"trace.jsonl", "synth.jsonl", "model.json"} {
		golden.Check(t, filepath.Join(goldenDir, n), readFile(t, p(n)))
	}
	// Parquet files are pinned by digest (binary, and large).
	for _, n := range []string{"trace.parquet", "synth.parquet"} {
		sum := sha256.Sum256(readFile(t, p(n)))
		golden.Check(t, filepath.Join(goldenDir, n+".sha256"), []byte(hex.EncodeToString(sum[:])+"\n"))
	}

	golden.Check(t, filepath.Join(goldenDir, "analyze.txt"), []byte(run("analyze", "--slo", "ttft=500ms,tpot=50ms", p("results.jsonl"))))
	golden.Check(t, filepath.Join(goldenDir, "analyze.json"), []byte(run("analyze", "--json", "--slo", "ttft=500ms,tpot=50ms", p("results.jsonl"))))
	golden.Check(t, filepath.Join(goldenDir, "analyze.vllm.txt"), []byte(run("analyze", "--format", "vllm", p("results.jsonl"))))
}

// sampleLogs are capture's sample gateway logs of seed 1 over d, at rate
// new conversations a second (the sample's default when 0).
func sampleLogs(t *testing.T, d time.Duration, rate float64) []byte {
	t.Helper()
	so := capture.DefaultSampleOptions()
	so.Duration = d
	if rate > 0 {
		so.Rate = rate
	}
	var b bytes.Buffer
	if err := capture.WriteSampleLogs(context.Background(), &b, 1, so); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func writeTestFile(t *testing.T, name string, b []byte) {
	t.Helper()
	if err := os.WriteFile(name, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sampleLogParts writes seeded sample gateway logs (capture.WriteSampleLogs
// over dur at rate) as n files dir/logs-I.jsonl of consecutive lines, and
// returns their paths and how many lines they hold.
func sampleLogParts(t *testing.T, dir string, seed int64, dur time.Duration, rate float64, n int) (paths []string, lines int) {
	t.Helper()
	so := capture.DefaultSampleOptions()
	so.Duration, so.Rate = dur, rate
	var logs bytes.Buffer
	if err := capture.WriteSampleLogs(context.Background(), &logs, seed, so); err != nil {
		t.Fatal(err)
	}
	ls := strings.SplitAfter(strings.TrimSuffix(logs.String(), "\n"), "\n")
	for i := range n {
		p := filepath.Join(dir, "logs-"+strconv.Itoa(i)+".jsonl")
		if err := os.WriteFile(p, []byte(strings.Join(ls[i*len(ls)/n:(i+1)*len(ls)/n], "")), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths, len(ls)
}

// TestCapturePartsCompose runs what the capture and compose Jobs run: two
// capture processes writing parts (--part), which inspect and replay
// refuse as unfinished, then compose, whose trace they read, with as many
// rows as a single capture of both logs.
func TestCapturePartsCompose(t *testing.T) {
	dir := t.TempDir()
	sampleLogParts(t, dir, 3, 10*time.Second, 2, 2)
	run := func(args ...string) (int, string) {
		var so, se bytes.Buffer
		code := Main(context.Background(), append([]string{"tokentrace"}, args...), nil, &so, &se)
		return code, se.String()
	}
	key := filepath.Join(dir, "capture.key")
	if err := os.Mkdir(filepath.Join(dir, "parts"), 0o755); err != nil {
		t.Fatal(err)
	}
	if code, se := run("capture", "--part", "0", "--out", filepath.Join(dir, "x.parquet"), filepath.Join(dir, "logs-0.jsonl")); code != exitUsage || !strings.Contains(se, "--part needs --key-file") {
		t.Fatalf("a part without a key: exit %d, %s", code, se)
	}
	if code, se := run("capture", "--new-key-file", key, "--out", filepath.Join(dir, "single.parquet"), filepath.Join(dir, "logs-*.jsonl")); code != 0 {
		t.Fatalf("single capture: exit %d: %s", code, se)
	}
	for _, i := range []string{"0", "1"} {
		if code, se := run("capture", "--key-file", key, "--part", i, "--out", filepath.Join(dir, "parts", "trace-part-"+i+".parquet"), filepath.Join(dir, "logs-"+i+".jsonl")); code != 0 {
			t.Fatalf("capture part %s: exit %d: %s", i, code, se)
		}
	}
	parts := filepath.Join(dir, "parts")
	if code, se := run("inspect", parts); code == 0 || !strings.Contains(se, "compose all the parts first") {
		t.Fatalf("inspect of the parts: exit %d, %s; want a refusal naming compose", code, se)
	}
	if code, se := run("replay", "--out", filepath.Join(dir, "r.parquet"), filepath.Join(parts, "trace-part-0.parquet")); code == 0 || !strings.Contains(se, "k-anonymity deferred") {
		t.Fatalf("replay of a part: exit %d, %s; want a refusal", code, se)
	}
	out := filepath.Join(dir, "trace.parquet")
	if code, se := run("compose", "--out", out, parts); code != 0 || !strings.Contains(se, "from 2 parts") {
		t.Fatalf("compose: exit %d: %s", code, se)
	}
	got, m, err := traces.ReadAll(out)
	if err != nil {
		t.Fatal(err)
	}
	want, _, err := traces.ReadAll(filepath.Join(dir, "single.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) || m.KAnonDeferred() || m.KThreshold != capture.DefaultMinCategorySize {
		t.Fatalf("composed %d rows (deferred %v, k %d), single capture %d", len(got), m.KAnonDeferred(), m.KThreshold, len(want))
	}
}
