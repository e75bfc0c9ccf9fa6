package traces

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// One validation for every record, wherever it comes from (a codec, an
// importer, a dataset part): the same rules, the same words, the same
// row numbers. A row that breaks a rule has a Problem; readers count each
// Problem in ReadStats (with the first row of each, file:line, never the
// row's content), skip the row (or keep it, for a row out of arrival
// order) and say so in the words of ReadStats.Notes. With
// OpenOptions.Strict the first problem is the reader's error instead.

// Problem is the kind of a bad row.
type Problem uint8

// The kinds of bad rows. Their String is the word every message uses.
const (
	// ProblemUnreadable is a row the codec cannot read as a record: not
	// a JSON object, a wrong number of CSV fields, text where a number
	// belongs, a damaged Parquet page.
	ProblemUnreadable Problem = iota + 1
	// ProblemNegative is a count, length, time or id below zero (below
	// NotReported where a column may say "not reported").
	ProblemNegative
	// ProblemNotInteger is a number with a fraction where a whole number
	// belongs (1.5 tokens).
	ProblemNotInteger
	// ProblemOutOfRange is a number too large for its column: tokens over
	// MaxTokens, times over MaxTimeNs, anything past its integer type.
	ProblemOutOfRange
	// ProblemMismatch is a list that does not match its count
	// (chunk_tokens must have one entry per chunk_ns entry, or none).
	ProblemMismatch
	// ProblemOutOfOrder is a row whose arrival_ns is earlier than the
	// row before it. The row is valid and kept; what a command does with
	// it (keep file order, sort, refuse) is the command's to say.
	ProblemOutOfOrder
	// ProblemTruncated is a file that ends in the middle of a row, block
	// or footer (see ErrTruncated).
	ProblemTruncated
	// ProblemTooLong is a line (a JSON document, a CSV record) longer
	// than OpenOptions.MaxLineBytes: read to its end without being held,
	// and skipped like any bad row.
	ProblemTooLong

	// NumProblems bounds the Problem values (ReadStats.Bad is indexed by
	// Problem).
	NumProblems
)

var problemWords = [NumProblems]string{
	ProblemUnreadable: "unreadable",
	ProblemNegative:   "negative",
	ProblemNotInteger: "not an integer",
	ProblemOutOfRange: "out of range",
	ProblemMismatch:   "list/count mismatch",
	ProblemOutOfOrder: "out of arrival order",
	ProblemTruncated:  "truncated",
	ProblemTooLong:    "too long",
}

// Key is the problem's word as a snake_case key ("out_of_arrival_order"),
// for JSON.
func (p Problem) Key() string {
	return strings.NewReplacer(" ", "_", "/", "_").Replace(p.String())
}

func (p Problem) String() string {
	if p > 0 && p < NumProblems {
		return problemWords[p]
	}
	return "problem " + strconv.Itoa(int(p))
}

// MaxTimeNs bounds every time column (arrival_ns, finish_ns, think_ns and
// the outcome offsets): about 146 years, so that the sum or the
// difference of any two times fits an int64 and no later arithmetic
// (spans, schedules, bins) can overflow.
const MaxTimeNs = math.MaxInt64 / 2

// MaxSpanNs bounds what a trace's times may span: an arrival may be at
// most this long after (or before) the first row's, and a think time at
// most this long: 10 years. A trace beyond it has no replay that reaches
// its far rows in a sane time, and no workload synth can fit (its model
// keeps think times and gaps in whole seconds of an int32, 68 years), so
// such a row is out of range where it is read, not a failure later.
const MaxSpanNs = 10 * 365 * 24 * int64(time.Hour)

// MaxTokens bounds every token count (input, output, prefix, server usage,
// tokens per chunk): 2^24, more than any served model's context, so that
// a count can be multiplied by bytes per token or summed over a trace
// without overflow, and replay never builds a prompt of billions of tokens.
const MaxTokens = 1 << 24

// ErrOutOfOrder is wrapped by the error of a row out of arrival order
// (ProblemOutOfOrder) when it is an error: under OpenOptions.Strict.
var ErrOutOfOrder = errors.New("row out of arrival order")

