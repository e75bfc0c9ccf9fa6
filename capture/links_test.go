package capture

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// otlpTestSpan is one span of an OTLP test line; times in ms from t0.
type otlpTestSpan struct {
	trace, id, parent, name string
	startMs, endMs          int64
	conv                    string // gen_ai.conversation.id ("" none)
}

const otlpT0 = int64(1740823200000000000)

// otlpLine is an export line holding spans (llm_request spans get usage).
func otlpLine(spans ...otlpTestSpan) string {
	var out []any
	for i, s := range spans {
		m := map[string]any{"traceId": s.trace, "spanId": s.id, "parentSpanId": s.parent, "name": s.name,
			"startTimeUnixNano": fmt.Sprint(otlpT0 + s.startMs*1e6)}
		if s.endMs > 0 {
			m["endTimeUnixNano"] = fmt.Sprint(otlpT0 + s.endMs*1e6)
		}
		if s.name == SpanName {
			attrs := []any{map[string]any{"key": "gen_ai.usage.prompt_tokens", "value": map[string]any{"intValue": fmt.Sprint(10 + i)}}}
			if s.conv != "" {
				attrs = append(attrs, map[string]any{"key": "gen_ai.conversation.id", "value": map[string]any{"stringValue": s.conv}})
			}
			m["attributes"] = attrs
		}
		out = append(out, m)
	}
	b, _ := json.Marshal(map[string]any{"resourceSpans": []any{map[string]any{"scopeSpans": []any{map[string]any{"spans": out}}}}})
	return string(b) + "\n"
}

func llm(trace, id, parent string, startMs, endMs int64) otlpTestSpan {
	return otlpTestSpan{trace: trace, id: id, parent: parent, name: SpanName, startMs: startMs, endMs: endMs}
}

func tool(trace, id, parent string, startMs int64) otlpTestSpan {
	return otlpTestSpan{trace: trace, id: id, parent: parent, name: "execute_tool", startMs: startMs, endMs: startMs + 1}
}

