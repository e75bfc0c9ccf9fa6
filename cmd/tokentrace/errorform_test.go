package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/replay"
	"github.com/tokentrace/tokentrace/traces"
)

// Every error is printed in one form, whoever made it (a command, a
// library, urfave/cli): "tokentrace COMMAND: what failed" naming the flag or
// input once, and after a usage error (exit 2) one line saying where the
// usage is. The whole of stderr is compared: nothing else is printed.
func TestErrorForm(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.parquet")
	out := filepath.Join(dir, "out.jsonl")
	trace := filepath.Join("testdata", "golden", "trace.jsonl")
	for _, c := range []struct {
		why  string
		args []string
		code int
		want string
	}{
		{"a required flag left out is said as its flag, after the command, with the hint",
			[]string{"capture", "x.log"}, exitUsage,
			"tokentrace capture: --out is required\nrun 'tokentrace capture --help' for usage\n"},
		{"a flag's bad value names the command it belongs to",
			[]string{"replay", "--speed", "0", "--target", "sim", missing}, exitUsage,
			"tokentrace replay: --speed: must be > 0, got 0\nrun 'tokentrace replay --help' for usage\n"},
		{"a subcommand is named whole, once, though its own error named it already",
			[]string{"synth", "gen", "--rate-scale", "-1", "--duration", "1s", "--out", out, "model.json"}, exitUsage,
			"tokentrace synth gen: --rate-scale: must be > 0, got -1\nrun 'tokentrace synth gen --help' for usage\n"},
		{"a wrong number of arguments names the subcommand, not only its last word",
			[]string{"synth", "fit", "--out", out}, exitUsage,
			"tokentrace synth fit: want 1 argument(s) (TRACE), got 0\nrun 'tokentrace synth fit --help' for usage\n"},
		{"a mistyped flag's suggestion keeps the one form",
			[]string{"analyze", "--slow", "x"}, exitUsage,
			"tokentrace analyze: unknown flag --slow; did you mean --slo?\nrun 'tokentrace analyze --help' for usage\n"},
		{"an unknown command has no command to name, and points at the top-level help",
			[]string{"analize"}, exitUsage,
			"tokentrace: unknown command \"analize\"; did you mean \"analyze\"?\nrun 'tokentrace --help' for usage\n"},
		{"a failure that is no usage error gets no hint, and a missing file is said once",
			[]string{"analyze", missing}, exitFailure,
			"tokentrace analyze: open trace " + missing + ": no such file or directory\n"},
		{"a validate target that is no NAME=SPEC names --target once",
			[]string{"validate", "--target", "target b:", "--target", "a=sim", missing, missing}, exitUsage,
			"tokentrace validate: --target \"target b:\": want NAME=URL or NAME=sim[:KEY=VALUE,...]\nrun 'tokentrace validate --help' for usage\n"},
		{"a sim spec with spaces for commas is answered with the spec written right",
			[]string{"replay", "--target", "sim:replicas=4 router=prefix-aware", "--out", out, trace}, exitUsage,
			"tokentrace replay: --target: simulator configuration \"replicas=4 router=prefix-aware\": \"replicas=4 router=prefix-aware\" has a space where a comma goes: keys are separated by commas, no spaces (write \"replicas=4,router=prefix-aware\")\nrun 'tokentrace replay --help' for usage\n"},
	} {
		code, _, se := runCLI(nil, c.args...)
		if code != c.code || se != c.want {
			t.Errorf("%s: exit %d, stderr\n%s\nwant exit %d, stderr\n%s", c.why, code, se, c.code, c.want)
		}
	}
}

