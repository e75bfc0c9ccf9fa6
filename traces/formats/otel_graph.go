package formats

import (
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// inference-perf replays an OTel trace as a graph it infers itself
// (inference_perf/datagen/replay/otel_trace_to_replay_graph.py, build_graph
// @ 7de5ef2). The importer reads dependencies as that graph has them, and
// the inference-perf export checks what it writes against the same rules:
//
//   - calls in order of start time (then span id), times as milliseconds
//     from the earliest start, rounded;
//   - causal edges: scanning earlier calls from the latest back, j feeds i
//     when an assistant message of i contains j's output text (an empty
//     output matches every assistant message); a call already reached
//     through the causal edges of one found is skipped;
//   - one temporal edge on top: the latest-starting earlier call that ended
//     by the time i started, unless it is already a predecessor.
//
// Token counts follow the builder too: the usage attributes, else
// max(1, characters / 4) per input message and for the output text.

// otelGraphCall is what the builder reads of one LLM span.
type otelGraphCall struct {
	startMs, endMs int64
	msgs           []otelGraphMsg
	out            string
	hasOut         bool // an output attribute was present
}

type otelGraphMsg struct {
	role, text string
}

// otelDepTemporal marks the one dependency drawn from timing alone.
const (
	otelDepCausal   = 1
	otelDepTemporal = 2
)

// otelGraph returns each call's predecessors (index → otelDepCausal or
// otelDepTemporal) as inference-perf's build_graph infers them; calls must
// be in its order (start, then span id).
func otelGraph(calls []otelGraphCall) []map[int]int {
	preds := make([]map[int]int, len(calls))
	for i := range preds {
		preds[i] = map[int]int{}
	}
	causalAncestors := func(j int, into map[int]bool) {
		stack := []int{}
		for p, t := range preds[j] {
			if t == otelDepCausal {
				stack = append(stack, p)
			}
		}
		for len(stack) > 0 {
			a := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if into[a] {
				continue
			}
			into[a] = true
			for p, t := range preds[a] {
				if t == otelDepCausal {
					stack = append(stack, p)
				}
			}
		}
	}
	for i := 1; i < len(calls); i++ {
		reached := map[int]bool{}
		for j := i - 1; j >= 0; j-- {
			if reached[j] || !otelFeeds(&calls[j], &calls[i]) {
				continue
			}
			preds[i][j] = otelDepCausal
			causalAncestors(j, reached)
		}
		for j := i - 1; j >= 0; j-- {
			if calls[i].startMs >= calls[j].endMs {
				if _, ok := preds[i][j]; !ok {
					preds[i][j] = otelDepTemporal
				}
				break
			}
		}
	}
	return preds
}

// otelFeeds is the builder's causal test: an assistant message of b
// contains a's output.
func otelFeeds(a, b *otelGraphCall) bool {
	if !a.hasOut {
		return false
	}
	for _, m := range b.msgs {
		if m.role == "assistant" && strings.Contains(m.text, a.out) {
			return true
		}
	}
	return false
}

// otelEstimate is the builder's token estimate of a text: max(1,
// characters / 4).
func otelEstimate(text string) int64 {
	return max(1, int64(utf8.RuneCountInString(text))/4)
}

// otelGraphMessages reads gen_ai.input.messages (a JSON string holding the
// list, or the list itself) as role and text; ok is false when it is
// neither.
func otelGraphMessages(raw json.RawMessage) ([]otelGraphMsg, bool) {
	if len(raw) == 0 {
		return nil, true
	}
	msgs, _, ok := otelChatMessages(raw)
	if !ok {
		return nil, false
	}
	out := make([]otelGraphMsg, len(msgs))
	for i, m := range msgs {
		role := m.Role
		if role == "developer" {
			role = "system"
		}
		text, ok := chatMessageText(m.Content)
		if !ok {
			text = string(m.Content) // structured content: its JSON as text
		}
		out[i] = otelGraphMsg{role: role, text: text}
	}
	return out, true
}

// otelGraphOutput reads a span's output as the builder does: the first of
// gen_ai.output.text, gen_ai.completion and gen_ai.output that is a string,
// else the single message of gen_ai.output.messages (its text).
func otelGraphOutput(attrs map[string]json.RawMessage) (string, bool) {
	for _, k := range []string{"gen_ai.output.text", "gen_ai.completion", "gen_ai.output"} {
		var s string
		if raw, ok := attrs[k]; ok && json.Unmarshal(raw, &s) == nil {
			return s, true
		}
	}
	raw, ok := attrs["gen_ai.output.messages"]
	if !ok {
		return "", false
	}
	msgs, _, ok := otelChatMessages(raw)
	if !ok || len(msgs) == 0 {
		return "", false
	}
	text, ok := chatMessageText(msgs[0].Content)
	if !ok {
		text = string(msgs[0].Content)
	}
	return text, true
}
