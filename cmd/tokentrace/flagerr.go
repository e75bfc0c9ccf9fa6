package main

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/tokentrace/tokentrace/traces"
)

// Libraries name their options, never flags: an error about an option is a
// *traces.OptionError ("replay: Options.Speed: must be > 0"), and advice
// that names an option wraps it as a traces.OptionRef ("set %w to one it
// serves" with OptionRef("Options.Model")). flagged says the error again
// from its tree, each node from its structure: an option error as its
// flag and its Err said again ("--speed: must be > 0"), an option
// reference as its flag ("set --model to one it serves"), a wrapper's text
// with each child's text (as written, or quoted with %q) replaced by that
// child said again, and an errors.Join by its children said again. No
// message is parsed for option names: an option a library writes into its
// text by hand stays as written (a test keeps libraries from doing so).
// The error flagged returns still unwraps to the library's, so errors.Is
// and errors.As see the whole chain (ErrNothingToSend, ErrTruncated, a
// *fs.PathError).
//
// flagOf maps an option to its flag: the command's own table first
// (replayFlags, promFlags: options said as a flag of another name), then
// optionFlags (fields whose flag is not their kebab-cased name, shared by
// every command), then the kebab-cased field name (Options.RateScale is
// --rate-scale).

// flagError is a library error as the command line sees it: its message
// names flags where the library named options.
type flagError struct {
	msg string
	err error // the library's error
}

func (e *flagError) Error() string { return e.msg }
func (e *flagError) Unwrap() error { return e.err }

// flagged returns err said with every option error and option reference
// in its tree that flags (option name → flag), optionFlags or the options'
// kebab-cased names map to a flag said as that flag; nil stays nil, and
// an error without any stays as it is.
func flagged(err error, flags map[string]string) error {
	if err == nil {
		return nil
	}
	msg, changed := sayError(err, flags)
	if !changed {
		return err
	}
	return &flagError{msg: msg, err: err}
}

// sayError is err's message said from its tree, and whether it differs
// from err.Error().
func sayError(err error, flags map[string]string) (string, bool) {
	switch e := err.(type) {
	case *traces.OptionError:
		cause, changed := sayError(e.Err, flags)
		if f := flagOf(e.Option, flags); f != "" {
			return f + ": " + cause, true
		}
		if !changed {
			return e.Error(), false
		}
		if e.Pkg == "" {
			return e.Option + ": " + cause, true
		}
		return e.Pkg + ": " + e.Option + ": " + cause, true
	case traces.OptionRef:
		if f := flagOf(string(e), flags); f != "" {
			return f, true
		}
		return string(e), false
	case traces.Text:
		said := e.Say(cliTerms{flags})
		return said, said != e.Error()
	case *flagError:
		return e.msg, false // said already
	}
	msg := err.Error()
	var children []error
	switch u := err.(type) {
	case interface{ Unwrap() []error }:
		children = u.Unwrap()
	case interface{ Unwrap() error }:
		children = []error{u.Unwrap()}
	}
	changed, at := false, 0
	for _, c := range children {
		if c == nil {
			continue
		}
		said, ok := sayError(c, flags)
		if !ok {
			continue
		}
		// The child's text where the wrapper wrote it, after the
		// children before it: as it is, or quoted (%q).
		for _, form := range [][2]string{{c.Error(), said}, {strconv.Quote(c.Error()), strconv.Quote(said)}} {
			if i := strings.Index(msg[at:], form[0]); i >= 0 {
				msg = msg[:at+i] + form[1] + msg[at+i+len(form[0]):]
				at += i + len(form[1])
				changed = true
				break
			}
		}
	}
	return msg, changed
}

// flagOf is the flag that sets option: flags' entry, else optionFlags',
// else for a field of an options struct ("Options.RateScale",
// "CompareOptions.MaxSample", synth's "Thresholds.Confidence") its
// kebab-cased name ("--rate-scale"); for fields that must agree
// ("Options.ModelBytes, Options.Bandwidth") each one's flag, once
// ("--model-bytes, --bandwidth"). "" when none knows it: the library's name
// stays.
func flagOf(option string, flags map[string]string) string {
	if f, ok := flags[option]; ok {
		return f
	}
	// Another package's option ("replay.Options.Sessions"), as a text
	// names it: its command's flag.
	if pkg, rest, ok := strings.Cut(option, "."); ok && pkg != "" && pkg[0] >= 'a' && pkg[0] <= 'z' && !strings.Contains(option, ", ") {
		return flagOf(rest, commandFlags[pkg])
	}
	if f, ok := optionFlags[option]; ok {
		return f
	}
	if names := strings.Split(option, ", "); len(names) > 1 {
		var fs []string
		for _, n := range names {
			f := flagOf(n, flags)
			if f == "" {
				return ""
			}
			if !slices.Contains(fs, f) {
				fs = append(fs, f)
			}
		}
		return strings.Join(fs, ", ")
	}
	typ, name, ok := strings.Cut(option, ".")
	if !ok || !(strings.HasSuffix(typ, "Options") || typ == "Thresholds") || name == "" || strings.ContainsAny(name, ", .") {
		return ""
	}
	return "--" + kebab(name)
}

