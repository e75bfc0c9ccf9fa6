package formats

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/tokentrace/tokentrace/internal/textsink"
	"github.com/tokentrace/tokentrace/traces"
)

// VLLMDefaultBlockSize is the hash_ids block size of a vllm export of a
// trace that has none: vLLM's own default --timed-trace-chunk-hash-size.
const VLLMDefaultBlockSize = 16

// lineFormat says how a line-per-row peer format writes a row.
type lineFormat struct {
	name      string
	tsKey     string
	tsScale   int  // digits of the timestamp unit below a second: 3 = ms, 0 = s
	sessions  bool // writes session_id and delay (AIPerf)
	hashes    bool
	blockSize int  // default when the trace has none
	exact     bool // hash_ids must be exactly ceil(input_length / block size) long
}

// lineWriter writes one JSON object per row: a timestamp, input_length,
// output_length, hash_ids, and for AIPerf session_id and delay.
type lineWriter struct {
	textsink.Sink
	f      lineFormat
	ids    *mooncakeWriter        // block id state (its sink is unused)
	chains map[int64]*aiperfChain // AIPerf sessions by the seq of their last row
	subs   map[int64]int          // AIPerf sessions started per tokentrace session
	latest map[int64]int64        // the seq of each tokentrace session's latest row
	tally  importTally
	buf    []byte
	lastAt int64
}

// aiperfChain is one AIPerf session being written: its name, and what
// AIPerf will have sent as its last row's prompt (sent) and reply (out).
type aiperfChain struct {
	name            string
	sent, out, done int64
}

func (w *lineWriter) losses() []traces.Text { return w.tally.notes() }

func newLineWriter(w io.Writer, m traces.Meta, o ExportOptions, f lineFormat) (traces.Writer, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	lw := &lineWriter{Sink: textsink.New(w), f: f, chains: map[int64]*aiperfChain{}, subs: map[int64]int{}, latest: map[int64]int64{}, ids: exportBlockIDs(m, o, f.blockSize, false)}
	if f.hashes {
		lw.tally.say(fmt.Sprintf("hash_ids are %d-token blocks: tell the replayer the same block size", lw.ids.blockSize))
	}
	return lw, nil
}

// NewAIPerfWriter writes AIPerf's mooncake_trace JSONL with sessions
// (--custom-dataset-type mooncake_trace; ai-dynamo/aiperf
// src/aiperf/dataset/loader/models.py MooncakeTrace @ 0109a64):
//
//	{"timestamp": ms, "input_length", "output_length", "hash_ids", "session_id": "s12", "delay": ms}
//
// timestamp is exact to the nanosecond (a decimal in ms; AIPerf schedules
// to the ms). AIPerf replays a session's rows as one conversation in its
// default context mode, deltas_without_responses
// (docs/reference/conversation-context-mode.md): each row's prompt is
// appended to the history with the live replies threaded in, so a turn
// sends every earlier input_length and reply plus its own. A row therefore
// carries only the tokens its prompt adds to what AIPerf will have sent
// (the previous turn's prompt and reply); its hash_ids cover those tokens
// (fresh ids), and delay is its think time (think_ns, else arrival − the
// previous turn's finish).
//
// A call continues its parent's AIPerf session when it is that session's
// latest row and its prompt holds the whole context (to 1 %: a shorter
// one adds 1 token). Any other call (a subagent, a second child, a
// compaction, a call without a session) starts an AIPerf session of its
// own ("s12.1", ...) with its whole prompt at its timestamp: AIPerf runs
// sessions side by side, so parallel subagents stay parallel, but does
// not wait for the call that spawned them (counted). Joins, finish times,
// models and classes are counted as not representable.
func NewAIPerfWriter(w io.Writer, m traces.Meta, o ExportOptions) (traces.Writer, error) {
	return newLineWriter(w, m, o, lineFormat{name: "aiperf", tsKey: "timestamp", tsScale: 3, sessions: true, hashes: true, blockSize: DefaultExportBlockSize})
}

// NewVLLMWriter writes the timed trace of `vllm bench serve --dataset-name
// timed_trace` (vllm-project/vllm PR #39795; vllm/benchmarks/datasets.py
// TimedTrace): {"timestamp": s, "input_length", "output_length",
// "hash_ids"}, timestamps in seconds (exact to the ns; the default
// --timed-trace-sec-multiplier 1), hash_ids of the trace's block size (else
// VLLMDefaultBlockSize, vLLM's default --timed-trace-chunk-hash-size).
// vLLM sends rows in file order. Sessions, parent links, joins, think and
// finish times, models and classes are counted as not representable.
func NewVLLMWriter(w io.Writer, m traces.Meta, o ExportOptions) (traces.Writer, error) {
	return newLineWriter(w, m, o, lineFormat{name: "vllm", tsKey: "timestamp", tsScale: 0, hashes: true, blockSize: VLLMDefaultBlockSize})
}

