package main

import (
	"bytes"
	"context"
	"io"
	"iter"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/internal/golden"
	"github.com/tokentrace/tokentrace/traces"
	"github.com/urfave/cli/v2"
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

// TestZeroTypedRefused: a 0 typed for any numeric flag of any command
// reaches the library as 0, never silently its default: where the library
// cannot use it, its option error is said as that flag (a usage error,
// before any input is read), and where 0 has a meaning of its own the run
// goes on to its input. Each command runs with a context already
// cancelled and inputs that do not exist, so a run that accepts the 0
// stops at once; the lists below keep the check from passing vacuously.
func TestZeroTypedRefused(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.parquet")
	// A twin file without keys: the built-in simulator.
	twinFile := filepath.Join(dir, "twin.conf")
	if err := os.WriteFile(twinFile, []byte("# no keys\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The arguments that make each command reach its library call.
	base := map[string][]string{
		"demo":            {"--out", filepath.Join(dir, "demo")},
		"capture":         {"--out", filepath.Join(dir, "c.parquet"), missing},
		"compose":         {"--out", filepath.Join(dir, "p.parquet"), missing},
		"import":          {"--format", "mooncake", "--out", filepath.Join(dir, "i.parquet"), missing},
		"export":          {"--format", "mooncake", "--out", filepath.Join(dir, "e.jsonl"), missing},
		"inspect":         {missing},
		"synth fit":       {"--out", filepath.Join(dir, "m.json"), missing},
		"synth gen":       {"--out", filepath.Join(dir, "g.parquet"), missing},
		"synth matrix":    {"--out", filepath.Join(dir, "x.parquet")},
		"synth check":     {missing, missing},
		"sim":             {},
		"sim fit":         {"--out", filepath.Join(dir, "t.conf"), missing},
		"sim check":       {"--twin", twinFile, missing},
		"replay":          {"--out", filepath.Join(dir, "r.parquet"), missing},
		"postmortem":      {"--prometheus", "http://127.0.0.1:1", missing},
		"sweep":           {"--slo", "ttft=1s", "--out-dir", filepath.Join(dir, "s"), missing},
		"validate":        {"--target", "a=sim", "--target", "b=sim", missing, missing},
		"analyze":         {missing},
		"analyze compare": {missing, missing},
	}
	refused, accepted := map[string]bool{}, map[string]bool{}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for path, cmd := range appCommands(newApp(nil, io.Discard, io.Discard)) {
		args, ok := base[path]
		if !ok {
			if numericFlags(cmd) != nil {
				t.Errorf("%s: teach this test the arguments of the command", path)
			}
			continue
		}
		for _, name := range numericFlags(cmd) {
			line := append(append(strings.Fields(path), "--"+name, "0"), args...)
			var out, errb bytes.Buffer
			code := Main(ctx, append([]string{"tokentrace"}, line...), strings.NewReader(""), &out, &errb)
			stderr := errb.String()
			key := path + " --" + name
			if code == exitOK || strings.Contains(stderr, missing) || strings.Contains(stderr, "context canceled") {
				accepted[key] = true
				continue
			}
			refused[key] = true
			// sim's fleet flags become configuration keys (fleetConfig),
			// which its errors name as keys: the flag without its dashes.
			named := strings.Contains(stderr, "--"+name) || path == "sim" && strings.Contains(stderr, name)
			if code != exitUsage || !named || strings.Contains(stderr, "Options.") {
				t.Errorf("%s 0: exit %d, stderr %q; want a usage error that names --%s (the library's option error said as the flag)", key, code, stderr, name)
			}
		}
	}
	for _, key := range []string{"analyze --exact-rows", "synth gen --rate-scale", "synth gen --length-scale", "synth gen --input-length-scale",
		"synth gen --output-length-scale", "synth fit --bin", "synth fit --min-bin-count", "synth matrix --sat-requests", "synth matrix --row-duration",
		"replay --speed", "replay --timeout", "replay --block-size", "validate --speed", "validate --repeat", "validate --resamples",
		"validate --confidence", "validate --timeout", "capture --min-category-size", "capture --max-kanon-entries", "sim --max-num-seqs",
		"analyze compare --max-sample", "sweep --timeout", "sweep --sim-max-num-seqs", "sim check --tolerance"} {
		if !refused[key] {
			t.Errorf("%s 0 was not refused: the library cannot use it", key)
		}
	}
	for _, key := range []string{"synth fit --reorder-window", "synth fit --cluster-gap", "validate --min-effect-pct", "validate --magnitude-tolerance",
		"validate --combination-budget", "replay --clock-probes", "replay --drain", "replay --max-concurrency", "analyze --kv-blocks", "export --block-size",
		"sim fit --seed", "sim fit --sim-rows", "sim fit --chunk-jitter"} {
		if !accepted[key] {
			t.Errorf("%s 0 was refused: its 0 means something", key)
		}
	}
	t.Logf("%d typed zeros refused, %d accepted: %v", len(refused), len(accepted), slices.Sorted(maps.Keys(accepted)))
}

// appCommands yields every command that runs (subcommands included) by
// its path ("synth gen").
func appCommands(app *cli.App) iter.Seq2[string, *cli.Command] {
	return func(yield func(string, *cli.Command) bool) {
		var walk func(prefix string, cmds []*cli.Command) bool
		walk = func(prefix string, cmds []*cli.Command) bool {
			for _, c := range cmds {
				path := strings.TrimSpace(prefix + " " + c.Name)
				if c.Action != nil && !yield(path, c) {
					return false
				}
				if !walk(path, c.Subcommands) {
					return false
				}
			}
			return true
		}
		walk("", app.Commands)
	}
}

// numericFlags are cmd's flags that take a number.
func numericFlags(cmd *cli.Command) []string {
	var names []string
	for _, f := range cmd.Flags {
		switch f.(type) {
		case *cli.IntFlag, *cli.Int64Flag, *cli.UintFlag, *cli.Uint64Flag, *cli.Float64Flag, *cli.DurationFlag:
			names = append(names, f.Names()[0])
		}
	}
	return names
}
