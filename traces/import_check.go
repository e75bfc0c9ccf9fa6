package traces

// The importers' rows pass the same checks as every codec's (Validate,
// arrival order), reported at the line the decoder last read.

// lineOf is the 1-based line of the row a decoder returned last; decoders
// without it are numbered by row.
type lineOf interface{ lastLine() int64 }

func (d *mooncakeDecoder) lastLine() int64  { return d.line }
func (d *bailianDecoder) lastLine() int64   { return d.line }
func (d *tracelabDecoder) lastLine() int64  { return d.line }
func (d *azureDecoder) lastLine() int64     { return d.c.line }
func (d *burstgptDecoder) lastLine() int64  { return d.c.line }
func (d *splitwiseDecoder) lastLine() int64 { return d.c.line }

// check validates rec, the row the decoder just returned, and checks its
// arrival order: a nil error keeps it; late says the error is about
// arrival order (the row is valid).
func (r *importReader) check(rec *Record) (late bool, err error) {
	line := r.stats.Rows + r.stats.Skipped + 1
	if l, ok := r.dec.(lineOf); ok {
		line = l.lastLine()
	}
	if p := rec.Validate(); p != nil {
		return false, &RowError{File: r.name, Line: line, Err: p}
	}
	if back, late := r.order.check(rec.ArrivalNs); late {
		return true, &RowError{File: r.name, Line: line, Err: outOfOrder(rec.ArrivalNs, back)}
	}
	return false, nil
}

// importProblem sorts an importer's row error by the number problem it
// wraps (a negative, fractional or too large count), else unreadable.
func importProblem(a []any) Problem {
	for _, x := range a {
		switch x {
		case errNumNegative:
			return ProblemNegative
		case errNumRange:
			return ProblemOutOfRange
		case errNumFraction:
			return ProblemNotInteger
		}
	}
	return ProblemUnreadable
}
