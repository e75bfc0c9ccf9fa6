package validate

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
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

// TargetError is a target that ParseTarget cannot use: Target names it
// (its name, or the whole argument quoted when it has no usable name) and
// Err says why. Its text names the target once ("target b: ..."), so a
// caller that names it otherwise (a flag) can say Err after its own name.
type TargetError struct {
	Target string
	Err    error
}

func (e *TargetError) Error() string { return "target " + e.Target + ": " + e.Err.Error() }
func (e *TargetError) Unwrap() error { return e.Err }

// targetErr says a TargetError as the option it is (Options.Targets), so a
// caller that says options by its own terms finds it; the TargetError
// inside names the target.
func targetErr(e *TargetError) error {
	return &traces.OptionError{Pkg: "validate", Option: "Options.Targets", Err: e}
}

// shown is a target argument quoted for an error, a URL's credentials
// removed.
func shown(s string) string {
	if strings.Contains(s, "://") {
		s = replay.RedactURL(s)
	}
	return strconv.Quote(s)
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,39}$`)

// ParseTarget parses "NAME=SPEC": a name for the reports and a target spec
// as replay.ParseTarget reads it everywhere a target is named: a running
// server's URL, "sim" (the simulator as base configures it) or
// "sim:KEY=VALUE,..." (base with the keys of sim.ApplyConfig applied, e.g.
// "b=sim:max-num-seqs=64,prefix-caching=false", or a fleet:
// "pa=sim:replicas=4,router=prefix-aware").
//
// An error is a *traces.OptionError naming Options.Targets around a
// *TargetError naming the target; replay's own
// (naming the spec it read, "target") is said by it, with the target's
// name, its cause kept.
func ParseTarget(s string, base sim.Options) (Target, error) {
	name, spec, ok := strings.Cut(strings.TrimSpace(s), "=")
	if !ok || spec == "" {
		return Target{}, targetErr(&TargetError{Target: shown(s), Err: errors.New("want NAME=URL or NAME=sim[:KEY=VALUE,...]")})
	}
	if !nameRE.MatchString(name) {
		return Target{}, targetErr(&TargetError{Target: shown(s), Err: fmt.Errorf("name %q: want letters, digits, '.', '_' or '-' (at most 40)", name)})
	}
	to, err := replay.ParseTarget(spec, base)
	if oe := (*traces.OptionError)(nil); errors.As(err, &oe) {
		err = oe.Err // replay's names the spec; this one names the target
	}
	if err != nil {
		return Target{}, targetErr(&TargetError{Target: name, Err: err})
	}
	t := Target{Name: name, URL: to.URL, Sim: to.Sim, Config: spec}
	if t.URL != "" {
		t.Config = replay.RedactURL(spec)
	}
	return t, nil
}
