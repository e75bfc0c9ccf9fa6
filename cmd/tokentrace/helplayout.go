package main

// Each command's --help in the order a first run needs it: the usage line
// and three examples, the flags most runs set, the rest of the flags
// grouped under headings, then the description and any further examples.
// urfave/cli's own layout puts the description first (replay's flags began
// below the first screen) and sorts categories and the flags in them by
// name, so the page is written here, in the layout's order, with each
// flag's Category set from it.

import (
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strings"
	"sync"

	"github.com/urfave/cli/v2"
)

// layoutHelp gives c and its subcommands their help page (path is c's
// parent, "" for a top-level command) and sets each flag's Category from
// its layout.
func layoutHelp(c *cli.Command, parent string) {
	path := strings.TrimSpace(parent + " " + c.Name)
	if l, ok := helpLayouts[path]; ok {
		byName := flagsByName(c.Flags)
		for _, g := range l.groups {
			for _, name := range g.flags {
				if f := byName[name]; f != nil {
					setCategory(f, g.name)
				}
			}
		}
	}
	c.CustomHelpTemplate = lazyHelpPage + path
	for _, sub := range c.Subcommands {
		layoutHelp(sub, path)
	}
}

// flagsByName maps each name and alias of flags to its flag (the first
// that has it, as findFlag finds it): a flag's Names() runs a regexp per
// name, and looking each layout name up with findFlag did so for every
// flag before it, on every run of Main (a child process's start under the
// race detector).
func flagsByName(flags []cli.Flag) map[string]cli.Flag {
	m := make(map[string]cli.Flag, len(flags))
	for _, f := range flags {
		for _, n := range f.Names() {
			if _, ok := m[n]; !ok {
				m[n] = f
			}
		}
	}
	return m
}

// helpPages holds each command's help page by its path, made once per
// process: a page depends only on the command's definition, and writing
// them all took 16 ms of every run of Main (120-250 ms under the race
// detector), most of what a test's in-process command costs.
var helpPages sync.Map

// lazyHelpPage starts the help template layoutHelp gives a command, the
// command's path after it: printHelp writes the page when the help is
// shown, so a run that shows no help (a child process of the tests, which
// starts hundreds) writes none.
const lazyHelpPage = "\x00tokentrace help page of "

// defaultHelpPrinter is urfave/cli's own, which printHelp hands the page.
var defaultHelpPrinter = cli.HelpPrinter

// printHelp is cli.HelpPrinter (set by newApp): a template that names a
// command's page by lazyHelpPage becomes the page, written once per
// process.
func printHelp(w io.Writer, templ string, data any) {
	if path, ok := strings.CutPrefix(templ, lazyHelpPage); ok {
		c, isCommand := data.(*cli.Command)
		if !isCommand {
			templ = cli.CommandHelpTemplate
		} else {
			page, ok := helpPages.Load(path)
			if !ok {
				page, _ = helpPages.LoadOrStore(path, strings.ReplaceAll(helpPage(c, path), "{{", `{{"{{"}}`))
			}
			templ = page.(string)
		}
	}
	defaultHelpPrinter(w, templ, data)
}

// setCategory sets a flag's Category field (every flag type of urfave/cli
// has one; no interface sets it).
func setCategory(f cli.Flag, name string) {
	v := reflect.ValueOf(f)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return
	}
	if fv := v.Elem().FieldByName("Category"); fv.IsValid() && fv.CanSet() && fv.Kind() == reflect.String {
		fv.SetString(name)
	}
}

// exampleHead is the line that starts a usage text's examples.
var exampleHead = regexp.MustCompile(`^\s*Examples?:\s*$`)

// descExamples is the line that starts a description's closing examples.
var descExamples = regexp.MustCompile(`(?m)^Examples?:[ \t]*$`)

// splitUsage splits a command's UsageText into its usage lines and its
// examples (an example's indented continuation lines belong to it).
func splitUsage(text string) (usage []string, examples []string) {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	i := 0
	for ; i < len(lines) && !exampleHead.MatchString(lines[i]); i++ {
		usage = append(usage, lines[i])
	}
	for len(usage) > 0 && strings.TrimSpace(usage[len(usage)-1]) == "" {
		usage = usage[:len(usage)-1]
	}
	indent := -1
	for _, l := range lines[min(i+1, len(lines)):] {
		t := strings.TrimSpace(l)
		if t == "" {
			continue
		}
		in := len(l) - len(strings.TrimLeft(l, " "))
		if indent < 0 {
			indent = in
		}
		if in > indent && len(examples) > 0 {
			examples[len(examples)-1] += "\n" + strings.Repeat(" ", in-indent) + t
			continue
		}
		examples = append(examples, t)
	}
	return usage, examples
}

