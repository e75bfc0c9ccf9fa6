package main

import (
	"bytes"
	"compress/gzip"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLogsWhereATraceIsExpected gives every command that reads a trace
// the serving logs capture reads, the likeliest first mistake. It used to
// go on as if they were an empty trace: replay said "no records to send:
// the trace is empty", analyze "the input is empty", inspect exited 0 with
// "rows 0 (471 malformed rows skipped)". Now each exits 1 and says what
// to run; a file in which every row is bad, logs or not, is an error too.
func TestLogsWhereATraceIsExpected(t *testing.T) {
	t.Parallel() // the commands run in child processes
	heavyCPU(t)
	dir := t.TempDir()
	gateway := filepath.Join(dir, "gateway.jsonl")
	logs := sampleLogs(t, 5*time.Second, 0)
	writeTestFile(t, gateway, logs)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(logs)
	zw.Close()
	gatewayGz := filepath.Join(dir, "gateway.jsonl.gz")
	writeTestFile(t, gatewayGz, gz.Bytes())
	junk := filepath.Join(dir, "junk.jsonl")
	writeTestFile(t, junk, []byte("{\"event\":\"start\"}\n{\"event\":\"stop\"}\n"))
	good := writeReplayTrace(t, 10)
	samples, _ := filepath.Abs("../../capture/testdata")
	inputs := []struct {
		name, shape string
	}{
		{gateway, "gateway logs (OpenAI-style JSON lines)"},
		{gatewayGz, "gateway logs (OpenAI-style JSON lines), gzip-compressed"},
		{filepath.Join(samples, "litellm.jsonl"), "LiteLLM logs"},
		{filepath.Join(samples, "otlp.jsonl"), "OTLP spans (JSON)"},
		{filepath.Join(samples, "vllm_new.log"), "vLLM server logs"},
		{junk, ""},
	}
	out := filepath.Join(dir, "out")
	commands := []struct {
		name string
		args func(f string) []string
	}{
		{"inspect", func(f string) []string { return []string{"inspect", f} }},
		{"export", func(f string) []string { return []string{"export", "--format", "jsonl", "--out", out + ".jsonl", f} }},
		{"synth fit", func(f string) []string { return []string{"synth", "fit", "--out", out + ".json", f} }},
		{"synth check", func(f string) []string { return []string{"synth", "check", good, f} }},
		{"synth gen", func(f string) []string { return []string{"synth", "gen", "--out", out + ".jsonl", f} }},
		{"replay", func(f string) []string { return []string{"replay", "--quiet", "--out", out + ".parquet", f} }},
		{"analyze", func(f string) []string { return []string{"analyze", f} }},
		{"validate", func(f string) []string {
			return []string{"validate", "--target", "a=sim", "--target", "b=sim", f, good}
		}},
		{"sweep", func(f string) []string { return []string{"sweep", "--slo", "ttft=1s", "--out-dir", out, f} }},
		{"compose", func(f string) []string { return []string{"compose", "--out", out + ".parquet", f} }},
		{"postmortem", func(f string) []string {
			return []string{"postmortem", "--prometheus", "http://127.0.0.1:9", "--start", "2026-01-01T00:00:00Z", f}
		}},
	}
	for _, in := range inputs {
		for _, c := range commands {
			code, so, se := runCLIChild(t, "", nil, c.args(in.name)...)
			var want []string
			switch {
			case in.shape == "" && c.name == "synth gen":
				want = []string{"invalid synth model"}
			case in.shape == "" && c.name == "compose":
				want = []string{"is not a capture part"} // its metadata says so first
			case in.shape == "":
				want = []string{"none of its 2 rows is a valid tokentrace record", junk + ":1: unreadable"}
			case c.name == "synth gen":
				want = []string{"this looks like " + in.shape + ", not a synth model", "tokentrace capture"}
			default:
				want = []string{"this looks like " + in.shape + ", not a trace: run `tokentrace capture --out trace.parquet " + in.name + "` first"}
			}
			if code != exitFailure {
				t.Errorf("%s given %s: exit %d, want 1:\n%s", c.name, filepath.Base(in.name), code, so+se)
			}
			for _, w := range want {
				if !strings.Contains(se, w) {
					t.Errorf("%s given %s: stderr lacks %q:\n%s", c.name, filepath.Base(in.name), w, se)
				}
			}
			for _, old := range []string{"no records to send", "the input is empty", "malformed rows skipped", "rows 0"} {
				if strings.Contains(so+se, old) {
					t.Errorf("%s given %s still says %q:\n%s", c.name, filepath.Base(in.name), old, so+se)
				}
			}
		}
	}
}
