package formats_test

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/tokentrace/tokentrace/internal/testtraces"
	"github.com/tokentrace/tokentrace/traces"
)

// A model of how inference-perf reads an OTel trace file into the graph it
// replays, transcribed from kubernetes-sigs/inference-perf
// inference_perf/datagen/replay/otel_trace_to_replay_graph.py @
// 7de5ef2ed6f7934e0ecbc8297e593f79e68430c0 (build_raw_calls, build_graph,
// get_causal_dep, output_matches_message, estimate_tokens):
//   - LLM spans: gen_ai.operation.name "chat" or a name starting "chat ",
//     with non-empty gen_ai.input.messages, status code not 2 (is_llm_span);
//   - sorted by (start time, span_id); t_start_ms / t_end_ms =
//     round((t − earliest start) × 1000);
//   - total_input_tokens = gen_ai.usage.prompt_tokens, else input_tokens,
//     else Σ max(1, len(content) // 4) over messages; expected_output_tokens
//     = completion_tokens, else output_tokens, else max(1, len(output) // 4)
//     of gen_ai.output.text (or .completion, .output);
//   - for each call i, earlier calls j from i−1 down: j is a causal
//     predecessor when an assistant message of i contains j's output text,
//     unless j is a causal ancestor of one already found; then the
//     latest-starting j with t_start_ms(i) ≥ t_end_ms(j) is added as a
//     temporal predecessor if it is not one already;
//   - wait_ms = max(0, t_start_ms − max t_end_ms of the predecessors).
//
// It is written apart from the importer's code on purpose: the tests below
// hold the exporter and the importer to it.

type ipEvent struct {
	spanID        string
	attrs         map[string]json.RawMessage
	startMs       int64
	endMs         int64
	in, out       int64
	preds         []int // indexes into the events, sorted
	waitMs        int64
	msgs          []struct{ role, text string }
	output        string
	hasOutput     bool
	causalPredSet map[int]bool
}

func ipParseTime(t *testing.T, s string) float64 {
	t.Helper()
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999"} {
		if v, err := time.Parse(layout, s); err == nil {
			return float64(v.UnixNano()) / 1e9
		}
	}
	t.Fatalf("peer model: unreadable time %q", s)
	return 0
}

func ipPyLen(s string) int64 { return int64(utf8.RuneCountInString(s)) }

