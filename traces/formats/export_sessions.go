package formats

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/tokentrace/tokentrace/internal/textsink"
	"github.com/tokentrace/tokentrace/traces"
)

// The formats below are written session by session (a conversation per
// document or line), so their writers hold the whole trace until Close
// (exportBuffer) and write it then; each says so in its doc.

// sessionExport is the shared part of the session-by-session writers.
type sessionExport struct {
	textsink.Sink
	exportBuffer
	tally importTally
	name  string
}

func (w *sessionExport) losses() []traces.Text { return w.tally.notes() }

// closeAfter writes the held trace with writeAll, then closes the sink; the
// first error is returned.
func (w *sessionExport) closeAfter(writeAll func() error) error {
	err := writeAll()
	if cerr := w.Sink.Close(); err == nil {
		err = cerr
	}
	return err
}

// lost counts n rows (or links) of what the format cannot hold.
func (w *sessionExport) lost(n int64, what string, refs ...any) {
	w.tally.add("%d "+what+" not representable in "+w.name, n, refs...)
}

// checkRows refuses negative counts and times, like every export.
func checkRows(g []traces.Record) error {
	for i := range g {
		if r := &g[i]; r.ArrivalNs < 0 || r.InputTokens < 0 || r.OutputTokens < 0 {
			return fmt.Errorf("row seq %d: negative arrival or token count", r.Seq)
		}
	}
	return nil
}

// thinkOf is the think time a format writes before call i of group g:
// think_ns, else its arrival minus the latest finish among its
// dependencies (never negative); -1 when neither is known.
func thinkOf(g []traces.Record, idx map[int64]int, i int) int64 {
	r := &g[i]
	if r.ThinkNs >= 0 {
		return r.ThinkNs
	}
	latest := int64(-1)
	for _, s := range exportDeps(r) {
		if j, ok := idx[s]; ok && g[j].FinishNs >= 0 {
			latest = max(latest, g[j].FinishNs)
		}
	}
	if latest < 0 {
		return -1
	}
	return max(r.ArrivalNs-latest, 0)
}

func seqIndex(g []traces.Record) map[int64]int {
	idx := make(map[int64]int, len(g))
	for i := range g {
		idx[g[i].Seq] = i
	}
	return idx
}

// ---------------------------------------------------------------------
// WEKA kv-cache-tester JSON

// NewWekaWriter writes WEKA kv-cache-tester traces (callanjfox/kv-cache-tester
// docs/trace_replay_tester.md @ 94f6046; the format the weka importer
// reads): one JSON document per session, one per line,
//
//	{"id", "block_size", "hash_id_scope": "global", "tool_tokens", "system_tokens", "requests": [
//	   {"t", "type": "n", "model", "in", "out", "hash_ids", "input_types", "api_time", "think_time"},
//	   {"type": "subagent", "t", "tool_tokens", "system_tokens", "requests": [...]}]}
//
// Times are seconds, exact to the ns: t from the conversation's (or the
// subagent's) start, api_time = finish − arrival, think_time = think_ns or
// arrival − the dependency's finish. A session's main chain and the
// subagents its calls spawn (splitAgents) nest as the format nests them,
// each subagent right after the call that spawned it. kv-cache-tester wants
// a file per conversation: `split -l 1 --additional-suffix=.json out
// traces/trace_`. hash_ids are the trace's blocks when the block size
// matches, else per-category shared and fresh ids for the prompt's whole
// blocks (the format drops a trailing partial block).
//
// Not representable, and counted: a session's start offset (every
// conversation starts at 0), joins, a subagent's first think time, and
// classes. A call without a parent after the first becomes the previous
// call's follower (the format chains a conversation's calls). The writer
// holds the whole trace until Close.
func NewWekaWriter(w io.Writer, m traces.Meta, o ExportOptions) (traces.Writer, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	ids := exportBlockIDs(m, o, WekaDefaultBlockSize, false)
	return &wekaWriter{sessionExport: sessionExport{Sink: textsink.New(w), name: "weka"}, bs: int(ids.blockSize), ids: ids}, nil
}

type wekaWriter struct {
	sessionExport
	bs  int
	ids *mooncakeWriter
	b   []byte
}

func (w *wekaWriter) Close() error { return w.closeAfter(w.writeAll) }