// NewGuideLLMWriter writes GuideLLM's trace input (vllm-project/guidellm
// docs/guides/trace_replay.md @ ee7a774): JSONL {"timestamp": s,
// "input_length", "output_length", "hash_ids"} for GuideLLM's data option
// `kind=trace_synthetic,path=FILE` (which reads the first three) or
// kind=mooncake with hash_id_block_size set to the block size (512 unless
// the trace has one), which wants exactly ceil(input_length / block size)
// ids: longer lists are cut (counted). GuideLLM re-bases timestamps on the
// first. Sessions,
// parent links, joins, think and finish times, models and classes are
// counted as not representable.
func NewGuideLLMWriter(w io.Writer, m traces.Meta, o ExportOptions) (traces.Writer, error) {
	return newLineWriter(w, m, o, lineFormat{name: "guidellm", tsKey: "timestamp", tsScale: 0, hashes: true, blockSize: DefaultExportBlockSize, exact: true})
}

func (w *lineWriter) Write(recs []traces.Record) (int, error) {
	for i := range recs {
		r := &recs[i]
		if r.ArrivalNs < 0 || r.InputTokens < 0 || r.OutputTokens < 0 {
			return i, fmt.Errorf("row seq %d: negative arrival or token count", r.Seq)
		}
		if r.ArrivalNs < w.lastAt {
			w.tally.add("%d rows came out of arrival order (peers send rows in file order): sort the trace first", 1)
		}
		w.lastAt = r.ArrivalNs
		in := int64(r.InputTokens)
		var chain *aiperfChain
		cont := false
		if w.f.sessions && r.Session != 0 {
			chain, cont, in = w.aiperfTurn(r)
		}
		if cont {
			w.ids.hash = w.ids.hash[:0]
			for int64(len(w.ids.hash)) < (in+w.ids.blockSize-1)/w.ids.blockSize {
				w.ids.hash = append(w.ids.hash, w.ids.fresh())
			}
		} else {
			w.ids.hashIDs(r)
		}
		if nb := (int64(r.InputTokens) + w.ids.blockSize - 1) / w.ids.blockSize; w.f.exact && int64(len(w.ids.hash)) > nb {
			w.ids.hash = w.ids.hash[:nb]
			w.tally.add("%d rows' hash_ids cut to ceil(input_length / block size), as "+w.f.name+" requires", 1)
		}
		b := append(w.buf[:0], '{', '"')
		b = append(b, w.f.tsKey...)
		b = append(b, `": `...)
		b = appendDecimal(b, r.ArrivalNs, 9-w.f.tsScale)
		b = append(b, `, "input_length": `...)
		b = strconv.AppendInt(b, in, 10)
		b = append(b, `, "output_length": `...)
		b = strconv.AppendInt(b, int64(r.OutputTokens), 10)
		if w.f.hashes {
			b = appendHashIDs(b, w.ids.hash)
		}
		b = w.structure(b, r, chain, cont)
		b = append(b, "}\n"...)
		w.buf = b
		if _, err := w.Buf.Write(b); err != nil {
			return i, err
		}
	}
	return len(recs), nil
}

// structure appends what the format holds of the row's session, and
// counts what it does not.
func (w *lineWriter) structure(b []byte, r *traces.Record, chain *aiperfChain, cont bool) []byte {
	name := w.f.name
	lostPrefixKinds(&w.tally, r, name)
	if r.Model != "" {
		w.tally.add("%d rows' model not representable in "+name, 1)
	}
	if r.Class != "" {
		w.tally.add("%d rows' class not representable in "+name, 1)
	}
	if !w.f.sessions {
		if r.Session != 0 {
			w.tally.add("%d rows' session and turn not representable in "+name+" (every row is independent)", 1)
		}
		if r.ParentSeq >= 0 {
			w.tally.add("%d parent links not representable in "+name, 1)
		}
		if len(r.AfterSeqs) > 0 {
			w.tally.add("%d joins not representable in "+name, 1)
		}
		if r.ThinkNs >= 0 {
			w.tally.add("%d think times not representable in "+name, 1)
		}
		if r.FinishNs >= 0 {
			w.tally.add("%d finish times not representable in "+name, 1)
		}
		return b
	}
	if r.FinishNs >= 0 {
		w.tally.add("%d finish times not representable in "+name+" (the think times they give are written as delay)", 1)
	}
	if chain == nil {
		if r.ParentSeq >= 0 || len(r.AfterSeqs) > 0 {
			w.tally.add("%d parent links of rows without a session not representable in "+name, 1)
		}
		return b
	}
	b = append(b, `, "session_id": `...)
	b = appendJSONString(b, chain.name)
	if len(exportDeps(r)) > 1 {
		w.tally.add("%d joins not representable in "+name, 1)
	}
	if cont {
		think := r.ThinkNs
		if think < 0 && chain.done >= 0 {
			think = max(r.ArrivalNs-chain.done, 0)
		}
		if think >= 0 {
			b = append(b, `, "delay": `...)
			b = appendDecimal(b, think, 6)
		}
	} else if r.ThinkNs >= 0 {
		w.tally.add("%d think times of a session's first row not representable in "+name+" (it starts at its timestamp)", 1)
	}
	chain.done = r.FinishNs
	return b
}

