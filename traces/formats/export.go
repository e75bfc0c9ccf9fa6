package formats

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/tokentrace/tokentrace/internal/atomicfile"
	"github.com/tokentrace/tokentrace/internal/textsink"
	"github.com/tokentrace/tokentrace/traces"
)

// ExportFormat is one format Export writes: the registry behind Exporter,
// ExportFormats and `tokentrace export --help`.
type ExportFormat struct {
	// Name is the format's name (export --format).
	Name string
	// Doc says in a sentence or two what the output holds, for --help
	// (plain text, unwrapped; the options it names said by the caller).
	Doc traces.Text
	// New is the constructor.
	New ExportFunc
}

// exportFormats is the registry, sorted by name.
var exportFormats = []ExportFormat{
	{"aiperf", traces.Plain("AIPerf mooncake_trace JSONL {timestamp (ms), input_length, output_length, hash_ids, session_id, delay (ms)}: each agent chain is a session (subagents run side by side), a later turn's input_length the tokens it adds (AIPerf appends turns and replies to the history), delay its think time; joins are counted as lost"), NewAIPerfWriter},
	{"aiperf-dag", traces.Plain("AIPerf dag_jsonl (--custom-dataset-type dag_jsonl): a conversation per agent chain, subagents as spawns joined at join_at, think times as delay, filler messages of the right length; arrivals are lost (delays only)"), NewAIPerfDAGWriter},
	{"azure", traces.Plain("Azure CSV TIMESTAMP,ContextTokens,GeneratedTokens: inference-perf's trace_replay input (and TraceStorm's); arrivals to 100 ns"), NewAzureWriter},
	{"csv", traces.Plain("tokentrace CSV with the Parquet column names; .zst compresses"), func(w io.Writer, m traces.Meta, _ ExportOptions) (traces.Writer, error) {
		return traces.NewWriter(w, traces.FormatCSV, m, traces.DefaultCreateOptions())
	}},
	{"guidellm", traces.Plain("GuideLLM trace JSONL {timestamp (s), input_length, output_length, hash_ids} for --data kind=trace_synthetic (or kind=mooncake with hash_id_block_size set to the block size)"), NewGuideLLMWriter},
	{"inference-perf", traces.Plain("inference-perf OTel trace-replay documents, one per session and line (split into a file each): spans with token usage, filler messages holding the replies a call waits for, a distinct reply each, and times laid out so that inference-perf's graph builder infers the trace's dependencies and waits"), NewInferencePerfWriter},
	{"jsonl", traces.Plain("tokentrace JSON lines (metadata on the first line); .zst compresses"), func(w io.Writer, m traces.Meta, _ ExportOptions) (traces.Writer, error) {
		return traces.NewWriter(w, traces.FormatJSONL, m, traces.DefaultCreateOptions())
	}},
	{"mooncake", traces.Textf("JSON lines {\"timestamp\": ms, \"input_length\", \"output_length\", \"hash_ids\"}, the format of the Mooncake traces, read by AIPerf (--custom-dataset-type mooncake_trace), SGLang and vLLM (vllm bench serve --dataset-name timed_trace, with --timed-trace-sec-multiplier 0.001 and --timed-trace-chunk-hash-size set to %s). Timestamps are rounded to the millisecond. hash_ids cover every 512-token block of the prompt: the trace's own prefix_blocks when their block size is 512 (re-cut when it divides 512), otherwise shared ids for each category's prefix and fresh ids for the rest. Ids are renumbered 0, 1, 2, ... in order of first appearance (Mooncake's own numbering, so an imported Mooncake trace exports its ids unchanged); which requests share a block is kept, the ids themselves are not (a capture's block digests, %s, become small integers), so exports of two traces do not share ids", traces.OptionRef("ExportOptions.BlockSize"), traces.OptionRef("capture.Options.KeepHashes")), NewMooncakeWriter},
	{"sglang-agentic", traces.Plain("SGLang bench_serving agentic trace {conversations: [[{messages, prompt_tokens, output_tokens}]]}: a conversation per agent chain, each turn's new tokens as filler; times are lost"), NewSGLangAgenticWriter},
	{"vllm", traces.Plain("vllm bench serve --dataset-name timed_trace JSONL {timestamp (s), input_length, output_length, hash_ids of the trace's block size, else 16}"), NewVLLMWriter},
	{"weka", traces.Plain("kv-cache-tester JSON, one conversation per line (split into a file each): subagents nested after the call that spawned them, api_time and think_time, tool_tokens and system_tokens (the warm prefix) and input_types; joins and session start offsets are counted as lost"), NewWekaWriter},
}

