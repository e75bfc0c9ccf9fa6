package main

import (
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// helpScreen is the first screen of a terminal: what --help must fit the
// usage line, an example and the first flags into.
const helpScreen = 24

// Every command's --help starts with what a first run needs: within the
// first screen the usage line, at least one example and the flags (the
// description follows them). A command whose flags are laid out places
// every flag exactly once, at the top or in a group whose name is the
// flag's Category, and names no flag the command lacks.
func TestHelpFirstScreen(t *testing.T) {
	app := newApp(strings.NewReader(""), io.Discard, io.Discard)
	seen := map[string]bool{}
	var walk func(cmds []*cli.Command, parent string)
	walk = func(cmds []*cli.Command, parent string) {
		for _, c := range cmds {
			if c.Hidden || c.Name == "help" {
				continue
			}
			path := strings.TrimSpace(parent + " " + c.Name)
			seen[path] = true
			checkHelpScreen(t, c, path)
			checkHelpLayout(t, c, path)
			walk(c.Subcommands, path)
		}
	}
	walk(app.Commands, "")
	for path := range helpLayouts {
		if !seen[path] {
			t.Errorf("helpLayouts[%q]: no such command", path)
		}
	}
}

func checkHelpScreen(t *testing.T, c *cli.Command, path string) {
	t.Helper()
	code, out, se := runCLI(nil, append(strings.Fields(path), "--help")...)
	if code != 0 {
		t.Errorf("%s --help: exit %d, %s", path, code, se)
		return
	}
	lines := strings.Split(out, "\n")
	screen := lines[:min(helpScreen, len(lines))]
	usage := strings.TrimSpace(strings.SplitN(c.UsageText, "\n", 2)[0])
	at := func(what string, ok func(string) bool) int {
		for i, l := range screen {
			if ok(l) {
				return i
			}
		}
		t.Errorf("%s --help: no %s in its first %d lines:\n%s", path, what, helpScreen, strings.Join(screen, "\n"))
		return -1
	}
	at("usage line "+usage, func(l string) bool { return strings.TrimSpace(l) == usage })
	if ex := at("EXAMPLES", func(l string) bool { return l == "EXAMPLES:" }); ex >= 0 {
		runs := false // an example may prepare the command's input first
		for _, l := range screen[ex+1:] {
			if l == "" {
				break
			}
			runs = runs || strings.Contains(l+" ", "tokentrace "+path+" ")
		}
		if !runs {
			t.Errorf("%s --help: no example on the first screen runs tokentrace %s", path, path)
		}
	}
	if o := at("OPTIONS", func(l string) bool { return l == "OPTIONS:" }); o >= 0 && o+1 < len(screen) && !strings.HasPrefix(screen[o+1], "   --") {
		t.Errorf("%s --help: no flag right under OPTIONS (%q)", path, screen[o+1])
	}
	if d := strings.Index(out, "\nDESCRIPTION:"); d >= 0 && d < strings.Index(out, "\nOPTIONS:") {
		t.Errorf("%s --help: the description comes before the flags", path)
	}
}

func checkHelpLayout(t *testing.T, c *cli.Command, path string) {
	t.Helper()
	l, ok := helpLayouts[path]
	if !ok {
		for _, f := range c.Flags {
			if cat := category(f); cat != "" {
				t.Errorf("%s: --%s has category %q but the command has no layout", path, f.Names()[0], cat)
			}
		}
		return
	}
	where := map[string]string{} // flag → "" (top) or its group
	place := func(name, group string) {
		if _, dup := where[name]; dup {
			t.Errorf("%s: --%s is placed twice", path, name)
		}
		where[name] = group
		if findFlag(c.Flags, name) == nil {
			t.Errorf("%s: the layout places --%s, which the command does not have", path, name)
		}
	}
	for _, name := range l.top {
		place(name, "")
	}
	for _, g := range l.groups {
		for _, name := range g.flags {
			place(name, g.name)
		}
	}
	for _, f := range c.Flags {
		name := f.Names()[0]
		if v, ok := f.(cli.VisibleFlag); (ok && !v.IsVisible()) || name == "help" {
			continue
		}
		group, placed := where[name]
		switch {
		case !placed:
			t.Errorf("%s: --%s is in no place of the layout: add it to the top or a group", path, name)
		case category(f) != group:
			t.Errorf("%s: --%s has category %q, its group is %q", path, name, category(f), group)
		}
	}
}

// category is a flag's Category field ("" when it has none).
func category(f cli.Flag) string {
	v := reflect.ValueOf(f)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return ""
	}
	if fv := v.Elem().FieldByName("Category"); fv.IsValid() && fv.Kind() == reflect.String {
		return fv.String()
	}
	return ""
}
