package replay

import (
	"net/url"
	"regexp"
	"strings"

	"github.com/tokentrace/tokentrace/sim"
)

// A target spec names what a run goes against, in one form for every
// command that takes a target (replay, sweep, validate, the demo's printed
// commands):
//
//	sim                      the built-in simulator
//	sim:KEY=VALUE,...        the built-in simulator configured by
//	                         sim.ApplyConfig's keys, a fleet included
//	                         (sim:max-num-seqs=32, sim:replicas=4,router=prefix-aware)
//	http://HOST:PORT         a running server (https:// too)

// BuiltinSim is the simulator a bare "sim" target means:
// sim.DefaultOptions with vLLM's per-request metrics on, so that a replay
// reads the server's own queue, prefill and decode times.
func BuiltinSim() sim.Options {
	o := sim.DefaultOptions()
	o.PerRequestMetrics = true
	return o
}

// ParseTarget parses a target spec (see above) into DefaultTargetOptions:
// a URL gives TargetOptions.URL (and no Sim), "sim" base and "sim:KEYS"
// base with the keys applied (TargetOptions.Sim). base is what "sim" means: BuiltinSim, or a caller's
// own simulator options that the keys override. An error names the spec
// and, for a bad key, the key, with the keys there are and the one a
// misspelt key was likely meant to be.
func ParseTarget(spec string, base sim.Options) (TargetOptions, error) {
	s := strings.TrimSpace(spec)
	switch {
	case s == "":
		return TargetOptions{}, optionErr("target", "empty: want sim, sim:KEY=VALUE,... or a server's URL (http://HOST:PORT)")
	case s == "sim" || strings.HasPrefix(s, "sim:"):
		o := base
		if err := sim.ApplyConfig(&o, strings.TrimPrefix(strings.TrimPrefix(s, "sim"), ":")); err != nil {
			return TargetOptions{}, optionErr("target", "%w", err)
		}
		to := DefaultTargetOptions()
		to.Sim = &o
		return to, nil
	case strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://"):
		if u, err := url.Parse(s); err != nil || u.Host == "" {
			return TargetOptions{}, optionErr("target", "%q is not a server's URL (want http://HOST:PORT)", redactSpec(s))
		}
		to := DefaultTargetOptions()
		to.URL, to.Sim = s, nil // a server, not the simulator
		return to, nil
	}
	return TargetOptions{}, optionErr("target", "%q is neither a URL (http://…) nor sim[:KEY=VALUE,...]%s", redactSpec(s), targetHint(s))
}

// hostPort is a URL without its scheme: HOST:PORT[/PATH].
var hostPort = regexp.MustCompile(`^[A-Za-z0-9.\-\[\]]+:[0-9]+(/.*)?$`)

// targetHint is "; did you mean SPEC?" for a spec that is almost one: sim
// with another separator or in capitals, a URL without its scheme.
func targetHint(s string) string {
	if strings.Contains(s, "@") {
		return "" // it may hold credentials: not repeated
	}
	if len(s) >= 3 && strings.EqualFold(s[:3], "sim") {
		rest := s[3:]
		if rest == "" {
			return "; did you mean sim?"
		}
		if strings.ContainsAny(rest[:1], ":=,; ") {
			return "; did you mean sim:" + strings.TrimLeft(rest, ":=,; ") + "?"
		}
	}
	if hostPort.MatchString(s) {
		return "; did you mean http://" + s + "?"
	}
	return ""
}

// redactSpec is a spec fit for a message: what may be credentials (before
// an '@', a URL's query) left out.
func redactSpec(s string) string {
	s, _, _ = strings.Cut(s, "?")
	if i := strings.LastIndex(s, "@"); i >= 0 {
		return "(redacted)" + s[i:]
	}
	return s
}

// FormatSimTarget is the target spec of the simulator o configures:
// "sim" for BuiltinSim, else "sim:" and the keys that set o's
// configuration from the defaults (sim.FormatConfig). Options outside the
// keys (the served model, faults, per-request metrics) are not in it.
func FormatSimTarget(o sim.Options) string {
	if c := sim.FormatConfig(o); c != "" {
		return "sim:" + c
	}
	return "sim"
}
