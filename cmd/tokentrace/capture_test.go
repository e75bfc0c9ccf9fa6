package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/traces"
)

const captureLog = `{"time":"2025-03-01T10:00:00Z","request_id":"qzsecretrequest","user":"qzsecretuser","request":{"model":"m","messages":[{"role":"system","content":"qzsecretsystem"},{"role":"user","content":"qzsecrettext"}]},"response":{"usage":{"prompt_tokens":9,"completion_tokens":2}},"latency_ms":10}
{"time":"2025-03-01T10:00:01Z","request":{"model":"m","messages":[{"role":"user","content":"qzsecret
`

func TestCaptureCommand(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "gw.jsonl")
	if err := os.WriteFile(logPath, []byte(captureLog), 0o600); err != nil {
		t.Fatal(err)
	}
	keyPath := filepath.Join(dir, "capture.key")
	outPath := filepath.Join(dir, "trace.jsonl")
	stdout, stderr := runMain(t, "capture", "--new-key-file", keyPath, "--out", outPath, logPath)
	key, err := os.ReadFile(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(keyPath); st.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v", st.Mode())
	}
	out, err := os.ReadFile(outPath)
	if err != nil {
		t.Fatal(err)
	}
	all := stdout + stderr + string(out)
	if strings.Contains(all, "qzsecret") {
		t.Errorf("content leaked:\n%s", all)
	}
	if strings.Contains(all, strings.TrimSpace(string(key))) {
		t.Errorf("key leaked")
	}
	if !strings.Contains(stderr, "bad_json; first at "+logPath+":2") {
		t.Errorf("stderr %q does not report the bad line", stderr)
	}
	recs, meta, err := traces.ReadAll(outPath)
	if err != nil || len(recs) != 1 || recs[0].InputTokens != 9 {
		t.Fatalf("read back: %v %+v", err, recs)
	}
	if !strings.HasPrefix(meta.KeyFingerprint, "hmac-sha256:") || meta.Command == "" {
		t.Errorf("meta %+v", meta)
	}

	// Same key again, stdin, JSONL to stdout: same fingerprint.
	code, stdout, stderr := runCLI(strings.NewReader(captureLog), "capture", "--key-file", keyPath, "--out", "-", "-")
	if code != 0 {
		t.Fatalf("stdin run exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, meta.KeyFingerprint) || strings.Contains(stdout+stderr, "qzsecret") {
		t.Errorf("stdout %s", stdout)
	}

	// --new-key-file never overwrites.
	if code, _, _ = runCLI(nil, "capture", "--new-key-file", keyPath, "--out", outPath, logPath); code == 0 {
		t.Errorf("overwrote an existing key file")
	}
	// --strict fails with the line number, no content.
	code, _, stderr = runCLI(nil, "capture", "--strict", "--out", outPath, logPath)
	if code != 1 || !strings.Contains(stderr, logPath+":2") || strings.Contains(stderr, "qzsecret") {
		t.Errorf("strict: exit %d, %q", code, stderr)
	}
}

func TestCaptureUsage(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
	}{
		{"unknown format", []string{"--format", "nope", "--out", "x.jsonl", "a.log"}},
		{"bad field", []string{"--field", "time", "--out", "x.jsonl", "a.log"}},
		{"unknown field name", []string{"--field", "colour=x", "--out", "x.jsonl", "a.log"}},
		{"flag after argument", []string{"--out", "x.jsonl", "a.log", "--strict"}},
		{"no logs", []string{"--out", "x.jsonl"}},
		{"both keys", []string{"--key-file", "a", "--new-key-file", "b", "--out", "x.jsonl", "a.log"}},
	} {
		code, _, stderr := runCLI(nil, append([]string{"capture"}, c.args...)...)
		if code != 2 {
			t.Errorf("%s: exit %d (%s), want 2", c.name, code, stderr)
		}
	}
}

