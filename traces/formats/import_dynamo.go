package formats

import (
	"encoding/json"
	"io"
	"math"
	"sort"
	"strconv"

	"github.com/tokentrace/tokentrace/internal/intern"
	"github.com/tokentrace/tokentrace/traces"
)

// DynamoTraceSchema is the schema tag of Dynamo's request trace records.
const DynamoTraceSchema = "dynamo.request.trace.v1"

// NewDynamoReader reads the request trace that NVIDIA Dynamo's frontend
// writes (DYN_REQUEST_TRACE; schema in ai-dynamo/dynamo
// lib/llm/src/request_trace/types.rs @ 0366e63, agent context in
// lib/llm/src/protocols/common/extensions.rs): JSON lines, each a record
// {"schema": "dynamo.request.trace.v1", "event_type", "event_time_unix_ms",
// "agent_context": {"session_id", "parent_session_id"}, "request": {...}}
// or the file sinks' envelope {"timestamp", "event": record}. Segmented
// captures (trace.000000.jsonl.gz, ...) read as one file once concatenated
// (`zcat trace.*.jsonl.gz | tokentrace import --format dynamo -`).
//
// Each "request_end" record becomes a Record; tool events and payload
// records are counted in an import note, never read for content. From its
// "request" object:
//   - ArrivalNs: request_received_ms (else event_time_unix_ms −
//     total_time_ms), as an offset from the earliest arrival in the file.
//   - InputTokens: input_tokens, else replay.input_length; OutputTokens:
//     output_tokens; Model: model.
//   - PrefixBlocks: replay.input_sequence_hashes (the 64-bit sequence
//     hashes, each bit pattern kept as an int64); Meta.BlockSize:
//     replay.trace_block_size of the first record that has one (a record
//     with another block size keeps no blocks, counted in a note).
//   - Session: the agent tree: a session_id and every session whose
//     parent_session_id chain leads to it share one number, in order of
//     first arrival. Turn: the call's place in its own agent session.
//     ParentSeq: the same agent session's previous call; a subagent
//     session's first call: its parent session's latest call that arrived
//     before it (the one that spawned it). No joins are drawn (the trace
//     records none). Records without agent_context are single calls.
//   - FinishNs: the arrival + total_time_ms (else event_time_unix_ms).
//   - The production outcome, as Dynamo measured it: Run "production",
//     Status ok, ScheduledNs = SentNs = ArrivalNs, FirstTokenNs = + ttft_ms,
//     LastTokenNs = FinishNs, ServerPromptTokens, ServerOutputTokens,
//     ServerCachedTokens = input, output and cached_tokens,
//     ServerQueueNs = prefill_wait_time_ms, ServerPrefillNs =
//     prefill_time_ms. Request ids, worker ids, KV hit rates and finish
//     reasons are not kept.
//
// Records are written in the order requests end; the importer reads the
// whole input when it is opened and holds every kept row (about 200 bytes
// plus 8 per block) to order them by arrival and link sessions, and hands
// them out in arrival order. Malformed lines are reported before any row
// (strict mode fails without a row). A record whose
// request_id repeats an earlier one is a duplicate (a retried upload) and
// is skipped with a note.
//
// A line is malformed when it is not a JSON object, or a request_end
// record has no "request", no arrival time, or a missing or negative count.
func NewDynamoReader(r io.Reader, name string, o traces.OpenOptions) (traces.Reader, error) {
	m := traces.NewMeta(importSource("dynamo", name))
	d := &dynamoDecoder{name: name, meta: &m, seen: map[string]bool{}}
	d.errs = readObjectLines(r, o, name, &d.line, d.parse)
	d.order()
	return newImportReader(r, d, m, o), nil
}

type dynamoRecord struct {
	Schema       string          `json:"schema"`
	EventType    string          `json:"event_type"`
	EventTimeMs  *json.Number    `json:"event_time_unix_ms"`
	AgentContext *dynamoAgentCtx `json:"agent_context"`
	Request      *dynamoRequest  `json:"request"`
	Event        *dynamoRecord   `json:"event"` // the file sinks' envelope
}

type dynamoAgentCtx struct {
	SessionID       string `json:"session_id"`
	ParentSessionID string `json:"parent_session_id"`
}

type dynamoRequest struct {
	RequestID     string       `json:"request_id"`
	Model         string       `json:"model"`
	InputTokens   *json.Number `json:"input_tokens"`
	OutputTokens  *json.Number `json:"output_tokens"`
	CachedTokens  *json.Number `json:"cached_tokens"`
	ReceivedMs    *json.Number `json:"request_received_ms"`
	PrefillWaitMs *json.Number `json:"prefill_wait_time_ms"`
	PrefillMs     *json.Number `json:"prefill_time_ms"`
	TTFTMs        *json.Number `json:"ttft_ms"`
	TotalMs       *json.Number `json:"total_time_ms"`
	Replay        *struct {
		BlockSize   *json.Number  `json:"trace_block_size"`
		InputLength *json.Number  `json:"input_length"`
		Hashes      []json.Number `json:"input_sequence_hashes"`
	} `json:"replay"`
}

