package formats

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"strings"

	"github.com/tokentrace/tokentrace/internal/lines"
	"github.com/tokentrace/tokentrace/traces"
)

// SGLangTokenBlockSize is the tokens per prefix block the SGLang token-trace
// importer hashes (vLLM's default KV block size).
const SGLangTokenBlockSize = 16

// SGLangAgenticOutputTokens is the output length SGLang's bench_serving
// gives every turn of an agentic trace when its ShareGPT output-length option is not
// set (DEFAULT_AGENTIC_OUTPUT_LEN): the format has no per-turn output length.
const SGLangAgenticOutputTokens = 220

// NewSGLangTokenTraceReader reads the token-level trace of SGLang's
// bench_serving (--dataset-name token_trace; sgl-project/sglang
// python/sglang/benchmark/datasets/token_trace.py @ dfb5af1): one JSON
// object per line with "input_tokens" (the prompt's token ids),
// "output_tokens" (the reply's token ids) or "num_output_tokens", optionally
// "num_input_tokens" (overrides the ids' count) and "ts" (the arrival in
// milliseconds: bench_serving's get_request divides it by 1000). Other
// keys are ignored; a row without input ids or an output length is
// malformed (bench_serving skips it too).
//
// Rows map to Records as: InputTokens = num_input_tokens or the number of
// input ids; OutputTokens = num_output_tokens or the number of output ids;
// ArrivalNs = ts × 10^6, exact, kept as it is (not re-based; 0 without ts).
// The token ids themselves are not kept (tokentrace stores no content):
// PrefixBlocks are chained digests of each SGLangTokenBlockSize-token block
// of the input ids (a block's id names it and every block before it, the
// Mooncake scheme), renumbered densely in order of first appearance, so two
// prompts sharing a prefix share its blocks' ids; Meta.BlockSize is
// SGLangTokenBlockSize. The importer holds one entry per distinct block.
func NewSGLangTokenTraceReader(r io.Reader, name string, o traces.OpenOptions) (traces.Reader, error) {
	sc := newLines(r, o)
	m := traces.NewMeta(importSource("sglang-tokens", name))
	m.BlockSize = SGLangTokenBlockSize
	d := &sglangTokenDecoder{name: name, sc: sc, ids: map[uint64]int64{}}
	return newImportReader(r, d, m, o), nil
}

type sglangTokenDecoder struct {
	name string
	sc   *lines.Reader
	line int64
	ids  map[uint64]int64 // chained block digest → dense id
	buf  [8]byte
}

type sglangTokenRow struct {
	InputTokens  []int64      `json:"input_tokens"`
	OutputTokens []int64      `json:"output_tokens"`
	NumInput     *json.Number `json:"num_input_tokens"`
	NumOutput    *json.Number `json:"num_output_tokens"`
	TS           *json.Number `json:"ts"`
}

func (d *sglangTokenDecoder) next(rec *traces.Record) error {
	var row sglangTokenRow
	err := nextRow(d.sc, d.name, &d.line, &row, "lists of integer token ids and numbers")
	if err != nil {
		return err
	}
	bad := func(format string, a ...any) error { return importRowError(d.name, d.line, format, a...) }
	if len(row.InputTokens) == 0 {
		return bad("no \"input_tokens\"")
	}
	if len(row.InputTokens) > 1<<31-1 || len(row.OutputTokens) > 1<<31-1 {
		return bad("too many token ids")
	}
	rec.InputTokens = int32(len(row.InputTokens))
	if row.NumInput != nil {
		if rec.InputTokens, err = parseCount(string(*row.NumInput)); err != nil {
			return bad("num_input_tokens: %v", err)
		}
	}
	switch {
	case row.NumOutput != nil:
		if rec.OutputTokens, err = parseCount(string(*row.NumOutput)); err != nil {
			return bad("num_output_tokens: %v", err)
		}
	case row.OutputTokens != nil:
		rec.OutputTokens = int32(len(row.OutputTokens))
	default:
		return bad("no \"output_tokens\" or \"num_output_tokens\"")
	}
	if row.TS != nil {
		if rec.ArrivalNs, err = parseScaled(string(*row.TS), 6); err != nil {
			return bad("ts: %v", err)
		}
	}
	// Chained block digests: FNV-1a over the previous block's digest and
	// this block's ids.
	var prev uint64
	blocks := make([]int64, 0, (len(row.InputTokens)+SGLangTokenBlockSize-1)/SGLangTokenBlockSize)
	for i := 0; i < len(row.InputTokens); i += SGLangTokenBlockSize {
		h := fnv.New64a()
		binary.LittleEndian.PutUint64(d.buf[:], prev)
		h.Write(d.buf[:])
		for _, t := range row.InputTokens[i:min(i+SGLangTokenBlockSize, len(row.InputTokens))] {
			binary.LittleEndian.PutUint64(d.buf[:], uint64(t))
			h.Write(d.buf[:])
		}
		prev = h.Sum64()
		id, ok := d.ids[prev]
		if !ok {
			id = int64(len(d.ids))
			d.ids[prev] = id
		}
		blocks = append(blocks, id)
	}
	rec.PrefixBlocks = blocks
	return nil
}