func (w *wekaWriter) writeAll() error {
	for _, g := range w.groups() {
		if err := checkRows(g); err != nil {
			return err
		}
		agents, _ := splitAgents(g, false)
		idx := seqIndex(g)
		base := g[0].ArrivalNs
		if base > 0 {
			w.lost(1, "session start offsets (every conversation starts at 0)")
		}
		b := append(w.b[:0], `{"id": "`...)
		if g[0].Session != 0 {
			b = append(b, 's')
			b = strconv.AppendInt(b, g[0].Session, 10)
		} else {
			b = append(b, 'r')
			b = strconv.AppendInt(b, g[0].Seq, 10)
		}
		b = append(b, `", "block_size": `...)
		b = strconv.AppendInt(b, int64(w.bs), 10)
		b = append(b, `, "hash_id_scope": "global"`...)
		b = appendWekaPrefix(b, &g[agents[0].calls[0]])
		b = append(b, `, "requests": `...)
		b = w.agent(b, g, idx, agents, 0, base)
		b = append(b, "}\n"...)
		w.b = b
		if _, err := w.Buf.Write(b); err != nil {
			return err
		}
	}
	return nil
}

// wekaHashIDs sets w.ids.hash to a call's hash_ids: its own blocks as
// they are (kv-cache-tester drops a trailing partial block, so they need
// not cover the prompt), else invented ones (as mooncake) for the whole
// blocks of the prompt only.
func (w *wekaWriter) wekaHashIDs(r *traces.Record) {
	w.ids.hashIDs(r)
	if w.ids.useBlocks && len(r.PrefixBlocks) > 0 {
		w.ids.hash = w.ids.hash[:len(r.PrefixBlocks)]
		return
	}
	w.ids.hash = w.ids.hash[:min(len(w.ids.hash), int(int64(r.InputTokens)/w.ids.blockSize))]
}

// appendWekaPrefix appends an agent's warm prefix (tool_tokens and
// system_tokens, from its first call) when the trace has one.
func appendWekaPrefix(b []byte, r *traces.Record) []byte {
	if r.ToolTokens > 0 || r.SystemTokens > 0 {
		b = append(b, `, "tool_tokens": `...)
		b = strconv.AppendInt(b, int64(r.ToolTokens), 10)
		b = append(b, `, "system_tokens": `...)
		b = strconv.AppendInt(b, int64(r.SystemTokens), 10)
	}
	return b
}

// agent appends agent a's requests list, times from baseNs.
func (w *wekaWriter) agent(b []byte, g []traces.Record, idx map[int64]int, agents []exportAgent, a int, baseNs int64) []byte {
	b = append(b, '[')
	for k, i := range agents[a].calls {
		r := &g[i]
		if k > 0 {
			b = append(b, ", "...)
		}
		deps := exportDeps(r)
		switch {
		case len(deps) > 1:
			w.lost(int64(len(deps)-1), "join dependencies")
		case k > 0 && len(deps) == 0:
			w.tally.add("%d calls without a parent follow the previous call in weka (it chains a conversation's calls)", 1)
		}
		if r.Class != "" {
			w.lost(1, "rows' class")
		}
		b = append(b, `{"t": `...)
		b = appendDecimal(b, r.ArrivalNs-baseNs, 9)
		b = append(b, `, "type": "n", "model": `...)
		b = appendJSONString(b, r.Model)
		b = append(b, `, "in": `...)
		b = strconv.AppendInt(b, int64(r.InputTokens), 10)
		b = append(b, `, "out": `...)
		b = strconv.AppendInt(b, int64(r.OutputTokens), 10)
		w.wekaHashIDs(r)
		b = appendHashIDs(b, w.ids.hash)
		if r.InputKinds != "" {
			b = append(b, `, "input_types": [`...)
			for j, k := range strings.Split(r.InputKinds, "+") {
				if j > 0 {
					b = append(b, ", "...)
				}
				b = appendJSONString(b, k)
			}
			b = append(b, ']')
		}
		if r.FinishNs >= r.ArrivalNs {
			b = append(b, `, "api_time": `...)
			b = appendDecimal(b, r.FinishNs-r.ArrivalNs, 9)
		}
		if think := thinkOf(g, idx, i); think >= 0 {
			if k == 0 && agents[a].spawner >= 0 {
				w.lost(1, "think times of a subagent's first call (the format counts them from the subagent's start)")
			} else {
				b = append(b, `, "think_time": `...)
				b = appendDecimal(b, think, 9)
			}
		}
		b = append(b, '}')
		for s := range agents {
			if agents[s].spawner != i {
				continue
			}
			start := g[agents[s].calls[0]].ArrivalNs
			b = append(b, `, {"type": "subagent", "t": `...)
			b = appendDecimal(b, start-baseNs, 9)
			b = appendWekaPrefix(b, &g[agents[s].calls[0]])
			b = append(b, `, "requests": `...)
			b = w.agent(b, g, idx, agents, s, start)
			b = append(b, '}')
		}
	}
	return append(b, ']')
}

