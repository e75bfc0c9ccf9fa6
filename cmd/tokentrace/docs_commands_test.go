package main

import (
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// Documented commands: in code spans, and lines of fenced blocks.
var (
	fenced   = regexp.MustCompile("(?ms)^```[a-z]*\n(.*?)^```")
	codeSpan = regexp.MustCompile("`(tokentrace [^`\n]*)`")
)

// docCommands returns the tokentrace command lines of a Markdown text.
func docCommands(md string) []string {
	var out []string
	for _, m := range fenced.FindAllStringSubmatch(md, -1) {
		for _, line := range strings.Split(strings.ReplaceAll(m[1], "\\\n", " "), "\n") {
			line = strings.TrimPrefix(strings.TrimSpace(line), "$ ")
			if strings.HasPrefix(line, "tokentrace ") {
				out = append(out, line)
			}
		}
	}
	for _, m := range codeSpan.FindAllStringSubmatch(fenced.ReplaceAllString(md, ""), -1) {
		out = append(out, m[1])
	}
	return out
}

// TestDocsCommandsExist: every tokentrace command written in README.md and
// docs/*.md names a command that exists and only flags that command has,
// so the documentation cannot drift from the CLI unnoticed. (The README's
// worked examples are also run as written by .ci/readme-examples.)
func TestDocsCommandsExist(t *testing.T) {
	files, _ := filepath.Glob("../../docs/*.md")
	files = append(files, "../../README.md", "../../ARCHITECTURE.md")
	app := newApp(strings.NewReader(""), io.Discard, io.Discard)
	checked := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range docCommands(string(b)) {
			// A line may chain commands (a && b; c | d): judge each.
			for _, part := range regexp.MustCompile(`&&|;|\|`).Split(line, -1) {
				part = strings.TrimSpace(part)
				if !strings.HasPrefix(part, "tokentrace ") {
					continue
				}
				if msg := checkDocCommand(app, strings.Fields(part)[1:]); msg != "" {
					t.Errorf("%s: %q: %s", filepath.Base(f), part, msg)
				}
				checked++
			}
		}
	}
	if checked < 30 {
		t.Fatalf("only %d commands found in the docs: the pattern is broken", checked)
	}
	t.Logf("%d documented commands checked", checked)
}

// checkDocCommand walks args down the command tree and checks each flag;
// placeholders (CMD, [...]) end the check. It returns what is wrong, or "".
func checkDocCommand(app *cli.App, args []string) string {
	args = helpArgs(app, append([]string{"tokentrace"}, args...))[1:] // "help CMD" is CMD --help
	cmds, flags := app.Commands, app.Flags
	path := "tokentrace"
	descend, skipValue := true, false
	for _, a := range args {
		if skipValue {
			skipValue = false
			continue
		}
		if a == "CMD" || strings.HasPrefix(a, "[") || strings.HasPrefix(a, "<") || strings.HasPrefix(a, "...") {
			return ""
		}
		if descend && strings.HasSuffix(a, ":") { // a line the tool prints ("tokentrace replay: ..."), not a command
			return ""
		}
		if strings.HasPrefix(a, "--") {
			name, _, inline := strings.Cut(strings.TrimPrefix(a, "--"), "=")
			if name == "help" || name == "version" {
				return ""
			}
			f := findFlag(flags, name)
			if f == nil {
				return "no flag --" + name + " on " + path
			}
			_, isBool := f.(*cli.BoolFlag)
			skipValue = !isBool && !inline
			continue
		}
		if !descend || strings.HasPrefix(a, "-") {
			continue
		}
		found := false
		for _, c := range cmds {
			if c.Name == a || slices.Contains(c.Aliases, a) {
				cmds, flags, path, found = c.Subcommands, c.Flags, path+" "+a, true
				break
			}
		}
		if !found {
			if path == "tokentrace" {
				return "no command " + a
			}
			// An argument (a file name): flags after it still belong here.
			descend = false
		}
	}
	return ""
}

// TestCheckDocCommand: the checker itself, on lines that must pass and fail.
func TestCheckDocCommand(t *testing.T) {
	app := newApp(strings.NewReader(""), io.Discard, io.Discard)
	for _, tc := range []struct {
		line string
		ok   bool
	}{
		{"tokentrace replay: 20.00s  sent 28/36 (78%)", true}, // a printed line, not a command
		{"tokentrace synth gen --seed 7 --gaps fitted --out g.jsonl model.json", true},
		{"tokentrace --cpuprofile cpu.prof replay --speed 2 t.parquet", true},
		{"tokentrace replay --no-such-flag t.parquet", false},
		{"tokentrace replya t.parquet", false},
		{"tokentrace synth gen --speed 2 model.json", false}, // a replay flag on the wrong command
	} {
		msg := checkDocCommand(app, strings.Fields(tc.line)[1:])
		if (msg == "") != tc.ok {
			t.Errorf("%q: got %q, want ok=%v", tc.line, msg, tc.ok)
		}
	}
}
