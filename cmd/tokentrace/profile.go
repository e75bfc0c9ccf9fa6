package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"runtime/trace"

	"github.com/urfave/cli/v2"
)

// profileFlags are the global flags for performance work.
var profileFlags = []cli.Flag{
	&cli.StringFlag{Name: "cpuprofile", Usage: "write a Go CPU profile of the command to `FILE` (for performance work; default: none)"},
	&cli.StringFlag{Name: "exectrace", Usage: "write a Go execution trace of the command to `FILE` (scheduler, GC and syscall events for timing work, `go tool trace FILE`; default: none)"},
}

// profilers are what the global flags start, in this order, and stop; file
// is the open output, if any.
var profilers = []*struct {
	flag  string
	start func(io.Writer) error
	stop  func()
	file  *os.File
}{
	{flag: "cpuprofile", start: pprof.StartCPUProfile, stop: pprof.StopCPUProfile},
	{flag: "exectrace", start: trace.Start, stop: trace.Stop},
}

func startProfiles(c *cli.Context) error {
	for _, p := range profilers {
		path := c.String(p.flag)
		if path == "" {
			continue
		}
		f, err := os.Create(path)
		if err != nil {
			return usageErrorf("--%s: %w", p.flag, err)
		}
		if err := p.start(f); err != nil {
			f.Close()
			return fmt.Errorf("--%s %s: %w", p.flag, path, err)
		}
		p.file = f
	}
	return nil
}

func stopProfiles(*cli.Context) error {
	var errs []error
	for _, p := range profilers {
		if p.file == nil {
			continue
		}
		p.stop()
		if err := p.file.Close(); err != nil {
			errs = append(errs, fmt.Errorf("--%s: %w", p.flag, err))
		}
		p.file = nil
	}
	return errors.Join(errs...)
}
