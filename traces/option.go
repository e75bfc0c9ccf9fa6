package traces

import "fmt"

// OptionError is an option, or a parsed input, that a library cannot use:
// which package's option it is, its name as the library's callers write
// it, and what is wrong with it. It reads "replay: Options.Speed: must be
// > 0, got 0". A program that sets the option some other way (the CLI, by
// a flag) finds it with errors.As and says it in its own terms, while the
// error, and whatever it wraps, stays whole for errors.Is.
type OptionError struct {
	// Pkg is the package whose option it is ("replay"); it prefixes the
	// message.
	Pkg string
	// Option is the option's name: a field of an options struct
	// ("Options.Speed"), two fields that must agree ("Options.WindowFrom,
	// Options.WindowTo"), or an input a Parse function reads ("window").
	Option string
	// Err says what is wrong, and wraps the cause when there is one.
	Err error
}

// OptionErrorf returns an *OptionError for pkg's option; its Err is
// fmt.Errorf(format, a...), so %w wraps a cause.
func OptionErrorf(pkg, option, format string, a ...any) *OptionError {
	return &OptionError{Pkg: pkg, Option: option, Err: fmt.Errorf(format, a...)}
}

func (e *OptionError) Error() string {
	if e.Pkg == "" {
		return e.Option + ": " + e.Err.Error()
	}
	return e.Pkg + ": " + e.Option + ": " + e.Err.Error()
}

func (e *OptionError) Unwrap() error { return e.Err }

// OptionRef is an option that an error's message names in passing, as
// advice ("set Options.Model to one it serves", "goodput needs
// Options.SLO"). The error wraps it with %w where the name goes, so its
// text is the option's name and a program that sets options some other way
// finds it in the error's tree, as it finds an OptionError, and says the
// name in its own terms; errors.Is(err, OptionRef("Options.Model")) asks
// whether err's advice names that option.
type OptionRef string

func (r OptionRef) Error() string { return string(r) }

// Say says r in terms (nil: its name).
func (r OptionRef) Say(terms Terms) string {
	if terms == nil {
		return string(r)
	}
	return terms.Option(r)
}