// ExportFormatList returns the export formats, sorted by name.
func ExportFormatList() []ExportFormat { return slices.Clone(exportFormats) }

// ExportFormats lists the names of the formats Export writes.
var ExportFormats = func() []string {
	names := make([]string, len(exportFormats))
	for i, f := range exportFormats {
		names[i] = f.Name
	}
	return names
}()

// DefaultExportBlockSize is the hash_ids block size of a mooncake export
// of a trace that has none (Mooncake's own 512).
const DefaultExportBlockSize = MooncakeBlockSize

// ExportOptions tunes Export. Start from DefaultExportOptions: every
// field's zero is a value of its own, never its default.
type ExportOptions struct {
	// BlockSize is the tokens per hash_ids entry of the mooncake format; a
	// replayer must be told the same size (vLLM
	// --timed-trace-chunk-hash-size). 0 means the trace's Meta.BlockSize, or
	// DefaultExportBlockSize when the trace has none. Defaults to 0.
	BlockSize int
	// OKOnly drops rows that carry a failed outcome (Status set and not
	// "ok", e.g. BurstGPT's failed requests with 0 output tokens, which a
	// replayer would send with max_tokens 0). Defaults to false.
	OKOnly bool
	// Lost is told, once per kind at the end of an export, what the format
	// could not hold, as a sentence with a count ("412 parent links not
	// representable in aiperf"), which the caller says (traces.Text.Say:
	// it may name an option); nil discards it. Defaults to nil.
	Lost func(traces.Text)
}

// DefaultExportOptions returns every ExportOptions default.
func DefaultExportOptions() ExportOptions {
	return ExportOptions{BlockSize: 0, OKOnly: false, Lost: nil}
}

// Validate checks the options; an error is a *traces.OptionError naming
// the option.
func (o ExportOptions) Validate() error {
	if o.BlockSize < 0 {
		return traces.OptionErrorf("formats", "ExportOptions.BlockSize", "%d: must be positive, or 0 for the trace's", o.BlockSize)
	}
	return nil
}

// An ExportFunc returns a Writer that encodes Records in one format onto w.
// m is the metadata of the trace being exported (formats without metadata
// ignore it). Close flushes and closes w if it is an io.Closer.
type ExportFunc func(w io.Writer, m traces.Meta, o ExportOptions) (traces.Writer, error)

// Exporter returns the constructor of the named export format.
func Exporter(format string) (ExportFunc, error) {
	for _, f := range exportFormats {
		if f.Name == format {
			return f.New, nil
		}
	}
	return nil, fmt.Errorf("%w %q: export formats are %s", traces.ErrUnknownFormat, format, strings.Join(ExportFormats, ", "))
}

// Export writes every record of r to w in the named format and returns how
// many it wrote. It does not close w. Reading stops with ctx.Err() once ctx
// is done.
func Export(ctx context.Context, format string, w io.Writer, r traces.Reader, o ExportOptions) (int64, error) {
	if err := o.Validate(); err != nil {
		return 0, fmt.Errorf("export %s: %w", format, err)
	}
	fn, err := Exporter(format)
	if err != nil {
		return 0, err
	}
	ew, err := fn(exportWriterOnly{w}, r.Meta(), o)
	if err != nil {
		return 0, fmt.Errorf("export %s: %w", format, err)
	}
	n, err := exportCopy(ctx, ew, r, o)
	if cerr := ew.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("export %s: %w", format, cerr)
	}
	if err == nil {
		reportLosses(ew, o)
	}
	return n, err
}

