package formats

import (
	"encoding/json"
	"io"
	"strconv"

	"github.com/tokentrace/tokentrace/internal/lines"
	"github.com/tokentrace/tokentrace/traces"
)

// MooncakeBlockSize is the number of tokens one Mooncake hash_ids entry
// stands for (FAST'25 traces; Meta.BlockSize of a Mooncake import).
const MooncakeBlockSize = 512

// MooncakeCategoryPrefix starts the Category label the Mooncake importer
// derives from shared leading blocks: "prefix-<block id>".
const MooncakeCategoryPrefix = "prefix-"

// NewMooncakeReader reads a Mooncake (kvcache-ai FAST'25) JSONL trace: one
// object per line with "timestamp" (milliseconds from the trace start; an
// integer, a decimal or a numeric string), "input_length", "output_length"
// (token counts) and optionally "hash_ids" (prefix-chained ids of 512-token
// blocks). Other keys are ignored. Timestamps are kept as they are (not
// re-based), so an export gives back the same timestamps.
//
// Rows map to Records as: ArrivalNs = timestamp × 10^6 (exact),
// InputTokens, OutputTokens, PrefixBlocks = hash_ids; Meta.BlockSize is
// MooncakeBlockSize. Rows whose hash_ids are not ceil(input_length / 512)
// long (a file cut to another block size) are counted in a note.
//
// Prefix categories. A hash id names a block together with every block
// before it, so a run of leading ids that already appeared in earlier rows is
// a prompt prefix that those rows share. For each row the importer takes L,
// the number of leading hash_ids seen in any earlier row (Mooncake reuse is
// always a prefix). If L > 0 the row's Category is "prefix-<id of block L>"
// (the id that names the whole shared prefix) and PrefixTokens is
// min(L × 512, input_length); if L = 0 the row has no category. Two rows get
// the same category exactly when they reuse the same already-seen prefix.
// Categories are derived in one streaming pass and are not k-thresholded.
func NewMooncakeReader(r io.Reader, name string, o traces.OpenOptions) (traces.Reader, error) {
	sc := newLines(r, o)
	m := traces.NewMeta(importSource("mooncake", name))
	m.BlockSize = MooncakeBlockSize
	d := &mooncakeDecoder{name: name, sc: sc, seen: map[int64]struct{}{}}
	return newImportReader(r, d, m, o), nil
}

type mooncakeDecoder struct {
	name  string
	sc    *lines.Reader
	line  int64
	seen  map[int64]struct{} // ids outside the bitset's range
	bits  []uint64           // seen ids in [0, mooncakeBitsetMax)
	tally importTally
}

func (d *mooncakeDecoder) notes() []traces.Text { return d.tally.notes() }

// mooncakeBitsetMax bounds the ids tracked in a bitset (8 MiB at most);
// Mooncake ids are dense small integers, other ids go to a map.
const mooncakeBitsetMax = 1 << 26

func (d *mooncakeDecoder) isSeen(id int64) bool {
	if id >= 0 && id < mooncakeBitsetMax {
		w := int(id >> 6)
		return w < len(d.bits) && d.bits[w]&(1<<(uint(id)&63)) != 0
	}
	_, ok := d.seen[id]
	return ok
}

func (d *mooncakeDecoder) markSeen(id int64) {
	if id >= 0 && id < mooncakeBitsetMax {
		w := int(id >> 6)
		if w >= len(d.bits) {
			d.bits = append(d.bits, make([]uint64, w+1-len(d.bits)+len(d.bits)/2)...)
		}
		d.bits[w] |= 1 << (uint(id) & 63)
		return
	}
	d.seen[id] = struct{}{}
}

// mooncakeRow is one line. Pointers tell a missing key from a zero.
type mooncakeRow struct {
	Timestamp    *json.Number `json:"timestamp"`
	InputLength  *json.Number `json:"input_length"`
	OutputLength *json.Number `json:"output_length"`
	HashIDs      []int64      `json:"hash_ids"`
}

func (d *mooncakeDecoder) next(rec *traces.Record) error {
	line, err := nextObjectLine(d.sc, d.name, &d.line)
	if err != nil {
		return err
	}
	var row mooncakeFields
	if !mooncakeFast(line, &row) {
		var slow mooncakeRow
		if err := unmarshalRow(d.name, d.line, line, &slow, "numbers and a list of integer hash_ids"); err != nil {
			return err
		}
		row = slow.fields()
	}
	if row.ts == nil {
		return importRowError(d.name, d.line, "no \"timestamp\"")
	}
	ts, err := parseScaled(string(row.ts), 6)
	if err != nil {
		return importRowError(d.name, d.line, "timestamp: %v", err)
	}
	if row.in == nil {
		return importRowError(d.name, d.line, "no \"input_length\"")
	}
	in, err := parseCount(string(row.in))
	if err != nil {
		return importRowError(d.name, d.line, "input_length: %v", err)
	}
	if row.out == nil {
		return importRowError(d.name, d.line, "no \"output_length\"")
	}
	out, err := parseCount(string(row.out))
	if err != nil {
		return importRowError(d.name, d.line, "output_length: %v", err)
	}
	rec.ArrivalNs = ts
	rec.InputTokens = in
	rec.OutputTokens = out
	if len(row.ids) > 0 {
		rec.PrefixBlocks = row.ids
		// AIPerf and GuideLLM reject a row unless its last block holds 1 to
		// 512 tokens; a file cut to another block size says so here.
		if nb := (int64(in) + MooncakeBlockSize - 1) / MooncakeBlockSize; int64(len(row.ids)) != nb {
			d.tally.add("%d rows have hash_ids that are not ceil(input_length / 512) long: the file was cut to another block size than Mooncake's 512 tokens (AIPerf and GuideLLM reject such rows at their default); the blocks are kept as given, as 512-token blocks", 1)
		}
	}
	// Shared leading blocks, then remember this row's blocks.
	shared := 0
	for _, id := range row.ids {
		if !d.isSeen(id) {
			break
		}
		shared++
	}
	for _, id := range row.ids[shared:] {
		d.markSeen(id)
	}
	if shared > 0 {
		rec.Category = MooncakeCategoryPrefix + strconv.FormatInt(row.ids[shared-1], 10)
		pt := int64(shared) * MooncakeBlockSize
		if pt > int64(in) {
			pt = int64(in)
		}
		rec.PrefixTokens = int32(pt)
	}
	return nil
}

// mooncakeFields is a decoded line: the raw text of the three numbers (nil
// when absent) and the block ids.
type mooncakeFields struct {
	ts, in, out []byte
	ids         []int64
}

func (r *mooncakeRow) fields() mooncakeFields {
	var f mooncakeFields
	num := func(n *json.Number) []byte {
		if n == nil {
			return nil
		}
		return []byte(*n)
	}
	f.ts, f.in, f.out = num(r.Timestamp), num(r.InputLength), num(r.OutputLength)
	f.ids = r.HashIDs
	return f
}
