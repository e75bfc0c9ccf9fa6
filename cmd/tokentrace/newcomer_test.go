package main

// The mistakes a newcomer makes in the first hour, each with what the CLI
// says back: a next step, never a dead end.

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/analyze"
	"github.com/tokentrace/tokentrace/replay"
	"github.com/tokentrace/tokentrace/traces"
	"github.com/tokentrace/tokentrace/traces/formats"
)

// writeModelTrace writes n small records that name model, as a capture of
// production logs does.
func writeModelTrace(t *testing.T, n int, model string) string {
	t.Helper()
	recs := evenRecords(n, 2*time.Millisecond, 16, 2)
	for i := range recs {
		recs[i].Model = model
	}
	return writeTrace(t, filepath.Join(t.TempDir(), "trace.jsonl"), traces.NewMeta("test"), recs)
}

// A replay against a server that does not serve the trace's model names
// what it does serve and the flags that send it (it said "HTTP 404 ...;
// every request would" and stopped there).
func TestPreflightNamesServedModels(t *testing.T) {
	url := startSimCommand(t, "--model", "served-8b")
	trace := writeModelTrace(t, 3, "demo-8b")
	out := filepath.Join(t.TempDir(), "res.jsonl")
	code, _, se := runCLI(nil, "replay", "--url", url, "--quiet", "--out", out, trace)
	if code != exitFailure {
		t.Fatalf("exit %d, want 1; stderr %q", code, se)
	}
	for _, want := range []string{`"served-8b"`, "--model", "--model-map demo-8b=served-8b", "every request of the run would fail the same way", "--no-preflight"} {
		if !strings.Contains(se, want) {
			t.Errorf("stderr %q does not say %q", se, want)
		}
	}
	if strings.Contains(se, "every request would (") {
		t.Errorf("stderr %q ends its sentence mid-way", se)
	}
	// What it suggests works.
	if code, _, se := runCLI(nil, "replay", "--url", url, "--quiet", "--max-lateness", "1h", "--model-map", "demo-8b=served-8b", "--out", out, trace); code != 0 {
		t.Errorf("with the suggested --model-map: exit %d, stderr %q", code, se)
	}
}

// An SLO bound without a unit is refused (exit 2, naming the fix) instead
// of being read as milliseconds: `--slo ttft=500` was accepted silently.
func TestSLOWithoutUnitRefused(t *testing.T) {
	for _, args := range [][]string{
		{"analyze", "--slo", "ttft=500", "results.parquet"},
		{"sweep", "--slo", "ttft=500", "trace.parquet"},
	} {
		code, _, se := runCLI(nil, args...)
		if code != exitUsage || !strings.Contains(se, "no unit") || !strings.Contains(se, "ttft=500ms") {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 saying the bound has no unit and suggesting ttft=500ms", args, code, se)
		}
	}
}

// `tokentrace help COMMAND` is COMMAND's --help, as in git and go (it
// exited 2 with "No help topic for 'help'").
func TestHelpCommandWord(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"help", "replay"}, "tokentrace replay - replay a trace"},
		{[]string{"help", "synth", "fit"}, "tokentrace synth fit - fit a workload model"},
		{[]string{"synth", "help", "fit"}, "tokentrace synth fit - fit a workload model"},
		{[]string{"help"}, "COMMANDS:"},
	} {
		code, so, se := runCLI(nil, c.args...)
		if code != 0 || !strings.Contains(so, c.want) {
			t.Errorf("%v: exit %d, stdout %.80q, stderr %q; want exit 0 and the help (%q)", c.args, code, so, se, c.want)
		}
	}
	if code, _, se := runCLI(nil, "help", "replai"); code != exitUsage || !strings.Contains(se, `did you mean "replay"?`) {
		t.Errorf("help replai: exit %d, stderr %q; want 2 with a suggestion", code, se)
	}
}

