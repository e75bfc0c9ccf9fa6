package main

// Usage errors a person can act on: a bad flag or command is named, with
// the nearest known one as a suggestion, instead of screens of help.

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"
)

// quietUsageErrors makes a bad flag a short usage error on every command:
// urfave/cli's default buries the message between screens of help. The
// error names the flag and suggests the nearest known one.
func quietUsageErrors(c *cli.Command, parent string) {
	cmd, path := c, strings.TrimSpace(parent+" "+c.Name)
	c.OnUsageError = func(_ *cli.Context, err error, _ bool) error {
		msg := err.Error()
		if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
			name = strings.TrimPrefix(name, "-")
			var names []string
			for _, f := range cmd.Flags {
				names = append(names, f.Names()...)
			}
			hint := ""
			if near := nearest(name, names); near != "" {
				hint = fmt.Sprintf("; did you mean --%s?", near)
			}
			return usageErrorf("%s: unknown flag --%s%s (see tokentrace %s --help)", path, name, hint, path)
		}
		return usageErrorf("%s: %w (see tokentrace %s --help)", path, err, path)
	}
	for _, sub := range c.Subcommands {
		quietUsageErrors(sub, path)
	}
}

// nearest returns the candidate closest to s by edit distance when it is
// close enough to be a plausible typo ("" otherwise).
func nearest(s string, candidates []string) string {
	best, bestD := "", max(2, len(s)/3)+1
	for _, c := range candidates {
		if d := editDistance(s, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// unknownCommand reports a first argument that names no command, with the
// nearest command as a suggestion ("" when the arguments are fine). Global
// flags before the command are skipped.
func unknownCommand(app *cli.App, args []string) string {
	for i := 1; i < len(args); i++ {
		a := args[i]
		if a == "--cpuprofile" || a == "-cpuprofile" || a == "--exectrace" || a == "-exectrace" {
			i++
			continue
		}
		if strings.HasPrefix(a, "-") {
			continue
		}
		var names []string
		for _, c := range app.Commands {
			for _, n := range c.Names() {
				if n == a {
					return ""
				}
				names = append(names, n)
			}
		}
		if a == "help" {
			return ""
		}
		msg := fmt.Sprintf("unknown command %q", a)
		if near := nearest(a, names); near != "" {
			msg += fmt.Sprintf("; did you mean %q?", near)
		}
		return msg + " (see tokentrace --help)"
	}
	return ""
}
