package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/tokentrace/tokentrace/internal/redact"
	"github.com/urfave/cli/v2"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
	// exitNotReproduced: replay finished but its lateness p99 exceeded
	// --max-lateness, so the run did not reproduce the trace.
	exitNotReproduced = 3
)

// commands are the subcommands in their --help order; each is defined in
// its own file.
var commands = []func() *cli.Command{
	demoCommand,
	captureCommand,
	composeCommand,
	importCommand,
	exportCommand,
	inspectCommand,
	synthCommand,
	simCommand,
	replayCommand,
	postmortemCommand,
	sweepCommand,
	validateCommand,
	analyzeCommand,
	versionCommand,
}

// exitErr carries an exit code through urfave/cli.
type exitErr struct {
	code int
	err  error
}

func (e *exitErr) Error() string { return e.err.Error() }
func (e *exitErr) Unwrap() error { return e.err }

// usageErrorf is a usage error (exit code 2). Name the flag or argument.
func usageErrorf(format string, a ...any) error {
	return &exitErr{code: exitUsage, err: fmt.Errorf(format, a...)}
}

// withCode wraps err with an exit code.
func withCode(code int, err error) error {
	if err == nil {
		return nil
	}
	return &exitErr{code: code, err: err}
}

type ctxKey struct{}

// streams are the process's stdio, reachable from actions through the
// context so tests can drive Main with buffers.
type streams struct {
	in       io.Reader
	out, err io.Writer
}

func stdio(c *cli.Context) streams {
	if s, ok := c.Context.Value(ctxKey{}).(streams); ok {
		return s
	}
	return streams{in: c.App.Reader, out: c.App.Writer, err: c.App.ErrWriter}
}

// newApp builds the CLI.
func newApp(stdin io.Reader, stdout, stderr io.Writer) *cli.App {
	var cmds []*cli.Command
	for _, cmd := range commands {
		cmds = append(cmds, cmd())
	}
	app := &cli.App{
		Name:  "tokentrace",
		Usage: "capture, synthesize, replay and analyze LLM serving traffic",
		Description: `tokentrace turns production LLM traffic into a content-free trace, makes
synthetic workloads from it, replays either against a vLLM-compatible server
with the original arrival timing, and explains where the tail latency came from.

Every command reads and writes one record schema, in Parquet (.parquet),
JSON lines (.jsonl, .jsonl.zst) or CSV (.csv); "-" is stdin/stdout. A
directory or a quoted glob of time-ordered part files reads as one trace.
Flags go before arguments.`,
		Commands:             cmds,
		Reader:               stdin,
		Writer:               stdout,
		ErrWriter:            stderr,
		HideHelpCommand:      true,
		EnableBashCompletion: false,
		ExitErrHandler:       func(*cli.Context, error) {}, // Main decides the exit code
		OnUsageError: func(c *cli.Context, err error, isSub bool) error {
			return usageErrorf("%w (see --help)", err)
		},
		Flags:   profileFlags,
		Before:  startProfiles,
		After:   stopProfiles,
		Version: versionString(),
	}
	cli.VersionFlag = &cli.BoolFlag{Name: "version", Aliases: []string{"v"}, Usage: "print the version and its commit (as tokentrace version does)"}
	cli.VersionPrinter = func(c *cli.Context) { fmt.Fprintln(c.App.Writer, versionLine()) }
	for _, c := range app.Commands {
		quietUsageErrors(c, "")
	}
	return app
}

// Main runs the CLI and returns the process exit code.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	stderr = redactWriter{stderr}
	app := newApp(stdin, stdout, stderr)
	args = helpArgs(app, args)
	if msg := unknownCommand(app, args); msg != "" {
		fmt.Fprintf(stderr, "tokentrace: %s\n", msg)
		return exitUsage
	}
	ctx = context.WithValue(ctx, ctxKey{}, streams{in: newCtxStdin(ctx, stdin), out: stdout, err: stderr})
	err := app.RunContext(ctx, args)
	if err == nil {
		return exitOK
	}
	code := exitFailure
	var ee *exitErr
	if errors.As(err, &ee) {
		code = ee.code
	} else if strings.HasPrefix(err.Error(), "flag provided but not defined") ||
		strings.HasPrefix(err.Error(), "Required flag") || strings.HasPrefix(err.Error(), "No help topic") || strings.HasPrefix(err.Error(), "invalid value") {
		code = exitUsage
	}
	fmt.Fprintf(stderr, "tokentrace: %s\n", redact.URLs(flagged(err, nil).Error()))
	return code
}

// zeroTyped refuses an explicit 0 for flags whose library option takes
// zero as "the default" (options structs fill zero fields with their
// defaults): a 0 typed on the command line would otherwise run silently
// with the default.
func zeroTyped(c *cli.Context, flags ...string) error {
	for _, f := range flags {
		if !c.IsSet(f) {
			continue
		}
		switch v := c.Value(f).(type) {
		case int:
			if v == 0 {
				return usageErrorf("--%s: 0 is not a value here (leave the flag out for its default)", f)
			}
		case float64:
			if v == 0 {
				return usageErrorf("--%s: must be > 0, got 0", f)
			}
		}
	}
	return nil
}

// args checks the positional arguments: between min and max of them
// (max < 0: no limit), none that looks like a flag (urfave/cli v2 silently
// ignores flags placed after a positional argument, so we refuse them).
func args(c *cli.Context, min, max int, what string) ([]string, error) {
	a := c.Args().Slice()
	for _, s := range a {
		if strings.HasPrefix(s, "-") && s != "-" {
			return nil, usageErrorf("%s: flag %s after an argument: put flags before arguments", c.Command.Name, s)
		}
	}
	if len(a) < min || (max >= 0 && len(a) > max) {
		switch {
		case min == max:
			return nil, usageErrorf("%s: want %d argument(s) (%s), got %d", c.Command.Name, min, what, len(a))
		case max < 0:
			return nil, usageErrorf("%s: want at least %d argument(s) (%s), got %d", c.Command.Name, min, what, len(a))
		default:
			return nil, usageErrorf("%s: want %d to %d argument(s) (%s), got %d", c.Command.Name, min, max, what, len(a))
		}
	}
	return a, nil
}

// prefixWriter starts every write with prefix: the library's one-line
// notices ("replay: ...") read as the command's ("tokentrace replay: ...").
type prefixWriter struct {
	w      io.Writer
	prefix string
}

func (p prefixWriter) Write(b []byte) (int, error) {
	if _, err := io.WriteString(p.w, p.prefix); err != nil {
		return 0, err
	}
	return p.w.Write(b)
}

// formatArg checks the --format of command cmd: given, and one of known.
func formatArg(cmd, format string, known []string) error {
	if format == "" {
		return usageErrorf("%s: --format is required (one of %s)", cmd, strings.Join(known, ", "))
	}
	if !slices.Contains(known, format) {
		return usageErrorf("%s: --format %q: want one of %s", cmd, format, strings.Join(known, ", "))
	}
	return nil
}