// dynamoRow is a kept call before ordering.
type dynamoRow struct {
	rec             traces.Record // times absolute (ns since the epoch) until emitted
	session, parent string
	order           int64 // file order, for ties
}

type dynamoDecoder struct {
	heldRows[dynamoRow]
	name   string
	line   int64
	meta   *traces.Meta
	seen   map[string]bool
	models intern.Strings
	tally  importTally
}

func (d *dynamoDecoder) notes() []traces.Text { return d.tally.notes() }

func (d *dynamoDecoder) next(rec *traces.Record) error {
	row, err := d.take()
	if err == nil {
		*rec = row.rec
	}
	return err
}

// ms parses a millisecond value into nanoseconds.
func dynamoMs(n *json.Number) (int64, bool, error) {
	if n == nil {
		return 0, false, nil
	}
	v, err := parseScaled(string(*n), 6)
	return v, true, err
}

func (d *dynamoDecoder) parse(line []byte) error {
	bad := func(format string, a ...any) error { return importRowError(d.name, d.line, format, a...) }
	var rec dynamoRecord
	if err := unmarshalRow(d.name, d.line, line, &rec, "a Dynamo request trace record"); err != nil {
		return err
	}
	if rec.Schema == "" && rec.Event != nil {
		rec = *rec.Event
	}
	if rec.Schema != "" && rec.Schema != DynamoTraceSchema {
		return bad("schema is not %s", DynamoTraceSchema)
	}
	if rec.EventType != "request_end" {
		switch {
		case rec.EventType == "request_payload":
			d.tally.add("%d request_payload records were skipped (they hold prompt content, which tokentrace never keeps)", 1)
		case rec.Schema == "" && rec.EventType == "":
			d.tally.add("%d lines were not trace records (uploader or control markers) and were skipped", 1)
		default:
			d.tally.add("%d tool and other non-request events were skipped (tool time shows as the gap before the next call)", 1)
		}
		return d.skipRow()
	}
	q := rec.Request
	if q == nil {
		return bad("a request_end record has no \"request\"")
	}
	if q.RequestID != "" {
		if d.seen[q.RequestID] {
			d.tally.add("%d duplicate request_end records (same request_id) were skipped", 1)
			return d.skipRow()
		}
		d.seen[q.RequestID] = true
	}
	r := traces.NewRecord()
	if err := dynamoCounts(q, &r, bad); err != nil {
		return err
	}
	if err := dynamoTimes(&rec, q, &r, bad); err != nil {
		return err
	}
	r.Model = d.models.Of(q.Model)
	r.Run = "production"
	r.Status = traces.StatusOK
	r.ServerPromptTokens, r.ServerOutputTokens = r.InputTokens, r.OutputTokens
	if q.CachedTokens != nil {
		var err error
		if r.ServerCachedTokens, err = parseCount(string(*q.CachedTokens)); err != nil {
			return bad("cached_tokens: %v", err)
		}
	}
	if q.Replay != nil && len(q.Replay.Hashes) > 0 {
		if err := d.prefixBlocks(q, &r, bad); err != nil {
			return err
		}
	}
	row := dynamoRow{rec: r, order: int64(len(d.rows))}
	if rec.AgentContext != nil {
		row.session, row.parent = rec.AgentContext.SessionID, rec.AgentContext.ParentSessionID
	}
	d.rows = append(d.rows, row)
	return nil
}

// dynamoCounts reads a request's token counts into r.
func dynamoCounts(q *dynamoRequest, r *traces.Record, bad func(string, ...any) error) error {
	var err error
	switch {
	case q.InputTokens != nil:
		if r.InputTokens, err = parseCount(string(*q.InputTokens)); err != nil {
			return bad("input_tokens: %v", err)
		}
	case q.Replay != nil && q.Replay.InputLength != nil:
		if r.InputTokens, err = parseCount(string(*q.Replay.InputLength)); err != nil {
			return bad("replay.input_length: %v", err)
		}
	default:
		return bad("no input_tokens")
	}
	if q.OutputTokens == nil {
		return bad("no output_tokens")
	}
	if r.OutputTokens, err = parseCount(string(*q.OutputTokens)); err != nil {
		return bad("output_tokens: %v", err)
	}
	return nil
}