// aiperfTurn places row r (of a session) in an AIPerf session: it
// continues its parent's when the parent is that session's latest row and
// its prompt holds the context AIPerf will have built (to 1 %), else it
// starts one of its own. It returns the session, whether r continues it,
// and the input_length to write: the tokens r adds, or its whole prompt.
func (w *lineWriter) aiperfTurn(r *traces.Record) (*aiperfChain, bool, int64) {
	in := int64(r.InputTokens)
	parent := r.ParentSeq
	if last, ok := w.latest[r.Session]; ok && parent < 0 {
		parent = last // no parent said: the session's previous row, if the prompt holds its context
	}
	w.latest[r.Session] = r.Seq
	if c, ok := w.chains[parent]; ok && parent >= 0 {
		ctx := c.sent + c.out
		if in >= ctx || float64(ctx+1-in) <= 0.01*float64(in) {
			delete(w.chains, parent)
			add := max(in-ctx, 1)
			if add != in-ctx {
				w.tally.add("%d turns whose prompt is a little shorter than the previous prompt and reply were written adding 1 token (AIPerf appends every turn)", 1)
			}
			c.sent, c.out = ctx+add, int64(r.OutputTokens)
			w.chains[r.Seq] = c
			return c, true, add
		}
	}
	name := "s" + strconv.FormatInt(r.Session, 10)
	if n := w.subs[r.Session]; n > 0 {
		name += "." + strconv.Itoa(n)
		switch {
		case r.ParentSeq < 0:
			w.tally.add("%d calls without a parent after a session's first start an AIPerf session of their own", 1)
		case w.chains[r.ParentSeq] != nil:
			w.tally.add("%d calls whose prompt does not hold their parent's prompt and reply (subagents, compactions) start an AIPerf session of their own: it runs beside the others from its timestamp, not after the call that spawned it", 1)
		default:
			w.tally.add("%d calls that branch off a call with a later turn already (subagents, forks) start an AIPerf session of their own: it runs beside the others from its timestamp, not after the call that spawned it", 1)
		}
	}
	w.subs[r.Session]++
	c := &aiperfChain{name: name, sent: in, out: int64(r.OutputTokens), done: traces.NotReported}
	w.chains[r.Seq] = c
	return c, false, in
}

// NewAzureWriter writes the Azure LLM inference trace CSV
// (TIMESTAMP,ContextTokens,GeneratedTokens), the input of inference-perf's
// trace_replay load (inference_perf/utils/trace_reader.py @ 7de5ef2),
// TraceStorm and Splitwise-style simulators. TIMESTAMP is 2023's layout
// ("2006-01-02 15:04:05.0000000", UTC) from 2000-01-01 00:00:00 plus the
// arrival, rounded to 100 ns (the readers re-base on the first row). Every
// other column is counted as not representable.
func NewAzureWriter(w io.Writer, m traces.Meta, o ExportOptions) (traces.Writer, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	aw := &azureWriter{Sink: textsink.New(w)}
	_, err := aw.Buf.WriteString("TIMESTAMP,ContextTokens,GeneratedTokens\n")
	return aw, err
}

// azureEpoch is the wall-clock time an azure export's arrival 0 is written
// at.
var azureEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

type azureWriter struct {
	textsink.Sink
	tally importTally
	buf   []byte
}

func (w *azureWriter) losses() []traces.Text { return w.tally.notes() }

func (w *azureWriter) Write(recs []traces.Record) (int, error) {
	for i := range recs {
		r := &recs[i]
		if r.ArrivalNs < 0 || r.InputTokens < 0 || r.OutputTokens < 0 {
			return i, fmt.Errorf("row seq %d: negative arrival or token count", r.Seq)
		}
		lostPrefixKinds(&w.tally, r, "azure")
		at := (r.ArrivalNs + 50) / 100 * 100
		if at != r.ArrivalNs {
			w.tally.add("%d arrivals rounded to 100 ns (the format's resolution)", 1)
		}
		for _, c := range []struct {
			lost bool
			what string
		}{
			{r.Session != 0, "sessions and turns"}, {r.ParentSeq >= 0, "parent links"}, {len(r.AfterSeqs) > 0, "joins"},
			{r.ThinkNs >= 0, "think times"}, {r.FinishNs >= 0, "finish times"}, {len(r.PrefixBlocks) > 0 || r.PrefixTokens > 0, "prefix blocks and categories"},
			{r.Model != "", "models"}, {r.Class != "", "classes"},
		} {
			if c.lost {
				w.tally.add("%d rows' "+c.what+" not representable in azure", 1)
			}
		}
		t := azureEpoch.Add(time.Duration(at))
		b := t.AppendFormat(w.buf[:0], "2006-01-02 15:04:05.0000000")
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(r.InputTokens), 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(r.OutputTokens), 10)
		b = append(b, '\n')
		w.buf = b
		if _, err := w.Buf.Write(b); err != nil {
			return i, err
		}
	}
	return len(recs), nil
}
