package formats

import (
	"bufio"
	"encoding/json"
	"io"
	"strings"
	"time"

	"github.com/tokentrace/tokentrace/internal/intern"
	"github.com/tokentrace/tokentrace/internal/lines"
	"github.com/tokentrace/tokentrace/traces"
)

// NewTraceLabReader reads the normalized round trace of SyFI TraceLab
// (uw-syfi/TraceLab: Claude Code and Codex sessions; schema in its README,
// "Data format", and artifacts/utils/DB_SCHEMA.md; released as
// syfi_coding_trace.jsonl.gz): one JSON object per line and LLM round, with
// "session_id", "round_index", "provider", "model", "input_tokens_total",
// "output_tokens" and "timing_events" (a list of {"event_type",
// "timestamp"}, ISO 8601 wall-clock times). Other keys (tools, cache
// splits, character counts) are ignored. session_id, input_tokens_total,
// output_tokens and at least one timed event are required.
//
// A round has no arrival or finish field; the importer infers them from its
// events, as TraceLab's own latency proxy does: the round was sent when its
// input was complete, at its latest "user_message" or "tool_result" event
// (its first event when it has neither), and finished at its latest other
// event ("reasoning", "text", "tool_call", "usage_report", …) at or after
// that; without one, the finish is NotReported.
//
// Rows map to Records as:
//   - Session: session_id, numbered from 1 in order of first appearance
//     (the id itself is not kept); Turn: round_index + 1 (the count of the
//     session's rows when absent).
//   - ArrivalNs, FinishNs: offsets from the session's first round's
//     arrival: every session starts at 0 (the dataset spans weeks of many
//     people's work; TraceLab's own simulator export also drops the
//     sessions' wall-clock placement). A round that arrives before its
//     session's first is malformed.
//   - ParentSeq: the session's previous row, so closed-session replay
//     derives think time (tool runs and human pauses) from the previous
//     finish.
//   - InputTokens: input_tokens_total; OutputTokens: output_tokens; Model;
//     Class: provider ("claude", "codex").
//
// No prefix blocks (the trace has the provider's cached-prefix counts, not
// block ids). The importer holds one small entry per session.
//
// A file that does not start with a JSON object is read as TraceLab's
// replay CSV instead (see newTraceLabCSVReader).
func NewTraceLabReader(r io.Reader, name string, o traces.OpenOptions) (traces.Reader, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	if tracelabIsCSV(br) {
		return newTraceLabCSVReader(r, br, name, o)
	}
	sc := newLines(br, o)
	m := traces.NewMeta(importSource("tracelab", name))
	d := &tracelabDecoder{name: name, sc: sc, sessions: map[string]*tracelabSession{}}
	return newImportReader(r, d, m, o), nil
}

type tracelabSession struct {
	num, baseNs, lastSeq int64
	rows                 int32
}

type tracelabDecoder struct {
	name     string
	sc       *lines.Reader
	line     int64
	kept     int64
	sessions map[string]*tracelabSession
	strs     intern.Strings // model and provider labels
}

type tracelabRow struct {
	SessionID    *string      `json:"session_id"`
	RoundIndex   *json.Number `json:"round_index"`
	Provider     string       `json:"provider"`
	Model        string       `json:"model"`
	InputTotal   *json.Number `json:"input_tokens_total"`
	OutputTokens *json.Number `json:"output_tokens"`
	Events       []struct {
		Type      string `json:"event_type"`
		Timestamp string `json:"timestamp"`
	} `json:"timing_events"`
}

func (d *tracelabDecoder) next(rec *traces.Record) error {
	var row tracelabRow
	if err := nextRow(d.sc, d.name, &d.line, &row, "a string session_id, numbers and a list of timing events"); err != nil {
		return err
	}
	bad := func(format string, a ...any) error { return importRowError(d.name, d.line, format, a...) }
	if row.SessionID == nil || *row.SessionID == "" {
		return bad("no \"session_id\"")
	}
	if row.InputTotal == nil {
		return bad("no \"input_tokens_total\"")
	}
	in, err := parseCount(string(*row.InputTotal))
	if err != nil {
		return bad("input_tokens_total: %v", err)
	}
	if row.OutputTokens == nil {
		return bad("no \"output_tokens\"")
	}
	out, err := parseCount(string(*row.OutputTokens))
	if err != nil {
		return bad("output_tokens: %v", err)
	}
	turn := int32(-1)
	if row.RoundIndex != nil {
		ri, err := parseCount(string(*row.RoundIndex))
		if err != nil || ri == 1<<31-1 {
			return bad("round_index: not an index")
		}
		turn = ri + 1
	}
	// Arrival: the latest input event (else the first event); finish: the
	// latest other event at or after it.
	var first, lastIn, lastOut int64
	var haveFirst, haveIn, haveOut bool
	type ev struct {
		ns    int64
		input bool
	}
	evs := make([]ev, 0, len(row.Events))
	for _, e := range row.Events {
		if e.Timestamp == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(e.Timestamp))
		if err != nil || t.Year() < 1970 || t.Year() > 2200 {
			return bad("a timing event's timestamp is not an ISO 8601 time between 1970 and 2200")
		}
		ns := t.UnixNano()
		input := e.Type == "user_message" || e.Type == "tool_result"
		evs = append(evs, ev{ns, input})
		if !haveFirst || ns < first {
			first, haveFirst = ns, true
		}
		if input && (!haveIn || ns > lastIn) {
			lastIn, haveIn = ns, true
		}
	}
	if !haveFirst {
		return bad("no timed \"timing_events\"")
	}
	arrival := first
	if haveIn {
		arrival = lastIn
	}
	for _, e := range evs {
		if !e.input && e.ns >= arrival && (!haveOut || e.ns > lastOut) {
			lastOut, haveOut = e.ns, true
		}
	}
	s := d.sessions[*row.SessionID]
	if s == nil {
		s = &tracelabSession{num: int64(len(d.sessions)) + 1, baseNs: arrival, lastSeq: traces.NotReported}
	} else if arrival < s.baseNs {
		return bad("the round arrives before its session's first round")
	}
	if turn < 0 {
		turn = s.rows + 1
	}
	rec.ArrivalNs = arrival - s.baseNs
	if haveOut {
		rec.FinishNs = lastOut - s.baseNs
	}
	rec.Session = s.num
	rec.Turn = turn
	rec.ParentSeq = s.lastSeq
	rec.InputTokens = in
	rec.OutputTokens = out
	rec.Model = d.strs.Of(row.Model)
	rec.Class = d.strs.Of(row.Provider)
	d.sessions[*row.SessionID] = s
	s.rows++
	s.lastSeq = d.kept
	d.kept++
	return nil
}
