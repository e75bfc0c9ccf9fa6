package formats

import (
	"encoding/json"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// otelMaxSpans bounds the LLM spans of one trace document: dependencies
// are inferred pairwise.
const otelMaxSpans = 10000

// NewOTelReader reads the OpenTelemetry trace files that inference-perf
// replays with data.type otel_trace_replay (kubernetes-sigs/inference-perf
// docs/otel_trace_replay.md "Trace File Format" and
// inference_perf/datagen/replay/otel_trace_to_replay_graph.py @ 7de5ef2):
// one JSON document per trace (a session), {"trace_id", "spans": [span,
// ...]}, documents back to back (`cat traces/*.json` works). A span is
//
//	{"span_id", "trace_id", "parent_span_id", "name", "start_time", "end_time",
//	 "attributes": {"gen_ai.request.model", "gen_ai.request.max_tokens",
//	   "gen_ai.input.messages", "gen_ai.output.messages" | "gen_ai.output.text",
//	   "gen_ai.usage.input_tokens" | "gen_ai.usage.prompt_tokens",
//	   "gen_ai.usage.output_tokens" | "gen_ai.usage.completion_tokens"}}
//
// with ISO 8601 times (no zone = UTC) or OTLP's "start_time_unix_nano" /
// "end_time_unix_nano". LLM calls are the spans inference-perf replays:
// gen_ai.operation.name "chat" (or a name starting "chat ") with input
// messages (or, here, token usage); others are counted and skipped. Content is read only to count tokens where the usage
// attributes are missing, and never kept.
//
// Every LLM span becomes a Record:
//   - Session: the document, numbered from 1; Turn: the call's place by
//     start time.
//   - ArrivalNs, FinishNs: start_time, end_time as offsets from the
//     document's earliest start (every session starts at 0, as inference-perf
//     replays them: by session, not by wall clock).
//   - InputTokens: the usage attribute, else inference-perf's estimate,
//     max(1, characters / 4) per input message; OutputTokens: the usage
//     attribute, else the same estimate of the recorded output text (what
//     inference-perf replays; gen_ai.request.max_tokens is a cap and is not
//     read). Each estimate is counted in a note. Model:
//     gen_ai.request.model.
//   - Dependencies as inference-perf's graph builder infers them
//     (otelGraph): causal edges where an input's assistant message holds an
//     earlier call's output, and the latest earlier call that ended before
//     it started. ParentSeq is the predecessor that ended last; AfterSeqs
//     lists them all when there are several (a join). The content is read
//     for this and never kept.
//
// A document is one row for strictness: a span without times, or with an
// end before its start, skips the whole document (a *RowError at the line
// where it starts). Text that is not JSON ends the import.
func NewOTelReader(r io.Reader, name string, o traces.OpenOptions) (traces.Reader, error) {
	d := &otelDecoder{name: name, docs: newJSONDocs(r, name, o)}
	return newImportReader(r, d, traces.NewMeta(importSource("inference-perf", name)), o), nil
}

type otelDoc struct {
	Spans []otelSpan `json:"spans"`
}

type otelSpan struct {
	SpanID        string                     `json:"span_id"`
	Name          string                     `json:"name"`
	StartTime     string                     `json:"start_time"`
	EndTime       string                     `json:"end_time"`
	StartUnixNano *json.Number               `json:"start_time_unix_nano"`
	EndUnixNano   *json.Number               `json:"end_time_unix_nano"`
	Attributes    map[string]json.RawMessage `json:"attributes"`
}

type otelDecoder struct {
	name     string
	docs     *jsonDocs
	queue    []traces.Record
	kept     int64
	sessions int64
	tally    importTally
}

func (d *otelDecoder) notes() []traces.Text { return d.tally.notes() }

func (d *otelDecoder) next(rec *traces.Record) error {
	for len(d.queue) == 0 {
		raw, line, err := d.docs.next()
		if err != nil {
			return err
		}
		if err := d.flatten(raw, line); err != nil {
			return err
		}
	}
	popRecord(&d.queue, rec)
	return nil
}

// otelTime parses an OTel time: ISO 8601 (no zone = UTC) or Unix
// nanoseconds.
func otelTime(iso string, nano *json.Number) (int64, bool) {
	if nano != nil {
		v, err := parseScaled(string(*nano), 0)
		return v, err == nil
	}
	s := strings.TrimSpace(iso)
	if s == "" {
		return 0, false
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999"} {
		if t, err := time.Parse(layout, s); err == nil && t.Year() >= 1970 && t.Year() <= 2200 {
			return t.UnixNano(), true
		}
	}
	return 0, false
}

// otelAttr returns a numeric attribute (a JSON number or numeric string).
func otelAttr(attrs map[string]json.RawMessage, keys ...string) (int32, bool, error) {
	for _, k := range keys {
		raw, ok := attrs[k]
		if !ok || string(raw) == "null" {
			continue
		}
		s := strings.Trim(string(raw), `"`)
		v, err := parseCount(s)
		return v, true, err
	}
	return 0, false, nil
}

// otelText returns a text attribute: a JSON string holding messages or
// text, or messages given as JSON directly.
func otelText(attrs map[string]json.RawMessage, key string) (string, bool) {
	raw, ok := attrs[key]
	if !ok {
		return "", false
	}
	msgs, raw, ok := otelChatMessages(raw)
	if ok {
		var b strings.Builder
		for _, m := range msgs {
			t, _ := chatMessageText(m.Content)
			b.WriteString(t)
		}
		return b.String(), true
	}
	return string(raw), true // plain text
}

// otelChatMessages reads an attribute that holds chat messages, as a JSON
// string holding them or as JSON itself; unquoted is the attribute with
// its string's quotes taken off (its text, where it holds no messages).
func otelChatMessages(raw json.RawMessage) (msgs []chatMessage, unquoted json.RawMessage, ok bool) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		raw = json.RawMessage(s)
	}
	ok = json.Unmarshal(raw, &msgs) == nil
	return msgs, raw, ok
}