// A mistyped subcommand gets the nearest one (synth fitt said "No help
// topic for 'fitt'"); a command's own argument is not mistaken for one.
func TestSubcommandDidYouMean(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"synth", "fitt", "trace.parquet"}, `unknown command "synth fitt"; did you mean "synth fit"?`},
		{[]string{"synth", "zzzzzz"}, `unknown command "synth zzzzzz"; synth's commands are`},
		{[]string{"analyze", "comapre", "a", "b"}, `unknown command "analyze comapre"; did you mean "analyze compare"?`},
	} {
		code, _, se := runCLI(nil, c.args...)
		if code != exitUsage || !strings.Contains(se, c.want) || strings.Count(se, "\n") > 2 {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line with %q (and the hint line)", c.args, code, se, c.want)
		}
	}
	// A results file whose name is close to "compare" is still a file.
	t.Chdir(t.TempDir())
	if err := os.WriteFile("compar", []byte("not results\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, se := runCLI(nil, "analyze", "compar")
	if strings.Contains(se, "did you mean") || code == exitUsage {
		t.Errorf("analyze compar (a file): exit %d, stderr %q: want it read as results, as any file", code, se)
	}
}

// A flag value that does not parse names the form the flag wants (it said
// `invalid value "fast" for flag -speed: parse error`).
func TestBadFlagValueNamesForm(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"replay", "--speed", "fast", "t.parquet"}, `replay: --speed "fast": want a number such as 1.5 (time scale: 2 replays twice as fast; default 1)`},
		{[]string{"replay", "--max-lateness", "5", "t.parquet"}, `--max-lateness "5": want a duration with its unit`},
		{[]string{"synth", "gen", "--seed", "x", "m.json"}, `synth gen: --seed "x": want a whole number`},
	} {
		code, _, se := runCLI(nil, c.args...)
		if code != exitUsage || !strings.Contains(se, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and %q", c.args, code, se, c.want)
		}
	}
}

// A run that only checks its input writes to /dev/null (it was refused:
// "cannot tell the format of "/dev/null" from its extension"), and the
// device is written, never replaced.
func TestOutDevNull(t *testing.T) {
	dir := t.TempDir()
	logs := filepath.Join(dir, "gateway.jsonl")
	writeTestFile(t, logs, sampleLogs(t, 5*time.Second, 1))
	for _, args := range [][]string{
		{"capture", "--strict", "--out", os.DevNull, logs},
		{"import", "--format", "azure", "--strict", "--out", os.DevNull, filepath.Join("..", "..", "testdata", "publictraces", "azure2023_conv_head1000.csv")},
	} {
		if code, _, se := runCLI(nil, args...); code != 0 {
			t.Errorf("%v: exit %d, stderr %q; want 0", args, code, se)
		}
	}
	// A replay for its checks alone: no journal or metrics file beside
	// the null device.
	if code, _, se := runCLI(nil, "replay", "--quiet", "--max-lateness", "1h", "--out", os.DevNull, writeModelTrace(t, 4, "")); code != 0 {
		t.Errorf("replay --out %s: exit %d, stderr %q", os.DevNull, code, se)
	}
	for _, p := range []string{os.DevNull + ".journal.jsonl", os.DevNull + ".metrics.parquet"} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("replay --out %s left %s", os.DevNull, p)
		}
	}
	if st, err := os.Stat(os.DevNull); err != nil || st.Mode()&os.ModeCharDevice == 0 {
		t.Errorf("%s is no longer the null device: %v, %v", os.DevNull, st.Mode(), err)
	}
}

// A capture that fails prints its error, not a summary of the nothing it
// captured first ("capture: 0 requests from 0 lines ..." came before
// "open log: no such file"); a bad --out is refused before any log is read.
func TestCaptureErrorWithoutSummary(t *testing.T) {
	dir := t.TempDir()
	code, _, se := runCLI(nil, "capture", "--out", filepath.Join(dir, "t.parquet"), filepath.Join(dir, "missing.jsonl"))
	if code != exitFailure || strings.Contains(se, "requests from") || !strings.Contains(se, "missing.jsonl") {
		t.Errorf("exit %d, stderr %q; want exit 1 naming the missing log and no summary line", code, se)
	}
	logs := filepath.Join(dir, "gateway.jsonl")
	writeTestFile(t, logs, sampleLogs(t, 5*time.Second, 1))
	code, _, se = runCLI(nil, "capture", "--out", filepath.Join(dir, "t.txt"), logs)
	if code != exitUsage || strings.Contains(se, "requests from") || !strings.Contains(se, "--out") {
		t.Errorf("bad --out: exit %d, stderr %q; want exit 2 naming --out before reading the logs", code, se)
	}
}

