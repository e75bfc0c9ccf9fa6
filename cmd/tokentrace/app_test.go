package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/internal/golden"
	"github.com/tokentrace/tokentrace/traces"
)

// runCLI runs one tokentrace command line in-process: args are the words
// after the program name, stdin (nil for none) is its standard input. It
// returns the exit code and what the command wrote to stdout and stderr.
func runCLI(stdin io.Reader, args ...string) (code int, stdout, stderr string) {
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	var out, errb bytes.Buffer
	code = Main(context.Background(), append([]string{"tokentrace"}, args...), stdin, &out, &errb)
	return code, out.String(), errb.String()
}

// runMain runs one command line that must succeed (the test stops
// otherwise) and returns its stdout and stderr.
func runMain(t *testing.T, args ...string) (stdout, stderr string) {
	t.Helper()
	code, stdout, stderr := runCLI(nil, args...)
	if code != 0 {
		t.Fatalf("%v: exit %d\nstdout %s\nstderr %s", args, code, stdout, stderr)
	}
	return stdout, stderr
}

// writeTrace writes recs with meta m to path (its format from the
// extension) and returns path.
func writeTrace(t *testing.T, path string, m traces.Meta, recs []traces.Record) string {
	t.Helper()
	if err := traces.WriteAll(path, m, recs); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestProfileFlags checks the global profiling flags: each writes its
// file for a command that succeeds, and an unwritable path is a usage
// error that names the flag.
func TestProfileFlags(t *testing.T) {
	for _, tc := range []struct {
		flag, writes string
		ok           func([]byte) bool
	}{
		{"--cpuprofile", "a gzip'd pprof profile",
			func(b []byte) bool { return len(b) >= 2 && b[0] == 0x1f && b[1] == 0x8b }},
		{"--exectrace", "a Go execution trace",
			func(b []byte) bool { return bytes.HasPrefix(b, []byte("go 1.")) }},
	} {
		path := filepath.Join(t.TempDir(), "out")
		runMain(t, tc.flag, path, "version")
		b, err := os.ReadFile(path)
		if err != nil || !tc.ok(b) {
			t.Errorf("%s %s: %d bytes, err %v; want %s", tc.flag, path, len(b), err, tc.writes)
		}
		code, _, se := runCLI(nil, tc.flag, filepath.Join(t.TempDir(), "no", "such", "dir", "p"), "version")
		if code != exitUsage || !strings.Contains(se, tc.flag) {
			t.Errorf("%s to an unwritable path: exit %d, %q; want 2 naming %s", tc.flag, code, se, tc.flag)
		}
	}
}

// TestUsageErrorsAreShortAndSuggest checks that a mistyped command or flag
// gives exit 2 and one short line naming it, with the nearest known name,
// and the line saying where the usage is, instead of a screen of help.
func TestUsageErrorsAreShortAndSuggest(t *testing.T) {
	for _, c := range []struct {
		why  string
		args []string
		want string
	}{
		{"a mistyped command suggests the command", []string{"analize"}, `unknown command "analize"; did you mean "analyze"?`},
		{"a mistyped flag suggests the flag", []string{"analyze", "--slow", "x"}, "analyze: unknown flag --slow; did you mean --slo?"},
		{"a subcommand's flag names the full command", []string{"synth", "fit", "--outt", "x", "y"}, "synth fit: unknown flag --outt; did you mean --out?"},
		{"an unrelated flag gets no suggestion", []string{"inspect", "--zzzzzzzz", "x"}, "inspect: unknown flag --zzzzzzzz\n"},
	} {
		code, _, se := runCLI(nil, c.args...)
		if code != exitUsage || !strings.Contains(se, c.want) || strings.Count(se, "\n") > 2 {
			t.Errorf("%s: exit %d, stderr %q; want exit 2 and one line containing %q (and the hint line)", c.why, code, se, c.want)
		}
	}
	if code, so, se := runCLI(nil, "--version"); code != 0 || !strings.HasPrefix(so, "tokentrace ") || !strings.Contains(so, "(commit ") {
		t.Errorf("--version: exit %d, %q %q", code, so, se)
	}
}

// TestHelpGolden pins the top-level --help to testdata/golden/help.txt: the
// commands in their order with their one-line usage, and the global flags
// (the build's version is written as VERSION).
func TestHelpGolden(t *testing.T) {
	code, stdout, stderr := runCLI(nil, "--help")
	if code != 0 {
		t.Fatalf("--help: exit %d, stderr %q", code, stderr)
	}
	got := strings.Replace(stdout, "\n   "+versionString()+"\n", "\n   VERSION\n", 1)
	golden.Check(t, filepath.Join("testdata", "golden", "help.txt"), []byte(got))
}

// TestZeroTypedRefused: options whose library zero means "the default"
// refuse a 0 typed on the command line, naming the flag, before any input
// is read (the file named does not exist), instead of running silently
// with the default.
func TestZeroTypedRefused(t *testing.T) {
	for _, c := range []struct {
		why  string
		args []string
		want string
	}{
		{"analyze --exact-rows 0 would have analyzed with the 4 Mi-row budget", []string{"analyze", "--exact-rows", "0", "missing.parquet"}, "--exact-rows: 0 is not a value here"},
		{"synth gen --rate-scale 0 would have generated at the fitted rate", []string{"synth", "gen", "--rate-scale", "0", "missing.json"}, "--rate-scale: must be > 0, got 0"},
		{"synth fit --reorder-window 0 would have held 64 Ki records", []string{"synth", "fit", "--reorder-window", "0", "missing.parquet"}, "--reorder-window: 0 is not a value here"},
	} {
		code, _, stderr := runCLI(nil, c.args...)
		if code != exitUsage || !strings.Contains(stderr, c.want) || strings.Contains(stderr, "missing") {
			t.Errorf("%s: exit %d, stderr %q; want exit 2 saying %q", c.why, code, stderr, c.want)
		}
	}
}