// ExportFile is Export to the named file ("-" = stdout). For jsonl and csv a
// ".zst" suffix compresses the output with zstd; a name whose extension
// names another codec (out.parquet with format jsonl) is refused. On error
// the partial file is removed.
func ExportFile(ctx context.Context, format, name string, r traces.Reader, o ExportOptions) (int64, error) {
	if _, err := Exporter(format); err != nil {
		return 0, err
	}
	if err := o.Validate(); err != nil {
		return 0, fmt.Errorf("export %s: %w", format, err)
	}
	if name == "-" {
		return Export(ctx, format, os.Stdout, r, o)
	}
	codec := traces.Format("")
	if format == "jsonl" || format == "csv" {
		codec = traces.Format(format)
		if f, err := traces.FormatOf(name); err == nil && f != traces.Format(format) && f != traces.Format(format)+".zst" {
			return 0, fmt.Errorf("export %s: output %s has the extension of %s; use format %s or a .%s name", format, name, f, exportFamily(f), format)
		} else if err == nil {
			codec = f
		}
	}
	f, err := atomicfile.Create(name)
	if err != nil {
		return 0, fmt.Errorf("export %s: %w", format, err)
	}
	var ew traces.Writer
	if codec == "" {
		fn, _ := Exporter(format)
		ew, err = fn(f, r.Meta(), o)
	} else {
		ew, err = traces.NewWriter(f, codec, r.Meta(), traces.DefaultCreateOptions())
	}
	if err != nil {
		f.Abort()
		return 0, fmt.Errorf("export %s %s: %w", format, name, err)
	}
	n, err := exportCopy(ctx, ew, r, o)
	if err != nil {
		f.Abort() // never a partial file under the final name
	}
	if cerr := ew.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("export %s: %w", format, cerr)
	}
	if err != nil {
		return n, err
	}
	reportLosses(ew, o)
	return n, nil
}

// exportFamily maps a codec to the export format that writes it.
func exportFamily(f traces.Format) string {
	s := strings.TrimSuffix(string(f), ".zst")
	for _, e := range ExportFormats {
		if e == s {
			return e
		}
	}
	return "jsonl"
}

func exportCopy(ctx context.Context, w traces.Writer, r traces.Reader, o ExportOptions) (int64, error) {
	buf := make([]traces.Record, 1024)
	var total int64
	for {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		n, rerr := r.Read(buf)
		recs := buf[:n]
		if o.OKOnly {
			kept := recs[:0]
			for i := range recs {
				if !recs[i].HasOutcome() || recs[i].OK() {
					kept = append(kept, recs[i])
				}
			}
			recs = kept
		}
		if len(recs) > 0 {
			m, err := w.Write(recs)
			total += int64(m)
			if err != nil {
				return total, fmt.Errorf("export: write: %w", err)
			}
		}
		if rerr == io.EOF {
			return total, nil
		}
		if rerr != nil {
			return total, rerr
		}
		if n > 0 {
			buf = make([]traces.Record, len(buf)) // writers may keep slices of records
		}
	}
}

// exportWriterOnly hides a writer's Close so Export leaves it open.
type exportWriterOnly struct{ io.Writer }