// helpPage is the text of c's --help (path: its command path).
func helpPage(c *cli.Command, path string) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	indent := func(s, by string) string {
		lines := strings.Split(s, "\n")
		for i, l := range lines {
			if l != "" {
				lines[i] = by + l
			}
		}
		return strings.Join(lines, "\n")
	}
	p("NAME:\n   tokentrace %s - %s\n\nUSAGE:\n", path, c.Usage)
	usage, examples := splitUsage(c.UsageText)
	desc := c.Description
	if len(examples) == 0 {
		// Some commands give their example at the end of the description.
		if m := descExamples.FindAllStringIndex(desc, -1); len(m) > 0 {
			i := m[len(m)-1][0]
			_, examples = splitUsage(desc[i:])
			desc = desc[:i]
		}
	}
	if len(usage) == 0 {
		usage = []string{"tokentrace " + path + " [flags]"}
	}
	p("%s\n", indent(strings.Join(usage, "\n"), "   "))
	if len(examples) > 0 {
		p("\nEXAMPLES:\n%s\n", indent(strings.Join(examples[:min(helpExamples, len(examples))], "\n"), "   "))
	}
	if subs := visibleSubcommands(c); len(subs) > 0 {
		p("\nCOMMANDS:\n")
		for _, s := range subs {
			p("   %s\t%s\n", s.Name, s.Usage)
		}
	}
	p("\nOPTIONS:\n")
	for _, f := range layoutFlags(c, path) {
		if f.group != "" {
			p("\n   %s:\n", f.group)
			continue
		}
		p("   %s\n", f.flag)
	}
	if desc = strings.TrimRight(desc, "\n"); desc != "" {
		p("\nDESCRIPTION:\n%s\n", indent(desc, "   "))
	}
	if len(examples) > helpExamples {
		p("\nMORE EXAMPLES:\n%s\n", indent(strings.Join(examples[helpExamples:], "\n"), "   "))
	}
	return b.String()
}

func visibleSubcommands(c *cli.Command) []*cli.Command {
	var out []*cli.Command
	for _, s := range c.Subcommands {
		if !s.Hidden && s.Name != "help" {
			out = append(out, s)
		}
	}
	return out
}

// helpLine is a line of the options: a flag, or the heading of a group.
type helpLine struct {
	flag  cli.Flag
	group string
}

// layoutFlags lists c's visible flags in its layout's order: the top ones
// and --help, then each group's heading and flags; flags the layout does
// not place (none, when TestHelpFirstScreen passes) come last, as defined.
// Without a layout, the flags as defined and --help.
func layoutFlags(c *cli.Command, path string) []helpLine {
	var out []helpLine
	placed := map[string]bool{}
	byName := flagsByName(c.Flags)
	add := func(name string) {
		if f := byName[name]; f != nil && !placed[name] {
			placed[name] = true
			out = append(out, helpLine{flag: f})
		}
	}
	l := helpLayouts[path]
	for _, name := range l.top {
		add(name)
	}
	var rest []helpLine
	for _, f := range c.Flags {
		if v, ok := f.(cli.VisibleFlag); (ok && !v.IsVisible()) || f == cli.HelpFlag || inLayout(l, f.Names()[0]) {
			continue
		}
		rest = append(rest, helpLine{flag: f})
	}
	help := helpLine{flag: cli.HelpFlag}
	if len(l.top) == 0 {
		return append(append(out, rest...), help)
	}
	out = append(out, help)
	for _, g := range l.groups {
		out = append(out, helpLine{group: g.name})
		for _, name := range g.flags {
			add(name)
		}
	}
	return append(out, rest...)
}

func inLayout(l helpLayout, name string) bool {
	for _, n := range l.top {
		if n == name {
			return true
		}
	}
	for _, g := range l.groups {
		for _, n := range g.flags {
			if n == name {
				return true
			}
		}
	}
	return false
}
