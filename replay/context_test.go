package replay

import (
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/replay/sim"
	"github.com/tokentrace/tokentrace/traces"
)

// growingTrace makes n chat-like sessions of turns turns each: turn k's
// input is turn k−1's input + its output + 40–100 new tokens, as a
// conversation's context grows; think times are 2–6 ms. shrink, when ≥ 1,
// makes that turn of every session shorter than the context before it.
func growingTrace(n, turns, shrink int, api string, seed uint64) []traces.Record {
	rng := rand.New(rand.NewPCG(seed, 18))
	var recs []traces.Record
	for s := 1; s <= n; s++ {
		start := int64(s) * int64(3*time.Millisecond)
		in, out := int32(0), int32(0)
		for k := range turns {
			r := traces.NewRecord()
			r.Seq, r.Session, r.API = int64(len(recs)), int64(s), api
			r.ArrivalNs = start
			r.InputTokens = in + out + int32(40+rng.IntN(61))
			if k == shrink {
				r.InputTokens = in / 2
			}
			r.OutputTokens = int32(8 + rng.IntN(40))
			if k > 0 {
				r.ThinkNs = int64(2+rng.IntN(5)) * int64(time.Millisecond)
			}
			in, out = r.InputTokens, r.OutputTokens
			recs = append(recs, r)
		}
	}
	return recs
}