// ---------------------------------------------------------------------
// SGLang agentic trace

// NewSGLangAgenticWriter writes SGLang bench_serving's agentic trace
// (--dataset-name agentic-trace; the format NewSGLangAgenticReader reads):
// one JSON document {"metadata", "conversations": [[turn, ...], ...]},
// a conversation per agent chain (a session's main chain, and each
// subagent as a conversation of its own), a turn
// {"messages": [{"role": "user", "content": filler}], "prompt_tokens": N,
// "output_tokens": M}. bench_serving feeds each real reply back into the
// history, so a turn's message holds only the tokens its prompt adds to
// the previous prompt and reply (fillerText, a first turn tagged per
// conversation); prompt_tokens keeps the whole length. output_tokens is
// tokentrace's own key, read back by the importer: bench_serving ignores it
// and gives every turn its ShareGPT output-length option.
//
// Not representable, and counted: arrival, think and finish times (it
// replays conversations back to back), a subagent's link to its spawner,
// joins, prefix blocks, models and classes; a turn whose prompt is shorter
// than the previous prompt and reply (compaction) is written adding 1 token
// (prompt_tokens still right). The writer holds the whole trace until
// Close.
func NewSGLangAgenticWriter(w io.Writer, m traces.Meta, o ExportOptions) (traces.Writer, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return &sglangAgenticWriter{sessionExport: sessionExport{Sink: textsink.New(w), name: "sglang-agentic"}}, nil
}

type sglangAgenticWriter struct {
	sessionExport
	b []byte
}

func (w *sglangAgenticWriter) Close() error { return w.closeAfter(w.writeAll) }

func (w *sglangAgenticWriter) writeAll() error {
	if _, err := w.Buf.WriteString(`{"metadata": {"source": "tokentrace export", "output_tokens": "per turn; bench_serving uses its ShareGPT output-length option instead"}, "conversations": [`); err != nil {
		return err
	}
	conv := int64(0)
	rows := int64(0)
	for _, g := range w.groups() {
		if err := checkRows(g); err != nil {
			return err
		}
		agents, _ := splitAgents(g, true)
		for _, a := range agents {
			b := w.b[:0]
			if conv > 0 {
				b = append(b, ",\n"...)
			} else {
				b = append(b, '\n')
			}
			if a.spawner >= 0 {
				w.lost(1, "subagent links to the call that spawned them (each subagent is a conversation of its own)")
			}
			b = append(b, '[')
			var prevIn, prevOut int64
			for k, i := range a.calls {
				r := &g[i]
				rows++
				lostPrefixKinds(&w.tally, r, w.name)
				if len(exportDeps(r)) > 1 {
					w.lost(int64(len(exportDeps(r))-1), "join dependencies")
				}
				for _, c := range []struct {
					is   bool
					what string
				}{{r.ThinkNs >= 0, "think times"}, {r.FinishNs >= 0, "finish times"}, {len(r.PrefixBlocks) > 0, "rows' prefix blocks"}, {r.Model != "", "rows' model"}, {r.Class != "", "rows' class"}} {
					if c.is {
						w.lost(1, c.what)
					}
				}
				add := int64(r.InputTokens)
				text := ""
				if k > 0 {
					add -= prevIn + prevOut
					if add < 1 {
						w.tally.add("%d turns whose prompt is shorter than the previous prompt and reply (compaction) were written adding 1 token; prompt_tokens keeps their length", 1)
						add = 1
					}
					text = fillerText(add)
				} else {
					text = taggedFiller(add, conv)
				}
				if k > 0 {
					b = append(b, ", "...)
				}
				b = append(b, `{"messages": [{"role": "user", "content": `...)
				b = appendJSONString(b, text)
				b = append(b, `}], "prompt_tokens": `...)
				b = strconv.AppendInt(b, int64(r.InputTokens), 10)
				b = append(b, `, "output_tokens": `...)
				b = strconv.AppendInt(b, int64(r.OutputTokens), 10)
				b = append(b, '}')
				prevIn, prevOut = int64(r.InputTokens), int64(r.OutputTokens)
			}
			b = append(b, ']')
			w.b = b
			if _, err := w.Buf.Write(b); err != nil {
				return err
			}
			conv++
		}
	}
	if rows > 0 {
		w.lost(rows, "arrival times (bench_serving replays conversations back to back, each turn after the previous reply)")
		w.tally.say("output lengths are written per turn as output_tokens, which bench_serving ignores: it gives every turn the length of its ShareGPT output-length option")
	}
	_, err := w.Buf.WriteString("\n]}\n")
	return err
}

// ---------------------------------------------------------------------
// AIPerf dag_jsonl

