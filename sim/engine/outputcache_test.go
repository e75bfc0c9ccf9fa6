package engine

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// outputIDs is the ids of the first n output tokens.
func outputIDs(n int) []int32 {
	ids := make([]int32, n)
	for k := range ids {
		ids[k] = OutputTokenID(k)
	}
	return ids
}

// A finished request's full blocks of prompt and output stay in the prefix
// cache, hashed chained like prompt blocks, so a follow-up whose prompt is
// the previous prompt, its output and new tokens reuses all of them (but
// the last output token, whose KV was never computed).
func TestOutputBlocksCached(t *testing.T) {
	const bs = 16
	first := randomPrompt(7, 40) // 2 full blocks and 8 tokens
	cases := []struct {
		name string
		// second is the follow-up's prompt; want its cached tokens.
		second       []int32
		noCache      bool
		wantCached   int32
		wantFirstOut int
	}{
		// 40 prompt + 30 output tokens, 69 computed: 4 full blocks.
		{name: "a follow-up carrying the output's ids reuses the prompt and output blocks",
			second: slices.Concat(first, outputIDs(30), randomPrompt(8, 10)), wantCached: 4 * bs},
		// Other ids where the output was: only the prompt's full blocks.
		{name: "a follow-up with other ids in the output's place reuses the prompt blocks only",
			second: slices.Concat(first, randomPrompt(9, 30), randomPrompt(8, 10)), wantCached: 2 * bs},
		// The output's first ids then other ones: the block that mixes the
		// prompt's tail with output (block 2, positions 32–47) still hits.
		{name: "a follow-up diverging inside the output reuses the blocks before the divergence",
			second: slices.Concat(first, outputIDs(10), randomPrompt(9, 20), randomPrompt(8, 10)), wantCached: 3 * bs},
		{name: "with prefix caching off nothing is reused", noCache: true,
			second: slices.Concat(first, outputIDs(30), randomPrompt(8, 10)), wantCached: 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := DefaultOptions()
			o.BlockSize = bs
			o.DisablePrefixCaching = c.noCache
			res := simulate(t, o, []Arrival{
				{Prompt: first, MaxTokens: 30, IgnoreEOS: true},
				{ArrivalNs: int64(time.Second), Prompt: c.second, MaxTokens: 4, IgnoreEOS: true},
			})
			if got := res.Truth[1].ServerCachedTokens; got != c.wantCached {
				t.Errorf("follow-up cached %d tokens, want %d", got, c.wantCached)
			}
		})
	}
}

// return_token_ids: every choice carries the ids of the tokens it
// generated, streamed chunk by chunk or whole, on both APIs, and only when
// asked for.
func TestReturnTokenIDs(t *testing.T) {
	s := startSim(t, func(o *Options) { o.StreamInterval = 3 })
	want := fmt.Sprint(outputIDs(7))
	cases := []struct {
		name, path, body string
		wantIDs          bool
	}{
		{"streamed completions carry the ids chunk by chunk", "/v1/completions",
			`{"prompt":[300,301,302],"max_tokens":7,"ignore_eos":true,"stream":true,"return_token_ids":true}`, true},
		{"streamed chat carries them on the choice", "/v1/chat/completions",
			`{"messages":[{"role":"user","content":"hi"}],"max_tokens":7,"ignore_eos":true,"stream":true,"return_token_ids":true}`, true},
		{"a whole completions response carries them once", "/v1/completions",
			`{"prompt":[300,301,302],"max_tokens":7,"ignore_eos":true,"return_token_ids":true}`, true},
		{"a whole chat response carries them once", "/v1/chat/completions",
			`{"messages":[{"role":"user","content":"hi"}],"max_tokens":7,"ignore_eos":true,"return_token_ids":true}`, true},
		{"without return_token_ids there are none", "/v1/completions",
			`{"prompt":[300,301,302],"max_tokens":7,"ignore_eos":true,"stream":true}`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, _, b := post(t, s.URL+c.path, c.body, nil)
			if status != 200 {
				t.Fatalf("status %d: %s", status, b)
			}
			events := sseEvents(b)
			if len(events) == 0 {
				events = []string{b}
			}
			var got []int32
			for _, e := range events {
				var ch struct {
					Choices []struct {
						TokenIDs []int32 `json:"token_ids"`
					} `json:"choices"`
				}
				if e == "[DONE]" {
					continue
				}
				if err := json.Unmarshal([]byte(e), &ch); err != nil {
					t.Fatalf("%v: %s", err, e)
				}
				for _, c := range ch.Choices {
					got = append(got, c.TokenIDs...)
				}
			}
			switch {
			case c.wantIDs && fmt.Sprint(got) != want:
				t.Errorf("token ids %v, want %s:\n%s", got, want, b)
			case !c.wantIDs && (len(got) > 0 || strings.Contains(b, "token_ids")):
				t.Errorf("token ids returned unasked:\n%s", b)
			}
		})
	}
}
