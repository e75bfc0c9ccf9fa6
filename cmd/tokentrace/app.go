package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
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
			return usageErrorf("%w", err)
		},
		Flags:   profileFlags,
		Before:  startProfiles,
		After:   stopProfiles,
		Version: versionString(),
	}
	cli.VersionFlag = &cli.BoolFlag{Name: "version", Aliases: []string{"v"}, Usage: "print the version and its commit (as tokentrace version does)"}
	cli.VersionPrinter = func(c *cli.Context) { fmt.Fprintln(c.App.Writer, versionLine()) }
	cli.HelpPrinter = printHelp
	for _, c := range app.Commands {
		quietUsageErrors(c, "")
		layoutHelp(c, "")
	}
	return app
}

// Main runs the CLI and returns the process exit code.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	stderr = redactWriter{stderr}
	app := newApp(stdin, stdout, stderr)
	args = helpArgs(app, args)
	if msg := unknownCommand(app, args); msg != "" {
		fmt.Fprint(stderr, redact.URLs(errorText(commandPath(app, args), errors.New(msg), exitUsage)))
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
	// A URL's credentials or query (a token) an error names never reach
	// the terminal or a log of it.
	fmt.Fprint(stderr, redact.URLs(errorText(commandPath(app, args), flagged(err, nil), code)))
	return code
}

// commandPath is the command the arguments run ("replay", "synth fit"; ""
// for none, or one that does not exist), said as typed at the prompt.
func commandPath(app *cli.App, args []string) string {
	i := firstWord(args)
	if i < 0 {
		return ""
	}
	cmd := findCommand(app.Commands, args[i])
	if cmd == nil {
		return ""
	}
	if len(cmd.Subcommands) > 0 && i+1 < len(args) {
		if sub := findCommand(cmd.Subcommands, args[i+1]); sub != nil {
			return cmd.Name + " " + sub.Name
		}
	}
	return cmd.Name
}

// requiredFlags is urfave/cli's message for required flags left out,
// which names them without their dashes or the command.
var requiredFlags = regexp.MustCompile(`^Required flags? "(.*)" not set$`)

// errorText is the one form every error of the CLI is printed in, whoever
// made it (a command, a library, urfave/cli): "tokentrace COMMAND: what
// failed", the command said once (an error that already starts with it is
// not prefixed again), and after a usage error (exit 2) a line saying
// where the usage is.
func errorText(path string, err error, code int) string {
	msg := err.Error()
	if m := requiredFlags.FindStringSubmatch(msg); m != nil {
		names := strings.Split(m[1], ", ")
		for i, n := range names {
			names[i] = "--" + n
		}
		if len(names) == 1 {
			msg = names[0] + " is required"
		} else {
			msg = strings.Join(names, " and ") + " are required"
		}
	}
	head := "tokentrace"
	if path != "" {
		head += " " + path
		msg = strings.TrimPrefix(msg, path+": ")
	}
	text := head + ": " + msg + "\n"
	if code == exitUsage {
		text += "run '" + head + " --help' for usage\n"
	}
	return text
}

// args checks the positional arguments: between min and max of them
// (max < 0: no limit), none that looks like a flag (urfave/cli v2 silently
// ignores flags placed after a positional argument, so we refuse them).
func args(c *cli.Context, min, max int, what string) ([]string, error) {
	a := c.Args().Slice()
	for _, s := range a {
		if strings.HasPrefix(s, "-") && s != "-" {
			return nil, usageErrorf("flag %s after an argument: put flags before arguments", s)
		}
	}
	if len(a) < min || (max >= 0 && len(a) > max) {
		switch {
		case min == max:
			return nil, usageErrorf("want %d argument(s) (%s), got %d", min, what, len(a))
		case max < 0:
			return nil, usageErrorf("want at least %d argument(s) (%s), got %d", min, what, len(a))
		default:
			return nil, usageErrorf("want %d to %d argument(s) (%s), got %d", min, max, what, len(a))
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