// growthSim is an uncontended simulator with prefix caching (the default)
// and room for every session's context.
func growthSim(t *testing.T) *sim.Server {
	t.Helper()
	o := sim.DefaultOptions()
	o.NumGPUBlocks = 50000
	srv, err := sim.Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

// prevTurns maps each result row's seq to the row of the turn before it in
// its session (by seq; sessions are chains here).
func prevTurns(res *Result) map[int64]*traces.Record {
	last := map[int64]*traces.Record{}
	prev := map[int64]*traces.Record{}
	rows := slices.Clone(res.Records)
	slices.SortFunc(rows, func(a, b traces.Record) int { return int(a.Seq - b.Seq) })
	for i := range rows {
		r := &rows[i]
		if p, ok := last[r.Session]; ok {
			prev[r.Seq] = p
		}
		last[r.Session] = r
	}
	return prev
}

// On an uncontended simulator with prefix caching, every follow-up turn
// of a growing conversation hits the cache for what the trace implies it
// reuses, within one block: on /v1/completions the previous turn's prompt
// and output (the simulator returns the output's token ids and caches
// generated tokens' blocks, as vLLM does), on chat the previous prompt
// (the server re-tokenizes the returned text into other ids than it
// generated, so the output's part misses there); without context growth
// the same trace hits almost nothing.
func TestContextGrowthHitsPreviousPrompt(t *testing.T) {
	const bs = 16 // the simulator's block size
	for _, tc := range []struct {
		name, api string
	}{
		{"completions with token ids: the previous prompt's ids are the next prompt's first ids", traces.APICompletions},
		{"chat: the previous messages, the returned text as an assistant message, a new user message", traces.APIChat},
	} {
		t.Run(tc.api, func(t *testing.T) {
			srv := growthSim(t)
			recs := growingTrace(30, 5, -1, tc.api, 7)
			for _, growth := range []bool{true, false} {
				res := closedRun(t, srv.URL, recs, func(o *Options) {
					o.NoContextGrowth = !growth
					o.Run = "grow" + tc.api + map[bool]string{true: "on", false: "off"}[growth]
				})
				prev := prevTurns(res)
				hit, n := 0, 0
				var dev []int
				for i := range res.Records {
					r := &res.Records[i]
					p, ok := prev[r.Seq]
					if !ok {
						continue
					}
					n++
					dev = append(dev, abs(int(r.ServerPromptTokens-r.InputTokens)))
					ctx := int(p.InputTokens + p.ServerOutputTokens)
					if tc.api == traces.APIChat {
						ctx = int(p.ServerPromptTokens)
					}
					if abs(int(r.ServerCachedTokens)-ctx/bs*bs) <= bs {
						hit++
					}
					if growth && tc.api == traces.APICompletions && r.ServerPromptTokens != r.InputTokens {
						t.Errorf("seq %d: the server counted %d prompt tokens, the trace says %d", r.Seq, r.ServerPromptTokens, r.InputTokens)
					}
				}
				ss := res.Summary.Sessions
				slices.Sort(dev)
				t.Logf("%s growth=%v: %d of %d follow-ups hit the implied reuse within a block; prompt_tokens − input_tokens: |p50| %d, |max| %d; %+v", tc.name, growth, hit, n, dev[len(dev)/2], dev[len(dev)-1], ss)
				if n != 120 {
					t.Fatalf("%d follow-ups, want 120", n)
				}
				if !growth {
					if hit > n/10 || ss.ContextGrown != 0 {
						t.Errorf("without growth %d of %d follow-ups hit the implied reuse (%d grown): the test would not tell growth from none", hit, n, ss.ContextGrown)
					}
					continue
				}
				// The server re-tokenizes the returned text; the run learns by
				// how much, so the median prompt is within 2 tokens of the trace.
				if d := dev[len(dev)/2]; d > 2 {
					t.Errorf("median |prompt_tokens − input_tokens| %d, want ≤ 2", d)
				}
				if hit*100 < 99*n {
					t.Errorf("%d of %d follow-ups hit the implied reuse within a block, want ≥ 99 %%", hit, n)
				}
				if ss.ContextGrown != n || ss.ContextFresh != 0 || ss.ContextLost != 0 {
					t.Errorf("counts %+v, want %d grown and none fresh or lost", ss, n)
				}
				if ss.ContextOutputGuessed != 0 {
					t.Errorf("%d turns guessed the output's ids, want none (the simulator returns token ids)", ss.ContextOutputGuessed)
				}
			}
		})
	}
}

// A turn whose trace input is shorter than the context before it (the
// previous prompt + output) is sent a fresh prompt and counted; the turn
// after it grows from that fresh prompt again.
func TestContextGrowthShorterInputFallsBack(t *testing.T) {
	const bs = 16
	for _, api := range []string{traces.APICompletions, traces.APIChat} {
		t.Run(api, func(t *testing.T) {
			srv := growthSim(t)
			recs := growingTrace(10, 5, 2, api, 9)
			res := closedRun(t, srv.URL, recs, func(o *Options) { o.Run = "shrink" + api })
			ss := res.Summary.Sessions
			if ss.ContextFresh != 10 || ss.ContextGrown != 30 {
				t.Errorf("counts %+v, want 10 fresh (turn 3 of each session) and 30 grown", ss)
			}
			prev := prevTurns(res)
			for i := range res.Records {
				r := &res.Records[i]
				p, ok := prev[r.Seq]
				if !ok {
					continue
				}
				turn := r.Seq % 5
				switch {
				case turn == 2 && r.ServerCachedTokens >= bs:
					t.Errorf("seq %d (fresh prompt): %d cached tokens, want under a block", r.Seq, r.ServerCachedTokens)
				case turn == 3 && int(r.ServerCachedTokens) < int(p.ServerPromptTokens)/bs*bs-bs:
					t.Errorf("seq %d (grown from the fresh prompt): %d cached tokens, want ≥ %d", r.Seq, r.ServerCachedTokens, int(p.ServerPromptTokens)/bs*bs-bs)
				}
			}
			var text strings.Builder
			res.Summary.WriteText(&text)
			if !strings.Contains(text.String(), "10 fresh because the trace's input was shorter than the context") {
				t.Errorf("the summary does not say so:\n%s", text.String())
			}
		})
	}
}

// Against a server that returns the output's token ids (vLLM's
// return_token_ids), a follow-up's prompt is exactly the previous prompt,
// those ids and new ids, as long as the trace's input; only turns with a
// follow-up ask for the ids.
func TestContextGrowthUsesReturnedTokenIDs(t *testing.T) {
	f := newFake(0)
	defer f.Close()
	recs := growingTrace(2, 3, -1, traces.APICompletions, 11)
	res := closedRun(t, f.srv.URL, recs, func(o *Options) { o.Model = "fake-model" })
	if ss := res.Summary.Sessions; ss.ContextGrown != 4 || ss.ContextOutputGuessed != 0 {
		t.Errorf("counts %+v, want 4 grown, none guessed", ss)
	}
	bySeq := map[int64]fakeReq{}
	for _, q := range f.requests() {
		seq, err := strconv.ParseInt(q.ID[strings.LastIndexByte(q.ID, '-')+1:], 10, 64)
		if err != nil {
			t.Fatalf("request id %q", q.ID)
		}
		bySeq[seq] = q
	}
	for _, r := range recs {
		q := bySeq[r.Seq]
		if len(q.Prompt) != int(r.InputTokens) {
			t.Errorf("seq %d: %d prompt ids, want %d", r.Seq, len(q.Prompt), r.InputTokens)
		}
		last := r.Seq%3 == 2
		if q.ReturnTokenIDs == last {
			t.Errorf("seq %d: return_token_ids %v, want %v", r.Seq, q.ReturnTokenIDs, !last)
		}
		if r.Seq%3 == 0 {
			continue
		}
		p := bySeq[r.Seq-1]
		want := slices.Clone(p.Prompt)
		for k := range p.MaxTokens {
			want = append(want, 500+k)
		}
		if len(q.Prompt) < len(want) || !slices.Equal(q.Prompt[:len(want)], want) {
			t.Errorf("seq %d: the prompt does not start with the previous prompt and the returned ids", r.Seq)
		}
	}
}

// turnCtx.capture keeps what a turn returned: the answer's text on chat,
// the output's token ids on completions, and marks ids it cannot trust.
func TestTurnCtxCapture(t *testing.T) {
	tests := []struct {
		name   string
		api    string
		chunks []string
		text   string
		ids    string
		n      int
		badIDs bool
	}{
		{
			// Chat text accumulates over chunks, escapes kept as sent.
			name: "chat text", api: traces.APIChat,
			chunks: []string{`{"choices":[{"delta":{"role":"assistant","content":""}}]}`, `{"choices":[{"delta":{"content":"a \"b\""}}]}`, `{"choices":[{"delta":{"content":" c\n"}}]}`},
			text:   `a \"b\" c\n`,
		},
		{
			// Completions ids accumulate over chunks, several per chunk too.
			name: "completions ids", api: traces.APICompletions,
			chunks: []string{`{"choices":[{"text":" a","token_ids":[11]}]}`, `{"choices":[{"text":" b c","token_ids":[ 12 , 13 ]}]}`},
			ids:    "11,12 , 13", n: 3,
		},
		{
			// A completions stream without ids leaves none: the follow-up
			// then guesses the output's place.
			name: "completions without ids", api: traces.APICompletions,
			chunks: []string{`{"choices":[{"text":" a"}]}`},
		},
		{
			// A negative or fractional id is not an id of the vocabulary.
			name: "bad ids", api: traces.APICompletions,
			chunks: []string{`{"choices":[{"text":" a","token_ids":[-1]}]}`, `{"choices":[{"text":" a","token_ids":[1.5]}]}`},
			badIDs: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc := &turnCtx{api: tt.api}
			for _, s := range tt.chunks {
				var c chunk
				if err := parseChunk([]byte(s), &c); err != nil {
					t.Fatalf("parseChunk(%s): %v", s, err)
				}
				tc.capture(&c)
			}
			if string(tc.outText) != tt.text || string(tc.outIDs) != tt.ids || tc.nOutIDs != tt.n || tc.badIDs != tt.badIDs {
				t.Errorf("text %q ids %q (%d, bad %v), want %q %q (%d, bad %v)", tc.outText, tc.outIDs, tc.nOutIDs, tc.badIDs, tt.text, tt.ids, tt.n, tt.badIDs)
			}
		})
	}
}

func abs(x int) int { return max(x, -x) }
