package traces

import (
	"fmt"
	"strings"
)

// Text is library text that names options or commands: advice, notes, a
// report's sentences, the hint of an error. It keeps each option it names
// as an OptionRef and each command as a Command, so that String says them
// by their library names and Say in a caller's terms (the CLI: as flags
// and command lines) without any text being rewritten. A Text is an
// error too, so an error can wrap one with %w where its advice goes, and
// a caller finds it in the error's tree.
type Text struct{ parts []textPart }

// textPart is a literal, an option or a command.
type textPart struct {
	lit string
	ref OptionRef
	cmd *Command
}

// placeholder marks the i-th reference in Textf's formatted string; NUL
// never appears in a format a library writes.
func placeholder(i int) string { return fmt.Sprintf("\x00%d\x00", i) }

// Textf formats a Text as fmt.Sprintf does, except that an OptionRef or
// Command argument (for a %s or %v verb) is kept as a reference for Say.
func Textf(format string, a ...any) Text {
	var refs []any
	args := make([]any, len(a))
	for i, v := range a {
		switch v := v.(type) {
		case OptionRef, Command, *Command:
			args[i] = placeholder(len(refs))
			refs = append(refs, v)
		default:
			args[i] = v
		}
	}
	s := fmt.Sprintf(format, args...)
	var t Text
	for len(s) > 0 {
		i := strings.IndexByte(s, 0)
		if i < 0 {
			t.parts = append(t.parts, textPart{lit: s})
			break
		}
		j := strings.IndexByte(s[i+1:], 0)
		if j < 0 {
			t.parts = append(t.parts, textPart{lit: s})
			break
		}
		if i > 0 {
			t.parts = append(t.parts, textPart{lit: s[:i]})
		}
		var n int
		fmt.Sscanf(s[i+1:i+1+j], "%d", &n)
		switch r := refs[n].(type) {
		case OptionRef:
			t.parts = append(t.parts, textPart{ref: r})
		case Command:
			t.parts = append(t.parts, textPart{cmd: &r})
		case *Command:
			t.parts = append(t.parts, textPart{cmd: r})
		}
		s = s[i+1+j+1:]
	}
	return t
}

// Plain is a Text of literal words alone.
func Plain(s string) Text { return Text{parts: []textPart{{lit: s}}} }

// Append is t followed by u.
func (t Text) Append(u Text) Text {
	parts := make([]textPart, 0, len(t.parts)+len(u.parts))
	return Text{parts: append(append(parts, t.parts...), u.parts...)}
}

// IsZero reports whether t says nothing.
func (t Text) IsZero() bool { return len(t.parts) == 0 }

// Say says t in terms: its options and commands as terms says them (nil
// terms: LibraryTerms).
func (t Text) Say(terms Terms) string {
	if terms == nil {
		terms = LibraryTerms
	}
	var b strings.Builder
	for _, p := range t.parts {
		switch {
		case p.ref != "":
			b.WriteString(terms.Option(p.ref))
		case p.cmd != nil:
			b.WriteString(terms.Command(*p.cmd))
		default:
			b.WriteString(p.lit)
		}
	}
	return b.String()
}

// String says t with the libraries' names (LibraryTerms).
func (t Text) String() string { return t.Say(LibraryTerms) }

// Error is String, so that an error can wrap t.
func (t Text) Error() string { return t.String() }

// Terms say options and commands in a caller's words: the CLI says an
// option as its flag and a command as the command line that runs it.
type Terms interface {
	// Option says an option in the caller's terms (the CLI: the flag that
	// sets Options.KVBlocks).
	Option(OptionRef) string
	// Command says a command in the caller's terms (the CLI: the command
	// line that runs it, its options as flags).
	Command(Command) string
}

// LibraryTerms say options and commands by the libraries' names: an
// option as its name, a command as Command.String.
var LibraryTerms Terms = libraryTerms{}

type libraryTerms struct{}

func (libraryTerms) Option(o OptionRef) string { return string(o) }
func (libraryTerms) Command(c Command) string  { return c.String() }

// Command is a tokentrace command that a library names or suggests: its
// words ("synth", "gen"), its options by their library names with the
// values they take, and its positional arguments (files). A caller says it
// in its own terms (Terms.Command: the CLI as a shell command line with
// its flags, arguments quoted); String says it with the library's names.
type Command struct {
	Words   []string
	Options []CommandOption
	Args    []string
}

// CommandOption is one option of a Command: Option names it as its
// package's callers do ("GenOptions.RateScale"; CommandOut for the file a
// command writes), Value is as the option takes it ("" for a switch). An
// option given more than once (a list) is repeated.
type CommandOption struct {
	Option OptionRef
	Value  string
}

// Options of a command that no options struct holds.
const (
	// CommandOut is the file a command writes.
	CommandOut OptionRef = "Command.Out"
	// CommandFormat is the format a command reads or writes (import,
	// export).
	CommandFormat OptionRef = "Command.Format"
	// CommandJSON is the switch that has a command print its result as
	// JSON (its library's WriteJSON).
	CommandJSON OptionRef = "Command.JSON"
)

// NewCommand is the command of words with no options or arguments yet.
func NewCommand(words ...string) Command { return Command{Words: words} }

// With is c with option set to value ("" for a switch), after its other
// options.
func (c Command) With(option OptionRef, value string) Command {
	c.Options = append(c.Options[:len(c.Options):len(c.Options)], CommandOption{option, value})
	return c
}

// WithArgs is c with args after its other arguments.
func (c Command) WithArgs(args ...string) Command {
	c.Args = append(c.Args[:len(c.Args):len(c.Args)], args...)
	return c
}

// Say says c in terms (nil: String).
func (c Command) Say(terms Terms) string {
	if terms == nil {
		return c.String()
	}
	return terms.Command(c)
}

// String says c by the library's names: its words, each option as
// NAME=VALUE (NAME for a switch), then its arguments: "synth gen
// GenOptions.RateScale=2 Command.Out=s.parquet model.json".
func (c Command) String() string {
	parts := append([]string{}, c.Words...)
	for _, o := range c.Options {
		if o.Value == "" {
			parts = append(parts, string(o.Option))
			continue
		}
		parts = append(parts, string(o.Option)+"="+o.Value)
	}
	return strings.Join(append(parts, c.Args...), " ")
}
