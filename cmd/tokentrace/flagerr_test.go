package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/replay"
	"github.com/tokentrace/tokentrace/traces"
)

// The replay command's errors keep the library's chain, so a program (or
// a test) can still ask errors.Is for replay's and traces' sentinels and
// errors.As for the option at fault, while the message names the flag the
// user typed instead of the option.
func TestReplayErrorsKeepTheirChain(t *testing.T) {
	dir := t.TempDir()
	trace := writeReplayTrace(t, 10)
	cut := filepath.Join(dir, "cut.parquet")
	toParquet(t, trace, cut)
	b, err := os.ReadFile(cut)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(cut, b[:8], 0o644) // not one complete row
	for _, c := range []struct {
		why    string
		set    func(a *replayArgs)
		is     error  // the sentinel errors.Is finds
		option string // the option errors.As finds
		want   string // in the message
	}{
		{"a window that selects nothing is ErrNothingToSend, naming --window",
			func(a *replayArgs) { a.window = "100s,200s" }, replay.ErrNothingToSend, "Options.WindowFrom, Options.WindowTo", "no records to send: --window: [1m40s, 3m20s) selects none"},
		{"a trace with no complete row is ErrTruncated",
			func(a *replayArgs) { a.trace = cut }, traces.ErrTruncated, "", "truncated"},
		{"a speed of 0 is the library's option error, naming --speed",
			func(a *replayArgs) { a.o.Speed = 0 }, nil, "Options.Speed", "--speed: must be > 0"},
		{"a bad shard names --shard",
			func(a *replayArgs) { a.shard = "3/2" }, nil, "shard", "--shard: want 0 <= i < n"},
		{"an unreadable key file keeps the OS error (and its path, never a key)",
			func(a *replayArgs) { a.apiKeyFile = filepath.Join(dir, "no-key") }, fs.ErrNotExist, "", "--api-key-file: open " + filepath.Join(dir, "no-key") + ": no such file"},
	} {
		a := newReplayArgs()
		a.trace, a.out, a.quiet = trace, filepath.Join(dir, "res.jsonl"), true
		c.set(a)
		var stderr bytes.Buffer
		err := runReplay(context.Background(), a, streams{out: &stderr, err: &stderr})
		if err == nil {
			t.Errorf("%s: no error", c.why)
			continue
		}
		if c.is != nil && !errors.Is(err, c.is) {
			t.Errorf("%s: %v is not %v", c.why, err, c.is)
		}
		var oe *traces.OptionError
		if c.option != "" && (!errors.As(err, &oe) || oe.Option != c.option) {
			t.Errorf("%s: %v: want an option error for %s, got %+v", c.why, err, c.option, oe)
		}
		if !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "Options.") {
			t.Errorf("%s: message %q, want %q and no option names", c.why, err, c.want)
		}
	}
}

// Through Main, a bad option is a usage error whose one line names the
// flag.
func TestReplayBadOptionNamesFlag(t *testing.T) {
	trace := writeReplayTrace(t, 1)
	out := filepath.Join(filepath.Dir(trace), "results.parquet")
	code, _, se := runCLI(nil, "replay", "--out", out, "--speed", "0", "--timeout", "0s", "--url", "http://127.0.0.1:1", trace)
	if code != exitUsage || !strings.Contains(se, "--speed: must be > 0, got 0") || !strings.Contains(se, "--timeout: must be > 0") || strings.Contains(se, "Options.") {
		t.Errorf("exit %d, stderr %q; want 2 naming --speed and --timeout", code, se)
	}
}

// flagged says each option error of a joined error with its flag, leaves
// other errors as they are, and keeps every cause.
func TestFlagged(t *testing.T) {
	cause := errors.New("the cause")
	joined := errors.Join(
		traces.OptionErrorf("replay", "Options.Speed", "must be > 0, got %v", 0),
		traces.OptionErrorf("replay", "window", "FROM: %w", cause),
		errors.New("replay: something else"),
	)
	got := flagged(joined, replayFlags)
	want := "--speed: must be > 0, got 0\n--window: FROM: the cause\nreplay: something else"
	if got.Error() != want || !errors.Is(got, cause) {
		t.Errorf("flagged = %q (is cause: %v), want %q", got, errors.Is(got, cause), want)
	}
	plain := errors.New("replay: no option here")
	if flagged(plain, replayFlags) != plain || flagged(nil, replayFlags) != nil {
		t.Errorf("flagged changed an error without option errors")
	}
	// An option without a flag keeps the library's name.
	tok := traces.OptionErrorf("replay", "model map", "want a=b")
	if got := flagged(tok, nil).Error(); got != tok.Error() {
		t.Errorf("flagged(%q) = %q", tok, got)
	}
	// Advice names its options as OptionRefs: each is said as its flag,
	// a longer name that holds it is not touched, and the chain stays.
	advice := fmt.Errorf("%w (set %w, or %w; FitOptions.TempDir is another)", cause, traces.OptionRef("Options.Model"), traces.OptionRef("Options.ModelMap"))
	got = flagged(advice, nil)
	want = "the cause (set --model, or --model-map; FitOptions.TempDir is another)"
	if got.Error() != want || !errors.Is(got, cause) || !errors.Is(got, traces.OptionRef("Options.ModelMap")) {
		t.Errorf("flagged = %q, want %q and the chain", got, want)
	}
}