// RowProblem is what is wrong with a row: its Problem, the column and a
// content-free detail (a number, never text a person wrote). It wraps
// ErrMalformed, or ErrOutOfOrder or ErrTruncated for those problems.
type RowProblem struct {
	Problem Problem
	// Column is the column at fault ("" when the row as a whole is).
	Column string
	// Detail says what was found, e.g. "-5" or "1 entry for 3 chunk_ns".
	Detail string
}

func (e *RowProblem) Error() string {
	var b strings.Builder
	b.WriteString(e.Problem.String())
	b.WriteString(": ")
	if e.Column != "" {
		b.WriteString(e.Column)
		if e.Detail != "" {
			b.WriteByte(' ')
		}
	}
	b.WriteString(e.Detail)
	return b.String()
}

func (e *RowProblem) Unwrap() error {
	switch e.Problem {
	case ProblemOutOfOrder:
		return ErrOutOfOrder
	case ProblemTruncated:
		return ErrTruncated
	}
	return ErrMalformed
}

// ProblemOf returns the Problem an error about a row describes:
// ProblemTruncated for ErrTruncated, ProblemUnreadable for any other
// malformed row, 0 for errors that are not about a row.
func ProblemOf(err error) Problem {
	var rp *RowProblem
	switch {
	case errors.As(err, &rp):
		return rp.Problem
	case errors.Is(err, ErrTruncated):
		return ProblemTruncated
	case errors.Is(err, ErrOutOfOrder):
		return ProblemOutOfOrder
	case errors.Is(err, ErrMalformed):
		return ProblemUnreadable
	}
	return 0
}

func problemf(p Problem, column, format string, a ...any) *RowProblem {
	return &RowProblem{Problem: p, Column: column, Detail: fmt.Sprintf(format, a...)}
}

// unreadable is a row the codec cannot read, with a reason.
func unreadable(format string, a ...any) *RowProblem {
	return problemf(ProblemUnreadable, "", format, a...)
}

// Validate reports the first rule r breaks, as a *RowProblem (nil for a
// valid record). The rules, the same for every reader and importer:
//
//   - seq, turn, parent_seq, after_seqs, http_status and the preemption
//     count are not negative (NotReported where the column allows it);
//   - every time (arrival_ns, finish_ns, think_ns, the outcome offsets and
//     chunk_ns) is in [0, MaxTimeNs], or NotReported where allowed;
//   - every token count is in [0, MaxTokens], or NotReported where allowed;
//   - prefix_tokens is at most input_tokens, and think_ns at most
//     MaxSpanNs;
//   - chunk_tokens has one entry per chunk_ns entry, or none.
//
// Order between rows is not a property of one record: readers check it
// (ProblemOutOfOrder), and that every arrival is within MaxSpanNs of the
// first row's (ProblemOutOfRange).
func (r *Record) Validate() error {
	// One pass of plain comparisons for the common case, a valid row (the
	// decoders' hot path); the first problem's words come from problem.
	if r.requestValid() && (r.outcomeUnset() || r.outcomeValid()) {
		return nil
	}
	if p := r.problem(); p != nil {
		return p
	}
	return nil
}

// inTime reports whether v is a time in [0, MaxTimeNs], or NotReported
// when unreported is set (as unsigned comparisons: one each).
func inTime(v int64, unreported bool) bool {
	if unreported {
		return uint64(v+1) <= MaxTimeNs+1
	}
	return uint64(v) <= MaxTimeNs
}

// inTokens is inTime for token counts.
func inTokens(v int32, unreported bool) bool {
	if unreported {
		return uint32(v+1) <= MaxTokens+1
	}
	return uint32(v) <= MaxTokens
}

func (r *Record) requestValid() bool {
	ok := r.Seq >= 0 && inTime(r.ArrivalNs, false) && r.Turn >= 0 &&
		inTokens(r.InputTokens, false) && inTokens(r.OutputTokens, false) && inTokens(r.PrefixTokens, false) &&
		r.PrefixTokens <= r.InputTokens &&
		inTime(r.FinishNs, true) && r.ThinkNs >= NotReported && r.ThinkNs <= MaxSpanNs && r.ParentSeq >= NotReported
	for _, s := range r.AfterSeqs {
		ok = ok && s >= 0
	}
	return ok
}

