package main

import (
	"fmt"
	"runtime/debug"

	"github.com/tokentrace/tokentrace/traces"
	"github.com/urfave/cli/v2"
)

func init() { register(1000, versionCommand) }

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:      "version",
		Usage:     "print the tokentrace version and trace schema version",
		UsageText: "tokentrace version",
		Action: func(c *cli.Context) error {
			v := "(devel)"
			if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
				v = bi.Main.Version
			}
			fmt.Fprintf(stdio(c).out, "tokentrace %s (trace schema %s)\n", v, traces.SchemaVersion)
			return nil
		},
	}
}