// ipGraph reads one trace document as inference-perf does.
func ipGraph(t *testing.T, doc []byte) []ipEvent {
	t.Helper()
	var d struct {
		Spans []struct {
			SpanID     string                     `json:"span_id"`
			Name       string                     `json:"name"`
			Start      string                     `json:"start_time"`
			End        string                     `json:"end_time"`
			Attributes map[string]json.RawMessage `json:"attributes"`
			Status     struct {
				Code int `json:"code"`
			} `json:"status"`
		} `json:"spans"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatalf("peer model: %v", err)
	}
	str := func(raw json.RawMessage) (string, bool) {
		var s string
		return s, json.Unmarshal(raw, &s) == nil
	}
	type span struct {
		ev         ipEvent
		start, end float64
	}
	var spans []span
	for _, sp := range d.Spans {
		op, _ := str(sp.Attributes["gen_ai.operation.name"])
		msgsRaw, _ := str(sp.Attributes["gen_ai.input.messages"])
		if !(op == "chat" || strings.HasPrefix(sp.Name, "chat ")) || msgsRaw == "" || sp.Status.Code == 2 {
			continue
		}
		e := ipEvent{spanID: sp.SpanID, attrs: sp.Attributes}
		var msgs []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		}
		if err := json.Unmarshal([]byte(msgsRaw), &msgs); err != nil {
			t.Fatalf("peer model: messages %v", err)
		}
		for _, m := range msgs {
			e.msgs = append(e.msgs, struct{ role, text string }{m.Role, m.Content})
		}
		for _, k := range []string{"gen_ai.output.text", "gen_ai.completion", "gen_ai.output"} {
			if s, ok := str(sp.Attributes[k]); ok && !e.hasOutput {
				e.output, e.hasOutput = s, true
			}
		}
		if s, ok := str(sp.Attributes["gen_ai.output.messages"]); ok && !e.hasOutput {
			var out []struct {
				Content string `json:"content"`
			}
			if json.Unmarshal([]byte(s), &out) == nil && len(out) == 1 {
				e.output, e.hasOutput = out[0].Content, true
			}
		}
		num := func(keys ...string) (int64, bool) {
			for _, k := range keys {
				var v float64
				if raw, ok := sp.Attributes[k]; ok && json.Unmarshal(raw, &v) == nil {
					return int64(v), true
				}
			}
			return 0, false
		}
		var ok bool
		if e.in, ok = num("gen_ai.usage.prompt_tokens", "gen_ai.usage.input_tokens"); !ok {
			for _, m := range e.msgs {
				e.in += max(1, ipPyLen(m.text)/4)
			}
		}
		if e.out, ok = num("gen_ai.usage.completion_tokens", "gen_ai.usage.output_tokens"); !ok {
			e.out = max(1, ipPyLen(e.output)/4)
		}
		spans = append(spans, span{ev: e, start: ipParseTime(t, sp.Start), end: ipParseTime(t, sp.End)})
	}
	sort.SliceStable(spans, func(a, b int) bool {
		if spans[a].start != spans[b].start {
			return spans[a].start < spans[b].start
		}
		return spans[a].ev.spanID < spans[b].ev.spanID
	})
	if len(spans) == 0 {
		return nil
	}
	t0 := spans[0].start
	ev := make([]ipEvent, len(spans))
	for i, s := range spans {
		ev[i] = s.ev
		ev[i].startMs = int64(math.RoundToEven((s.start - t0) * 1000))
		ev[i].endMs = int64(math.RoundToEven((s.end - t0) * 1000))
		ev[i].causalPredSet = map[int]bool{}
	}
	for i := 1; i < len(ev); i++ {
		skip := map[int]bool{}
		var all []int
		for j := i - 1; j >= 0; j-- {
			if skip[j] || !ev[j].hasOutput {
				continue
			}
			feeds := false
			for _, m := range ev[i].msgs {
				feeds = feeds || (m.role == "assistant" && strings.Contains(m.text, ev[j].output))
			}
			if !feeds {
				continue
			}
			ev[i].causalPredSet[j] = true
			all = append(all, j)
			stack := []int{j}
			for len(stack) > 0 { // j's causal ancestors
				a := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				for p := range ev[a].causalPredSet {
					if !skip[p] {
						skip[p] = true
						stack = append(stack, p)
					}
				}
			}
		}
		for j := i - 1; j >= 0; j-- {
			if ev[i].startMs >= ev[j].endMs {
				if !ev[i].causalPredSet[j] {
					all = append(all, j)
				}
				break
			}
		}
		sort.Ints(all)
		ev[i].preds = all
		if len(all) > 0 {
			last := int64(math.MinInt64)
			for _, p := range all {
				last = max(last, ev[p].endMs)
			}
			ev[i].waitMs = max(0, ev[i].startMs-last)
		}
	}
	return ev
}

// The exports of the agentic fixture (kv-cache-tester's trace_0291: a
// 20-call main chain whose call 16 spawns two subagents of 5 and 7 calls
// running beside it), of the test's own agentic trace (fan-out and a join)
// and of a plain trace, read by the model of inference-perf: every call's
// dependencies are the trace's (up to transitivity: 0 calls differ), every
// wait after them the trace's think time (else its gap) to the
// millisecond, and the counts its usage.
func TestPeerInferencePerfReadsExports(t *testing.T) {
	for _, tc := range peerTraces(t) {
		t.Run(tc.name, func(t *testing.T) {
			buf, _ := exportT(t, "inference-perf", tc.recs, tc.m)
			bySeq := map[int64]*traces.Record{}
			for i := range tc.recs {
				bySeq[tc.recs[i].Seq] = &tc.recs[i]
			}
			differ, calls := 0, 0
			for _, doc := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
				ev := ipGraph(t, doc)
				seqOf := func(e *ipEvent) int64 {
					var s int64
					json.Unmarshal(e.attrs["tokentrace.seq"], &s)
					return s
				}
				for i := range ev {
					calls++
					r := bySeq[seqOf(&ev[i])]
					got := map[int64]bool{}
					for _, p := range ev[i].preds {
						got[seqOf(&ev[p])] = true
					}
					want := peerReducedDeps(tc.recs, r)
					same := len(got) == len(want)
					for _, d := range want {
						same = same && got[d]
					}
					if !same {
						differ++
						t.Errorf("seq %d: inference-perf waits for %v, the trace for %v", r.Seq, got, want)
					}
					if ev[i].in != int64(r.InputTokens) || ev[i].out != int64(r.OutputTokens) {
						t.Errorf("seq %d: inference-perf sends %d/%d tokens, the trace has %d/%d", r.Seq, ev[i].in, ev[i].out, r.InputTokens, r.OutputTokens)
					}
					if len(want) > 0 {
						latest := int64(-1)
						for _, d := range want {
							latest = max(latest, bySeq[d].FinishNs)
						}
						wait := (r.ArrivalNs - latest) / 1e6
						if r.ThinkNs >= 0 { // the think time the trace records wins, as in every export
							wait = r.ThinkNs / 1e6
						}
						if latest >= 0 && (ev[i].waitMs-wait > 1 || wait-ev[i].waitMs > 1) {
							t.Errorf("seq %d: inference-perf waits %d ms after its dependencies, the trace %d ms", r.Seq, ev[i].waitMs, wait)
						}
					}
				}
			}
			if calls != len(tc.recs) || differ != 0 {
				t.Errorf("%d of %d calls read with other dependencies (of %d rows)", differ, calls, len(tc.recs))
			}
		})
	}
}

// peerReducedDeps is r's dependencies in recs (seqs) without those reached
// through another of them.
func peerReducedDeps(recs []traces.Record, r *traces.Record) []int64 {
	bySeq := map[int64]*traces.Record{}
	for i := range recs {
		bySeq[recs[i].Seq] = &recs[i]
	}
	deps := func(x *traces.Record) []int64 {
		var out []int64
		for _, s := range append(slices.Clone(x.AfterSeqs), x.ParentSeq) {
			if _, ok := bySeq[s]; ok && s >= 0 && !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
		return out
	}
	var reaches func(from, to int64) bool
	reaches = func(from, to int64) bool {
		for _, d := range deps(bySeq[from]) {
			if d == to || reaches(d, to) {
				return true
			}
		}
		return false
	}
	var out []int64
	for _, d := range deps(r) {
		implied := false
		for _, e := range deps(r) {
			implied = implied || (e != d && reaches(e, d))
		}
		if !implied {
			out = append(out, d)
		}
	}
	return out
}

// inference-perf's nine example traces (examples/otel/test_traces @
// 7de5ef2: the fan-in one ships in testdata, the others are read from the
// public traces folder, inference-perf/test_traces/{advanced,simple}/)
// import as inference-perf replays them: every call's prompt within 2 % and
// output within 25 % of the model's counts, and its dependencies the
// model's.
func TestPeerInferencePerfExamples(t *testing.T) {
	files := []string{publicTraces + "inference-perf_fan_in_dependencies.json"}
	for _, f := range []string{"advanced/code_review_workflow", "advanced/customer_support_escalation", "advanced/multi_agent_research",
		"advanced/parallel_requests", "advanced/prefix_sharing_example", "advanced/software_architecture_review",
		"simple/simple_chain", "simple/simple_chain_alt"} {
		p := filepath.Join(testtraces.Dir(), "inference-perf", "test_traces", filepath.FromSlash(f)+".json")
		if _, err := os.Stat(p); testtraces.Dir() == "" || err != nil {
			t.Logf("inference-perf example %s not available: put the upstream file in %s/inference-perf/test_traces/ (docs/traces.md)", f, testtraces.EnvVar)
			continue
		}
		files = append(files, p)
	}
	for _, f := range files {
		name := f[strings.LastIndex(f, "/")+1:]
		t.Run(name, func(t *testing.T) {
			recs, _, _ := importAllT(t, "inference-perf", f, true)
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			ev := ipGraph(t, raw)
			if len(ev) != len(recs) {
				t.Fatalf("%d calls imported, inference-perf replays %d", len(recs), len(ev))
			}
			for i := range ev {
				r := recs[i]
				if d := math.Abs(float64(r.InputTokens)-float64(ev[i].in)) / float64(ev[i].in); d > 0.02 {
					t.Errorf("%s: prompt %d, inference-perf sends %d", ev[i].spanID, r.InputTokens, ev[i].in)
				}
				if d := math.Abs(float64(r.OutputTokens)-float64(ev[i].out)) / float64(ev[i].out); d > 0.25 {
					t.Errorf("%s: output %d, inference-perf expects %d", ev[i].spanID, r.OutputTokens, ev[i].out)
				}
				var got []int
				for _, s := range append(slices.Clone(r.AfterSeqs), r.ParentSeq) {
					if s >= 0 && !slices.Contains(got, int(s-recs[0].Seq)) {
						got = append(got, int(s-recs[0].Seq))
					}
				}
				sort.Ints(got)
				if !slices.Equal(got, ev[i].preds) && !(len(got) == 0 && len(ev[i].preds) == 0) {
					t.Errorf("%s: dependencies %v, inference-perf's %v", ev[i].spanID, got, ev[i].preds)
				}
			}
		})
	}
}