// dynamoTimes reads the times of request_end record rec (request q) into
// r, absolute: the arrival (request_received_ms, else the end less the
// total), the finish, the first token and the server's queue and prefill.
func dynamoTimes(rec *dynamoRecord, q *dynamoRequest, r *traces.Record, bad func(string, ...any) error) error {
	end, haveEnd, err := dynamoMs(rec.EventTimeMs)
	if err != nil {
		return bad("event_time_unix_ms: %v", err)
	}
	total, haveTotal, err := dynamoMs(q.TotalMs)
	if err != nil {
		return bad("total_time_ms: %v", err)
	}
	arrival, haveArrival, err := dynamoMs(q.ReceivedMs)
	if err != nil {
		return bad("request_received_ms: %v", err)
	}
	if !haveArrival {
		if !haveEnd || !haveTotal || total > end {
			return bad("no request_received_ms (nor event_time_unix_ms and total_time_ms)")
		}
		arrival = end - total
	}
	r.ArrivalNs = arrival
	switch {
	case haveTotal && total <= math.MaxInt64-arrival:
		r.FinishNs = arrival + total
	case haveEnd && end >= arrival:
		r.FinishNs = end
	}
	r.ScheduledNs, r.SentNs = arrival, arrival
	r.LastTokenNs = r.FinishNs
	if ttft, ok, err := dynamoMs(q.TTFTMs); err != nil {
		return bad("ttft_ms: %v", err)
	} else if ok && ttft <= math.MaxInt64-arrival {
		r.FirstTokenNs = arrival + ttft
	}
	if v, ok, err := dynamoMs(q.PrefillWaitMs); err != nil {
		return bad("prefill_wait_time_ms: %v", err)
	} else if ok {
		r.ServerQueueNs = v
	}
	if v, ok, err := dynamoMs(q.PrefillMs); err != nil {
		return bad("prefill_time_ms: %v", err)
	} else if ok {
		r.ServerPrefillNs = v
	}
	return nil
}

// prefixBlocks keeps a request's sequence hashes as r's prefix blocks when
// its block size is the first call's (which sets Meta.BlockSize).
func (d *dynamoDecoder) prefixBlocks(q *dynamoRequest, r *traces.Record, bad func(string, ...any) error) error {
	bs := int64(0)
	if q.Replay.BlockSize != nil {
		if v, err := parseCount(string(*q.Replay.BlockSize)); err == nil && v > 0 {
			bs = int64(v)
		}
	}
	if d.meta.BlockSize == 0 && bs > 0 {
		d.meta.BlockSize = int(bs)
	}
	if bs != int64(d.meta.BlockSize) {
		d.tally.add("%d calls with another trace_block_size than the first call's keep no prefix blocks", 1)
		return nil
	}
	blocks := make([]int64, len(q.Replay.Hashes))
	for i, h := range q.Replay.Hashes {
		u, err := strconv.ParseUint(string(h), 10, 64)
		if err != nil {
			return bad("replay.input_sequence_hashes: not 64-bit unsigned integers")
		}
		blocks[i] = int64(u)
	}
	r.PrefixBlocks = blocks
	return nil
}

// skipRow tells the caller to go on to the next line: a non-call line is
// neither a record nor malformed.
func (d *dynamoDecoder) skipRow() error { return nil }

// order sorts the kept calls by arrival, re-bases times on the earliest
// arrival, numbers sessions and links parents. Seqs are the sorted order.
func (d *dynamoDecoder) order() {
	rows := d.rows
	sort.SliceStable(rows, func(a, b int) bool {
		if rows[a].rec.ArrivalNs != rows[b].rec.ArrivalNs {
			return rows[a].rec.ArrivalNs < rows[b].rec.ArrivalNs
		}
		return rows[a].order < rows[b].order
	})
	if len(rows) == 0 {
		return
	}
	base := rows[0].rec.ArrivalNs
	rebase := func(v *int64) {
		if *v >= 0 {
			*v -= base
		}
	}
	// The root of each agent session's tree (parent chains, cycles cut).
	parentOf := map[string]string{}
	for _, r := range rows {
		if r.session != "" && r.parent != "" && r.parent != r.session {
			parentOf[r.session] = r.parent
		}
	}
	root := func(s string) string {
		for i := 0; i < 64; i++ {
			p, ok := parentOf[s]
			if !ok {
				break
			}
			s = p
		}
		return s
	}
	treeNum := map[string]int64{}
	type agentState struct {
		last  int64
		turns int32
	}
	agents := map[string]*agentState{}
	for i := range rows {
		r := &rows[i].rec
		seq := int64(i) // rows are handed out in this order, numbered from 0
		rebase(&r.ArrivalNs)
		rebase(&r.FinishNs)
		rebase(&r.ScheduledNs)
		rebase(&r.SentNs)
		rebase(&r.FirstTokenNs)
		rebase(&r.LastTokenNs)
		s := rows[i].session
		if s == "" {
			continue
		}
		tree := root(s)
		num, ok := treeNum[tree]
		if !ok {
			num = int64(len(treeNum)) + 1
			treeNum[tree] = num
		}
		r.Session = num
		a := agents[s]
		if a == nil {
			a = &agentState{last: traces.NotReported}
			agents[s] = a
			if p := rows[i].parent; p != "" {
				if pa := agents[p]; pa != nil {
					r.ParentSeq = pa.last // the spawning call: the parent's latest so far
				}
			}
		} else {
			r.ParentSeq = a.last
		}
		a.turns++
		r.Turn = a.turns
		a.last = seq
	}
}
