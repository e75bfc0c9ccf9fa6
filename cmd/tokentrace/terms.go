package main

import (
	"strconv"
	"strings"

	"github.com/tokentrace/tokentrace/analyze"
	"github.com/tokentrace/tokentrace/sim/twin"
	"github.com/tokentrace/tokentrace/traces"
)

// cliTerms say the libraries' text (traces.Text: advice, notes, next
// steps) on the command line, with the mapping errors use (flagOf): an
// option as the flag that sets it, flags being the command's own table; a
// command as the line that runs it, each option as that command's flag and
// value, its words quoted for a shell.
type cliTerms struct{ flags map[string]string }

func (t cliTerms) Option(o traces.OptionRef) string {
	if f := flagOf(string(o), t.flags); f != "" {
		return f
	}
	return string(o)
}

func (t cliTerms) Command(c traces.Command) string {
	cmd := strings.Join(c.Words, " ")
	words := append([]string{"tokentrace"}, c.Words...)
	for _, o := range c.Options {
		f := flagOf(string(o.Option), commandFlags[cmd])
		if f == "" {
			f = string(o.Option) // a test keeps every option of a printed command known
		}
		words = append(words, f)
		if o.Value == "" {
			continue
		}
		v := o.Value
		if conv := flagValues[cmd][string(o.Option)]; conv != nil {
			v = conv(v)
		}
		words = append(words, shellWord(v))
	}
	for _, a := range c.Args {
		words = append(words, shellWord(a))
	}
	return strings.Join(words, " ")
}

// analyzeOptions are analyze's defaults, its sentences saying options as
// flags.
func analyzeOptions() analyze.Options {
	o := analyze.DefaultOptions()
	o.Terms = cliTerms{}
	return o
}

// commandFlags are the flag tables of the commands libraries print (by
// their words), for the options whose flag is not their kebab-cased name.
var commandFlags = map[string]map[string]string{
	"validate": validateFlags,
	"replay":   replayFlags,
	"sweep":    sweepFlags,
	"capture":  captureFlags,
	"compose":  captureFlags,
	// sim check's twin is a file (a simulator's options), no option's.
	"sim check": {string(twin.CheckTwin): "--twin"},
}

// flagValues turn an option's value into its flag's where their units
// differ (a fraction given as a percentage).
var flagValues = map[string]map[string]func(string) string{
	"validate": {"Options.MinEffect": percent},
}

// percent is a fraction ("0.05") as a percentage ("5").
func percent(v string) string {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return v
	}
	return strconv.FormatFloat(100*f, 'g', 6, 64)
}
