package formats

import "github.com/tokentrace/tokentrace/traces"

// The importers' rows pass the same check as every codec's (Validate, and
// arrivals within traces.MaxSpanNs of the first row's), reported at the
// line the decoder last read. Their arrival order is not
// checked here: rows keep the source's order (some formats group them by
// session), and the trace written is checked when it is read.

// lineOf is the 1-based line of the row a decoder returned last; decoders
// without it are numbered by row.
type lineOf interface{ lastLine() int64 }

func (d *mooncakeDecoder) lastLine() int64  { return d.line }
func (d *bailianDecoder) lastLine() int64   { return d.line }
func (d *tracelabDecoder) lastLine() int64  { return d.line }
func (d *azureDecoder) lastLine() int64     { return d.c.line }
func (d *burstgptDecoder) lastLine() int64  { return d.c.line }
func (d *splitwiseDecoder) lastLine() int64 { return d.c.line }

// check validates rec, the row the decoder just returned: a nil error
// keeps it.
func (r *importReader) check(rec *traces.Record) error {
	line := r.stats.Rows + r.stats.Skipped + 1
	if l, ok := r.dec.(lineOf); ok {
		line = l.lastLine()
	}
	if p := rec.Validate(); p != nil {
		return &traces.RowError{File: r.name, Line: line, Err: p}
	}
	if p := r.span.Check(rec.ArrivalNs); p != nil {
		return &traces.RowError{File: r.name, Line: line, Err: p}
	}
	return nil
}

// importProblem sorts an importer's row error by the number problem it
// wraps (a negative, fractional or too large count), else unreadable.
func importProblem(a []any) traces.Problem {
	for _, x := range a {
		switch x {
		case errNumNegative:
			return traces.ProblemNegative
		case errNumRange:
			return traces.ProblemOutOfRange
		case errNumFraction:
			return traces.ProblemNotInteger
		}
	}
	return traces.ProblemUnreadable
}