func (r *Record) outcomeValid() bool {
	ok := inTime(r.ScheduledNs, true) && inTime(r.SentNs, true) && inTime(r.FirstTokenNs, true) && inTime(r.LastTokenNs, true) &&
		inTime(r.ServerQueueNs, true) && inTime(r.ServerPrefillNs, true) && inTime(r.ServerDecodeNs, true) &&
		inTokens(r.ServerPromptTokens, true) && inTokens(r.ServerOutputTokens, true) && inTokens(r.ServerCachedTokens, true) &&
		r.ServerPreemptions >= NotReported && uint32(r.HTTPStatus) <= 999 &&
		(len(r.ChunkTokens) == 0 || len(r.ChunkTokens) == len(r.ChunkNs))
	for _, t := range r.ChunkNs {
		ok = ok && inTime(t, false)
	}
	for _, t := range r.ChunkTokens {
		ok = ok && inTokens(t, false)
	}
	return ok
}

// problem is the first rule r breaks, in words.
func (r *Record) problem() *RowProblem {
	if r.Seq < 0 {
		return problemf(ProblemNegative, "seq", "%d", r.Seq)
	}
	if p := checkTime("arrival_ns", r.ArrivalNs, false); p != nil {
		return p
	}
	if r.Turn < 0 {
		return problemf(ProblemNegative, "turn", "%d", r.Turn)
	}
	for _, c := range [...]struct {
		name string
		v    int32
	}{{"input_tokens", r.InputTokens}, {"output_tokens", r.OutputTokens}, {"prefix_tokens", r.PrefixTokens}} {
		if p := checkTokens(c.name, int64(c.v), false); p != nil {
			return p
		}
	}
	if r.PrefixTokens > r.InputTokens {
		return problemf(ProblemOutOfRange, "prefix_tokens", "%d is more than input_tokens %d (a prefix is part of the prompt)", r.PrefixTokens, r.InputTokens)
	}
	if p := checkTime("finish_ns", r.FinishNs, true); p != nil {
		return p
	}
	if p := checkTime("think_ns", r.ThinkNs, true); p != nil {
		return p
	}
	if r.ThinkNs > MaxSpanNs {
		return problemf(ProblemOutOfRange, "think_ns", "%d (%s; at most %s)", r.ThinkNs, years(r.ThinkNs), years(MaxSpanNs))
	}
	if r.ParentSeq < NotReported {
		return problemf(ProblemNegative, "parent_seq", "%d", r.ParentSeq)
	}
	for _, s := range r.AfterSeqs {
		if s < 0 {
			return problemf(ProblemNegative, "after_seqs", "entry %d", s)
		}
	}
	if r.outcomeUnset() {
		return nil // a trace row: nothing more to check
	}
	for _, c := range [...]struct {
		name string
		v    int64
	}{{"scheduled_ns", r.ScheduledNs}, {"sent_ns", r.SentNs}, {"first_token_ns", r.FirstTokenNs}, {"last_token_ns", r.LastTokenNs},
		{"server_queue_ns", r.ServerQueueNs}, {"server_prefill_ns", r.ServerPrefillNs}, {"server_decode_ns", r.ServerDecodeNs}} {
		if p := checkTime(c.name, c.v, true); p != nil {
			return p
		}
	}
	for _, c := range [...]struct {
		name string
		v    int32
	}{{"server_prompt_tokens", r.ServerPromptTokens}, {"server_output_tokens", r.ServerOutputTokens}, {"server_cached_tokens", r.ServerCachedTokens}} {
		if p := checkTokens(c.name, int64(c.v), true); p != nil {
			return p
		}
	}
	if r.ServerPreemptions < NotReported {
		return problemf(ProblemNegative, "server_preemptions", "%d", r.ServerPreemptions)
	}
	if r.HTTPStatus < 0 || r.HTTPStatus > 999 {
		p := ProblemOutOfRange
		if r.HTTPStatus < 0 {
			p = ProblemNegative
		}
		return problemf(p, "http_status", "%d", r.HTTPStatus)
	}
	for _, t := range r.ChunkNs {
		if err := checkTime("chunk_ns", t, false); err != nil {
			err.Detail = "entry " + err.Detail
			return err
		}
	}
	for _, t := range r.ChunkTokens {
		if err := checkTokens("chunk_tokens", int64(t), false); err != nil {
			err.Detail = "entry " + err.Detail
			return err
		}
	}
	if len(r.ChunkTokens) > 0 && len(r.ChunkTokens) != len(r.ChunkNs) {
		return problemf(ProblemMismatch, "chunk_tokens", "has %d %s for %d chunk_ns (want one per chunk, or none)", len(r.ChunkTokens), plural(int64(len(r.ChunkTokens)), "entry", "entries"), len(r.ChunkNs))
	}
	return nil
}

