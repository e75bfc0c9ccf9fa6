package sim

import (
	"testing"

	"github.com/tokentrace/tokentrace/traces"
)

// TestAdmitLongest checks the context length a trace's longest request
// gives the simulator; one case per rule.
func TestAdmitLongest(t *testing.T) {
	recs := []traces.Record{{InputTokens: 9000, OutputTokens: 500}, {InputTokens: 100, OutputTokens: 12000}, {InputTokens: 3000}}
	if got := LongestRequest(recs); got != 12100 {
		t.Fatalf("LongestRequest = %d, want 12100 (the second row's input + output)", got)
	}
	if got := LongestRequest(nil); got != 0 {
		t.Errorf("LongestRequest(nil) = %d, want 0", got)
	}
	for _, c := range []struct {
		doc                          string
		maxModelLen, blocks, longest int
		want                         int
	}{
		{doc: "A longer request raises the context length.", maxModelLen: 8192, blocks: 26000, longest: 12100, want: 12100},
		{doc: "A shorter one leaves it as set.", maxModelLen: 8192, blocks: 26000, longest: 4000, want: 8192},
		{doc: "It is raised no further than the KV cache holds (512 blocks of 16).", maxModelLen: 4096, blocks: 512, longest: 12100, want: 8192},
		{doc: "A context length set past the KV cache comes down to it.", maxModelLen: 16384, blocks: 512, longest: 0, want: 8192},
	} {
		o := DefaultOptions()
		o.MaxModelLen, o.NumGPUBlocks, o.BlockSize = c.maxModelLen, c.blocks, 16
		got := o.AdmitLongest(c.longest)
		if got.MaxModelLen != c.want {
			t.Errorf("%s AdmitLongest(%d) with MaxModelLen %d and %d blocks: MaxModelLen %d, want %d", c.doc, c.longest, c.maxModelLen, c.blocks, got.MaxModelLen, c.want)
		}
		if got.NumGPUBlocks != o.NumGPUBlocks || got.Model != o.Model {
			t.Errorf("%s AdmitLongest changed more than MaxModelLen: %+v", c.doc, got)
		}
	}
}
