package formats

import (
	"encoding/json"
	"errors"
	"io"

	"github.com/tokentrace/tokentrace/internal/lines"
	"github.com/tokentrace/tokentrace/traces"
)

// NewAIPerfReader reads AIPerf's mooncake_trace JSONL with sessions
// (ai-dynamo/aiperf src/aiperf/dataset/loader/models.py MooncakeTrace @
// 0109a64; what the aiperf export writes): one object per line with
// "input_length", "output_length", "hash_ids" and optionally "timestamp"
// (ms), "session_id" and "delay" (ms to wait after the session's previous
// turn). Rows map as a Mooncake import does (ArrivalNs = timestamp × 10^6,
// PrefixBlocks = hash_ids, block size MooncakeBlockSize, AIPerf's default
// --isl-block-size), plus: Session numbered from 1 by session_id in order
// of first appearance, Turn its row count, ParentSeq the session's previous
// row, ThinkNs = delay. A later turn's InputTokens is what AIPerf sends in
// its default context mode (deltas_without_responses): the session's
// earlier input_lengths and replies (output_length each) plus its own, and
// its hash_ids (which cover only the added tokens) are not kept; a row
// with "context_mode": "message_array_with_responses" is its whole prompt.
// A row without a timestamp arrives with its session's
// previous row plus its delay (0 for a first row). Rows with "text_input",
// "messages" or "payload" instead of input_length are malformed here (their
// length is the server's to count). The importer holds one small entry per
// session.
func NewAIPerfReader(r io.Reader, name string, o traces.OpenOptions) (traces.Reader, error) {
	return newLineImport(r, name, o, "aiperf", 6, true, MooncakeBlockSize)
}

// NewVLLMReader reads the timed trace of `vllm bench serve --dataset-name
// timed_trace` as the vllm export writes it: JSONL {"timestamp" (s),
// "input_length", "output_length", "hash_ids"}; ArrivalNs = timestamp ×
// 10^9 (exact), PrefixBlocks = hash_ids with block size
// VLLMDefaultBlockSize (the file does not say its block size).
func NewVLLMReader(r io.Reader, name string, o traces.OpenOptions) (traces.Reader, error) {
	return newLineImport(r, name, o, "vllm", 9, false, VLLMDefaultBlockSize)
}

// NewGuideLLMReader reads GuideLLM's trace_synthetic JSONL as the guidellm
// export writes it: {"timestamp" (s), "input_length", "output_length",
// "hash_ids"}; ArrivalNs = (timestamp − the first row's) × 10^9 (exact:
// GuideLLM schedules each row from the first, so absolute seconds become
// offsets; a row before the first is malformed), PrefixBlocks = hash_ids
// with block size 512 (GuideLLM's mooncake default).
func NewGuideLLMReader(r io.Reader, name string, o traces.OpenOptions) (traces.Reader, error) {
	return newLineImport(r, name, o, "guidellm", 9, false, DefaultExportBlockSize)
}

func newLineImport(r io.Reader, name string, o traces.OpenOptions, format string, scale int, sessions bool, bs int) (traces.Reader, error) {
	sc := newLines(r, o)
	m := traces.NewMeta(importSource(format, name))
	m.BlockSize = bs
	d := &lineImportDecoder{name: name, sc: sc, scale: scale, sessions: sessions, seen: map[string]*lineImportSession{}, rebase: format == "guidellm"}
	return newImportReader(r, d, m, o), nil
}

type lineImportSession struct {
	num, last, arrival int64
	turns              int32
	sent, out          int64 // what AIPerf sent as the last turn's prompt, and its reply
}

type lineImportDecoder struct {
	name     string
	sc       *lines.Reader
	line     int64
	scale    int
	sessions bool
	seen     map[string]*lineImportSession
	kept     int64
	tally    importTally
	rebase   bool  // arrivals from the first row's timestamp
	first    int64 // the first row's timestamp (ns), once read
	haveOne  bool
}

func (d *lineImportDecoder) notes() []traces.Text { return d.tally.notes() }

type lineImportRow struct {
	Timestamp    *json.Number    `json:"timestamp"`
	InputLength  *json.Number    `json:"input_length"`
	OutputLength *json.Number    `json:"output_length"`
	HashIDs      []int64         `json:"hash_ids"`
	SessionID    *string         `json:"session_id"`
	Delay        *json.Number    `json:"delay"`
	ContextMode  string          `json:"context_mode"`
	TextInput    json.RawMessage `json:"text_input"`
	Messages     json.RawMessage `json:"messages"`
	Payload      json.RawMessage `json:"payload"`
}