// NewSGLangAgenticReader reads the agentic trace of SGLang's bench_serving
// (--dataset-name agentic-trace; sgl-project/sglang
// python/sglang/benchmark/datasets/agentic_trace.py @ 3666ee9, e.g.
// OpenHands / SWE-smith traces): one JSON document
//
//	{"metadata": {...}, "conversations": [[turn, ...], ...]}
//
// where a turn is {"messages": [the turn's new non-assistant messages],
// "prompt_tokens": the whole prompt's length}. bench_serving replays each
// conversation turn by turn, feeding the server's real replies back into
// the history. Turns without messages are skipped (bench_serving does not
// send them); the document is read conversation by conversation, never
// whole.
//
// Every turn becomes a Record:
//   - Session: the conversation, numbered from 1; Turn: its place, from 1;
//     ParentSeq: the conversation's previous turn.
//   - InputTokens: prompt_tokens; without it, the previous turn's input and
//     output plus the new messages' text estimated at ChatBytesPerToken
//     bytes per token (counted in an import note).
//   - OutputTokens: the turn's "output_tokens" where tokentrace's export
//     wrote one (bench_serving ignores the key); else
//     SGLangAgenticOutputTokens, which bench_serving itself uses (noted).
//   - ArrivalNs: 0. The format has no times: every conversation starts at
//     once and each turn follows the previous reply without a pause, which
//     `replay --sessions closed` reproduces.
//
// A conversation is one row for strictness: a malformed turn (messages
// that are not chat messages, a negative or fractional count) skips the
// whole conversation, a *RowError at the line where it starts. Text that
// is not the document's JSON ends the import.
func NewSGLangAgenticReader(r io.Reader, name string, o traces.OpenOptions) (traces.Reader, error) {
	d := &sglangAgenticDecoder{name: name, f: newJSONFramer(r, o)}
	m := traces.NewMeta(importSource("sglang-agentic", name))
	return newImportReader(r, d, m, o), nil
}

type sglangAgenticTurn struct {
	Messages     []chatMessage `json:"messages"`
	PromptTokens *json.Number  `json:"prompt_tokens"`
	OutputTokens *json.Number  `json:"output_tokens"`
}

type sglangAgenticDecoder struct {
	name     string
	f        *jsonFramer // a conversation is one value: over the limit, a bad row
	state    int         // 0 = before the document, 1 = at the first conversation, 3 = after one, 2 = done
	queue    []traces.Record
	kept     int64
	sessions int64
	tally    importTally
}

func (d *sglangAgenticDecoder) notes() []traces.Text { return d.tally.notes() }

// broken ends the import with a malformed row at line: the rest of the
// document cannot be framed or is not an agentic trace.
func (d *sglangAgenticDecoder) broken(line int64, format string, a ...any) error {
	d.state = 2
	return importRowError(d.name, line, format, a...)
}

// frame frames the next value for open and next; a failure ends the import.
func (d *sglangAgenticDecoder) frame() (raw []byte, line, size int64, err error) {
	raw, line, size, err = d.f.value()
	switch {
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		return nil, 0, 0, d.broken(d.f.line, "the input ends inside the document")
	case err != nil:
		d.state = 2
		return nil, 0, 0, fmt.Errorf("read %s: %w", importDisplay(d.name), err)
	case raw != nil:
		if at, bad := syntaxLine(raw, line); bad {
			return nil, 0, 0, d.broken(at, "not a JSON document (the rest of the input is not read)")
		}
	}
	return raw, line, size, nil
}

// delim expects one of want (after white space) and takes it.
func (d *sglangAgenticDecoder) delim(want string) (byte, error) {
	c, err := d.f.peek()
	if err != nil {
		return 0, d.broken(d.f.line, "the input ends inside the document")
	}
	if !strings.ContainsRune(want, rune(c)) {
		return 0, d.broken(d.f.line, "not a JSON document (the rest of the input is not read)")
	}
	d.f.take()
	return c, nil
}

