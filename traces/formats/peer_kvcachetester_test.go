package formats_test

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"testing"
)

// A model of what kv-cache-tester reads of a conversation for its warm
// prefix and its messages, from callanjfox/kv-cache-tester
// trace_replay_tester.py @ 94f6046dfd9c0c8bc0cdb24a5aa6579bac8669bf:
// normalize_trace keeps the document's tool_tokens and system_tokens (0
// when absent; their sum, the largest over the traces, is the warm prefix
// every conversation shares), a subagent's mini-trace takes its entry's
// tool_tokens and system_tokens (_spawn_subagent), and normalize_request
// keeps input_types, from which _get_user_message_type sends a tool result
// ("tool_result" among them) or a text message.
type kvctAgent struct {
	Tool, System int64
	Messages     []string // per request: "tool_result" or "text", and its counts
	Subagents    []kvctAgent
}

func kvctRead(t *testing.T, doc []byte) kvctAgent {
	t.Helper()
	type req struct {
		Type         string            `json:"type"`
		In           int64             `json:"in"`
		Out          int64             `json:"out"`
		InputTypes   []string          `json:"input_types"`
		ToolTokens   int64             `json:"tool_tokens"`
		SystemTokens int64             `json:"system_tokens"`
		Requests     []json.RawMessage `json:"requests"`
	}
	var walk func(r req) kvctAgent
	walk = func(r req) kvctAgent {
		a := kvctAgent{Tool: r.ToolTokens, System: r.SystemTokens}
		for _, raw := range r.Requests {
			var q req
			if err := json.Unmarshal(raw, &q); err != nil {
				t.Fatalf("kv-cache-tester model: %v", err)
			}
			if q.Type == "subagent" {
				a.Subagents = append(a.Subagents, walk(q))
				continue
			}
			kind := "text"
			if slices.Contains(q.InputTypes, "tool_result") {
				kind = "tool_result"
			}
			a.Messages = append(a.Messages, kind+" "+itoa(q.In)+"/"+itoa(q.Out))
		}
		return a
	}
	var top req
	if err := json.Unmarshal(doc, &top); err != nil {
		t.Fatalf("kv-cache-tester model: %v", err)
	}
	return walk(top)
}

// kv-cache-tester's trace_0291 survives import → weka export as
// kv-cache-tester reads it: the conversation's tool_tokens and
// system_tokens (12,166 and 3,318), each subagent's own (7,401 and 1,465
// for the first), and which requests send a tool result.
func TestPeerKVCacheTesterWarmPrefixRoundTrip(t *testing.T) {
	raw, err := os.ReadFile(publicTraces + "weka_trace_0291.json")
	if err != nil {
		t.Fatal(err)
	}
	want := kvctRead(t, raw)
	if want.Tool != 12166 || want.System != 3318 || len(want.Subagents) != 2 || want.Subagents[0].Tool != 7401 {
		t.Fatalf("the fixture reads as %+v", want)
	}
	recs, m, _ := importAllT(t, "weka", publicTraces+"weka_trace_0291.json", true)
	if recs[0].ToolTokens != 12166 || recs[0].SystemTokens != 3318 || recs[1].InputKinds != "tool_result" {
		t.Errorf("imported row 0 %d/%d, row 1 input kinds %q", recs[0].ToolTokens, recs[0].SystemTokens, recs[1].InputKinds)
	}
	buf, _ := exportT(t, "weka", recs, m)
	if got := kvctRead(t, bytes.TrimSpace(buf.Bytes())); !reflect.DeepEqual(got, want) {
		t.Errorf("kv-cache-tester reads the export as\n%+v\nthe original as\n%+v", got, want)
	}
}
