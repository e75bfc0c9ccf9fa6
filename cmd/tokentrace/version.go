package main

import (
	"fmt"
	"runtime/debug"

	"github.com/tokentrace/tokentrace/traces"
	"github.com/urfave/cli/v2"
)

// version is stamped by release and image builds
// (-ldflags "-X main.version=v1.2.3"); otherwise the module version or the
// VCS revision Go recorded at build time is shown.
var version string

// versionString names this build: the stamped version, else the module
// version, else "(devel)" with the VCS revision when Go recorded one.
func versionString() string {
	if version != "" {
		return version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(devel)"
	}
	if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	v := "(devel)"
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			v += " " + s.Value[:12]
		}
	}
	return v
}

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:      "version",
		Usage:     "print the tokentrace version and trace schema version",
		UsageText: "tokentrace version",
		Action: func(c *cli.Context) error {
			fmt.Fprintf(stdio(c).out, "tokentrace %s (trace schema %s)\n", versionString(), traces.SchemaVersion)
			return nil
		},
	}
}
