package main

import (
	"iter"
	"maps"
	"slices"
	"strings"

	"github.com/tokentrace/tokentrace/traces"
)

// Libraries name their options, never flags: an error about an option is a
// *traces.OptionError ("replay: Options.Speed: must be > 0"), and advice
// that names an option wraps it as a traces.OptionRef ("set %w to one it
// serves" with OptionRef("Options.Model")). flagged finds both in the
// error's tree and says each with its flag ("--speed: must be > 0", "set
// --model to one it serves"): an option error's own text becomes its flag
// and its Err's text, an OptionRef's text (the option's name, nothing else)
// becomes the flag. No message is parsed for option names: an option a
// library writes into its text by hand stays as written (a test keeps
// libraries from doing so). The error flagged returns still unwraps to the
// library's, so errors.Is and errors.As see the whole chain
// (ErrNothingToSend, ErrTruncated, a *fs.PathError).
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

// flagged returns err with every option error and option reference in it
// that flags (option name → flag), optionFlags or the options' kebab-cased
// names map to a flag said as that flag; nil stays nil, and an error
// without any stays as it is.
func flagged(err error, flags map[string]string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	for e := range optionErrors(err) {
		switch e := e.(type) {
		case *traces.OptionError:
			if f := flagOf(e.Option, flags); f != "" {
				msg = strings.Replace(msg, e.Error(), f+": "+e.Err.Error(), 1)
			}
		case traces.OptionRef:
			if f := flagOf(string(e), flags); f != "" {
				msg = replaceName(msg, string(e), f)
			}
		}
	}
	if msg == err.Error() {
		return err
	}
	return &flagError{msg: msg, err: err}
}

// optionErrors yields every *traces.OptionError and traces.OptionRef in
// err's tree (through Unwrap() error and Unwrap() []error, the way
// errors.As searches), outer before inner: an option error's text holds
// its cause's as the library wrote it, so the cause is said after it.
func optionErrors(err error) iter.Seq[error] {
	return func(yield func(error) bool) {
		var walk func(error) bool
		walk = func(err error) bool {
			for err != nil {
				switch err.(type) {
				case *traces.OptionError, traces.OptionRef:
					if !yield(err) {
						return false
					}
				}
				switch u := err.(type) {
				case interface{ Unwrap() []error }:
					for _, e := range u.Unwrap() {
						if !walk(e) {
							return false
						}
					}
					return true
				case interface{ Unwrap() error }:
					err = u.Unwrap()
				default:
					return true
				}
			}
			return true
		}
		walk(err)
	}
}

// replaceName replaces every whole occurrence of the option name in msg
// by flag: not one inside a longer name (Options.Model in
// Options.ModelMap, Options.Fleet in Options.Fleet.Router, Options.TempDir
// in FitOptions.TempDir).
func replaceName(msg, name, flag string) string {
	var b strings.Builder
	for {
		i := strings.Index(msg, name)
		if i < 0 {
			b.WriteString(msg)
			return b.String()
		}
		j := i + len(name)
		longer := j < len(msg) && (isNameByte(msg[j]) || msg[j] == '.' && j+1 < len(msg) && 'A' <= msg[j+1] && msg[j+1] <= 'Z')
		whole := (i == 0 || !isNameByte(msg[i-1])) && !longer
		b.WriteString(msg[:i])
		if whole {
			b.WriteString(flag)
		} else {
			b.WriteString(name)
		}
		msg = msg[j:]
	}
}

func isNameByte(c byte) bool {
	return c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// flagOf is the flag that sets option: flags' entry, else optionFlags',
// else for a field of an options struct ("Options.RateScale",
// "CompareOptions.MaxSample") its kebab-cased name ("--rate-scale"); for fields that must agree
// ("Options.ModelBytes, Options.Bandwidth") each one's flag, once
// ("--model-bytes, --bandwidth"). "" when none knows it: the library's name
// stays.
func flagOf(option string, flags map[string]string) string {
	if f, ok := flags[option]; ok {
		return f
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
	if !ok || !strings.HasSuffix(typ, "Options") || name == "" || strings.ContainsAny(name, ", .") {
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
	"FitOptions.ReorderWindow":              "--reorder-window",
	"FitOptions.TempDir":                    "--temp-dir",
	"CreateOptions.TempDir":                 "--temp-dir",
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