// import --help describes every format import takes (it described four of
// seven), and export --help every format export writes, with what a
// Mooncake export does to hash ids.
func TestFormatHelpListsEveryFormat(t *testing.T) {
	for _, c := range []struct {
		cmd     string
		formats []string
	}{{"import", formats.ImportFormats}, {"export", formats.ExportFormats}} {
		so, _ := runMain(t, c.cmd, "--help")
		for _, f := range c.formats {
			if !regexp.MustCompile(`(?m)^\s+` + f + `\s+\S`).MatchString(so) {
				t.Errorf("%s --help does not describe format %s", c.cmd, f)
			}
		}
	}
	if so, _ := runMain(t, "export", "--help"); !strings.Contains(so, "renumbered") {
		t.Error("export --help does not say that Mooncake hash ids are renumbered")
	}
}

// A Mooncake export keeps which requests share a block and renumbers the
// ids in order of first appearance, as export --help says: a Mooncake
// file's own ids come back unchanged, other ids become 0, 1, 2, ...
func TestMooncakeExportIDs(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join("..", "..", "testdata", "publictraces", "mooncake_conversation_head500.jsonl")
	runMain(t, "import", "--format", "mooncake", "--out", filepath.Join(dir, "mc.parquet"), src)
	runMain(t, "export", "--format", "mooncake", "--out", filepath.Join(dir, "back.jsonl"), filepath.Join(dir, "mc.parquet"))
	if a, b := readFile(t, src), readFile(t, filepath.Join(dir, "back.jsonl")); string(a) != string(b) {
		t.Error("a Mooncake import exported to Mooncake is not the same file")
	}

	recs := []traces.Record{traces.NewRecord(), traces.NewRecord()}
	recs[0].InputTokens, recs[0].PrefixBlocks = 1024, []int64{7001, 7002}
	recs[1].Seq, recs[1].ArrivalNs, recs[1].InputTokens, recs[1].PrefixBlocks = 1, 1e6, 1024, []int64{7001, 9000}
	m := traces.NewMeta("test")
	m.BlockSize = 512
	in := writeTrace(t, filepath.Join(dir, "t.jsonl"), m, recs)
	runMain(t, "export", "--format", "mooncake", "--out", filepath.Join(dir, "t.mooncake.jsonl"), in)
	got := string(readFile(t, filepath.Join(dir, "t.mooncake.jsonl")))
	want := `{"timestamp": 0, "input_length": 1024, "output_length": 0, "hash_ids": [0, 1]}
{"timestamp": 1, "input_length": 1024, "output_length": 0, "hash_ids": [0, 2]}
`
	if got != want {
		t.Errorf("export of ids 7001,7002 / 7001,9000:\n%s\nwant\n%s", got, want)
	}
}

