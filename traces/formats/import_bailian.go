package formats

import (
	"encoding/json"
	"io"
	"strconv"
	"strings"

	"github.com/tokentrace/tokentrace/internal/lines"
	"github.com/tokentrace/tokentrace/traces"
)

// BailianBlockSize is the number of tokens one Qwen-Bailian hash_ids entry
// stands for (the files are named *_blksz_16.jsonl; Meta.BlockSize of a
// Bailian import).
const BailianBlockSize = 16

// NewBailianReader reads an Alibaba Qwen-Bailian usage trace
// (alibaba-edu/qwen-bailian-usagetraces-anon, "KVCache Cache in the Wild",
// ATC'25: qwen_traceA/traceB/thinking/coder_blksz_16.jsonl): one JSON object
// per line with "chat_id" (an integer naming the request), "parent_chat_id"
// (the chat_id of the request this one continues; -1 for a root request),
// "timestamp" (seconds from the trace start, a decimal), "input_length",
// "output_length" (token counts), "type" (the request type: text, search,
// image, file, …), "turn" (the conversation turn, from 1) and "hash_ids"
// (salted SipHash-2-4 ids of 16-token blocks, remapped to integers). Other
// keys are ignored. chat_id, timestamp, input_length and output_length are
// required; a missing parent_chat_id reads as -1, a missing turn as the
// parent's turn + 1 (1 for a root).
//
// Rows map to Records as:
//   - ArrivalNs: timestamp × 10^9, exact to the nanosecond, kept as it is
//     (not re-based), like Mooncake's.
//   - InputTokens, OutputTokens; PrefixBlocks: hash_ids as published,
//     Meta.BlockSize BailianBlockSize.
//   - Session: a root request starts a session; a request whose
//     parent_chat_id names an earlier row joins that row's session and gets
//     ParentSeq = that row's Seq (the turn it continues). Sessions are
//     numbered from 1 in order of first appearance; the chat ids are not
//     kept. A request whose parent is not in the file (it arrived before the
//     sampled window, or the file is cut) starts a session of its own with no
//     ParentSeq: its context is in its hash_ids, its parent is not replayed.
//   - Turn: turn.
//   - Class: type as written (the request type is the category whose reuse
//     the paper finds predictable).
//
// There is no category or prefix_tokens (the block ids carry the reuse), and
// no finish time or think time: the trace has arrivals only, so a closed
// session replay estimates think time.
//
// A row is malformed when a required key is missing, a number is negative,
// fractional (chat ids, counts, turn) or of the wrong type, the line is not a
// JSON object, its chat_id repeats an earlier row's or its parent_chat_id is
// its own chat_id.
//
// The importer holds one entry per kept row (chat id → seq, session, turn:
// about 50 bytes), so that a later turn finds its parent; the traces have
// 10–173 thousand rows.
func NewBailianReader(r io.Reader, name string, o traces.OpenOptions) (traces.Reader, error) {
	sc := newLines(r, o)
	m := traces.NewMeta(importSource("bailian", name))
	m.BlockSize = BailianBlockSize
	d := &bailianDecoder{name: name, sc: sc, chats: map[int64]bailianChat{}}
	return newImportReader(r, d, m, o), nil
}

// bailianChat is what a later turn needs of its parent row.
type bailianChat struct {
	seq, session int64
	turn         int32
}

type bailianDecoder struct {
	name        string
	sc          *lines.Reader
	line        int64
	kept        int64 // rows returned so far: the next row's Seq
	sessions    int64
	chats       map[int64]bailianChat
	lastType    string // interned Class
	lastTypeRaw string
}

// bailianRow is one line. Pointers tell a missing key from a zero.
type bailianRow struct {
	ChatID       *json.Number `json:"chat_id"`
	ParentChatID *json.Number `json:"parent_chat_id"`
	Timestamp    *json.Number `json:"timestamp"`
	InputLength  *json.Number `json:"input_length"`
	OutputLength *json.Number `json:"output_length"`
	Type         *string      `json:"type"`
	Turn         *json.Number `json:"turn"`
	HashIDs      []int64      `json:"hash_ids"`
}

// bailianID parses a chat id: an integer, -1 allowed for a parent.
func bailianID(n json.Number) (int64, bool) {
	v, err := strconv.ParseInt(strings.TrimSpace(string(n)), 10, 64)
	return v, err == nil
}

func (d *bailianDecoder) next(rec *traces.Record) error {
	var row bailianRow
	if err := nextRow(d.sc, d.name, &d.line, &row, "numbers, a string type and a list of integer hash_ids"); err != nil {
		return err
	}
	if row.ChatID == nil {
		return importRowError(d.name, d.line, "no \"chat_id\"")
	}
	id, ok := bailianID(*row.ChatID)
	if !ok || id < 0 {
		return importRowError(d.name, d.line, "chat_id: not a non-negative integer")
	}
	parent := int64(-1)
	if row.ParentChatID != nil {
		if parent, ok = bailianID(*row.ParentChatID); !ok || parent < -1 {
			return importRowError(d.name, d.line, "parent_chat_id: not an integer ≥ -1")
		}
	}
	if parent == id {
		return importRowError(d.name, d.line, "parent_chat_id is the row's own chat_id")
	}
	if row.Timestamp == nil {
		return importRowError(d.name, d.line, "no \"timestamp\"")
	}
	ts, err := parseScaled(string(*row.Timestamp), 9)
	if err != nil {
		return importRowError(d.name, d.line, "timestamp: %v", err)
	}
	if row.InputLength == nil {
		return importRowError(d.name, d.line, "no \"input_length\"")
	}
	in, err := parseCount(string(*row.InputLength))
	if err != nil {
		return importRowError(d.name, d.line, "input_length: %v", err)
	}
	if row.OutputLength == nil {
		return importRowError(d.name, d.line, "no \"output_length\"")
	}
	out, err := parseCount(string(*row.OutputLength))
	if err != nil {
		return importRowError(d.name, d.line, "output_length: %v", err)
	}
	turn := int32(-1)
	if row.Turn != nil {
		if turn, err = parseCount(string(*row.Turn)); err != nil {
			return importRowError(d.name, d.line, "turn: %v", err)
		}
	}
	if _, dup := d.chats[id]; dup {
		return importRowError(d.name, d.line, "chat_id repeats an earlier row's")
	}

	p, hasParent := d.chats[parent]
	if parent < 0 {
		hasParent = false
	}
	c := bailianChat{seq: d.kept}
	if hasParent {
		c.session = p.session
		rec.ParentSeq = p.seq
	} else {
		d.sessions++
		c.session = d.sessions
	}
	if turn < 0 {
		turn = 1
		if hasParent {
			turn = p.turn + 1
		}
	}
	c.turn = turn
	d.chats[id] = c
	d.kept++

	rec.ArrivalNs = ts
	rec.InputTokens = in
	rec.OutputTokens = out
	rec.Session = c.session
	rec.Turn = turn
	if len(row.HashIDs) > 0 {
		rec.PrefixBlocks = row.HashIDs
	}
	if row.Type != nil {
		if *row.Type != d.lastTypeRaw {
			d.lastTypeRaw, d.lastType = *row.Type, strings.TrimSpace(*row.Type)
		}
		rec.Class = d.lastType
	}
	return nil
}