// outcomeUnset reports whether every outcome number is NotReported and
// every outcome list empty (the state of a trace row), so that Validate
// can skip their checks on the common path.
func (r *Record) outcomeUnset() bool {
	return r.ScheduledNs == NotReported && r.SentNs == NotReported && r.FirstTokenNs == NotReported && r.LastTokenNs == NotReported &&
		r.ServerQueueNs == NotReported && r.ServerPrefillNs == NotReported && r.ServerDecodeNs == NotReported &&
		r.ServerPromptTokens == NotReported && r.ServerOutputTokens == NotReported && r.ServerCachedTokens == NotReported &&
		r.ServerPreemptions == NotReported && r.HTTPStatus == 0 && len(r.ChunkNs) == 0 && len(r.ChunkTokens) == 0
}

func checkTime(name string, v int64, unreported bool) *RowProblem {
	switch {
	case v == NotReported && unreported:
		return nil
	case v < 0:
		return problemf(ProblemNegative, name, "%d", v)
	case v > MaxTimeNs:
		return problemf(ProblemOutOfRange, name, "%d (at most %d, about %d years)", v, int64(MaxTimeNs), int64(MaxTimeNs)/int64(365*24*time.Hour))
	}
	return nil
}

func checkTokens(name string, v int64, unreported bool) *RowProblem {
	switch {
	case v == NotReported && unreported:
		return nil
	case v < 0:
		return problemf(ProblemNegative, name, "%d", v)
	case v > MaxTokens:
		return problemf(ProblemOutOfRange, name, "%d (at most %d)", v, MaxTokens)
	}
	return nil
}

// numberProblem classifies a number that did not parse as a column's
// integer: a fraction is ProblemNotInteger; a whole number past the
// column's type, ProblemOutOfRange; anything else (text, an empty
// value) ProblemUnreadable. text is the value as written (cut short in
// the message).
func numberProblem(column, text string) *RowProblem {
	shown := text
	if len(shown) > 24 {
		shown = shown[:24] + "…"
	}
	f, err := strconv.ParseFloat(text, 64)
	switch {
	case err != nil && !errors.Is(err, strconv.ErrRange):
		return problemf(ProblemUnreadable, column, "is not a number")
	case math.IsInf(f, 0) || f == math.Trunc(f):
		return problemf(ProblemOutOfRange, column, "%s", shown)
	}
	return problemf(ProblemNotInteger, column, "%s", shown)
}

// parseInt parses a CSV cell or other text as a whole number of the given
// bit size, written as an integer or as an integral float (1e3), as the
// JSON codec reads numbers. Its error is a *RowProblem without a column.
func parseInt(s string, bits int) (int64, *RowProblem) {
	n, err := strconv.ParseInt(s, 10, bits)
	if err == nil {
		return n, nil
	}
	if f, ferr := strconv.ParseFloat(s, 64); ferr == nil && f == math.Trunc(f) &&
		f >= -math.Ldexp(1, bits-1) && f < math.Ldexp(1, bits-1) {
		return int64(f), nil
	}
	return 0, numberProblem("", s)
}

// orderCheck finds rows whose arrival_ns goes back from the row before,
// and rows too far from the first (MaxSpanNs).
type orderCheck struct {
	prev  int64
	seen  bool
	off   bool // the file is not in arrival order by design (see checksOrder)
	spans spanCheck
}

// spanCheck finds rows whose arrival is more than MaxSpanNs from the
// first valid row's.
type spanCheck struct {
	first int64
	seen  bool
}

// check returns the problem of a row arriving at a, or nil; the first row
// it sees is the reference.
func (s *spanCheck) check(a int64) *RowProblem {
	if !s.seen {
		s.first, s.seen = a, true
		return nil
	}
	d, dir := a-s.first, "after"
	if d < 0 {
		d, dir = -d, "before"
	}
	if d <= MaxSpanNs {
		return nil
	}
	return problemf(ProblemOutOfRange, "arrival_ns", "%d is %s %s the first row's (at most %s: no replay reaches it)", a, years(d), dir, years(MaxSpanNs))
}