// NewMooncakeWriter writes records as a Mooncake JSONL trace, one line per
// record, byte-compatible with the published files:
//
//	{"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1, 2]}
//
// This is the input format of AIPerf (--custom-dataset-type mooncake_trace),
// SGLang's bench_serving and vLLM's `vllm bench serve --dataset-name
// timed_trace` (PR #39795, in v0.23.0 but not v0.21.0). What timed_trace
// needs from it:
//   - timestamp: milliseconds here, so run it with
//     --timed-trace-sec-multiplier 0.001. vLLM treats the value as an
//     absolute offset from the benchmark start (not re-based on the first
//     row) and sends rows in file order, so rows must be sorted by arrival.
//     ArrivalNs is rounded to the nearest millisecond, which loses sub-ms
//     detail of Azure and BurstGPT imports.
//   - input_length: the prompt length; output_length becomes max_tokens
//     with ignore_eos, so rows with 0 output tokens are better dropped
//     (ExportOptions.OKOnly).
//   - hash_ids: every id expands to --timed-trace-chunk-hash-size random
//     tokens (vLLM's default is 16, Mooncake's is 512: pass the block size
//     this file was written with, recorded nowhere in the file) and the
//     prompt is cut to input_length, so the ids must cover
//     ceil(input_length / block size) blocks. This writer always writes
//     exactly that many when it has to invent them.
//
// hash_ids come from the record's PrefixBlocks when the trace's
// Meta.BlockSize equals the export block size; otherwise from its prefix
// category: the first PrefixTokens / block size ids are shared by every row
// of the same Category, the rest are fresh, so a replay sees the trace's
// prefix sharing. Ids are renumbered densely in order of first appearance
// (Mooncake's own scheme, so a Mooncake import exports the same ids), and a
// too-short PrefixBlocks list is padded with fresh ids.
func NewMooncakeWriter(w io.Writer, m traces.Meta, o ExportOptions) (traces.Writer, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	// The format defines 512-token blocks and has no field to say another
	// size: a trace's finer blocks are re-cut to 512 (readers assume it).
	mw := exportBlockIDs(traces.Meta{BlockSize: m.BlockSize}, o, DefaultExportBlockSize, true)
	mw.Sink = textsink.New(w)
	return mw, nil
}

// exportBlockIDs numbers an export's hash_ids in blocks of o.BlockSize
// tokens, else of the trace's Meta.BlockSize (unless the format's size is
// fixed), else of the format's def: from the records' PrefixBlocks when
// the trace's block size is the export's, re-cut from them when it divides
// it, from their prefix categories otherwise.
func exportBlockIDs(m traces.Meta, o ExportOptions, def int, fixed bool) *mooncakeWriter {
	bs := o.BlockSize
	if bs == 0 && !fixed {
		bs = m.BlockSize
	}
	if bs == 0 {
		bs = def
	}
	w := &mooncakeWriter{
		blockSize: int64(bs),
		useBlocks: m.BlockSize == bs,
		ids:       map[int64]int64{},
		cats:      map[string][]int64{},
	}
	if m.BlockSize > 0 && m.BlockSize < bs && bs%m.BlockSize == 0 {
		w.recut = bs / m.BlockSize
	}
	w.from = m.BlockSize
	return w
}

// losses says how the blocks were cut (the mooncake export: its readers
// assume 512-token blocks, and the file cannot say otherwise).
func (w *mooncakeWriter) losses() []traces.Text {
	return append(w.blockLosses(), w.tally.notes()...)
}

func (w *mooncakeWriter) blockLosses() []traces.Text {
	switch {
	case w.recut > 0:
		return []traces.Text{traces.Textf("hash_ids re-cut from the trace's %d-token blocks to %d-token blocks (the size Mooncake's readers assume: AIPerf, GuideLLM)", w.from, w.blockSize)}
	case w.from > 0 && !w.useBlocks:
		return []traces.Text{traces.Textf("the trace's %d-token blocks do not divide %d-token blocks: hash_ids come from prefix categories, shared prefixes beyond them are lost", w.from, w.blockSize)}
	}
	return nil
}

// recutBlocks sets w.hash to r's prompt in blocks of w.blockSize made of
// its finer blocks (w.recut of them each): a block is named by the chain of
// its fine ids and every block before it, so prompts share a coarse block
// exactly when they share its fine blocks and all before; a block the fine
// ones do not cover whole (the prompt's tail past its last full fine block)
// is fresh.
func (w *mooncakeWriter) recutBlocks(r *traces.Record) {
	nb := (int64(r.InputTokens) + w.blockSize - 1) / w.blockSize
	fine := int64(w.blockSize) / int64(w.recut)
	covered := int64(len(r.PrefixBlocks)) * fine
	h := fnv.New64a()
	var buf [8]byte
	w.hash = w.hash[:0]
	for c := int64(0); c < nb; c++ {
		end := min((c+1)*w.blockSize, int64(r.InputTokens))
		if end > covered {
			w.hash = append(w.hash, w.fresh())
			continue
		}
		for _, id := range r.PrefixBlocks[c*int64(w.recut) : (end+fine-1)/fine] {
			binary.LittleEndian.PutUint64(buf[:], uint64(id))
			h.Write(buf[:])
		}
		binary.LittleEndian.PutUint64(buf[:], uint64(end-c*w.blockSize))
		h.Write(buf[:])
		w.hash = append(w.hash, w.mapID(int64(h.Sum64()|1<<63)))
	}
}

