package main

import (
	"iter"
	"strings"

	"github.com/tokentrace/tokentrace/traces"
)

// Libraries name their options (traces.OptionError: "replay:
// Options.Speed: must be > 0"); users type flags. flagged finds the option
// errors in a library error and says each with its flag ("--speed: must be
// > 0"), and the error it returns still unwraps to the library's, so
// errors.Is and errors.As see the whole chain (ErrNothingToSend,
// ErrTruncated, a *fs.PathError).

// flagError is a library error as the command line sees it: its message
// names flags where the library named options.
type flagError struct {
	msg string
	err error // the library's error
}

func (e *flagError) Error() string { return e.msg }
func (e *flagError) Unwrap() error { return e.err }

// flagged returns err with every option error in it that flags (option
// name → flag) or the options' kebab-cased names map to a flag said as
// that flag; nil stays nil, and an error without any stays as it is.
func flagged(err error, flags map[string]string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	for oe := range optionErrors(err) {
		if f := flagOf(oe.Option, flags); f != "" {
			msg = strings.Replace(msg, oe.Error(), f+": "+oe.Err.Error(), 1)
		}
	}
	if msg == err.Error() {
		return err
	}
	return &flagError{msg: msg, err: err}
}

// optionErrors yields every *traces.OptionError in err's tree (through
// Unwrap() error and Unwrap() []error, the way errors.As searches), outermost
// first; an option error's own cause is not searched.
func optionErrors(err error) iter.Seq[*traces.OptionError] {
	return func(yield func(*traces.OptionError) bool) {
		var walk func(error) bool
		walk = func(err error) bool {
			for err != nil {
				if oe, ok := err.(*traces.OptionError); ok {
					return yield(oe)
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

// flagOf is the flag that sets option: flags' entry, else for a field of
// an options struct ("Options.RateScale") its kebab-cased name
// ("--rate-scale", optionFlags for the exceptions); "" when neither knows
// it.
func flagOf(option string, flags map[string]string) string {
	if f, ok := flags[option]; ok {
		return f
	}
	name, ok := strings.CutPrefix(option, "Options.")
	if !ok || name == "" || strings.ContainsAny(name, ", .") {
		return ""
	}
	if f, ok := optionFlags[name]; ok {
		return "--" + f
	}
	return "--" + kebab(name)
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

// usageError is err as a usage error (exit code 2), its options said as
// flags.
func usageError(err error, flags map[string]string) error {
	return withCode(exitUsage, flagged(err, flags))
}
