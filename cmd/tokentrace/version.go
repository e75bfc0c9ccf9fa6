package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/tokentrace/tokentrace/traces"
	"github.com/urfave/cli/v2"
)

// version is stamped by release and image builds
// (-ldflags "-X main.version=v1.2.3"); otherwise the module version is
// shown, or "(devel)".
var version string

// commit is the VCS revision stamped at link time (-X main.commit=...) by
// builds where Go records none in the build info (-buildvcs=false, a build
// outside the clone); the build info's vcs.revision wins when present.
var commit string

// versionString names this build: the stamped version, else the module
// version, else "(devel)".
func versionString() string {
	bi, _ := debug.ReadBuildInfo()
	v, _ := buildVersion(bi)
	return v
}

// buildVersion is the version and commit of the build bi describes (nil:
// no build info). The commit is vcs.revision from Go's build info (12
// hex digits, "+modified" for a build from a dirty tree), else the stamped
// commit, else "unknown".
func buildVersion(bi *debug.BuildInfo) (ver, rev string) {
	ver, rev = version, "unknown"
	if commit != "" {
		rev = shortRev(commit)
	}
	if bi == nil {
		if ver == "" {
			ver = "(devel)"
		}
		return ver, rev
	}
	if ver == "" {
		ver = "(devel)"
		if bi.Main.Version != "" {
			ver = bi.Main.Version
		}
	}
	modified := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = shortRev(s.Value)
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if modified && rev != "unknown" {
		rev += "+modified"
	}
	return ver, rev
}

func shortRev(r string) string {
	if len(r) > 12 {
		return r[:12]
	}
	return r
}

// versionLine is what `tokentrace version`, --version and -v print: one
// format, carrying the commit, so a bug report names the exact build.
func versionLine() string {
	bi, _ := debug.ReadBuildInfo()
	ver, rev := buildVersion(bi)
	return fmt.Sprintf("tokentrace %s (commit %s, trace schema %s, %s)", ver, rev, traces.SchemaVersion, runtime.Version())
}

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:      "version",
		Usage:     "print the tokentrace version, its commit and the trace schema version",
		UsageText: "tokentrace version    (also: tokentrace --version, tokentrace -v)\n\nExample:\n  tokentrace version",
		Action: func(c *cli.Context) error {
			fmt.Fprintln(stdio(c).out, versionLine())
			return nil
		},
	}
}
