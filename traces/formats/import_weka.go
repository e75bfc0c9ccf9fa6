package formats

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/tokentrace/tokentrace/traces"
)

// WekaDefaultBlockSize is the block size of a WEKA agentic trace that does
// not give one (kv-cache-tester's default, 64 tokens).
const WekaDefaultBlockSize = 64

// wekaMaxDepth bounds how deeply subagents may nest.
const wekaMaxDepth = 32

// NewWekaReader reads agentic coding traces in the format of WEKA's
// kv-cache-tester (callanjfox/kv-cache-tester, traces/trace_NNNN.json,
// documented in docs/trace_replay_tester.md; Claude Code sessions captured
// through a proxy): a stream of JSON documents, one per conversation,
// separated by any whitespace or none (`cat traces/*.json` works). Each
// document has "block_size" (tokens per hash id, default 64),
// "hash_id_scope" ("local" or absent: ids are the conversation's own;
// "global": shared across conversations) and "requests", an array of
// calls: {"t" (seconds from the conversation start), "in", "out" (token
// counts), "hash_ids", "model", "api_time" (seconds the call took),
// "think_time" (seconds between the previous call's end and this one)} or
// a subagent {"type": "subagent", "t" (its start), "requests": [calls and
// subagents, their "t" from the subagent's start]}. Other keys are ignored.
//
// Every call becomes a Record:
//   - Session: the conversation, numbered from 1 in file order; Turn: the
//     call's place in its conversation (document order, from 1).
//   - ArrivalNs: the conversation's start (every conversation starts at 0:
//     the traces carry no wall-clock time) + the enclosing subagents' t + t.
//   - InputTokens, OutputTokens, Model.
//   - PrefixBlocks: hash_ids; with local scope conversation × 2^32 + id, so
//     that two conversations share no block by accident (local ids must lie
//     in [0, 2^32)). Meta.BlockSize is the first conversation's block_size.
//   - ParentSeq: the previous call of the same agent; for a subagent's first
//     call, the call of the spawning agent just before the subagent entry.
//   - FinishNs: ArrivalNs + api_time, when given.
//   - ThinkNs: think_time, when given, except on a subagent's first call
//     (there it counts from the subagent's start, so replay derives it from
//     the spawning call's finish).
//   - SystemTokens, ToolTokens: the conversation's (or, in a subagent, the
//     subagent entry's) system_tokens and tool_tokens, the warm prefix
//     kv-cache-tester builds; InputKinds: input_types joined by "+"
//     ("tool_result": the prompt sends a tool's result). Stop reasons,
//     output_types and subagent ids are counted in a note, not kept.
//
// No join is drawn: the recorded parents go on before their subagents end
// (the reference replayer waits for them; that is its choice, not the
// recording's). A conversation's calls come out in arrival order (its
// subagents interleave with the parent), so seqs follow arrival within a
// conversation.
//
// A conversation is read whole (the importer holds one at a time) and is
// one row for strictness: if any of its calls is malformed (a missing or
// negative count or time, a fractional count, a local id out of range, a
// call arriving before the call it follows, nesting deeper than 32) or its
// block_size differs from the first conversation's, the whole conversation
// is a *RowError at the line where it starts and is skipped. Text that is
// not JSON ends the stream (one malformed row): the rest cannot be framed.
func NewWekaReader(r io.Reader, name string, o traces.OpenOptions) (traces.Reader, error) {
	d := &wekaDecoder{name: name, docs: newJSONDocs(r, name, o)}
	m := traces.NewMeta(importSource("weka", name))
	m.BlockSize = WekaDefaultBlockSize
	// The block size comes from the first conversation: read it now.
	d.first = d.read()
	if d.first.err == nil && d.first.doc != nil && d.first.doc.BlockSize != nil {
		if bs, err := parseCount(string(*d.first.doc.BlockSize)); err == nil && bs > 0 {
			m.BlockSize = int(bs)
		}
	}
	d.blockSize = m.BlockSize
	d.havePending = true
	return newImportReader(r, d, m, o), nil
}

// popRecord moves the first record of a decoder's queue into rec and lets
// the queue's copy go.
func popRecord(queue *[]traces.Record, rec *traces.Record) {
	*rec = (*queue)[0]
	(*queue)[0] = traces.Record{}
	*queue = (*queue)[1:]
}