// TestOTLPParentLinks captures OTLP lines and checks every call's session,
// parent_seq and finish_ns, and the links counted. Rows are in arrival
// order; seq i is the i-th call to arrive.
func TestOTLPParentLinks(t *testing.T) {
	type want = linkWant
	for _, tc := range []struct {
		name, why string
		lines     []string
		mod       func(*Options)
		want      []want
		links     int64
		dropped   int64
	}{
		{
			name: "chain",
			why:  "a parent, its child and grandchild, logged in reverse order (spans are exported when they end): the links follow the spans, not the lines",
			lines: []string{
				otlpLine(llm("t1", "c", "b", 400, 500)),
				otlpLine(llm("t1", "b", "a", 200, 300)),
				otlpLine(llm("t1", "a", "", 0, 100)),
			},
			want:  []want{{1, -1, 100}, {1, 0, 300}, {1, 1, 500}},
			links: 2,
		},
		{
			name: "through a tool span on the line",
			why:  "a subagent's call whose parent is a tool span, itself a child of the call that asked for the tool: the nearest llm_request ancestor on the line is the parent",
			lines: []string{
				otlpLine(llm("t1", "a", "root", 0, 100), tool("t1", "tool", "a", 100), llm("t1", "b", "tool", 150, 250)),
			},
			want:    []want{{1, -1, 100}, {1, 0, 250}},
			links:   1,
			dropped: 1, // a's parent, the agent's root span, was not captured
		},
		{
			name: "fan out",
			why:  "two subagents spawned by one call both link to it",
			lines: []string{
				otlpLine(llm("t1", "a", "", 0, 100)),
				otlpLine(llm("t1", "b", "a", 120, 300), llm("t1", "c", "a", 130, 200)),
			},
			want:  []want{{1, -1, 100}, {1, 0, 300}, {1, 0, 200}},
			links: 2,
		},
		{
			name:    "missing parent",
			why:     "a parent span that is no captured call: the link is dropped and counted, the call kept without it",
			lines:   callThenChild("gone"),
			want:    []want{{1, -1, 100}, {1, -1, 300}},
			dropped: 1,
		},
		{
			name:    "missing parent, strict",
			why:     "a dropped link is not a malformed line: Strict does not fail on it",
			lines:   callThenChild("gone"),
			mod:     func(o *Options) { o.Strict = true },
			want:    []want{{1, -1, 100}, {1, -1, 300}},
			dropped: 1,
		},
		{
			name: "tool span on another line",
			why:  "an ancestor chain through a span exported on another line is not followed (the parser sees one line at a time): dropped",
			lines: []string{
				otlpLine(llm("t1", "a", "", 0, 100)),
				otlpLine(tool("t1", "tool", "a", 100)),
				otlpLine(llm("t1", "b", "tool", 150, 250)),
			},
			want:    []want{{1, -1, 100}, {1, -1, 250}},
			dropped: 1,
		},
		{
			name: "same span ids in two traces",
			why:  "span ids are scoped by their trace: each trace is its own session and links only within itself",
			lines: []string{
				otlpLine(llm("t1", "a", "", 0, 100), llm("t2", "a", "", 10, 110)),
				otlpLine(llm("t2", "b", "a", 200, 300), llm("t1", "b", "a", 210, 310)),
			},
			want:  []want{{1, -1, 100}, {2, -1, 110}, {2, 1, 300}, {1, 0, 310}},
			links: 2,
		},
		{
			name: "another session",
			why:  "conversation ids put parent and child in different sessions: replay follows links only within a session, so it is dropped",
			lines: []string{
				otlpLine(otlpTestSpan{trace: "t1", id: "a", name: SpanName, startMs: 0, endMs: 100, conv: "x"}, otlpTestSpan{trace: "t1", id: "a2", name: SpanName, startMs: 50, endMs: 60, conv: "x"}),
				otlpLine(otlpTestSpan{trace: "t1", id: "b", parent: "a", name: SpanName, startMs: 200, endMs: 300, conv: "y"}, otlpTestSpan{trace: "t1", id: "b2", name: SpanName, startMs: 250, endMs: 260, conv: "y"}),
			},
			want:    []want{{1, -1, 100}, {1, -1, 60}, {2, -1, 300}, {2, -1, 260}},
			dropped: 1,
		},
		{
			name: "past the idle window",
			why:  "a parent that arrived more than SessionIdle before is forgotten (and the trace's session has ended): dropped",
			lines: []string{
				otlpLine(llm("t1", "a", "", 0, 100), llm("t1", "a2", "", 10, 20)),
				otlpLine(llm("t1", "b", "a", 5000, 5100), llm("t1", "b2", "", 5010, 5020)),
			},
			mod:     func(o *Options) { o.SessionIdle = time.Second },
			want:    []want{{1, -1, 100}, {1, -1, 20}, {2, -1, 5100}, {2, -1, 5020}},
			dropped: 1,
		},
		{
			name:    "no sessions",
			why:     "with Sessions none no call has a session, so no link can be replayed: dropped",
			lines:   callThenChild("a"),
			mod:     func(o *Options) { o.Sessions = SessionsNone },
			want:    []want{{0, -1, 100}, {0, -1, 300}},
			dropped: 1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions()
			o.Format = FormatOTLP
			if tc.mod != nil {
				tc.mod(&o)
			}
			checkLinks(t, tc.why, o, "spans.jsonl", strings.Join(tc.lines, ""), tc.want, tc.links, tc.dropped)
		})
	}
}

// callThenChild is a call a (0–100 ms) and, on the next line, a call b
// (200–300 ms) whose parent span is parent.
func callThenChild(parent string) []string {
	return []string{otlpLine(llm("t1", "a", "", 0, 100)), otlpLine(llm("t1", "b", parent, 200, 300))}
}

// linkWant is what a links test checks of one captured record, in arrival
// order.
type linkWant struct {
	session, parent, finishMs int64
}