// NewAIPerfDAGWriter writes AIPerf's DAG conversations (--custom-dataset-type
// dag_jsonl; the format NewAIPerfDAGReader reads): one conversation per
// line and agent chain (splitAgents), "s<session>" for a session's main
// chain, "s<session>.<k>" for its subagents, "r<seq>" for a row without a
// session. A turn is {"messages": [{"role": "user", "content": filler}],
// "max_tokens", "model", "delay" (ms), "spawns": [{"children", "join_at"}]}:
//   - messages hold the tokens the prompt adds to the conversation's
//     previous prompt and reply (AIPerf threads the live replies into the
//     history; a first turn is tagged per conversation); a conversation
//     whose prompt ever shrinks (compaction) is written with context_mode
//     "message_array_with_responses", each turn its whole prompt (counted).
//   - delay: think_ns, else arrival − the latest finish of its dependencies.
//   - a session with several calls without a parent is an orchestrator
//     conversation ("s<session>", sending nothing) that spawns their chains;
//   - a subagent is spawned by the call that started it, joined at the
//     parent chain's first later turn that waits for it; one the trace does
//     not join is joined at its parent's last turn (AIPerf's spawns always
//     join; counted), one spawned by its parent's last turn is written as a
//     conversation of its own (link counted).
//
// Not representable, and counted: arrival times (AIPerf's DAG has delays
// only; roots start together), finish times, joins on anything but the
// chain's previous turn and its spawned subagents' last turns, prefix
// blocks, classes; a call with 0 output tokens is written with max_tokens 1
// (AIPerf's minimum). The writer holds the whole trace until Close.
func NewAIPerfDAGWriter(w io.Writer, m traces.Meta, o ExportOptions) (traces.Writer, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return &dagWriter{sessionExport: sessionExport{Sink: textsink.New(w), name: "aiperf-dag"}}, nil
}

type dagWriter struct {
	sessionExport
	b    []byte
	tags int64
}

func (w *dagWriter) Close() error { return w.closeAfter(w.writeAll) }

func (w *dagWriter) writeAll() error {
	rows := int64(0)
	for _, g := range w.groups() {
		if err := checkRows(g); err != nil {
			return err
		}
		s := w.layout(g)
		if err := w.writeOrchestrator(s); err != nil {
			return err
		}
		for a := range s.agents {
			rows += int64(len(s.agents[a].calls))
			if err := w.writeConversation(s, a); err != nil {
				return err
			}
		}
	}
	if rows > 0 {
		w.lost(rows, "arrival times (AIPerf's DAG has delays only: replay the import with %s closed)", replaySessions)
	}
	return nil
}

// dagSession is one session laid out as DAG conversations: its agents
// (splitAgents with separate roots), each written as a conversation, and
// where each subagent is joined.
type dagSession struct {
	g         []traces.Record
	agents    []exportAgent
	agentOf   []int
	idx       map[int64]int
	pos       []int // a call's index in its agent
	multiRoot int   // how many agents have no spawner
	// joinAt is the turn of its parent chain that joins a subagent (-1
	// for none); a detached subagent is written as a conversation of its
	// own.
	joinAt   []int
	detached []bool
}

// layout splits group g into agents and finds where each subagent is
// joined: the first later call of its parent chain that waits for one of
// its calls.
func (w *dagWriter) layout(g []traces.Record) *dagSession {
	agents, agentOf := splitAgents(g, true)
	s := &dagSession{g: g, agents: agents, agentOf: agentOf, idx: seqIndex(g), pos: make([]int, len(g))}
	for _, a := range agents {
		for k, i := range a.calls {
			s.pos[i] = k
		}
	}
	for _, a := range agents {
		if a.spawner < 0 {
			s.multiRoot++
		}
	}
	s.joinAt = make([]int, len(agents))
	s.detached = make([]bool, len(agents))
	for sub := range agents {
		s.joinAt[sub] = -1
		if agents[sub].spawner < 0 {
			continue
		}
		p := agentOf[agents[sub].spawner]
		for _, j := range agents[p].calls[s.pos[agents[sub].spawner]+1:] {
			for _, d := range exportDeps(&g[j]) {
				if k, ok := s.idx[d]; ok && agentOf[k] == sub && s.joinAt[sub] < 0 {
					s.joinAt[sub] = s.pos[j]
				}
			}
		}
		if s.joinAt[sub] < 0 {
			last := len(agents[p].calls) - 1
			if s.pos[agents[sub].spawner] < last {
				s.joinAt[sub] = last
				w.tally.add("%d subagents the trace does not join are joined at their parent chain's last turn (AIPerf's spawns always join)", 1)
			} else {
				s.detached[sub] = true
				w.lost(1, "links of subagents spawned by their parent chain's last call (written as conversations of their own)")
			}
		}
	}
	return s
}