// otelCall is an LLM span read as a call, its times absolute.
type otelCall struct {
	rec        traces.Record
	start, end int64
	spanID     string
	graph      otelGraphCall
}

// otelEstimates counts the calls whose counts were not in their span's
// usage: estimated from text.
type otelEstimates struct{ in, out int64 }

func (d *otelDecoder) flatten(raw json.RawMessage, line int64) error {
	bad := func(format string, a ...any) error { return importRowError(d.name, line, format, a...) }
	if len(raw) == 0 || raw[0] != '{' {
		return bad("not a JSON object")
	}
	var doc otelDoc
	if err := json.Unmarshal(raw, &doc); err != nil {
		return bad("not an OTel trace document: want {\"spans\": [...]} with string times and attribute maps")
	}
	var calls []otelCall
	var skipped int64
	var est otelEstimates
	for _, sp := range doc.Spans {
		if !otelIsLLM(&sp) {
			skipped++
			continue
		}
		c, err := otelSpanCall(&sp, &est, bad)
		if err != nil {
			return err
		}
		calls = append(calls, c)
		if len(calls) > otelMaxSpans {
			return bad("more than %d LLM spans in one trace", otelMaxSpans)
		}
	}
	d.tally.add("%d non-LLM spans (tools, agents, HTTP) were skipped: their time shows as gaps between calls", skipped)
	d.tally.add("%d calls had no input token usage: estimated as inference-perf does, max(1, characters / 4) per input message", est.in)
	d.tally.add("%d calls had no output token usage: estimated from the recorded output text as inference-perf does, max(1, characters / 4)", est.out)
	if len(calls) == 0 {
		return nil
	}
	session := d.sessions + 1
	if session >= 1<<31 {
		return bad("more than 2^31 traces")
	}
	d.sessions = session
	sort.SliceStable(calls, func(a, b int) bool {
		if calls[a].start != calls[b].start {
			return calls[a].start < calls[b].start
		}
		return calls[a].spanID < calls[b].spanID
	})
	d.link(calls, session)
	d.kept += int64(len(calls))
	return nil
}

