// Command tokentrace captures, synthesizes, replays and analyzes LLM serving
// traffic. See README.md; every subcommand has --help with an example.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signalContext()
	code := Main(ctx, os.Args, os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// signalContext is the commands' context: Ctrl-C or SIGTERM cancels it,
// and every command stops then with what it promises (partial results
// written, temporary files removed). The first signal also gives the
// signals back their default action, so a second one ends the process at
// once, whatever it was doing.
func signalContext() (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	return ctx, stop
}