// Analyze says what evidence it lacks and on which clock its times run:
// without a scraped metrics series it names the missing server lines and
// --metrics-url (it dropped them silently); --requests-out marks the tail
// (every request came out alike); tail times of a replay that started at
// a --window start say so and give the trace's time.
func TestAnalyzeSaysWhatIsMissing(t *testing.T) {
	dir := t.TempDir()
	recs := evenRecords(60, 20*time.Millisecond, 64, 4)
	trace := writeTrace(t, filepath.Join(dir, "trace.jsonl"), traces.NewMeta("test"), recs)

	url := startSimCommand(t)
	res := filepath.Join(dir, "url.results.jsonl")
	// The lateness gate is not what this test is about; a loaded machine
	// must not fail it.
	runMain(t, "replay", "--url", url, "--quiet", "--max-lateness", "1h", "--out", res, trace)
	tail := filepath.Join(dir, "tail.csv")
	so, _ := runMain(t, "analyze", "--requests-out", tail, res)
	for _, want := range []string{"Not in this report", "Server metrics: none", "--metrics-url"} {
		if !strings.Contains(so, want) {
			t.Errorf("analyze of a replay without --metrics-url does not say %q:\n%s", want, so)
		}
	}
	csv := string(readFile(t, tail))
	if !strings.HasPrefix(csv, "seq,request_id,lateness_ns,queue_ns,prefill_ns,decode_ns,other_ns,source,tail\n") ||
		!strings.Contains(csv, ",true\n") || !strings.Contains(csv, ",false\n") {
		t.Errorf("--requests-out does not mark the tail:\n%.300s", csv)
	}
	if h, _ := runMain(t, "analyze", "--help"); !strings.Contains(h, "tail is true for the requests in the --tail") {
		t.Error("analyze --help does not say how --requests-out marks the tail")
	}

	win := filepath.Join(dir, "win.results.jsonl")
	runMain(t, "replay", "--window", "600ms,", "--speed", "2", "--quiet", "--max-lateness", "1h", "--out", win, trace)
	so, _ = runMain(t, "analyze", win)
	if !strings.Contains(so, "of the run, which started at the trace's 0.6 s (--window) and ran at speed 2:") || !strings.Contains(so, "s into the trace") {
		t.Errorf("tail times of a --window replay do not say they count from the window start:\n%s", so)
	}
	if strings.Contains(so, "Server metrics: none") {
		t.Errorf("analyze of a built-in simulator run (scraped by default) says it has no metrics:\n%s", so)
	}
}

// analyze compare warns about a run that failed its lateness check, by the
// same gate replay exits 3 on.
func TestCompareWarnsAboutLateRun(t *testing.T) {
	if analyze.DefaultMaxLateness != replay.DefaultMaxLateness {
		t.Fatalf("compare's lateness gate %v differs from replay's %v", analyze.DefaultMaxLateness, replay.DefaultMaxLateness)
	}
	dir := t.TempDir()
	results := func(name string, late time.Duration) string {
		recs := make([]traces.Record, 30)
		for i := range recs {
			r := traces.NewRecord()
			r.Seq, r.ArrivalNs, r.InputTokens, r.OutputTokens = int64(i), int64(i)*50e6, 100, 10
			r.Status, r.HTTPStatus = traces.StatusOK, 200
			r.ScheduledNs = r.ArrivalNs
			r.SentNs = r.ScheduledNs + int64(late)
			r.FirstTokenNs, r.LastTokenNs = r.SentNs+40e6, r.SentNs+300e6
			recs[i] = r
		}
		return writeTrace(t, filepath.Join(dir, name), traces.NewMeta("replay"), recs)
	}
	onTime, late := results("on-time.jsonl", 100*time.Microsecond), results("late.jsonl", 30*time.Millisecond)
	so, _ := runMain(t, "analyze", "compare", "--resamples", "20", onTime, late)
	if !strings.Contains(so, "Warning: "+late+" did not keep its recorded timing") {
		t.Errorf("compare of a late run does not warn:\n%s", so)
	}
	if so, _ := runMain(t, "analyze", "compare", "--resamples", "20", onTime, onTime); strings.Contains(so, "Warning:") {
		t.Errorf("compare of runs that kept their timing warns:\n%s", so)
	}
}

// The demo's replay lines say whether each replay kept its timing, by
// replay's own gate (two of four replays exited 3 on a busy machine while
// the demo's lines read like success).
func TestDemoTimingKept(t *testing.T) {
	if s := timingKept(300 * time.Microsecond); !strings.HasPrefix(s, "kept its timing (lateness p99 300µs ≤ 5ms)") {
		t.Errorf("timingKept(300µs) = %q", s)
	}
	if s := timingKept(12 * time.Millisecond); !strings.HasPrefix(s, "did NOT keep its timing (lateness p99 12ms > 5ms") || !strings.Contains(s, "exit 3") {
		t.Errorf("timingKept(12ms) = %q", s)
	}
	if h := hostLoad(); !strings.Contains(h, "CPUs") {
		t.Errorf("hostLoad() = %q, want the CPU count", h)
	}
}
