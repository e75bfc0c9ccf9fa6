package main

// Usage errors a person can act on: a bad flag or command is named, with
// the nearest known one as a suggestion, instead of screens of help.

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/tokentrace/tokentrace/internal/suggest"
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
			if near := suggest.Nearest(name, names); near != "" {
				hint = fmt.Sprintf("; did you mean --%s?", near)
			}
			return usageErrorf("%s: unknown flag --%s%s", path, name, hint)
		}
		if m := invalidValue.FindStringSubmatch(msg); m != nil {
			if f := findFlag(cmd.Flags, m[2]); f != nil {
				return usageErrorf("%s: --%s %q: want %s", path, m[2], m[1], expectedForm(f))
			}
		}
		return usageErrorf("%s: %w", path, err)
	}
	for _, sub := range c.Subcommands {
		quietUsageErrors(sub, path)
	}
}

// globalValueFlags are the global flags that take a value (the next
// argument, unless written --flag=value).
var globalValueFlags = map[string]bool{"--cpuprofile": true, "-cpuprofile": true, "--exectrace": true, "-exectrace": true}

// firstWord is the index of the first argument that is not a global flag
// or its value: the command's name (-1: none).
func firstWord(args []string) int {
	for i := 1; i < len(args); i++ {
		a := args[i]
		if globalValueFlags[a] {
			i++
			continue
		}
		if !strings.HasPrefix(a, "-") {
			return i
		}
	}
	return -1
}

func findCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if slices.Contains(c.Names(), name) {
			return c
		}
	}
	return nil
}

// helpArgs turns "help" in command position into --help, as git and go
// read it: "tokentrace help replay" is "tokentrace replay --help",
// "tokentrace synth help fit" is "tokentrace synth fit --help".
func helpArgs(app *cli.App, args []string) []string {
	i := firstWord(args)
	if i < 0 {
		return args
	}
	if args[i] != "help" {
		c := findCommand(app.Commands, args[i])
		if c == nil || len(c.Subcommands) == 0 || i+1 >= len(args) || args[i+1] != "help" {
			return args
		}
		i++
	}
	out := append(slices.Clone(args[:i]), args[i+1:]...)
	return append(out, "--help")
}

// unknownCommand reports a first argument that names no command, or a
// second that names no subcommand of a command made of subcommands (synth
// fitt), with the nearest name as a suggestion ("" when the arguments are
// fine). Global flags before the command are skipped.
func unknownCommand(app *cli.App, args []string) string {
	i := firstWord(args)
	if i < 0 {
		return ""
	}
	a := args[i]
	cmd := findCommand(app.Commands, a)
	if cmd == nil {
		var names []string
		for _, c := range app.Commands {
			names = append(names, c.Names()...)
		}
		msg := fmt.Sprintf("unknown command %q", a)
		if near := suggest.Nearest(a, names); near != "" {
			msg += fmt.Sprintf("; did you mean %q?", near)
		}
		return msg
	}
	if len(cmd.Subcommands) == 0 || i+1 >= len(args) || strings.HasPrefix(args[i+1], "-") {
		return ""
	}
	sub := args[i+1]
	if findCommand(cmd.Subcommands, sub) != nil {
		return ""
	}
	var names []string
	for _, c := range cmd.Subcommands {
		names = append(names, c.Names()...)
	}
	near := suggest.Nearest(sub, names)
	if cmd.Action != nil {
		// The word may be the command's own argument (analyze's results
		// file): only a word that is no file and is close to a
		// subcommand is a typo.
		if _, err := os.Stat(sub); err == nil || near == "" {
			return ""
		}
	}
	msg := fmt.Sprintf("unknown command %q", cmd.Name+" "+sub)
	if near != "" {
		msg += fmt.Sprintf("; did you mean %q?", cmd.Name+" "+near)
	} else {
		msg += fmt.Sprintf("; %s's commands are %s", cmd.Name, strings.Join(names, ", "))
	}
	return msg
}

// invalidValue is urfave/cli's message for a flag value that does not
// parse ("invalid value "fast" for flag -speed: parse error"), which names
// neither the flag as typed nor what it wants.
var invalidValue = regexp.MustCompile(`^invalid (?:boolean )?value "(.*)" for (?:flag )?-+([A-Za-z0-9-]+): `)

func findFlag(flags []cli.Flag, name string) cli.Flag {
	for _, f := range flags {
		if slices.Contains(f.Names(), name) {
			return f
		}
	}
	return nil
}

// expectedForm says what a flag's value looks like, with its usage line
// and default, so a wrong value is answered with a right one.
func expectedForm(f cli.Flag) string {
	form := "a value of the form its help gives"
	switch f.(type) {
	case *cli.Float64Flag:
		form = "a number such as 1.5"
	case *cli.IntFlag, *cli.Int64Flag, *cli.UintFlag, *cli.Uint64Flag:
		form = "a whole number such as 4"
	case *cli.DurationFlag:
		form = "a duration with its unit such as 500ms, 30s or 2m"
	case *cli.BoolFlag:
		form = "true or false"
	}
	d, ok := f.(cli.DocGenerationFlag)
	if !ok {
		return form
	}
	var extra []string
	if u := d.GetUsage(); u != "" {
		extra = append(extra, u)
	}
	if v := d.GetDefaultText(); v != "" && v != "0" && v != "0s" && v != "false" {
		extra = append(extra, "default "+v)
	} else if v := d.GetValue(); v != "" && v != "0" && v != "0s" && v != "false" && v != `""` {
		extra = append(extra, "default "+v)
	}
	if len(extra) > 0 {
		form += " (" + strings.Join(extra, "; ") + ")"
	}
	return form
}