func (d *lineImportDecoder) next(rec *traces.Record) error {
	var row lineImportRow
	err := nextRow(d.sc, d.name, &d.line, &row, "numbers, a string session_id and a list of integer hash_ids")
	if err != nil {
		return err
	}
	bad := func(format string, a ...any) error { return importRowError(d.name, d.line, format, a...) }
	if row.InputLength == nil {
		if row.TextInput != nil || row.Messages != nil || row.Payload != nil {
			return bad("a text, messages or payload row has no input_length (its length is the server's to count)")
		}
		return bad("no \"input_length\"")
	}
	if rec.InputTokens, err = parseCount(string(*row.InputLength)); err != nil {
		return bad("input_length: %v", err)
	}
	if row.OutputLength == nil {
		return bad("no \"output_length\"")
	}
	if rec.OutputTokens, err = parseCount(string(*row.OutputLength)); err != nil {
		return bad("output_length: %v", err)
	}
	haveTS := row.Timestamp != nil
	if haveTS {
		if rec.ArrivalNs, err = parseScaled(string(*row.Timestamp), d.scale); err != nil {
			return bad("timestamp: %v", err)
		}
		if d.rebase {
			if !d.haveOne {
				d.first, d.haveOne = rec.ArrivalNs, true
			}
			if rec.ArrivalNs -= d.first; rec.ArrivalNs < 0 {
				return bad("timestamp: before the first row's (GuideLLM schedules from the first row)")
			}
		}
	} else if !d.sessions {
		return bad("no \"timestamp\"")
	}
	if len(row.HashIDs) > 0 {
		rec.PrefixBlocks = row.HashIDs
	}
	if !d.sessions {
		return nil
	}
	delay := int64(traces.NotReported)
	if row.Delay != nil {
		if delay, err = parseScaled(string(*row.Delay), 6); err != nil {
			return bad("delay: %v", err)
		}
	}
	if row.SessionID == nil || *row.SessionID == "" {
		if !haveTS {
			return bad("no \"timestamp\" and no session to follow")
		}
		d.kept++
		return nil
	}
	s := d.seen[*row.SessionID]
	if s == nil {
		s = &lineImportSession{num: int64(len(d.seen)) + 1, last: traces.NotReported}
		d.seen[*row.SessionID] = s
	}
	if !haveTS {
		rec.ArrivalNs = s.arrival + max(delay, 0)
		if rec.ArrivalNs < s.arrival {
			return bad("delay: out of range")
		}
	}
	s.turns++
	rec.Session, rec.Turn, rec.ParentSeq = s.num, s.turns, s.last
	if s.last >= 0 {
		rec.ThinkNs = delay
		if row.ContextMode != "message_array_with_responses" {
			// AIPerf's default context mode, deltas_without_responses:
			// the turn is sent after the session's history and replies.
			whole := s.sent + s.out + int64(rec.InputTokens)
			if whole > 1<<31-1 {
				return bad("input_length: the session's accumulated prompt is out of range")
			}
			rec.InputTokens = int32(whole)
			rec.PrefixBlocks = nil
			d.tally.add("%d later turns read as AIPerf sends them: the session's earlier prompts and replies plus the row's input_length (its default context mode, deltas_without_responses); their hash_ids cover only the tokens they add and are not kept", 1)
		}
	}
	s.sent, s.out = int64(rec.InputTokens), int64(rec.OutputTokens)
	s.last, s.arrival = d.kept, rec.ArrivalNs
	d.kept++
	return nil
}

// nextRow reads the next row of a JSON-lines import into row: the next
// object line (nextObjectLine), decoded (unmarshalRow).
func nextRow(lr *lines.Reader, name string, line *int64, row any, want string) error {
	b, err := nextObjectLine(lr, name, line)
	if err != nil {
		return err
	}
	return unmarshalRow(name, *line, b, row, want)
}

// unmarshalRow decodes the JSON object b on line into row; a failure is
// the row's error: a field of the wrong type (want says what the format's
// fields hold), or not a JSON object.
func unmarshalRow(name string, line int64, b []byte, row any, want string) error {
	err := json.Unmarshal(b, row)
	if err == nil {
		return nil
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return importRowError(name, line, "a field has the wrong type (want %s)", want)
	}
	return importRowError(name, line, "not a JSON object")
}
