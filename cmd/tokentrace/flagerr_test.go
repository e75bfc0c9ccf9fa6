package main

import (
	"bytes"
	"context"
	"errors"
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
	code, _, se := runCLI(nil, "replay", "--speed", "0", "--timeout", "0s", "--url", "http://127.0.0.1:1", trace)
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
	tok := traces.OptionErrorf("replay", "Options.TokenIDMin, Options.TokenIDMax", "want 0 <= min < max")
	if got := flagged(tok, nil).Error(); got != tok.Error() {
		t.Errorf("flagged(%q) = %q", tok, got)
	}
}