// The outcome line says ok once: its breakdown lists the failures by kind
// only, and none when nothing failed.
func TestOutcomeLine(t *testing.T) {
	for _, c := range []struct {
		why  string
		o    traces.OutcomeSummary
		want string
	}{
		{"failures are broken down by kind, ok is not repeated among them",
			traces.OutcomeSummary{Requests: 471, OK: 464, Failed: 7, ByStatus: map[string]int64{"ok": 464, "http_error": 7}},
			"471 requests: ok 464, failed 7 (http_error 7)"},
		{"several kinds of failure, in name order",
			traces.OutcomeSummary{Requests: 10, OK: 7, Failed: 3, ByStatus: map[string]int64{"ok": 7, "timeout": 1, "http_error": 2}},
			"10 requests: ok 7, failed 3 (http_error 2, timeout 1)"},
		{"no failure, no breakdown",
			traces.OutcomeSummary{Requests: 5, OK: 5, ByStatus: map[string]int64{"ok": 5}},
			"5 requests: ok 5, failed 0"},
	} {
		if got := outcomeLine(&c.o); got != c.want {
			t.Errorf("%s: %q, want %q", c.why, got, c.want)
		}
	}
}

// A run that did not keep its timing is advised to slow down with "a lower
// --speed" (a rate, not a count).
func TestLatenessAdviceSaysLowerSpeed(t *testing.T) {
	err := replayValid(&replay.Summary{LatenessP99: 10 * time.Millisecond}, 1, time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "use a lower --speed,") || strings.Contains(err.Error(), "fewer --") {
		t.Errorf("lateness over the bound: %v; want advice to use a lower --speed", err)
	}
}

// stutter is an error that says a file operation twice, a path error
// wrapped by hand ("open trace: open missing.parquet: ...").
var stutter = regexp.MustCompile(`\b(open|create|read)\b[^:]*: (open|create|read|stat|mkdir) /`)

// A file that cannot be read or written is named once, after what failed
// on it, whichever command meets it.
func TestFileErrorsSayThePathOnce(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.parquet")
	bad := filepath.Join(dir, "no-such-dir", "out.parquet")
	trace := filepath.Join("testdata", "golden", "trace.jsonl")
	model := filepath.Join("testdata", "golden", "model.json")
	for _, c := range []struct {
		why  string
		args []string
		path string
		want string
	}{
		{"inspect of a missing trace", []string{"inspect", missing}, missing, "tokentrace inspect: open trace " + missing + ": no such file or directory"},
		{"synth fit of a missing trace", []string{"synth", "fit", "--out", filepath.Join(dir, "m.json"), missing}, missing, "tokentrace synth fit: open trace " + missing + ": no such file or directory"},
		{"synth gen of a missing model", []string{"synth", "gen", "--duration", "1s", "--out", filepath.Join(dir, "s.jsonl"), missing}, missing, "tokentrace synth gen: open model " + missing + ": no such file or directory"},
		{"synth gen into a missing directory", []string{"synth", "gen", "--duration", "1s", "--out", bad, model}, bad, "tokentrace synth gen: create trace " + bad + ": no such file or directory"},
		{"import into a missing directory", []string{"import", "--format", "mooncake", "--out", bad, trace}, bad, ""},
		{"capture of a missing log", []string{"capture", "--out", filepath.Join(dir, "t.jsonl"), missing}, missing, "tokentrace capture: open log " + missing + ": no such file or directory"},
		{"a missing simulator configuration file", []string{"sim", "--config", missing}, missing, "read configuration file " + missing + ": no such file or directory"},
	} {
		_, _, se := runCLI(nil, c.args...)
		last := se
		if lines := strings.Split(strings.TrimSpace(se), "\n"); len(lines) > 0 {
			last = lines[len(lines)-1]
			if strings.HasPrefix(last, "run '") && len(lines) > 1 {
				last = lines[len(lines)-2]
			}
		}
		if strings.Count(last, c.path) != 1 || stutter.MatchString(last) || !strings.Contains(last, c.want) {
			t.Errorf("%s: %q: want %s named once, no operation said twice, containing %q", c.why, last, c.path, c.want)
		}
	}
}
