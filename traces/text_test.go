package traces_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/traces"
)

// flagTerms say options as kebab-cased flags and commands with them, as a
// command line would.
type flagTerms struct{}

func (flagTerms) Option(o traces.OptionRef) string {
	return "--" + strings.ToLower(strings.TrimPrefix(string(o), "Options."))
}

func (t flagTerms) Command(c traces.Command) string {
	w := append([]string{"tool"}, c.Words...)
	for _, o := range c.Options {
		w = append(w, t.Option(o.Option))
		if o.Value != "" {
			w = append(w, o.Value)
		}
	}
	return strings.Join(append(w, c.Args...), " ")
}

// A Text keeps the options and commands it names: String says them by the
// library's names, Say in the caller's terms, the rest formatted as
// fmt.Sprintf formats it; an error that wraps it finds it.
func TestTextSaysItsReferences(t *testing.T) {
	fit := traces.NewCommand("synth", "fit").With(traces.OptionRef("Options.Bin"), "1s").WithArgs("real.parquet")
	txt := traces.Textf("%d%% off: set %s, or run %v (%q)", 5, traces.OptionRef("Options.Speed"), fit, "x")
	if got, want := txt.String(), `5% off: set Options.Speed, or run synth fit Options.Bin=1s real.parquet ("x")`; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got, want := txt.Say(flagTerms{}), `5% off: set --speed, or run tool synth fit --bin 1s real.parquet ("x")`; got != want {
		t.Errorf("Say() = %q, want %q", got, want)
	}
	if got := txt.Say(nil); got != txt.String() {
		t.Errorf("Say(nil) = %q, want the library's names", got)
	}
	err := fmt.Errorf("open: %w", txt)
	var found traces.Text
	if !errors.As(err, &found) || found.Say(flagTerms{}) != txt.Say(flagTerms{}) {
		t.Errorf("errors.As found %v in %v", found, err)
	}
	if got := traces.Plain("50%").Append(traces.Textf(" by %s", traces.OptionRef("Options.Rate"))).Say(flagTerms{}); got != "50% by --rate" {
		t.Errorf("Plain+Append = %q", got)
	}
}