type mooncakeWriter struct {
	textsink.Sink
	blockSize int64
	useBlocks bool
	recut     int // fine blocks per exported block, when re-cut (0: not)
	from      int // the trace's block size
	tally     importTally
	ids       map[int64]int64    // source block id → exported id (large ids)
	dense     []int64            // source id → exported id + 1, ids below mooncakeBitsetMax
	cats      map[string][]int64 // category → exported ids of its prefix blocks
	next      int64
	buf       []byte
	hash      []int64
}

// mapID returns the exported id of a source block id, allocating the next
// one on first sight. Small non-negative ids (Mooncake's) use a slice.
func (w *mooncakeWriter) mapID(id int64) int64 {
	if id >= 0 && id < mooncakeBitsetMax {
		if id >= int64(len(w.dense)) {
			w.dense = append(w.dense, make([]int64, id+1-int64(len(w.dense))+int64(len(w.dense)/2))...)
		}
		if v := w.dense[id]; v != 0 {
			return v - 1
		}
		out := w.fresh()
		w.dense[id] = out + 1
		return out
	}
	out, ok := w.ids[id]
	if !ok {
		out = w.fresh()
		w.ids[id] = out
	}
	return out
}

func (w *mooncakeWriter) fresh() int64 {
	id := w.next
	w.next++
	return id
}

// hashIDs sets w.hash to the row's exported hash_ids (see
// NewMooncakeWriter).
func (w *mooncakeWriter) hashIDs(r *traces.Record) {
	nb := (int64(r.InputTokens) + w.blockSize - 1) / w.blockSize
	w.hash = w.hash[:0]
	if w.recut > 0 && len(r.PrefixBlocks) > 0 {
		w.recutBlocks(r)
		return
	}
	if w.useBlocks && len(r.PrefixBlocks) > 0 {
		for _, id := range r.PrefixBlocks {
			w.hash = append(w.hash, w.mapID(id))
		}
	} else if r.Category != "" && r.PrefixTokens > 0 {
		shared := min(int64(r.PrefixTokens)/w.blockSize, nb)
		cat := w.cats[r.Category]
		for int64(len(cat)) < shared {
			cat = append(cat, w.fresh())
		}
		w.cats[r.Category] = cat
		w.hash = append(w.hash, cat[:shared]...)
	}
	for int64(len(w.hash)) < nb {
		w.hash = append(w.hash, w.fresh())
	}
}

func (w *mooncakeWriter) Write(recs []traces.Record) (int, error) {
	for i := range recs {
		r := &recs[i]
		if r.ArrivalNs < 0 || r.InputTokens < 0 || r.OutputTokens < 0 {
			return i, fmt.Errorf("row seq %d: negative arrival or token count", r.Seq)
		}
		lostPrefixKinds(&w.tally, r, "mooncake")
		w.hashIDs(r)
		b := w.buf[:0]
		b = append(b, `{"timestamp": `...)
		b = strconv.AppendInt(b, (r.ArrivalNs+500_000)/1_000_000, 10)
		b = append(b, `, "input_length": `...)
		b = strconv.AppendInt(b, int64(r.InputTokens), 10)
		b = append(b, `, "output_length": `...)
		b = strconv.AppendInt(b, int64(r.OutputTokens), 10)
		b = appendHashIDs(b, w.hash)
		b = append(b, "}\n"...)
		w.buf = b
		if _, err := w.Buf.Write(b); err != nil {
			return i, err
		}
	}
	return len(recs), nil
}