// runErr runs one command line as Main does and returns the error Main
// would print (nil when it succeeds).
func runErr(args ...string) error {
	var out bytes.Buffer
	app := newApp(strings.NewReader(""), &out, &out)
	ctx := context.WithValue(context.Background(), ctxKey{}, streams{in: strings.NewReader(""), out: &out, err: &out})
	return app.RunContext(ctx, append([]string{"tokentrace"}, args...))
}

// A library error about an option reaches the user naming the flag, never
// "Options.": the libraries' option errors and the options their advice
// names are said as flags from their structure (no text is rewritten),
// and the printed error still unwraps to the library's, for errors.Is
// (its sentinel) and errors.As (the option at fault).
func TestLibraryOptionErrorsNameFlags(t *testing.T) {
	trace := filepath.Join("testdata", "golden", "trace.jsonl")
	model := filepath.Join("testdata", "golden", "model.json")
	out := filepath.Join(t.TempDir(), "out.jsonl")
	for _, c := range []struct {
		why    string
		args   []string
		code   int
		want   string // the stderr line, after "tokentrace COMMAND: "
		option string // the option errors.As finds ("": none)
		is     error  // a sentinel or OptionRef errors.Is finds (nil: none)
	}{
		{"synth gen's rate scale must be positive",
			[]string{"synth", "gen", "--rate-scale", "-1", "--duration", "1s", "--out", out, model}, exitUsage,
			"synth gen: --rate-scale: must be > 0, got -1", "Options.RateScale", nil},
		{"analyze's --tail is parsed by the CLI and says its flag",
			[]string{"analyze", "--tail", "100", trace}, exitUsage,
			`--tail: percentile "100": want p50 … p99.99 (strictly between 0 and 100)`, "", nil},
		{"analyze's grouping must be a known dimension",
			[]string{"analyze", "--by", "nope", trace}, exitUsage,
			`analyze: --by: "nope": want one of class, category, model, replica`, "Options.By", nil},
		{"a simulator's context length must fit its KV cache",
			[]string{"sim", "--max-model-len", "99999999"}, exitUsage,
			"sim: --max-model-len: 99999999 is larger than the KV cache (26000 blocks of 16 = 416000 tokens)", "Options.MaxModelLen", nil},
		{"a fleet's prefill pool needs a decode pool; the fleet is no flag of its own",
			[]string{"sim", "--prefill-replicas", "2"}, exitUsage,
			`sim: simulator configuration "prefill-replicas=2": fleet: prefill-replicas 2 needs a decode pool (decode-replicas): a pool of size 0 serves nothing`, "Options.Fleet", nil},
		{"a built-in target's unknown router names --target",
			[]string{"replay", "--target", "sim:router=nope", "--out", out, trace}, exitUsage,
			`--target: simulator configuration "router=nope": router: unknown router policy "nope"`, "target", nil},
		{"a simulator option inside --target is said as its flag too",
			[]string{"replay", "--target", "sim:max-model-len=99999999", "--out", out, trace}, exitUsage,
			`--target: simulator configuration "max-model-len=99999999": --max-model-len: 99999999 is larger`, "target", nil},
		{"a replay window that selects nothing is replay.ErrNothingToSend",
			[]string{"replay", "--target", "sim", "--window", "100s,200s", "--out", out, trace}, exitFailure,
			"no records to send: --window: [1m40s, 3m20s) selects none of them", "Options.WindowFrom, Options.WindowTo", replay.ErrNothingToSend},
		{"validate's repeat count is bounded",
			[]string{"validate", "--target", "a=sim", "--target", "b=sim", "--repeat", "0", trace, trace}, exitUsage,
			"--repeat: want 1 to 100 runs, got 0", "Options.Repeat", nil},
		{"validate's goodput names the option it needs as a flag",
			[]string{"validate", "--target", "a=sim", "--target", "b=sim", "--metrics", "goodput", trace, trace}, exitUsage,
			"--metrics: goodput needs --slo (e.g. ttft=500ms,tpot=50ms)", "Options.Metrics", traces.OptionRef("Options.SLO")},
		{"postmortem's labels cannot be one and the same, and the hint names the other flag",
			[]string{"postmortem", "--start", "2024-01-01T00:00:00Z", "--prometheus", "http://127.0.0.1:1", "--role-label", "pod", "--instance-label", "pod", trace}, exitUsage,
			`--role-label: "pod" is also --instance-label: one label cannot name both a replica and its pool`, "Options.RoleLabel", traces.OptionRef("Options.InstanceLabel")},
		{"sweep's repeat count is bounded",
			[]string{"sweep", "--slo", "ttft=1s", "--repeat", "0", trace}, exitUsage,
			"--repeat: want 1 to 100 runs per speed, got 0", "", nil},
		{"synth fit's bin must be positive",
			[]string{"synth", "fit", "--bin", "-1s", "--out", out, trace}, exitUsage,
			"synth fit: --bin: must be > 0, got -1s", "Options.Bin", nil},
		{"a synth matrix row must be IN/OUT@RATE",
			[]string{"synth", "matrix", "--rows", "256@1rps", "--out", out}, exitUsage,
			`synth matrix: --rows: "256@1rps": no IN/OUT`, "Options.Rows", nil},
	} {
		code, _, se := runCLI(nil, c.args...)
		path := commandPath(newApp(nil, nil, nil), append([]string{"tokentrace"}, c.args...))
		if code != c.code || !strings.HasPrefix(se, "tokentrace "+path+": "+strings.TrimPrefix(c.want, path+": ")) || strings.Contains(se, "Options.") {
			t.Errorf("%s: exit %d, stderr %q; want exit %d and %q, no \"Options.\"", c.why, code, se, c.code, c.want)
		}
		err := runErr(c.args...)
		if err == nil {
			t.Errorf("%s: no error", c.why)
			continue
		}
		if got := errorText(path, flagged(err, nil), code); got != se {
			t.Errorf("%s: Main printed %q, the error says %q", c.why, se, got)
		}
		var oe *traces.OptionError
		if c.option != "" && (!errors.As(err, &oe) || oe.Option != c.option) {
			t.Errorf("%s: %v: want an option error for %s, got %+v", c.why, err, c.option, oe)
		}
		if c.is != nil && !errors.Is(err, c.is) {
			t.Errorf("%s: %v is not %v", c.why, err, c.is)
		}
	}
}