// otelSpanCall reads an LLM span as a call: its times, what inference-perf's
// graph builder reads of its content, its token counts (from usage, else
// estimated as the builder does, counted in est) and its model.
func otelSpanCall(sp *otelSpan, est *otelEstimates, bad func(string, ...any) error) (otelCall, error) {
	start, ok1 := otelTime(sp.StartTime, sp.StartUnixNano)
	end, ok2 := otelTime(sp.EndTime, sp.EndUnixNano)
	if !ok1 || !ok2 {
		return otelCall{}, bad("an LLM span has no readable start_time or end_time")
	}
	if end < start {
		return otelCall{}, bad("an LLM span ends before it starts")
	}
	c := otelCall{rec: traces.NewRecord(), start: start, end: end, spanID: sp.SpanID}
	msgs, ok := otelGraphMessages(sp.Attributes["gen_ai.input.messages"])
	if !ok {
		return otelCall{}, bad("gen_ai.input.messages: not a list of chat messages")
	}
	c.graph.msgs = msgs
	c.graph.out, c.graph.hasOut = otelGraphOutput(sp.Attributes)
	in, ok, err := otelAttr(sp.Attributes, "gen_ai.usage.prompt_tokens", "gen_ai.usage.input_tokens")
	if err != nil {
		return otelCall{}, bad("gen_ai.usage.input_tokens: %v", err)
	}
	if !ok {
		var n int64
		for _, m := range msgs {
			n += otelEstimate(m.text)
		}
		if n > 1<<31-1 {
			return otelCall{}, bad("the estimated prompt is out of range")
		}
		in = int32(n)
		est.in++
	}
	out, ok, err := otelAttr(sp.Attributes, "gen_ai.usage.completion_tokens", "gen_ai.usage.output_tokens")
	if err != nil {
		return otelCall{}, bad("gen_ai.usage.output_tokens: %v", err)
	}
	if !ok {
		n := otelEstimate(c.graph.out)
		if n > 1<<31-1 {
			return otelCall{}, bad("the estimated output is out of range")
		}
		out = int32(n)
		est.out++
	}
	c.rec.InputTokens, c.rec.OutputTokens = in, out
	if raw, ok := sp.Attributes["gen_ai.request.model"]; ok {
		var m string
		if json.Unmarshal(raw, &m) == nil {
			c.rec.Model = m
		}
	}
	return c, nil
}

// link queues one trace's calls, in inference-perf's order, as session
// session: times from the first start, and each call's dependencies as
// inference-perf's graph builder infers them (otelGraph), the latest to
// end its parent.
func (d *otelDecoder) link(calls []otelCall, session int64) {
	base := calls[0].start
	g := make([]otelGraphCall, len(calls))
	for i := range calls {
		g[i] = calls[i].graph
		g[i].startMs = otelMs(calls[i].start - base)
		g[i].endMs = otelMs(calls[i].end - base)
	}
	preds := otelGraph(g)
	for i := range calls {
		c := &calls[i]
		c.rec.Session = session
		c.rec.Turn = int32(i + 1)
		c.rec.ArrivalNs = c.start - base
		c.rec.FinishNs = c.end - base
		direct := make([]int, 0, len(preds[i]))
		for j := range preds[i] {
			direct = append(direct, j)
		}
		sort.Ints(direct)
		if len(direct) > 0 {
			last := direct[0]
			for _, j := range direct {
				if calls[j].end > calls[last].end || (calls[j].end == calls[last].end && j > last) {
					last = j
				}
			}
			c.rec.ParentSeq = d.kept + int64(last)
			if len(direct) > 1 {
				for _, j := range direct {
					c.rec.AfterSeqs = append(c.rec.AfterSeqs, d.kept+int64(j))
				}
			}
		}
		d.queue = append(d.queue, c.rec)
	}
}

// otelMs is inference-perf's millisecond of an offset in ns (rounded).
func otelMs(ns int64) int64 { return (ns + 500_000) / 1_000_000 }

// otelIsLLM is inference-perf's test for an LLM call: the operation is chat
// (gen_ai.operation.name, else a name starting "chat ") and the span has
// input messages; a span with token usage but no messages counts too here
// (a capture that dropped the content).
func otelIsLLM(sp *otelSpan) bool {
	var op string
	if raw, ok := sp.Attributes["gen_ai.operation.name"]; ok {
		json.Unmarshal(raw, &op)
	}
	if op != "chat" && !strings.HasPrefix(sp.Name, "chat ") {
		return false
	}
	if raw, ok := sp.Attributes["gen_ai.input.messages"]; ok {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s != "" && s != "[]"
		}
		return len(raw) > 0 && string(raw) != "null" && string(raw) != "[]"
	}
	_, u1 := sp.Attributes["gen_ai.usage.input_tokens"]
	_, u2 := sp.Attributes["gen_ai.usage.prompt_tokens"]
	return u1 || u2
}
