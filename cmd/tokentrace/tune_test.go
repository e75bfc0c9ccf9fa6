package main

import (
	"os"
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/replay"
)

// childEnv makes the test binary run the CLI instead of the tests: its value
// is the command line, arguments separated by \x1f. Tests that must SIGKILL
// a command start it this way (see startChild).
const childEnv = "TOKENTRACE_TEST_MAIN"

// TestMain tunes the process as the CLI does before a replay (see
// replay.TuneProcess): the lateness these tests check depends on it.
func TestMain(m *testing.M) {
	if args := os.Getenv(childEnv); args != "" {
		// As main does: Ctrl-C and SIGTERM cancel the command's context.
		ctx, stop := signalContext()
		code := Main(ctx, strings.Split(args, "\x1f"), os.Stdin, os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	restore := replay.TuneProcess(1)
	code := m.Run()
	restore()
	os.Exit(code)
}
