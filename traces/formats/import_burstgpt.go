package formats

import (
	"fmt"
	"io"
	"strings"

	"github.com/tokentrace/tokentrace/traces"
)

// BurstGPTFailedError is Record.Error of a BurstGPT row that failed in the
// source service (0 response tokens).
const BurstGPTFailedError = "failed in the source trace (0 response tokens)"

// NewBurstGPTReader reads a BurstGPT trace (HPMLL/BurstGPT, Azure OpenAI
// GPT-3.5/GPT-4 usage): CSV with the columns Timestamp, Model, Request
// tokens, Response tokens, Total tokens and Log Type, plus Session ID and
// Elapsed time in the v3 files (BurstGPT_3*.csv, where they sit at positions
// 2 and 3). Columns are found by name, so either layout works; Timestamp,
// Request tokens and Response tokens are required.
//
// Rows map to Records as:
//   - ArrivalNs: Timestamp (seconds, integer or decimal) minus the first
//     row's, exact to the nanosecond; a row earlier than the first is
//     malformed (the files are sorted).
//   - InputTokens, OutputTokens: Request tokens, Response tokens. Total
//     tokens is ignored.
//   - Model: Model as written ("ChatGPT", "GPT-4").
//   - Class: Log Type, "Conversation log" → "conversation", "API log" →
//     "api" (other values: lower case, " log" dropped, spaces as "_").
//   - Session, Turn (v3): a non-empty Session ID becomes a session number
//     from 1 in order of first appearance and Turn counts that session's rows
//     from 1; the UUID itself is not kept. Rows without one (API log) have
//     session 0, turn 0.
//
// BurstGPT records what happened to each request, so every row carries the
// production outcome (Run "production", ScheduledNs = SentNs = ArrivalNs,
// ServerPromptTokens/ServerOutputTokens = the request/response tokens):
//   - Response tokens > 0: Status "ok"; in v3, LastTokenNs = ArrivalNs +
//     Elapsed time (and FinishNs the same), so E2E is the source's end-to-end latency (FirstTokenNs
//     stays NotReported: BurstGPT has no TTFT).
//   - Response tokens = 0: the request failed in the source service. The row
//     is kept (its arrival is real load) with OutputTokens 0, Status
//     "http_error" and Error BurstGPTFailedError, so consumers that want
//     only successful requests filter on Record.OK(). Replay ignores outcome
//     columns of its input. Their number is an import note.
//
// Total tokens (the sum of the two counts) is not kept, and neither is any
// column the layouts above do not name; both are import notes
// (ImportNotes).
func NewBurstGPTReader(r io.Reader, name string, o traces.OpenOptions) (traces.Reader, error) {
	c, err := newImportCSV(r, name, o)
	if err != nil {
		return nil, err
	}
	d := &burstgptDecoder{c: c, clock: importClock{col: "Timestamp"}, sessions: map[string]*burstgptSession{}}
	if d.ts, err = c.require("Timestamp"); err != nil {
		return nil, err
	}
	if d.lengths, err = c.requireLengths("Request tokens", "Response tokens"); err != nil {
		return nil, err
	}
	d.model = c.col("Model")
	d.logType = c.col("Log Type")
	d.session = c.col("Session ID")
	d.elapsed = c.col("Elapsed time")
	if other := droppedColumns(c, "Timestamp", "Request tokens", "Response tokens", "Model", "Log Type", "Session ID", "Elapsed time"); len(other) > 0 {
		d.tally.say(fmt.Sprintf("columns dropped (Total tokens is Request + Response tokens; tokentrace has no place for the others): %s", strings.Join(other, ", ")))
	}
	m := traces.NewMeta(importSource("burstgpt", name))
	if d.session >= 0 || d.elapsed >= 0 {
		m.Set("burstgpt_version", "3")
	}
	return newImportReader(r, d, m, o), nil
}

type burstgptSession struct {
	id    int64
	turns int32
}

type burstgptDecoder struct {
	c                      *importCSV
	ts, model, logType     int
	lengths                importLengths
	session, elapsed       int
	clock                  importClock
	sessions               map[string]*burstgptSession
	nextSession            int64
	lastModel, lastModelIn string // interned
	lastClass, lastClassIn string
	tally                  importTally
}

func (d *burstgptDecoder) notes() []traces.Text { return d.tally.notes() }

func (d *burstgptDecoder) next(rec *traces.Record) error {
	row, err := d.c.row()
	if err != nil {
		return err
	}
	name, line := d.c.name, d.c.line
	t, err := parseScaled(row[d.ts], 9)
	if err != nil {
		return importRowError(name, line, "Timestamp: %v", err)
	}
	if rec.InputTokens, rec.OutputTokens, err = d.lengths.parse(row); err != nil {
		return err
	}
	elapsed := int64(traces.NotReported)
	if d.elapsed >= 0 {
		if s := strings.TrimSpace(row[d.elapsed]); s != "" {
			if elapsed, err = parseScaled(s, 9); err != nil {
				return importRowError(name, line, "Elapsed time: %v", err)
			}
		}
	}
	if rec.ArrivalNs, err = d.clock.offset(d.c, t); err != nil {
		return err
	}
	if d.model >= 0 {
		if m := row[d.model]; m != d.lastModelIn {
			d.lastModelIn, d.lastModel = m, strings.TrimSpace(m)
		}
		rec.Model = d.lastModel
	}
	if d.logType >= 0 {
		if lt := row[d.logType]; lt != d.lastClassIn {
			d.lastClassIn, d.lastClass = lt, burstgptClass(lt)
		}
		rec.Class = d.lastClass
	}
	if d.session >= 0 {
		if id := strings.TrimSpace(row[d.session]); id != "" {
			s := d.sessions[id]
			if s == nil {
				d.nextSession++
				s = &burstgptSession{id: d.nextSession}
				d.sessions[id] = s
			}
			s.turns++
			rec.Session, rec.Turn = s.id, s.turns
		}
	}
	rec.Run = "production"
	rec.ScheduledNs, rec.SentNs = rec.ArrivalNs, rec.ArrivalNs
	rec.ServerPromptTokens, rec.ServerOutputTokens = rec.InputTokens, rec.OutputTokens
	if rec.OutputTokens > 0 {
		rec.Status = traces.StatusOK
		if elapsed >= 0 {
			rec.LastTokenNs = rec.ArrivalNs + elapsed
			rec.FinishNs = rec.LastTokenNs
		}
	} else {
		rec.Status = traces.StatusHTTPError
		rec.Error = BurstGPTFailedError
		d.tally.add("%d rows failed in the source (0 response tokens): kept as real load with status http_error and 0 output tokens (export %s drops them)", 1, traces.OptionRef("ExportOptions.OKOnly"))
	}
	return nil
}

// burstgptClass maps a Log Type to a traffic class.
func burstgptClass(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	switch s {
	case "conversation log":
		return "conversation"
	case "api log":
		return "api"
	}
	s = strings.TrimSuffix(s, " log")
	return strings.ReplaceAll(s, " ", "_")
}