// open moves the decoder into the "conversations" array.
func (d *sglangAgenticDecoder) open() error {
	c, err := d.f.peek()
	if err == io.EOF {
		d.state = 2
		return io.EOF
	}
	if err != nil {
		return d.broken(d.f.line, "the input ends inside the document")
	}
	if c != '{' {
		return d.broken(d.f.line, "not a JSON object")
	}
	d.f.take()
	for first := true; ; first = false {
		if c, err := d.f.peek(); err == nil && c == '}' {
			return d.broken(d.f.line, "no \"conversations\"")
		}
		if !first {
			if _, err := d.delim(","); err != nil {
				return err
			}
		}
		raw, _, _, err := d.frame()
		if err != nil {
			return err
		}
		var key string
		if raw == nil || json.Unmarshal(raw, &key) != nil {
			return d.broken(d.f.line, "not a JSON document (the rest of the input is not read)")
		}
		if _, err := d.delim(":"); err != nil {
			return err
		}
		if key == "conversations" {
			if c, err := d.f.peek(); err != nil || c != '[' {
				return d.broken(d.f.line, "\"conversations\" is not a list")
			}
			d.f.take()
			d.state = 1
			return nil
		}
		if _, _, _, err := d.frame(); err != nil { // another key's value, unread
			return err
		}
	}
}

func (d *sglangAgenticDecoder) next(rec *traces.Record) error {
	for len(d.queue) == 0 {
		switch d.state {
		case 0:
			if err := d.open(); err != nil {
				return err
			}
			continue
		case 2:
			return io.EOF
		}
		c, err := d.f.peek()
		if err != nil {
			return d.broken(d.f.line, "the input ends inside the document")
		}
		if c == ']' {
			d.state = 2 // the rest of the document (metadata after the list) is not needed
			return io.EOF
		}
		if d.state == 3 { // after a conversation: a comma before the next
			if c != ',' {
				return d.broken(d.f.line, "not a JSON document (the rest of the input is not read)")
			}
			d.f.take()
		}
		d.state = 3
		raw, line, size, err := d.frame()
		if err != nil {
			return err
		}
		if raw == nil {
			return tooLongValue(d.name, line, size, d.f.max)
		}
		var conv []sglangAgenticTurn
		if err := json.Unmarshal(raw, &conv); err != nil {
			return importRowError(d.name, line, "a conversation is not a list of turns with chat messages and numbers")
		}
		if err := d.flatten(conv, line); err != nil {
			return err
		}
	}
	popRecord(&d.queue, rec)
	return nil
}

// flatten queues one conversation's turns, or returns its RowError.
func (d *sglangAgenticDecoder) flatten(conv []sglangAgenticTurn, line int64) error {
	bad := func(format string, a ...any) error { return importRowError(d.name, line, format, a...) }
	session := d.sessions + 1
	var recs []traces.Record
	var estimated, defaulted, skipped int64
	prevIn, prevOut := int64(0), int64(0)
	for _, t := range conv {
		if len(t.Messages) == 0 {
			skipped++
			continue
		}
		rec := traces.NewRecord()
		rec.Session = session
		rec.Turn = int32(len(recs) + 1)
		if len(recs) > 0 {
			rec.ParentSeq = d.kept + int64(len(recs)) - 1
		}
		if t.OutputTokens != nil {
			out, err := parseCount(string(*t.OutputTokens))
			if err != nil {
				return bad("output_tokens: %v", err)
			}
			rec.OutputTokens = out
		} else {
			rec.OutputTokens = SGLangAgenticOutputTokens
			defaulted++
		}
		if t.PromptTokens != nil {
			in, err := parseCount(string(*t.PromptTokens))
			if err != nil {
				return bad("prompt_tokens: %v", err)
			}
			rec.InputTokens = in
		} else {
			n, ok := chatMessagesTokens(t.Messages)
			if !ok {
				return bad("a message's content is neither text nor a list of parts")
			}
			if len(recs) > 0 {
				n += prevIn + prevOut
			}
			if n > 1<<31-1 {
				return bad("the estimated prompt is out of range")
			}
			rec.InputTokens = int32(n)
			estimated++
		}
		prevIn, prevOut = int64(rec.InputTokens), int64(rec.OutputTokens)
		recs = append(recs, rec)
	}
	if session >= 1<<31 {
		return bad("more than 2^31 conversations")
	}
	d.sessions = session
	d.kept += int64(len(recs))
	d.queue = append(d.queue, recs...)
	d.tally.add("%d turns had no prompt_tokens: their input was estimated from the message text at 4 bytes per token plus the context before it", estimated)
	d.tally.add("%d turns had no output length (the format has none): given SGLang's own default of 220 tokens", defaulted)
	d.tally.add("%d turns without messages were skipped (bench_serving does not send them)", skipped)
	if len(recs) > 0 {
		d.tally.sayText(traces.Textf("the format has no arrival or think times: every call arrives at 0 and follows its previous turn at once (replay with %s closed)", replaySessions))
	}
	return nil
}