// checkLinks captures log (named name) with o and checks each record's
// session, parent_seq and finish_ns (in ms on the arrival clock, whose 0 is
// the first call), the links counted and dropped, and that every record is
// valid.
func checkLinks(t *testing.T, why string, o Options, name, log string, want []linkWant, links, dropped int64) {
	t.Helper()
	res, err := Capture(context.Background(), o, []Input{{Name: name, R: strings.NewReader(log)}})
	if err != nil {
		t.Fatalf("%s: %v", why, err)
	}
	var got []linkWant
	for _, r := range res.Records {
		got = append(got, linkWant{r.Session, r.ParentSeq, r.FinishNs / 1e6})
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n got %v\nwant %v (session, parent_seq, finish ms)", why, got, want)
	}
	if res.Stats.ParentLinks != links || res.Stats.ParentsDropped != dropped {
		t.Errorf("%s: links %d dropped %d, want %d and %d", why, res.Stats.ParentLinks, res.Stats.ParentsDropped, links, dropped)
	}
	for _, r := range res.Records {
		if err := r.Validate(); err != nil {
			t.Errorf("%s: seq %d: %v", why, r.Seq, err)
		}
	}
}

// TestLinksSurviveSpill: with a sort budget so small that every request
// spills, the links, sessions and finishes are those of the in-memory run
// (the run encoding carries the span hashes and the logged finish).
func TestLinksSurviveSpill(t *testing.T) {
	var log bytes.Buffer
	for i := range 200 {
		tr := fmt.Sprintf("t%d", i/4)
		parent := ""
		if i%4 > 0 {
			parent = fmt.Sprintf("s%d", i-1)
		}
		log.WriteString(otlpLine(llm(tr, fmt.Sprintf("s%d", i), parent, int64(i)*10, int64(i)*10+5)))
	}
	o := DefaultOptions()
	o.Format = FormatOTLP
	mem, _ := captureBytes(t, o, map[string][]byte{"a": log.Bytes()}, "a")
	o.SortMemoryBytes = 1
	spilled, runs := captureBytes(t, o, map[string][]byte{"a": log.Bytes()}, "a")
	if runs == 0 {
		t.Fatal("nothing spilled")
	}
	if mem.Stats.ParentLinks != 150 || spilled.Stats.ParentLinks != 150 {
		t.Errorf("links: in memory %d, spilled %d, want 150", mem.Stats.ParentLinks, spilled.Stats.ParentLinks)
	}
	for i := range mem.Records {
		a, b := mem.Records[i], spilled.Records[i]
		if a.ParentSeq != b.ParentSeq || a.Session != b.Session || a.FinishNs != b.FinishNs {
			t.Fatalf("seq %d: in memory %d/%d/%d, spilled %d/%d/%d", i, a.Session, a.ParentSeq, a.FinishNs, b.Session, b.ParentSeq, b.FinishNs)
		}
	}
}

// TestLiteLLMTraceSessions: LiteLLM's trace_id groups calls into a session
// when no end_user or user is logged, and endTime sets finish_ns; the spec
// carries no parent call id, so no parent_seq is written.
func TestLiteLLMTraceSessions(t *testing.T) {
	line := func(trace, user string, start, end float64) string {
		p := map[string]any{"id": "x", "trace_id": trace, "status": "success", "prompt_tokens": 10, "completion_tokens": 2,
			"startTime": 1740823200 + start, "endTime": 1740823200 + end, "model": "m", "messages": "hi"}
		if user != "" {
			p["end_user"] = user
		}
		b, _ := json.Marshal(p)
		return string(b) + "\n"
	}
	log := line("tr1", "", 0, 1) + line("tr2", "", 0.5, 0.75) + line("tr1", "", 2, 2.5) + line("tr2", "u", 3, 4) + line("tr2", "u", 5, 6)
	o := DefaultOptions()
	o.Format = FormatLiteLLM
	res := mustCapture(t, o, []Input{{Name: "l", R: strings.NewReader(log)}})
	var sess, finish []int64
	for _, r := range res.Records {
		sess = append(sess, r.Session)
		finish = append(finish, r.FinishNs/1e6)
		if r.ParentSeq != traces.NotReported {
			t.Errorf("seq %d has parent_seq %d", r.Seq, r.ParentSeq)
		}
	}
	// tr1 is session 1; tr2's lone call none; the end_user's two calls
	// session 2 (the user takes precedence over the trace).
	if want := []int64{1, 0, 1, 2, 2}; !slices.Equal(sess, want) {
		t.Errorf("sessions %v, want %v", sess, want)
	}
	if want := []int64{1000, 750, 2500, 4000, 6000}; !slices.Equal(finish, want) {
		t.Errorf("finish ms %v, want %v", finish, want)
	}
}