// name is agent a's session_id; a = −1 is the session's orchestrator.
func (s *dagSession) name(a int) string {
	g := s.g
	if g[0].Session == 0 {
		return "r" + strconv.FormatInt(g[0].Seq, 10)
	}
	n := "s" + strconv.FormatInt(g[0].Session, 10)
	if a > 0 || (a == 0 && s.multiRoot > 1) {
		n += "." + strconv.Itoa(a)
	}
	return n
}

// writeOrchestrator writes the orchestrator of a session with several
// calls without a parent: it sends nothing and fires their chains
// together, in one session.
func (w *dagWriter) writeOrchestrator(s *dagSession) error {
	var roots []int
	for a := range s.agents {
		if s.agents[a].spawner < 0 {
			roots = append(roots, a)
		}
	}
	if len(roots) <= 1 {
		return nil
	}
	b := append(w.b[:0], `{"session_id": `...)
	b = appendJSONString(b, s.name(-1))
	b = append(b, `, "orchestrator": true, "spawns": [`...)
	for k, a := range roots {
		if k > 0 {
			b = append(b, ", "...)
		}
		b = appendJSONString(b, s.name(a))
	}
	b = append(b, "]}\n"...)
	w.b = b
	_, err := w.Buf.Write(b)
	return err
}

// writeConversation writes agent a of session s as one conversation.
func (w *dagWriter) writeConversation(s *dagSession, a int) error {
	g := s.g
	b := append(w.b[:0], `{"session_id": `...)
	b = appendJSONString(b, s.name(a))
	isolated := false
	var pIn, pOut int64
	for k, i := range s.agents[a].calls {
		if k > 0 && int64(g[i].InputTokens) < pIn+pOut {
			isolated = true
		}
		pIn, pOut = int64(g[i].InputTokens), int64(g[i].OutputTokens)
	}
	if isolated {
		b = append(b, `, "context_mode": "message_array_with_responses"`...)
		w.tally.add("%d conversations whose prompt shrinks (compaction) are written with each turn's whole prompt (context_mode message_array_with_responses)", 1)
	}
	b = append(b, `, "turns": [`...)
	w.tags++
	pIn, pOut = 0, 0
	for k, i := range s.agents[a].calls {
		r := &g[i]
		if k > 0 {
			b = append(b, ", "...)
		}
		add := int64(r.InputTokens)
		if k > 0 && !isolated {
			add -= pIn + pOut
		}
		pIn, pOut = int64(r.InputTokens), int64(r.OutputTokens)
		text := fillerText(add)
		if k == 0 || isolated {
			text = taggedFiller(add, w.tags)
		}
		b = w.appendTurn(b, s, a, k, text)
	}
	b = append(b, "]}\n"...)
	w.b = b
	_, err := w.Buf.Write(b)
	return err
}

