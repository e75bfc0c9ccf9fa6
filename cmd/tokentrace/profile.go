package main

import (
	"errors"
	"fmt"
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

// profileFile and traceFile are the open --cpuprofile and --exectrace
// files, if any.
var profileFile, traceFile *os.File

func startProfiles(c *cli.Context) error {
	if path := c.String("cpuprofile"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			return usageErrorf("--cpuprofile: %v", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return fmt.Errorf("--cpuprofile %s: %w", path, err)
		}
		profileFile = f
	}
	if path := c.String("exectrace"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			return usageErrorf("--exectrace: %v", err)
		}
		if err := trace.Start(f); err != nil {
			f.Close()
			return fmt.Errorf("--exectrace %s: %w", path, err)
		}
		traceFile = f
	}
	return nil
}

func stopProfiles(*cli.Context) error {
	var errs []error
	if profileFile != nil {
		pprof.StopCPUProfile()
		if err := profileFile.Close(); err != nil {
			errs = append(errs, fmt.Errorf("--cpuprofile: %w", err))
		}
		profileFile = nil
	}
	if traceFile != nil {
		trace.Stop()
		if err := traceFile.Close(); err != nil {
			errs = append(errs, fmt.Errorf("--exectrace: %w", err))
		}
		traceFile = nil
	}
	return errors.Join(errs...)
}