type wekaTrace struct {
	BlockSize   *json.Number `json:"block_size"`
	HashIDScope string       `json:"hash_id_scope"`
	wekaPrefix
	Requests []wekaRequest `json:"requests"`
}

// wekaPrefix is a conversation's or subagent's warm prefix: the tokens of
// its tool definitions and system prompt.
type wekaPrefix struct {
	ToolTokens   *json.Number `json:"tool_tokens"`
	SystemTokens *json.Number `json:"system_tokens"`
}

type wekaRequest struct {
	T         *json.Number  `json:"t"`
	Type      string        `json:"type"`
	Model     string        `json:"model"`
	In        *json.Number  `json:"in"`
	Out       *json.Number  `json:"out"`
	HashIDs   []int64       `json:"hash_ids"`
	APITime   *json.Number  `json:"api_time"`
	ThinkTime *json.Number  `json:"think_time"`
	Requests  []wekaRequest `json:"requests"`
	wekaPrefix
	InputTypes   []string        `json:"input_types"`
	Stop         string          `json:"stop"`
	OutputTypes  json.RawMessage `json:"output_types"`
	AgentID      string          `json:"agent_id"`
	SubagentType string          `json:"subagent_type"`
}

// wekaDoc is one decoded conversation and the line it starts on.
type wekaDoc struct {
	doc  *wekaTrace
	line int64
	err  error // a *RowError (bad document) or the stream's end or failure
}

type wekaDecoder struct {
	name        string
	docs        *jsonDocs
	blockSize   int
	first       wekaDoc
	havePending bool
	queue       []traces.Record
	kept        int64 // seqs handed out so far
	sessions    int64
	tally       importTally
}

func (d *wekaDecoder) notes() []traces.Text { return d.tally.notes() }

// tokens reads the prefix's counts (0 when absent).
func (p *wekaPrefix) tokens() (system, tool int32, err error) {
	if p.SystemTokens != nil {
		if system, err = parseCount(string(*p.SystemTokens)); err != nil {
			return 0, 0, fmt.Errorf("system_tokens: %w", err)
		}
	}
	if p.ToolTokens != nil {
		if tool, err = parseCount(string(*p.ToolTokens)); err != nil {
			return 0, 0, fmt.Errorf("tool_tokens: %w", err)
		}
	}
	return system, tool, nil
}

// read decodes the next document.
func (d *wekaDecoder) read() wekaDoc {
	raw, line, err := d.docs.next()
	if err != nil {
		return wekaDoc{err: err}
	}
	if len(raw) == 0 || raw[0] != '{' {
		return wekaDoc{line: line, err: importRowError(d.name, line, "not a JSON object")}
	}
	var t wekaTrace
	if err := json.Unmarshal(raw, &t); err != nil {
		return wekaDoc{line: line, err: importRowError(d.name, line, "a field has the wrong type (want numbers, strings and lists of integer hash_ids)")}
	}
	return wekaDoc{doc: &t, line: line}
}

func (d *wekaDecoder) next(rec *traces.Record) error {
	for len(d.queue) == 0 {
		var doc wekaDoc
		if d.havePending {
			doc, d.havePending = d.first, false
			d.first = wekaDoc{}
		} else {
			doc = d.read()
		}
		if doc.err != nil {
			return doc.err
		}
		if err := d.flatten(doc); err != nil {
			return err
		}
	}
	popRecord(&d.queue, rec)
	return nil
}

// wekaBlocks returns a call's prefix blocks: its hash ids, made the
// conversation's own (session × 2^32 + id) when their scope is local.
func wekaBlocks(hashIDs []int64, session int64, local bool) ([]int64, error) {
	if len(hashIDs) == 0 || !local {
		if len(hashIDs) == 0 {
			return nil, nil
		}
		return hashIDs, nil
	}
	ids := make([]int64, len(hashIDs))
	for j, id := range hashIDs {
		if id < 0 || id >= 1<<32 {
			return nil, errors.New("a local hash id is outside [0, 2^32)")
		}
		ids[j] = session<<32 | id
	}
	return ids, nil
}

// wekaCall is a flattened call before seqs are final.
type wekaCall struct {
	rec    traces.Record
	parent int // index into the calls, -1 = none
}