// quoted is a wrapper that writes its cause's text quoted (%q), as a
// library wrapper may, and keeps it as its cause.
type quoted struct{ err error }

func (q quoted) Error() string { return fmt.Sprintf("bad spec %q", q.err.Error()) }
func (q quoted) Unwrap() error { return q.err }

// flagged says an error again from its tree, not by replacing text in the
// whole message: an option error quoted by its wrapper, one inside an
// errors.Join inside fmt.Errorf, a reference in advice and an option error
// whose flag is unknown all come out right, and each result still unwraps
// to the library's error.
func TestFlaggedSaysTheTree(t *testing.T) {
	by := traces.OptionErrorf("analyze", "Options.By", "%q: want one of class, model", "user")
	speed := traces.OptionErrorf("replay", "Options.Speed", "must be > 0, got %d", 0)
	model := traces.OptionErrorf("replay", "Options.Model", "set %w to one it serves", traces.OptionRef("Options.ModelMap"))
	unknown := traces.OptionErrorf("x", "Thing", "no flag sets it")
	for _, c := range []struct {
		why  string
		err  error
		want string
	}{
		{"quoted by its wrapper (its quotes escaped)", fmt.Errorf("run: %w", quoted{by}), `run: bad spec "--by: \"user\": want one of class, model"`},
		{"in a join inside fmt.Errorf", fmt.Errorf("options: %w", errors.Join(by, model)), "options: --by: \"user\": want one of class, model\n--model: set --model-map to one it serves"},
		{"a join of a known and an unknown option", errors.Join(unknown, speed), "x: Thing: no flag sets it\n--speed: must be > 0, got 0"},
		{"the same text twice, each said once", fmt.Errorf("%w; again %w", speed, speed), "--speed: must be > 0, got 0; again --speed: must be > 0, got 0"},
		{"no option at all", fmt.Errorf("read: %w", os.ErrNotExist), "read: file does not exist"},
	} {
		got := flagged(c.err, nil)
		if got.Error() != c.want {
			t.Errorf("%s: %q, want %q", c.why, got, c.want)
		}
		var oe *traces.OptionError
		if strings.Contains(c.want, "--") && !errors.As(got, &oe) {
			t.Errorf("%s: the flagged error lost the option error", c.why)
		}
	}
}