// TestOpenAIParentLinks: openai-jsonl lines with trace_id, call_id,
// parent_call_id and end_time (or remapped paths to them) give sessions,
// parent_seq and finish_ns. Rows are in arrival order.
func TestOpenAIParentLinks(t *testing.T) {
	type row struct {
		trace, call, parent string
		startMs, endMs      int64
		latencyMs           int64 // 0 = none
	}
	line := func(r row, nested bool) string {
		ts := func(ms int64) string { return time.UnixMilli(1740823200000 + ms).UTC().Format(time.RFC3339Nano) }
		m := map[string]any{"time": ts(r.startMs), "request": map[string]any{"model": "m", "prompt": "x"},
			"response": map[string]any{"usage": map[string]any{"prompt_tokens": 5, "completion_tokens": 1}}}
		ids := map[string]any{}
		if r.trace != "" {
			ids["trace_id"] = r.trace
		}
		if r.call != "" {
			ids["call_id"] = r.call
		}
		if r.parent != "" {
			ids["parent_call_id"] = r.parent
		}
		if r.endMs > 0 {
			ids["end_time"] = ts(r.endMs)
		}
		if r.latencyMs > 0 {
			m["latency_ms"] = r.latencyMs
		}
		if nested {
			m["ctx"] = ids
		} else {
			for k, v := range ids {
				m[k] = v
			}
		}
		b, _ := json.Marshal(m)
		return string(b) + "\n"
	}
	type want = linkWant
	for _, tc := range []struct {
		name, why string
		rows      []row
		nested    bool
		want      []want
		links     int64
		dropped   int64
	}{
		{
			name: "chain out of order",
			why:  "a grandchild, child and parent logged in reverse order (a gateway logs at response end): links follow the ids, finish_ns the end_time",
			rows: []row{{"t", "c", "b", 400, 500, 0}, {"t", "b", "a", 200, 300, 0}, {"t", "a", "", 0, 100, 0}},
			want: []want{{1, -1, 100}, {1, 0, 300}, {1, 1, 500}}, links: 2,
		},
		{
			name: "remapped fields",
			why:  "the same chain with its ids and end time under ctx.*, mapped with Fields",
			rows: []row{{"t", "c", "b", 400, 500, 0}, {"t", "b", "a", 200, 300, 0}, {"t", "a", "", 0, 100, 0}}, nested: true,
			want: []want{{1, -1, 100}, {1, 0, 300}, {1, 1, 500}}, links: 2,
		},
		{
			name: "missing parent",
			why:  "a parent_call_id no captured call has: dropped and counted",
			rows: []row{{"t", "a", "", 0, 100, 0}, {"t", "b", "zz", 200, 300, 0}},
			want: []want{{1, -1, 100}, {1, -1, 300}}, dropped: 1,
		},
		{
			name: "latency first",
			why:  "latency_ms (the measured e2e) sets finish_ns when both it and end_time are logged",
			rows: []row{{"t", "a", "", 0, 100, 40}, {"t", "b", "a", 200, 300, 0}},
			want: []want{{1, -1, 40}, {1, 0, 300}}, links: 1,
		},
		{
			name: "ids scoped by trace",
			why:  "the same call id in two traces: each child links within its own trace",
			rows: []row{{"t1", "a", "", 0, 10, 0}, {"t2", "a", "", 5, 15, 0}, {"t2", "b", "a", 20, 30, 0}, {"t1", "b", "a", 25, 35, 0}},
			want: []want{{1, -1, 10}, {2, -1, 15}, {2, 1, 30}, {1, 0, 35}}, links: 2,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log strings.Builder
			for _, r := range tc.rows {
				log.WriteString(line(r, tc.nested))
			}
			o := DefaultOptions()
			o.Format = FormatOpenAI
			if tc.nested {
				o.Fields = map[string]string{"trace_id": "ctx.trace_id", "call_id": "ctx.call_id", "parent_call_id": "ctx.parent_call_id", "end_time": "ctx.end_time"}
			}
			checkLinks(t, tc.why, o, "gw.jsonl", log.String(), tc.want, tc.links, tc.dropped)
		})
	}
}