// flatten turns one conversation into queued Records, or a RowError.
func (d *wekaDecoder) flatten(doc wekaDoc) error {
	t := doc.doc
	bad := func(format string, a ...any) error {
		return importRowError(d.name, doc.line, format, a...)
	}
	if t.BlockSize != nil {
		bs, err := parseCount(string(*t.BlockSize))
		if err != nil || int(bs) != d.blockSize {
			return bad("block_size differs from the first conversation's (%d)", d.blockSize)
		}
	}
	local := t.HashIDScope != "global"
	session := d.sessions + 1
	var calls []wekaCall
	var walk func(reqs []wekaRequest, pre *wekaPrefix, baseNs int64, spawner int, sub bool, depth int) error
	walk = func(reqs []wekaRequest, pre *wekaPrefix, baseNs int64, spawner int, sub bool, depth int) error {
		if depth > wekaMaxDepth {
			return bad("subagents nested deeper than %d", wekaMaxDepth)
		}
		system, tool, err := pre.tokens()
		if err != nil {
			return bad("%v", err)
		}
		prev, first := spawner, true
		for i := range reqs {
			q := &reqs[i]
			if q.T == nil {
				return bad("a call has no \"t\"")
			}
			tNs, err := parseScaled(string(*q.T), 9)
			if err != nil {
				return bad("t: %v", err)
			}
			at := baseNs + tNs
			if q.Type == "subagent" {
				if q.AgentID != "" || q.SubagentType != "" {
					d.tally.add("%d subagents' agent_id and subagent_type were not kept (a subagent is the calls it made)", 1)
				}
				if err := walk(q.Requests, &q.wekaPrefix, at, prev, true, depth+1); err != nil {
					return err
				}
				continue
			}
			rec := traces.NewRecord()
			rec.ArrivalNs = at
			rec.Session = session
			rec.Model = q.Model
			rec.SystemTokens, rec.ToolTokens = system, tool
			rec.InputKinds = strings.Join(q.InputTypes, "+")
			if q.Stop != "" || len(q.OutputTypes) > 0 {
				d.tally.add("%d calls' stop reason and output_types were not kept (the output length is)", 1)
			}
			if q.In == nil || q.Out == nil {
				return bad("a call has no \"in\" or \"out\"")
			}
			if rec.InputTokens, err = parseCount(string(*q.In)); err != nil {
				return bad("in: %v", err)
			}
			if rec.OutputTokens, err = parseCount(string(*q.Out)); err != nil {
				return bad("out: %v", err)
			}
			if q.APITime != nil {
				api, err := parseScaled(string(*q.APITime), 9)
				if err != nil {
					return bad("api_time: %v", err)
				}
				rec.FinishNs = at + api
			}
			if q.ThinkTime != nil && !(sub && first) {
				if rec.ThinkNs, err = parseScaled(string(*q.ThinkTime), 9); err != nil {
					return bad("think_time: %v", err)
				}
			}
			if rec.PrefixBlocks, err = wekaBlocks(q.HashIDs, session, local); err != nil {
				return bad("%v", err)
			}
			if prev >= 0 && calls[prev].rec.ArrivalNs > at {
				return bad("a call arrives before the call it follows")
			}
			calls = append(calls, wekaCall{rec: rec, parent: prev})
			prev, first = len(calls)-1, false
		}
		return nil
	}
	if err := walk(t.Requests, &t.wekaPrefix, 0, -1, false, 0); err != nil {
		return err
	}
	if session >= 1<<31 {
		return bad("more than 2^31 conversations")
	}
	d.sessions = session
	// Arrival order within the conversation; a call never precedes its
	// parent, and ties keep document order.
	order := make([]int, len(calls))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return calls[order[a]].rec.ArrivalNs < calls[order[b]].rec.ArrivalNs })
	seqOf := make([]int64, len(calls))
	for pos, i := range order {
		seqOf[i] = d.kept + int64(pos)
	}
	for _, i := range order {
		c := &calls[i]
		c.rec.Turn = int32(i + 1)
		if c.parent >= 0 {
			c.rec.ParentSeq = seqOf[c.parent]
		}
		d.queue = append(d.queue, c.rec)
	}
	d.kept += int64(len(calls))
	return nil
}
