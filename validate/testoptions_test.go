package validate

import (
	"strconv"
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/traces"
)

// Tests build options the way callers do: from DefaultOptions, changing
// what they mean.

// with is o changed by set.
func with[T any](o T, set func(*T)) T {
	set(&o)
	return o
}

// targeted is DefaultOptions with the targets specs name.
func targeted(t *testing.T, specs ...string) Options {
	t.Helper()
	o := DefaultOptions()
	o.Targets = targets(t, specs...)
	return o
}

// flagTerms say options and commands as the CLI says them (its flags:
// kebab-cased field names, --target, --min-effect-pct in percent; words
// quoted for a shell), so that the tests read the next steps as printed.
type flagTerms struct{}

func (flagTerms) Option(o traces.OptionRef) string {
	name := string(o)
	if i := strings.LastIndex(name, "."); i >= 0 {
		name = name[i+1:]
	}
	switch name {
	case "Targets":
		return "--target"
	case "MinEffect":
		return "--min-effect-pct"
	case "SLO":
		return "--slo"
	}
	var b strings.Builder
	for i, r := range name {
		if r >= 'A' && r <= 'Z' {
			if i > 0 {
				b.WriteByte('-')
			}
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return "--" + b.String()
}

func (t flagTerms) Command(c traces.Command) string {
	words := append([]string{"tokentrace"}, c.Words...)
	for _, o := range c.Options {
		words = append(words, t.Option(o.Option))
		v := o.Value
		if o.Option == optMinEffect {
			f, _ := strconv.ParseFloat(v, 64)
			v = strconv.FormatFloat(100*f, 'g', 6, 64)
		}
		if v != "" {
			words = append(words, shellWord(v))
		}
	}
	for _, a := range c.Args {
		words = append(words, shellWord(a))
	}
	return strings.Join(words, " ")
}

// shellWord quotes a shell word that needs it.
func shellWord(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=,+@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
