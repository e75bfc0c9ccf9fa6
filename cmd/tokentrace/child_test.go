package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// runCLIChild runs one command line as runCLI does, in a child process:
// the test binary, which runs the CLI when childEnv is set (see TestMain),
// in dir ("" = the test's working directory). Tests that run beside others
// (t.Parallel) use it, because two runs of Main in one process race:
// urfave/cli keeps package-level state that every run writes (its help and
// version flags, its help command), and the commands tune process-wide
// settings (replay.TuneProcess).
func runCLIChild(t *testing.T, dir string, stdin io.Reader, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	var out, errb bytes.Buffer
	cmd := exec.Command(os.Args[0])
	cmd.Dir, cmd.Env = dir, childEnviron(args)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, &out, &errb
	if err := cmd.Run(); err != nil {
		if ee := (*exec.ExitError)(nil); !errors.As(err, &ee) {
			t.Fatalf("%v: %v", args, err)
		}
	}
	code, stdout, stderr = cmd.ProcessState.ExitCode(), out.String(), errb.String()
	// What would stop the test binary when Main runs in it stops the test:
	// a data race the child's race detector saw, or a panic.
	if strings.Contains(stderr, "WARNING: DATA RACE") || strings.Contains(stderr, "panic: ") && strings.Contains(stderr, "\ngoroutine ") {
		t.Fatalf("%v: the command raced or panicked (exit %d):\n%s", args, code, stderr)
	}
	return code, stdout, stderr
}

// runMainChild is runMain in a child process (see runCLIChild).
func runMainChild(t *testing.T, dir string, args ...string) (stdout, stderr string) {
	t.Helper()
	code, stdout, stderr := runCLIChild(t, dir, nil, args...)
	if code != 0 {
		t.Fatalf("%v: exit %d\nstdout %s\nstderr %s", args, code, stdout, stderr)
	}
	return stdout, stderr
}

// childEnviron is the environment of a child that runs the CLI with args.
// The race detector's pause before exit (a second by default, for racing
// goroutines to show) is left out: the command has finished by then, and
// the tests start hundreds of children.
func childEnviron(args []string) []string {
	return append(os.Environ(),
		childEnv+"="+strings.Join(append([]string{"tokentrace"}, args...), "\x1f"),
		"GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
}

// mainChild is Main(ctx, args, nil, stdout, stderr) in a child process
// (see runCLIChild): args start with the program's name.
func mainChild(t *testing.T, args []string, stdout, stderr io.Writer) int {
	t.Helper()
	code, so, se := runCLIChild(t, "", nil, args[1:]...)
	io.WriteString(stdout, so)
	io.WriteString(stderr, se)
	return code
}