// years says a duration in ns as whole years, or days under a year.
func years(ns int64) string {
	const day = 24 * int64(time.Hour)
	if ns >= 365*day {
		return fmt.Sprintf("%d years", ns/(365*day))
	}
	return fmt.Sprintf("%d days", ns/day)
}

// SpanCheck checks the arrivals of a stream of rows against its first:
// importers apply it as readers do (see MaxSpanNs).
type SpanCheck struct{ c spanCheck }

// Check returns the problem of a row arriving at a (a *RowProblem), or
// nil; the first row checked is the reference.
func (s *SpanCheck) Check(a int64) error {
	if p := s.c.check(a); p != nil {
		return p
	}
	return nil
}

// check reports whether a row arriving at a comes before the row above
// it, and by how much.
func (o *orderCheck) check(a int64) (back int64, late bool) {
	if o.off {
		return 0, false
	}
	prev, seen := o.prev, o.seen
	o.prev, o.seen = a, true
	return prev - a, seen && a < prev
}

// outOfOrder is the problem of a row arriving at a, back ns before the
// row above it.
func outOfOrder(a, back int64) *RowProblem {
	return problemf(ProblemOutOfOrder, "arrival_ns", "%d goes back %v from the row before", a, time.Duration(back))
}

// checksOrder reports whether a file with metadata m promises arrival
// order. Results of a replay are written in the order requests finished,
// so their arrivals are not checked.
func checksOrder(m Meta) bool {
	return !(m.Source == "replay" || strings.HasPrefix(m.Source, "replay:"))
}

// BadRows counts the rows with one Problem and keeps the first of them.
type BadRows struct {
	// Rows is how many rows had the problem.
	Rows int64
	// First is the first of them: a *RowError naming the file and line.
	First error
}

// add counts err, a *RowError, under its Problem.
func (s *ReadStats) add(p Problem, err error) {
	if p == 0 || p >= NumProblems {
		p = ProblemUnreadable
	}
	b := &s.Bad[p]
	b.Rows++
	if b.First == nil {
		b.First = err
	}
}

// merge adds the counts of o (another part of a dataset) to s.
func (s *ReadStats) merge(o ReadStats) {
	s.Rows += o.Rows
	s.Skipped += o.Skipped
	if s.FirstSkip == nil {
		s.FirstSkip = o.FirstSkip
	}
	s.Truncated = s.Truncated || o.Truncated
	for p := range o.Bad {
		s.Bad[p].Rows += o.Bad[p].Rows
		if s.Bad[p].First == nil {
			s.Bad[p].First = o.Bad[p].First
		}
	}
}

// OutOfOrder is how many rows arrived before the row above them.
func (s *ReadStats) OutOfOrder() int64 { return s.Bad[ProblemOutOfOrder].Rows }

// SkipNote says which rows of the file name were skipped and why, in the
// words every command uses ("" when none was): the count, each Problem
// with its count and its first row (file:line and what was wrong, never
// the row's content). For example:
//
//	trace.jsonl: skipped 2 bad rows: 1 negative (first trace.jsonl:12: negative: input_tokens -5), 1 not an integer (first trace.jsonl:40: not an integer: output_tokens 1.5)
func (s *ReadStats) SkipNote(name string) string {
	if s.Skipped == 0 {
		return ""
	}
	var parts []string
	for p := ProblemUnreadable; p < NumProblems; p++ {
		b := &s.Bad[p]
		if p == ProblemOutOfOrder || p == ProblemTruncated || b.Rows == 0 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%d %s (first %v)", b.Rows, p, b.First))
	}
	if len(parts) == 0 && s.FirstSkip != nil { // a Reader that does not sort its skips by Problem
		parts = append(parts, fmt.Sprintf("first %v", s.FirstSkip))
	}
	return fmt.Sprintf("%s: skipped %d bad %s: %s", displayName(name), s.Skipped, plural(s.Skipped, "row", "rows"), strings.Join(parts, ", "))
}

// OrderNote says how many rows of the file name arrived before the row
// above them, and the first ("" when none did). The rows were kept; the
// command adds what it does with them.
func (s *ReadStats) OrderNote(name string) string {
	b := &s.Bad[ProblemOutOfOrder]
	if b.Rows == 0 {
		return ""
	}
	return fmt.Sprintf("%s: %d %s out of arrival order (first %v)", displayName(name), b.Rows, plural(b.Rows, "row", "rows"), b.First)
}

func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
