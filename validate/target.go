package validate

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/tokentrace/tokentrace/replay"
	"github.com/tokentrace/tokentrace/replay/sim"
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

// ParseTarget parses "NAME=URL" (a running server), "NAME=sim" (the
// simulator as base configures it) or "NAME=sim:KEY=VALUE,..." (base with
// the keys of sim.ApplyConfig applied, e.g.
// "b=sim:max-num-seqs=64,prefix-caching=false", or a fleet:
// "pa=sim:replicas=4,router=prefix-aware").
func ParseTarget(s string, base sim.Options) (Target, error) {
	name, spec, ok := strings.Cut(strings.TrimSpace(s), "=")
	if !ok || spec == "" {
		return Target{}, fmt.Errorf("target %q: want NAME=URL or NAME=sim[:KEY=VALUE,...]", s)
	}
	if !nameRE.MatchString(name) {
		return Target{}, fmt.Errorf("target %q: name %q: want letters, digits, '.', '_' or '-' (at most 40)", s, name)
	}
	t := Target{Name: name}
	switch {
	case spec == "sim" || strings.HasPrefix(spec, "sim:"):
		o := base
		if err := sim.ApplyConfig(&o, strings.TrimPrefix(strings.TrimPrefix(spec, "sim"), ":")); err != nil {
			return Target{}, fmt.Errorf("target %s: %w", name, err)
		}
		t.Sim, t.Config = &o, spec
	case strings.HasPrefix(spec, "http://") || strings.HasPrefix(spec, "https://"):
		t.URL, t.Config = spec, replay.RedactURL(spec)
	default:
		return Target{}, fmt.Errorf("target %s: %q is neither a URL (http://…) nor sim[:KEY=VALUE,...]", name, replay.RedactURL(spec))
	}
	return t, nil
}