// appendTurn appends turn k of agent a, whose new prompt is text: its
// message, max_tokens, model, delay and spawns, counting the dependencies
// and columns the format cannot hold.
func (w *dagWriter) appendTurn(b []byte, s *dagSession, a, k int, text string) []byte {
	g, agents, agentOf := s.g, s.agents, s.agentOf
	i := agents[a].calls[k]
	r := &g[i]
	lostPrefixKinds(&w.tally, r, w.name)
	b = append(b, `{"messages": [{"role": "user", "content": `...)
	b = appendJSONString(b, text)
	b = append(b, `}], "max_tokens": `...)
	out := int64(r.OutputTokens)
	if out < 1 {
		out = 1
		w.tally.add("%d calls with 0 output tokens were written with max_tokens 1 (AIPerf's minimum)", 1)
	}
	b = strconv.AppendInt(b, out, 10)
	if r.Model != "" {
		b = append(b, `, "model": `...)
		b = appendJSONString(b, r.Model)
	}
	if think := thinkOf(g, s.idx, i); think > 0 {
		b = append(b, `, "delay": `...)
		b = appendDecimal(b, think, 6)
	}
	// Which of its dependencies the format holds: the chain's previous
	// turn, the spawner (first turn of a subagent), and the last calls of
	// subagents joined here.
	for _, d := range exportDeps(r) {
		j, ok := s.idx[d]
		switch {
		case !ok:
		case agentOf[j] == a && s.pos[j] == k-1:
		case k == 0 && j == agents[a].spawner && !s.detached[a]:
		case agents[agentOf[j]].spawner >= 0 && agentOf[agents[agentOf[j]].spawner] == a && s.joinAt[agentOf[j]] == k && j == agents[agentOf[j]].calls[len(agents[agentOf[j]].calls)-1]:
		default:
			w.lost(1, "dependencies (a join on another call than the chain's previous turn and its subagents' last turns)")
		}
	}
	var spawned []int
	for sub := range agents {
		if agents[sub].spawner == i && !s.detached[sub] {
			spawned = append(spawned, sub)
		}
	}
	if len(spawned) > 0 {
		b = append(b, `, "spawns": [`...)
		for n, sub := range spawned {
			if n > 0 {
				b = append(b, ", "...)
			}
			b = append(b, `{"children": [`...)
			b = appendJSONString(b, s.name(sub))
			b = append(b, `], "join_at": `...)
			b = strconv.AppendInt(b, int64(s.joinAt[sub]), 10)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	for _, c := range []struct {
		is   bool
		what string
	}{{r.FinishNs >= 0, "finish times"}, {len(r.PrefixBlocks) > 0, "rows' prefix blocks"}, {r.Class != "", "rows' class"}} {
		if c.is {
			w.lost(1, c.what)
		}
	}
	return append(b, '}')
}

// ---------------------------------------------------------------------
// inference-perf OTel trace replay

// otelEpoch is the wall-clock time an inference-perf export's session
// starts at.
var otelEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// NewInferencePerfWriter writes inference-perf's OTel trace-replay input
// (data.type otel_trace_replay; the format NewOTelReader reads): one
// trace document per session, one per line, {"trace_id", "spans": [...]},
// a span per call with start_time and end_time (ISO 8601, UTC, µs, from
// 2026-01-01 plus the arrival and finish), and the GenAI attributes
// gen_ai.request.model, gen_ai.request.max_tokens, gen_ai.usage.input_tokens
// and output_tokens, gen_ai.input.messages (the parent call's messages and
// reply plus the tokens the prompt adds, filler text) and
// gen_ai.output.text. inference-perf reads a directory of files, one per
// trace: `split -l 1 --additional-suffix=.json out traces/trace_`.
//
// inference-perf infers a call's dependencies from the span times (every
// call that ended before it started, reduced to the direct ones), so what
// the trace says and what the times imply can differ: the writer runs the
// same inference on what it wrote and counts the calls whose dependencies
// would change. Not representable, and counted: finish times of calls
// without one (their span ends when it starts), think times (they are the
// gaps), prefix blocks and classes. Rows without a session are one-call
// traces (for plain traces use the azure export, inference-perf's
// trace_replay input). The writer holds the whole trace until Close.
func NewInferencePerfWriter(w io.Writer, m traces.Meta, o ExportOptions) (traces.Writer, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return &otelWriter{sessionExport: sessionExport{Sink: textsink.New(w), name: "inference-perf"}}, nil
}

type otelWriter struct {
	sessionExport
	b []byte
}

func (w *otelWriter) Close() error { return w.closeAfter(w.writeAll) }

type otelOutMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

func (w *otelWriter) writeAll() error {
	n := int64(0)
	for _, g := range w.groups() {
		if err := checkRows(g); err != nil {
			return err
		}
		n++
		if g[0].Session == 0 {
			w.tally.add("%d rows without a session were written as one-call traces", 1)
		}
		calls := w.otelCalls(g, n)
		w.otelTimes(g, calls)
		b := append(w.b[:0], `{"trace_id": "tokentrace-`...)
		b = strconv.AppendInt(b, n, 10)
		b = append(b, `", "spans": [`...)
		for i := range g {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = w.appendSpan(b, &g[i], &calls[i], n, len(g))
		}
		b = append(b, "]}\n"...)
		w.b = b
		if _, err := w.Buf.Write(b); err != nil {
			return err
		}
		w.checkGraph(g, calls)
	}
	return nil
}

// otelOutCall is one call as the inference-perf export writes it: times
// from the session's start (ns, written to the µs), its span's number,
// messages and output text.
type otelOutCall struct {
	start, end int64
	span       int
	msgs       []otelOutMessage
	out        string
}

// otelTimes sets the calls' span times and numbers: laid out anew
// (otelLayout) when inference-perf then infers the trace's dependencies,
// else the recorded times (the calls it would link otherwise are counted
// by checkGraph).
func (w *otelWriter) otelTimes(g []traces.Record, calls []otelOutCall) {
	if start, end, order, ok := otelLayout(g, reducedDeps(g)); ok {
		trial := append([]otelOutCall(nil), calls...)
		for k, i := range order {
			trial[i].start, trial[i].end, trial[i].span = start[i], end[i], k
		}
		if len(otelDiffer(g, trial)) == 0 {
			copy(calls, trial)
			if len(g) > 1 {
				w.tally.add("%d sessions' span times were laid out anew so that inference-perf's graph builder infers their dependencies: each wait after a call's dependencies is kept (to the ms), span durations are not (inference-perf replays waits, never durations), calls without a dependency start at 0", 1)
			}
			return
		}
	}
	base := g[0].ArrivalNs
	for i := range g {
		r, c := &g[i], &calls[i]
		c.span = i
		c.start = (r.ArrivalNs - base + 500) / 1000 * 1000
		c.end = c.start
		if r.FinishNs >= r.ArrivalNs {
			c.end = (r.FinishNs - base + 500) / 1000 * 1000
		} else {
			w.lost(1, "missing finish times (the span ends when it starts)")
		}
		if c.start != r.ArrivalNs-base || (r.FinishNs >= r.ArrivalNs && c.end != r.FinishNs-base) {
			w.tally.add("%d calls' times rounded to the microsecond", 1)
		}
	}
}

// otelSpanID is the span id of span number k of a session of n calls,
// zero-padded so that ids sort as numbers (inference-perf orders calls that
// start together by id).
func otelSpanID(k, n int) string {
	s := strconv.Itoa(k + 1)
	for len(s) < len(strconv.Itoa(n)) {
		s = "0" + s
	}
	return "span_" + s
}

// otelCalls lays out session g (document n): each call's times, its
// messages (the parent's messages and reply, the replies of the other calls
// it waits for, then the tokens its prompt adds) and an output text that no
// other call's output contains (inference-perf draws a dependency wherever
// an earlier output appears in an assistant message).
func (w *otelWriter) otelCalls(g []traces.Record, n int64) []otelOutCall {
	idx := seqIndex(g)
	width := len(strconv.FormatInt(int64(len(g)), 36))
	calls := make([]otelOutCall, len(g))
	for i := range g {
		r, c := &g[i], &calls[i]
		c.out = otelOutputText(int64(r.OutputTokens), n, i, width)
		add := int64(r.InputTokens)
		var msgs []otelOutMessage
		if p, ok := idx[r.ParentSeq]; ok && r.ParentSeq >= 0 && p < i {
			if add -= int64(g[p].InputTokens) + int64(g[p].OutputTokens); add >= 0 {
				msgs = append(msgs, calls[p].msgs...)
			} else {
				// A prompt shorter than its parent's context (a subagent,
				// a compaction) still carries the parent's reply, the
				// edge inference-perf reads.
				add = max(int64(r.InputTokens)-int64(g[p].OutputTokens), 1)
			}
			msgs = append(msgs, otelOutMessage{"assistant", calls[p].out})
		}
		for _, d := range exportDeps(r) {
			if j, ok := idx[d]; ok && d != r.ParentSeq && j < i {
				msgs = append(msgs, otelOutMessage{"assistant", calls[j].out})
			}
		}
		if len(msgs) == 0 {
			msgs = append(msgs, otelOutMessage{"user", taggedFiller(add, n)})
		} else {
			msgs = append(msgs, otelOutMessage{"user", fillerText(add)})
		}
		c.msgs = msgs
	}
	return calls
}

// otelOutputText is call i's output in session document n: filler of
// `tokens` tokens whose first word is the call's tag ("o", n in base 36,
// "x", i in base 36 with width digits), so that no output holds another
// (an empty output would match every assistant message) and no two
// sessions share a reply's text.
func otelOutputText(tokens, n int64, i, width int) string {
	tag := strconv.FormatInt(int64(i), 36)
	for len(tag) < width {
		tag = "0" + tag
	}
	tag = "o" + strconv.FormatInt(n, 36) + "x" + tag
	if tokens <= 1 {
		return tag
	}
	return tag + fillerText(tokens)[3:]
}

// appendSpan appends a call of session document n, of size calls.
func (w *otelWriter) appendSpan(b []byte, r *traces.Record, c *otelOutCall, n int64, size int) []byte {
	lostPrefixKinds(&w.tally, r, w.name)
	in, _ := json.Marshal(c.msgs)
	b = append(b, `{"trace_id": "tokentrace-`...)
	b = strconv.AppendInt(b, n, 10)
	b = append(b, `", "span_id": "`...)
	b = append(b, otelSpanID(c.span, size)...)
	b = append(b, `", "parent_span_id": null, "name": "chat `...)
	b = append(b, r.Model...)
	b = append(b, `", "kind": "SPAN_KIND_CLIENT", "start_time": "`...)
	b = otelEpoch.Add(time.Duration(c.start)).AppendFormat(b, "2006-01-02T15:04:05.000000")
	b = append(b, `", "end_time": "`...)
	b = otelEpoch.Add(time.Duration(c.end)).AppendFormat(b, "2006-01-02T15:04:05.000000")
	b = append(b, `", "attributes": {"gen_ai.operation.name": "chat", "tokentrace.seq": `...)
	// (inference-perf drops spans with equal times and attributes: the seq
	// keeps two identical calls apart.)
	b = strconv.AppendInt(b, r.Seq, 10)
	b = append(b, `, "gen_ai.request.model": `...)
	b = appendJSONString(b, r.Model)
	b = append(b, `, "gen_ai.request.max_tokens": `...)
	b = strconv.AppendInt(b, int64(r.OutputTokens), 10)
	b = append(b, `, "gen_ai.usage.input_tokens": `...)
	b = strconv.AppendInt(b, int64(r.InputTokens), 10)
	b = append(b, `, "gen_ai.usage.output_tokens": `...)
	b = strconv.AppendInt(b, int64(r.OutputTokens), 10)
	b = append(b, `, "gen_ai.input.messages": `...)
	b = appendJSONString(b, string(in))
	b = append(b, `, "gen_ai.output.text": `...)
	b = appendJSONString(b, c.out)
	b = append(b, `}, "status": {"code": 1, "message": ""}}`...)
	for _, c := range []struct {
		is   bool
		what string
	}{{len(r.PrefixBlocks) > 0, "rows' prefix blocks"}, {r.Class != "", "rows' class"}} {
		if c.is {
			w.lost(1, c.what)
		}
	}
	return b
}

// checkGraph runs inference-perf's graph inference (otelGraph) on what was
// written for session g and counts the calls whose dependencies it would
// draw otherwise than the trace has them (up to transitivity: a
// dependency reached through another one is not needed).
func (w *otelWriter) checkGraph(g []traces.Record, calls []otelOutCall) {
	if n := len(otelDiffer(g, calls)); n > 0 {
		w.lost(int64(n), "calls' dependencies (inference-perf's graph builder draws others from these times: the latest call that ended before a call started is always one)")
	}
}

// otelDiffer returns the calls of session g whose dependencies
// inference-perf's graph builder, reading calls as written, would draw
// otherwise than the trace's own, transitively reduced.
func otelDiffer(g []traces.Record, calls []otelOutCall) []int {
	start := make([]int64, len(calls))
	for i := range calls {
		start[i] = calls[i].start
	}
	order := otelSpanOrder(start, func(i int) string { return otelSpanID(calls[i].span, len(calls)) })
	// Replies are matched by their tags alone: a reply's tag (its first
	// word) appears nowhere but at the start of that reply, so one reply
	// contains another exactly when their tags are equal, and the check
	// stays cheap on long prompts.
	tag := func(text string) string { t, _, _ := strings.Cut(text, " "); return t }
	gc := make([]otelGraphCall, len(calls))
	for k, i := range order {
		c := &calls[i]
		gc[k] = otelGraphCall{startMs: otelMs(c.start), endMs: otelMs(c.end), out: tag(c.out), hasOut: true}
		for _, m := range c.msgs {
			if m.Role == "assistant" {
				gc[k].msgs = append(gc[k].msgs, otelGraphMsg{role: m.Role, text: tag(m.Content)})
			}
		}
	}
	peer := otelGraph(gc)
	want := reducedDeps(g)
	var differ []int
	for k, i := range order {
		got := map[int]bool{}
		for p := range peer[k] {
			got[order[p]] = true
		}
		same := len(got) == len(want[i])
		for _, j := range want[i] {
			same = same && got[j]
		}
		if !same {
			differ = append(differ, i)
		}
	}
	return differ
}

// reducedDeps returns each call's dependencies within session g (indexes)
// without those reached through another of them.
func reducedDeps(g []traces.Record) [][]int {
	idx := seqIndex(g)
	deps := make([][]int, len(g))
	for i := range g {
		for _, d := range exportDeps(&g[i]) {
			if j, ok := idx[d]; ok && j != i {
				deps[i] = append(deps[i], j)
			}
		}
	}
	reaches := func(from, to int) bool { // to is an ancestor of from
		seen := map[int]bool{}
		stack := append([]int(nil), deps[from]...)
		for len(stack) > 0 {
			a := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if a == to {
				return true
			}
			if !seen[a] {
				seen[a] = true
				stack = append(stack, deps[a]...)
			}
		}
		return false
	}
	out := make([][]int, len(g))
	for i := range g {
		for _, d := range deps[i] {
			implied := false
			for _, e := range deps[i] {
				if e != d && reaches(e, d) {
					implied = true
				}
			}
			if !implied {
				out[i] = append(out[i], d)
			}
		}
	}
	return out
}
