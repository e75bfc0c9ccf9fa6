package traces

import (
	"errors"
	"strings"
	"testing"
)

// TestSniffPointsAtImport gives the trace reader files that are not
// tokentrace traces but that tokentrace knows: the error says what the
// file is and which command takes it.
func TestSniffPointsAtImport(t *testing.T) {
	for _, c := range []struct{ why, content, want string }{
		{"an Azure LLM inference trace", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n", "import Command.Format=azure"},
		{"a BurstGPT trace", "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n5,ChatGPT,472,18,490,Conversation log\n", "import Command.Format=burstgpt"},
		{"a Splitwise trace", "arrived_at,num_prefill_tokens,num_decode_tokens\n0.1,100,20\n", "import Command.Format=splitwise"},
		{"a Mooncake trace", `{"timestamp": 0, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47]}` + "\n", "import Command.Format=mooncake"},
		{"a synth model", "{\n  \"format\": \"tokentrace-synth-model\",\n  \"version\": 1\n}\n", "synth gen"},
	} {
		_, err := NewReader(strings.NewReader(c.content), "f", DefaultOpenOptions())
		if !errors.Is(err, ErrUnknownFormat) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want ErrUnknownFormat pointing at %q", c.why, err, c.want)
		}
	}
	// A tokentrace JSONL trace is not mistaken for any of them.
	r, err := NewReader(strings.NewReader(`{"seq":0,"arrival_ns":0,"input_tokens":5,"output_tokens":2}`+"\n"), "f", DefaultOpenOptions())
	if err != nil {
		t.Fatalf("tokentrace JSONL: %v", err)
	}
	r.Close()
}