func TestCaptureCommandFormats(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "t.jsonl")
	for _, c := range []struct {
		name string
		args []string
		rows int
	}{
		{"vllm log with year", []string{"--format", "vllm-log", "--year", "2024", "--out", out, "../../capture/testdata/vllm_old.log"}, 2},
		{"otlp spans", []string{"--out", out, "../../capture/testdata/otlp.jsonl"}, 3},
		{"litellm", []string{"--format", "litellm", "--block-size", "0", "--out", out, "../../capture/testdata/litellm.jsonl"}, 4},
		{"field remap", []string{"--field", "time=ts", "--field", "request=body", "--out", out, "-"}, 1},
	} {
		in := `{"ts":1740823200.5,"body":{"model":"m","messages":[{"role":"user","content":"hi"}]}}` + "\n"
		code, _, stderr := runCLI(strings.NewReader(in), append([]string{"capture"}, c.args...)...)
		if code != 0 {
			t.Errorf("%s: exit %d: %s", c.name, code, stderr)
			continue
		}
		recs, meta, err := traces.ReadAll(out)
		if err != nil || len(recs) != c.rows {
			t.Errorf("%s: %v, %d rows, want %d", c.name, err, len(recs), c.rows)
		}
		if c.name == "vllm log with year" && (meta.Get("capture.input.1.year") != "2024" || meta.Get("capture.start") != "2024-03-01T10:00:00Z") {
			t.Errorf("%s: meta %v", c.name, meta.Extra)
		}
	}
}

// TestCaptureOTLPParentReplayClosed captures an agent's OTLP export (call A
// and the subagent call B it spawned through a tool, exported child first;
// beside them a long call C of the same trace that spawned nothing) and
// replays it against the built-in simulator in closed sessions. B must wait
// for its parent A to finish in the replay, then its recorded think time
// (2 ms: B arrived 2 ms after A's span ended), and not for C, the turn
// before it, which it would wait for if the link were lost (the session
// would be a chain). An open replay sends B before A has finished (A's 8
// output tokens take the simulator far longer than B's 3 ms offset), which
// shows the check can fail.
func TestCaptureOTLPParentReplayClosed(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(dir, "agent.jsonl")
	if _, se := runMain(t, "capture", "--out", trace, filepath.Join("testdata", "agent_otlp.jsonl")); !strings.Contains(se, "1 calls linked to the call that spawned them") {
		t.Errorf("capture stats do not report the link:\n%s", se)
	}
	recs, _, err := traces.ReadAll(trace)
	if err != nil {
		t.Fatal(err)
	}
	// Seqs by arrival: A 0, C 1, B 2.
	if len(recs) != 3 || recs[0].ParentSeq != traces.NotReported || recs[1].ParentSeq != traces.NotReported || recs[2].ParentSeq != 0 ||
		recs[0].Session == 0 || recs[1].Session != recs[0].Session || recs[2].Session != recs[0].Session ||
		recs[0].FinishNs != 1e6 || recs[2].ArrivalNs != 3e6 || recs[1].OutputTokens != 64 {
		t.Fatalf("captured %+v", recs)
	}
	replayed := func(mode string) (a, c, b traces.Record) {
		t.Helper()
		out := filepath.Join(dir, mode+".jsonl")
		runMain(t, "replay", "--sessions", mode, "--max-lateness", "10s", "--out", out, trace)
		res, _, err := traces.ReadAll(out)
		if err != nil {
			t.Fatal(err)
		}
		bySeq := map[int64]traces.Record{}
		for _, r := range res {
			if r.Status != traces.StatusOK {
				t.Fatalf("replay --sessions %s: seq %d %s %q", mode, r.Seq, r.Status, r.Error)
			}
			bySeq[r.Seq] = r
		}
		if len(bySeq) != 3 {
			t.Fatalf("replay --sessions %s: %d results", mode, len(res))
		}
		return bySeq[0], bySeq[1], bySeq[2]
	}
	ms := func(ns int64) float64 { return float64(ns) / 1e6 }
	a, c, b := replayed("closed")
	if b.SentNs < a.LastTokenNs+2e6 {
		t.Errorf("closed: B sent at %v ms, before its parent A finished (%v ms) + 2 ms think", ms(b.SentNs), ms(a.LastTokenNs))
	}
	if b.SentNs >= c.LastTokenNs {
		t.Errorf("closed: B sent at %v ms, after C finished (%v ms): it waited for the previous turn, not its parent", ms(b.SentNs), ms(c.LastTokenNs))
	}
	a, _, b = replayed("open")
	if b.SentNs >= a.LastTokenNs {
		t.Errorf("open: B sent at %v ms, after A finished (%v ms): the closed check above proves nothing", ms(b.SentNs), ms(a.LastTokenNs))
	}
}