// optionFlags are the options whose flag, in every command that has it, is
// not their kebab-cased name (or that are not a field of an Options
// struct).
var optionFlags = map[string]string{
	"Options.TailPercentile":    "--tail",
	"Options.MaxQueuedRequests": "--max-num-queued-reqs",
	"Options.WindowFrom":        "--window",
	"Options.WindowTo":          "--window",
	"Options.ShardIndex":        "--shard",
	"Options.ShardCount":        "--shard",
	// A simulated fleet is set by several flags (or target keys) that its
	// errors name themselves.
	"Options.Fleet":                         "fleet",
	"Options.Fleet.Router":                  "--router",
	"Options.Fleet.KVTransferBandwidth":     "--kv-transfer-bandwidth",
	"Options.Fleet.KVTransferBytesPerToken": "--kv-transfer-bytes-per-token",
	"Options.Fleet.Overrides":               "--replica-config",
	"OpenOptions.Salvage":                   "--salvage",
	"OpenOptions.MaxLineBytes":              "--max-line-mib",
	"Command.Out":                           "--out",
	"Command.Format":                        "--format",
	"Command.JSON":                          "--json",
	"FitOptions.ReorderWindow":              "--reorder-window",
	"FitOptions.TempDir":                    "--temp-dir",
	"CreateOptions.TempDir":                 "--temp-dir",
	"CheckOptions.WhatIfs":                  "--what-if",
}

// kebab turns RateScale into rate-scale and OTLPTracesEndpoint into
// otlp-traces-endpoint.
func kebab(s string) string {
	var b strings.Builder
	for i, r := range s {
		upper := r >= 'A' && r <= 'Z'
		if upper && i > 0 {
			prevLower := s[i-1] >= 'a' && s[i-1] <= 'z' || s[i-1] >= '0' && s[i-1] <= '9'
			nextLower := i+1 < len(s) && s[i+1] >= 'a' && s[i+1] <= 'z'
			if prevLower || (nextLower && s[i-1] >= 'A' && s[i-1] <= 'Z') {
				b.WriteByte('-')
			}
		}
		if upper {
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// replayFlags are the flags of the replay and sweep commands whose
// options (replay's, by the name its errors give) are not their
// kebab-cased names.
var replayFlags = map[string]string{
	"Options.WindowFrom, Options.WindowTo":   "--window",
	"window":                                 "--window",
	"Options.ShardIndex, Options.ShardCount": "--shard",
	"shard":                                  "--shard",
	"Options.TokenIDMin, Options.TokenIDMax": "token ids",
	"background":                             "--background",
	"model map":                              "--model-map",
	"metadata":                               "--metadata",
	"target":                                 "--target",
	"TargetOptions.OTLPListen":               "--otlp-listen",
	"TargetOptions.MetricsInterval":          "--metrics-interval",
}

// sweepFlags are the sweep command's: replay's for every step, and
// sweep's options whose flag is not their kebab-cased name.
var sweepFlags = withFlags(replayFlags, map[string]string{
	"Options.Percentile":        "--slo-percentile",
	"Options.Low, Options.High": "--search-range",
	"Options.Tolerance":         "--search-tolerance",
})

// validateFlags are the validate command's: replay's for URL targets, and
// validate's options whose flag is not their kebab-cased name.
var validateFlags = withFlags(replayFlags, map[string]string{
	"Options.Targets":   "--target",
	"Options.MinEffect": "--min-effect-pct",
})

// withFlags is a command's table: base's entries, then more's.
func withFlags(base, more map[string]string) map[string]string {
	m := maps.Clone(base)
	maps.Copy(m, more)
	return m
}

// usageError is err as a usage error (exit code 2), its options said as
// flags.
func usageError(err error, flags map[string]string) error {
	return withCode(exitUsage, flagged(err, flags))
}
