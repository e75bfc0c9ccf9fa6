package validate

import (
	"errors"
	"regexp"
	"strings"

	"github.com/tokentrace/tokentrace/replay"
	"github.com/tokentrace/tokentrace/sim"
	"github.com/tokentrace/tokentrace/traces"
)

// Target is one server configuration the workloads run against: a running
// server (URL) or the built-in simulator with a configuration (Sim).
type Target struct {
	// Name labels the target in reports ("a", "prefix-on").
	Name string
	// URL is a running vLLM-compatible server; "" means the simulator.
	URL string
	// Sim is the simulator's configuration when URL is "".
	Sim *sim.Options
	// Config is the configuration as given ("sim:max-num-seqs=64"), for
	// reports; a URL's credentials are removed.
	Config string
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,39}$`)

// ParseTarget parses "NAME=SPEC": a name for the reports and a target spec
// as replay.ParseTarget reads it everywhere a target is named: a running
// server's URL, "sim" (the simulator as base configures it) or
// "sim:KEY=VALUE,..." (base with the keys of sim.ApplyConfig applied, e.g.
// "b=sim:max-num-seqs=64,prefix-caching=false", or a fleet:
// "pa=sim:replicas=4,router=prefix-aware").
//
// An error is a *traces.OptionError naming Options.Targets; replay's own
// (naming the spec it read, "target") is said by it, with the target's
// name, its cause kept.
func ParseTarget(s string, base sim.Options) (Target, error) {
	name, spec, ok := strings.Cut(strings.TrimSpace(s), "=")
	if !ok || spec == "" {
		return Target{}, traces.OptionErrorf("validate", "Options.Targets", "%q: want NAME=URL or NAME=sim[:KEY=VALUE,...]", s)
	}
	if !nameRE.MatchString(name) {
		return Target{}, traces.OptionErrorf("validate", "Options.Targets", "%q: name %q: want letters, digits, '.', '_' or '-' (at most 40)", s, name)
	}
	to, err := replay.ParseTarget(spec, base)
	if oe := (*traces.OptionError)(nil); errors.As(err, &oe) {
		err = oe.Err // replay's names the spec; this one names the target
	}
	if err != nil {
		return Target{}, traces.OptionErrorf("validate", "Options.Targets", "%s: %w", name, err)
	}
	t := Target{Name: name, URL: to.URL, Sim: to.Sim, Config: spec}
	if t.URL != "" {
		t.Config = replay.RedactURL(spec)
	}
	return t, nil
}
