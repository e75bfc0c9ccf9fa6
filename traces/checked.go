package traces

import (
	"errors"
	"fmt"
	"io"
)

// ErrNoValidRows is wrapped by the error of a file that has rows but not
// one valid record among them: whatever the file is, it is not a trace,
// and reading on would give an empty one.
var ErrNoValidRows = errors.New("no valid record")

type noValidRows struct{ msg string }

func (e *noValidRows) Error() string { return e.msg }
func (e *noValidRows) Unwrap() error { return ErrNoValidRows }

// DamagedError is a damaged (truncated) file read without
// OpenOptions.Salvage: it names the file and how many complete rows came
// before the damage. It wraps ErrTruncated, and when there are such rows
// OptionRef("OpenOptions.Salvage"), which its message names as the way to
// read them.
type DamagedError struct {
	File string
	// Rows is how many valid rows came before the damage.
	Rows int64
	// Err is the reader's error at the damage (a *RowError).
	Err error
}

func (e *DamagedError) Error() string {
	if e.Rows == 0 {
		return fmt.Sprintf("%s is damaged (truncated) before its first complete row: %v", e.File, e.Err)
	}
	return fmt.Sprintf("%s is damaged (truncated): %d complete %s before the damage, which %s uses (%v)", e.File, e.Rows, plural(e.Rows, "row", "rows"), salvageRef, e.Err)
}

func (e *DamagedError) Unwrap() []error {
	if e.Rows == 0 {
		return []error{e.Err}
	}
	return []error{e.Err, salvageRef}
}

// salvageRef is the option a DamagedError's message names.
const salvageRef OptionRef = "OpenOptions.Salvage"

// checked is what OpenWith and CheckDamage return: the codec's reader
// with the rules every command shares on top. A truncated file is an
// error unless OpenOptions.Salvage asks for the rows before the damage
// (then the stream ends there, with ReadStats.Truncated set); a file
// whose every row is bad is an error (ErrNoValidRows), never an empty
// trace.
type checked struct {
	Reader
	name    string
	salvage bool
	// allowEmpty leaves a file without a valid row to the caller
	// (CheckDamage).
	allowEmpty bool
	err        error // sticky
}

func withChecks(r Reader, name string, o OpenOptions) Reader {
	return &checked{Reader: r, name: displayName(name), salvage: o.Salvage}
}

// CheckDamage returns r, a Reader of the file name that OpenWith did not
// make (an importer's), with the damage rule every reader shares: a
// truncated input is a *DamagedError unless o.Salvage asks for the rows
// before the damage, and then the stream ends there with
// ReadStats.Truncated set. Unlike OpenWith it leaves a file without a
// valid row to the caller, who knows what the file was meant to be (an
// import names the format it was told).
func CheckDamage(r Reader, name string, o OpenOptions) Reader {
	c := withChecks(r, name, o).(*checked)
	c.allowEmpty = true
	return c
}

func (c *checked) Read(recs []Record) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.Reader.Read(recs)
	if err == nil {
		return n, nil
	}
	st := c.Reader.Stats()
	switch {
	case err == io.EOF && st.Rows == 0 && st.Skipped > 0 && !c.allowEmpty:
		err = &noValidRows{fmt.Sprintf("%s: none of its %d rows is a valid tokentrace record (first %v): logs are read by tokentrace capture, public traces by tokentrace import",
			c.name, st.Skipped, st.FirstSkip)}
	case err == io.EOF:
	case errors.Is(err, ErrTruncated) && c.salvage && st.Rows > 0:
		err = io.EOF
	case errors.Is(err, ErrTruncated):
		var d *DamagedError
		if !errors.As(err, &d) {
			err = &DamagedError{File: c.name, Rows: st.Rows, Err: err}
		}
	}
	c.err = err
	return n, err
}

// SortedByArrival passes on the codec's promise of arrival order.
func (c *checked) SortedByArrival() bool { return IsSorted(c.Reader) }

// Notes are what a command says about the rows of the file name that it
// read, in the same words everywhere: the skipped rows (SkipNote), the
// rows out of arrival order (OrderNote, followed by what the command
// does with them: order, e.g. "kept in file order"; "" leaves the note
// out, for a command that does not depend on order), and the damage it
// read up to (SalvageNote). Empty when there is nothing to say.
func (s *ReadStats) Notes(name, order string) []string {
	var notes []string
	if n := s.SkipNote(name); n != "" {
		notes = append(notes, n)
	}
	if n := s.OrderNote(name); n != "" && order != "" {
		notes = append(notes, n+": "+order)
	}
	if s.Truncated {
		notes = append(notes, SalvageNote(displayName(name), s.Rows))
	}
	return notes
}
