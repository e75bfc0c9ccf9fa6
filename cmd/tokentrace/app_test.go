package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCPUProfileFlag checks the global --cpuprofile flag: a gzip'd pprof
// profile is written for a command that succeeds, and an unwritable path is
// a usage error that names the flag.
func TestCPUProfileFlag(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.prof")
	var out, errb bytes.Buffer
	if code := Main(context.Background(), []string{"tokentrace", "--cpuprofile", path, "version"}, strings.NewReader(""), &out, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	b, err := os.ReadFile(path)
	if err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Errorf("profile %s: %d bytes, err %v; want a gzip'd pprof profile", path, len(b), err)
	}
	errb.Reset()
	code := Main(context.Background(), []string{"tokentrace", "--cpuprofile", filepath.Join(t.TempDir(), "no", "such", "dir", "p"), "version"}, strings.NewReader(""), &out, &errb)
	if code != exitUsage || !strings.Contains(errb.String(), "--cpuprofile") {
		t.Errorf("unwritable profile path: exit %d, %q; want 2 naming --cpuprofile", code, errb.String())
	}
}

// TestUsageErrorsAreShortAndSuggest checks that a mistyped command or flag
// gives exit 2 and one short line naming it, with the nearest known name,
// instead of a screen of help.
func TestUsageErrorsAreShortAndSuggest(t *testing.T) {
	for _, c := range []struct {
		why  string
		args []string
		want string
	}{
		{"a mistyped command suggests the command", []string{"analize"}, `unknown command "analize"; did you mean "analyze"?`},
		{"a mistyped flag suggests the flag", []string{"analyze", "--slow", "x"}, "analyze: unknown flag --slow; did you mean --slo?"},
		{"a subcommand's flag names the full command", []string{"synth", "fit", "--outt", "x", "y"}, "synth fit: unknown flag --outt; did you mean --out?"},
		{"an unrelated flag gets no suggestion", []string{"inspect", "--zzzzzzzz", "x"}, "inspect: unknown flag --zzzzzzzz (see"},
	} {
		var so, se bytes.Buffer
		code := Main(context.Background(), append([]string{"tokentrace"}, c.args...), strings.NewReader(""), &so, &se)
		if code != exitUsage || !strings.Contains(se.String(), c.want) || strings.Count(se.String(), "\n") > 1 {
			t.Errorf("%s: exit %d, stderr %q; want exit 2 and one line containing %q", c.why, code, se.String(), c.want)
		}
	}
	var so, se bytes.Buffer
	if code := Main(context.Background(), []string{"tokentrace", "--version"}, nil, &so, &se); code != 0 || !strings.HasPrefix(so.String(), "tokentrace version ") {
		t.Errorf("--version: exit %d, %q %q", code, so.String(), se.String())
	}
}

// TestCLINames checks that library errors naming options reach the user
// naming flags.
func TestCLINames(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"synth: Options.RateScale must be > 0, got 0", "--rate-scale must be > 0, got 0"},
		{"analyze: Options.ModelBytes and Options.Bandwidth: give both", "--model-bytes and --bandwidth: give both"},
		{"sim: Options.OTLPTracesEndpoint \"x\": want http", "--otlp-traces-endpoint \"x\": want http"},
		{"analyze: Options.TailPercentile 100: want", "--tail 100: want"},
		{"sim: Options.MaxModelLen 9 is larger", "--max-model-len 9 is larger"},
		{"read trace t.parquet: no such file", "read trace t.parquet: no such file"},
	} {
		if got := cliNames(c.in); got != c.want {
			t.Errorf("cliNames(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
