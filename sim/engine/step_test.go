package engine

import (
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// stepOptions is a small engine whose four step-time terms differ by
// orders of magnitude, so a step's duration says which terms it charged
// and how often: 1 ms a step, 10 µs a prefill token, 100 µs a decoding
// sequence, 1 ns a context token. Blocks hold 4 tokens.
func stepOptions() Options {
	o := DefaultOptions()
	o.MaxNumSeqs, o.MaxNumBatchedTokens = 16, 64
	o.NumGPUBlocks, o.BlockSize, o.MaxModelLen = 64, 4, 256
	o.StepFixed = time.Millisecond
	o.PrefillPerToken = 10 * time.Microsecond
	o.DecodePerSeq = 100 * time.Microsecond
	o.AttnPerContextToken = time.Nanosecond
	return o
}

// stepTime is the step model: StepFixed + PrefillPerToken·prefill +
// DecodePerSeq·decode + AttnPerContextToken·ctx.
func stepTime(o Options, prefill, decode, ctx int) int64 {
	return int64(o.StepFixed + time.Duration(prefill)*o.PrefillPerToken +
		time.Duration(decode)*o.DecodePerSeq + time.Duration(ctx)*o.AttnPerContextToken)
}

// step is what one engine step did: prompt tokens computed, sequences
// decoded, context tokens read, and the requests running and waiting
// after it.
type step struct{ prefill, decode, ctx, running, waiting int }

// prompt is n token ids of its own (seed apart, no block shared).
func prompt(seed uint64, n int) []int32 { return randomPrompt(seed<<32, n) }

// checkSteps compares res's steps with want and checks that each lasted
// exactly the step model's time and began when the one before ended (or
// at an arrival, when the engine was idle).
func checkSteps(t *testing.T, o Options, res *Result, want []step) {
	t.Helper()
	if len(res.Steps) != len(want) {
		for i, s := range res.Steps {
			t.Logf("step %d: %+v", i+1, s)
		}
		t.Fatalf("%d steps, want %d", len(res.Steps), len(want))
	}
	for i, s := range res.Steps {
		w := want[i]
		got := step{s.PrefillTokens, s.DecodeSeqs, s.ContextTokens, s.Running, s.Waiting}
		if got != w {
			t.Errorf("step %d: %+v, want %+v", i+1, got, w)
		}
		if d := s.EndNs - s.StartNs; d != stepTime(o, s.PrefillTokens, s.DecodeSeqs, s.ContextTokens) {
			t.Errorf("step %d lasted %d ns, want the model's %d", i+1, d, stepTime(o, s.PrefillTokens, s.DecodeSeqs, s.ContextTokens))
		}
	}
}

// stepEnd is when step k (from 1) of res ended.
func stepEnd(res *Result, k int) int64 { return res.Steps[k-1].EndNs }

// TestStepAccounting: hand-computed small runs, step by step. Each case
// says what the scheduler must do; every step lasts exactly the step
// model's time for what it computed.
func TestStepAccounting(t *testing.T) {
	for _, tc := range []struct {
		why  string
		mut  func(*Options)
		reqs []Arrival
		want []step
	}{
		{
			why:  "A lone request prefills its 10 prompt tokens in one step, then decodes one token a step, reading one more context token each time.",
			reqs: []Arrival{{Prompt: prompt(1, 10), MaxTokens: 3, IgnoreEOS: true}},
			want: []step{{10, 0, 10, 1, 0}, {0, 1, 11, 1, 0}, {0, 1, 12, 0, 0}},
		},
		{
			why:  "A 150-token prompt is chunked within the 64-token budget (64, 64, 22); its first token comes with the last chunk.",
			reqs: []Arrival{{Prompt: prompt(2, 150), MaxTokens: 2, IgnoreEOS: true}},
			want: []step{{64, 0, 64, 1, 0}, {64, 0, 128, 1, 0}, {22, 0, 150, 1, 0}, {0, 1, 151, 0, 0}},
		},
		{
			why: "A running request's decode comes first and a prompt that arrived meanwhile takes the rest of the budget (63, then 37).",
			reqs: []Arrival{
				{Prompt: prompt(3, 10), MaxTokens: 5, IgnoreEOS: true},
				{ArrivalNs: 1, Prompt: prompt(4, 100), MaxTokens: 3, IgnoreEOS: true},
			},
			want: []step{{10, 0, 10, 1, 0}, {63, 1, 11 + 63, 2, 0}, {37, 1, 12 + 100, 2, 0}, {0, 2, 13 + 101, 2, 0}, {0, 2, 14 + 102, 0, 0}},
		},
		{
			why:  "MaxNumSeqs 2 admits two of three requests; the third waits until a running one finishes, though the budget had room.",
			mut:  func(o *Options) { o.MaxNumSeqs = 2 },
			reqs: []Arrival{{Prompt: prompt(5, 10), MaxTokens: 2, IgnoreEOS: true}, {Prompt: prompt(6, 10), MaxTokens: 2, IgnoreEOS: true}, {Prompt: prompt(7, 10), MaxTokens: 2, IgnoreEOS: true}},
			want: []step{{20, 0, 20, 2, 1}, {0, 2, 22, 0, 1}, {10, 0, 10, 1, 0}, {0, 1, 11, 0, 0}},
		},
	} {
		t.Run(tc.why, func(t *testing.T) {
			o := stepOptions()
			if tc.mut != nil {
				tc.mut(&o)
			}
			res := simulate(t, o, tc.reqs)
			checkSteps(t, o, res, tc.want)
		})
	}
}

// TestPreemptionByRecompute: six blocks of 4 tokens hold two 8-token
// prompts and their first outputs; a request whose next token needs a
// block none is free for preempts a running one, which frees its blocks,
// waits while the other finishes, and recomputes its prompt and outputs
// so far in one step. Its row counts the preemption and keeps its first
// token's time; the counter agrees.
func TestPreemptionByRecompute(t *testing.T) {
	for _, tc := range []struct {
		why    string
		policy string
		reqs   []Arrival
		want   []step
		victim int
		// first and last are the steps (from 1) that gave each request
		// its first and its last token.
		first, last [2]int
	}{
		{
			why:    "FCFS preempts the last running request when the first needs its 4th block for the 13th token; it recomputes 8 + 5 tokens.",
			policy: "fcfs",
			reqs:   []Arrival{{Prompt: prompt(8, 8), MaxTokens: 8, IgnoreEOS: true}, {Prompt: prompt(9, 8), MaxTokens: 8, IgnoreEOS: true}},
			want: []step{
				{16, 0, 16, 2, 0}, {0, 2, 18, 2, 0}, {0, 2, 20, 2, 0}, {0, 2, 22, 2, 0}, {0, 2, 24, 2, 0},
				{0, 1, 13, 1, 1}, {0, 1, 14, 1, 1}, {0, 1, 15, 0, 1},
				{13, 0, 13, 1, 0}, {0, 1, 14, 1, 0}, {0, 1, 15, 0, 0},
			},
			victim: 1, first: [2]int{1, 1}, last: [2]int{8, 11},
		},
		{
			why:    "Priority preempts the running request with the largest priority value, here the one that needs the block itself, admitted first.",
			policy: "priority",
			reqs: []Arrival{
				{Prompt: prompt(10, 8), MaxTokens: 8, IgnoreEOS: true, Priority: 9},
				{ArrivalNs: 1, Prompt: prompt(11, 8), MaxTokens: 8, IgnoreEOS: true},
			},
			want: []step{
				{8, 0, 8, 1, 0}, {8, 1, 17, 2, 0}, {0, 2, 19, 2, 0}, {0, 2, 21, 2, 0}, {0, 2, 23, 2, 0},
				{0, 1, 12, 1, 1}, {0, 1, 13, 1, 1}, {0, 1, 14, 1, 1}, {0, 1, 15, 0, 1},
				{13, 0, 13, 1, 0}, {0, 1, 14, 1, 0}, {0, 1, 15, 0, 0},
			},
			victim: 0, first: [2]int{1, 2}, last: [2]int{12, 9},
		},
	} {
		t.Run(tc.why, func(t *testing.T) {
			o := stepOptions()
			o.NumGPUBlocks, o.MaxModelLen, o.DisablePrefixCaching, o.Policy = 6, 24, true, tc.policy
			res := simulate(t, o, tc.reqs)
			checkSteps(t, o, res, tc.want)
			for i, r := range res.Truth {
				wantPre := int32(0)
				if i == tc.victim {
					wantPre = 1
				}
				if r.ServerPreemptions != wantPre || r.OutputTokens != 8 {
					t.Errorf("request %d: %d preemptions, %d tokens; want %d and 8", i, r.ServerPreemptions, r.OutputTokens, wantPre)
				}
				if r.FirstTokenNs != stepEnd(res, tc.first[i]) || r.LastTokenNs != stepEnd(res, tc.last[i]) {
					t.Errorf("request %d: tokens from %d to %d, want the ends of steps %d and %d (%d, %d)",
						i, r.FirstTokenNs, r.LastTokenNs, tc.first[i], tc.last[i], stepEnd(res, tc.first[i]), stepEnd(res, tc.last[i]))
				}
			}
			if res.Steps[4].PreemptionsSoFar != 0 || res.Steps[5].PreemptionsSoFar != 1 || res.Steps[len(res.Steps)-1].PreemptionsSoFar != 1 {
				t.Errorf("preemptions counted %d by step 5, %d by step 6, %d at the end; want 0, 1, 1",
					res.Steps[4].PreemptionsSoFar, res.Steps[5].PreemptionsSoFar, res.Steps[len(res.Steps)-1].PreemptionsSoFar)
			}
		})
	}
}

// TestTruthComponentsExact: a truth row's queue, prefill and decode are
// the engine's step boundaries, so they add up to TTFT and E2E exactly,
// hand-computed from the step model.
func TestTruthComponentsExact(t *testing.T) {
	o := stepOptions()
	d := func(prefill, decode, ctx int) int64 { return stepTime(o, prefill, decode, ctx) }
	for _, tc := range []struct {
		why                    string
		reqs                   []Arrival
		row                    int
		queue, prefill, decode int64
	}{
		{
			why:     "A lone request: no queue, prefill one step, decode the two steps after it.",
			reqs:    []Arrival{{ArrivalNs: 5, Prompt: prompt(1, 10), MaxTokens: 3, IgnoreEOS: true}},
			queue:   0,
			prefill: d(10, 0, 10),
			decode:  d(0, 1, 11) + d(0, 1, 12),
		},
		{
			why: "A request arriving 1 ns into a step waits for the step to end; its prompt then shares two steps with the other's decodes.",
			reqs: []Arrival{
				{Prompt: prompt(3, 10), MaxTokens: 5, IgnoreEOS: true},
				{ArrivalNs: 1, Prompt: prompt(4, 100), MaxTokens: 3, IgnoreEOS: true},
			},
			row:     1,
			queue:   d(10, 0, 10) - 1,
			prefill: d(63, 1, 74) + d(37, 1, 112),
			decode:  d(0, 2, 114) + d(0, 2, 116),
		},
		{
			why:     "A chunked prompt's prefill spans its chunks' steps.",
			reqs:    []Arrival{{Prompt: prompt(2, 150), MaxTokens: 2, IgnoreEOS: true}},
			prefill: d(64, 0, 64) + d(64, 0, 128) + d(22, 0, 150),
			decode:  d(0, 1, 151),
		},
	} {
		t.Run(tc.why, func(t *testing.T) {
			res := simulate(t, o, tc.reqs)
			r := res.Truth[tc.row]
			if r.ServerQueueNs != tc.queue || r.ServerPrefillNs != tc.prefill || r.ServerDecodeNs != tc.decode {
				t.Errorf("queue %d prefill %d decode %d, want %d %d %d", r.ServerQueueNs, r.ServerPrefillNs, r.ServerDecodeNs, tc.queue, tc.prefill, tc.decode)
			}
			if ttft := r.FirstTokenNs - r.ArrivalNs; ttft != r.ServerQueueNs+r.ServerPrefillNs {
				t.Errorf("TTFT %d ≠ queue + prefill %d", ttft, r.ServerQueueNs+r.ServerPrefillNs)
			}
			if e2e := r.LastTokenNs - r.ArrivalNs; e2e != r.ServerQueueNs+r.ServerPrefillNs+r.ServerDecodeNs {
				t.Errorf("E2E %d ≠ queue + prefill + decode", e2e)
			}
		})
	}
}

// TestPrefixCacheEviction: a prompt seen before hits its cached full
// blocks, all but the block holding its last token (which is always
// computed); freed blocks are evicted least recently used first, a
// finished request's last block before its first, so a prefix outlives
// its tail. Each request here is alone (a second apart) with one output
// token, so 12-token prompts hold 3 blocks of 4 in a 6-block cache.
func TestPrefixCacheEviction(t *testing.T) {
	a, b := prompt(20, 12), prompt(21, 12)
	for _, tc := range []struct {
		why     string
		prompts [][]int32
		cached  int32 // the last request's cached tokens
		prefill int   // the last request's prefill tokens (one step)
	}{
		{"A repeat hits 2 of its 3 blocks: the last holds the last prompt token.", [][]int32{a, a}, 8, 4},
		{"A repeat after another request that used only never-used blocks still hits.", [][]int32{a, b, a}, 8, 4},
		{"A third request takes the least recently freed blocks: all of the first's, which then misses.", [][]int32{a, b, prompt(22, 12), a}, 0, 12},
		{"The second, freed later, still hits.", [][]int32{a, b, prompt(22, 12), b}, 8, 4},
		{"A one-block request evicts the first's tail block only: its prefix still hits.", [][]int32{a, b, prompt(23, 4), a}, 8, 4},
		{"A two-block request evicts its last two blocks: one block still hits.", [][]int32{a, b, prompt(24, 8), a}, 4, 8},
		{"A prompt sharing the first block only hits that block.", [][]int32{a, append(append([]int32(nil), a[:4]...), prompt(25, 8)...)}, 4, 8},
	} {
		t.Run(tc.why, func(t *testing.T) {
			o := stepOptions()
			o.NumGPUBlocks, o.MaxModelLen = 6, 24
			var reqs []Arrival
			for i, p := range tc.prompts {
				reqs = append(reqs, Arrival{ArrivalNs: int64(i) * int64(time.Second), Prompt: p, MaxTokens: 1, IgnoreEOS: true})
			}
			res := simulate(t, o, reqs)
			last := res.Truth[len(reqs)-1]
			if last.ServerCachedTokens != tc.cached {
				t.Errorf("cached %d tokens, want %d", last.ServerCachedTokens, tc.cached)
			}
			s := res.Steps[len(res.Steps)-1]
			if s.PrefillTokens != tc.prefill || s.ContextTokens != 12 {
				t.Errorf("last step prefilled %d tokens reading %d; want %d reading all 12 (hits are read, not computed)", s.PrefillTokens, s.ContextTokens, tc.prefill)
			}
			if want := stepTime(o, tc.prefill, 0, 12); last.ServerPrefillNs != want {
				t.Errorf("prefill %d ns, want %d", last.ServerPrefillNs, want)
			}
		})
	}
}

// TestPrefixHitCounters: the prefix-cache counters count prompt tokens
// queried and hit once per request, at admission.
func TestPrefixHitCounters(t *testing.T) {
	o := stepOptions()
	a := prompt(30, 20)
	reqs := []Arrival{
		{Prompt: a, MaxTokens: 1, IgnoreEOS: true},
		{ArrivalNs: int64(time.Second), Prompt: a, MaxTokens: 1, IgnoreEOS: true},
		{ArrivalNs: 2 * int64(time.Second), Prompt: prompt(31, 20), MaxTokens: 1, IgnoreEOS: true},
	}
	rp, err := NewReplica(o)
	if err != nil {
		t.Fatal(err)
	}
	var rows []traces.Record
	rp.OnFinish = func(_ *Request, r traces.Record) { rows = append(rows, r) }
	for i, q := range reqs {
		x, err := NewRequest(o, q, int64(i))
		if err != nil {
			t.Fatal(err)
		}
		rp.Add(x, q.ArrivalNs)
		for end, ok := rp.Plan(q.ArrivalNs); ok; end, ok = rp.Plan(end) {
			rp.Commit()
		}
	}
	c := rp.Meter().Counters()
	// The repeat hits 4 of 5 blocks (16 tokens): its last block holds the
	// last prompt token.
	if c.PrefixQueries != 60 || c.PrefixHits != 16 || len(rows) != 3 || rows[1].ServerCachedTokens != 16 {
		t.Errorf("queries %d hits %d, rows %d; want 60, 16 and the repeat's 16 cached tokens", c.PrefixQueries, c.PrefixHits, len(rows))
	}
	if c.Finished != 3 || c.PromptTokens != 60 || c.GenerationTokens != 3 || !rp.Idle() {
		t.Errorf("counters %+v, idle %v; want 3 finished, 60 prompt and 3 generated tokens, idle", c, rp.Idle())
	}
}

// TestPromptWaitsForBlocks: a prompt that does not fit in the KV cache
// beside a running request waits, though the token budget and
// MaxNumSeqs had room, until that request finishes and frees its blocks.
func TestPromptWaitsForBlocks(t *testing.T) {
	o := stepOptions()
	o.NumGPUBlocks, o.MaxModelLen = 6, 24
	// 20-token prompts take 5 of the 6 blocks each.
	res := simulate(t, o, []Arrival{{Prompt: prompt(40, 20), MaxTokens: 2, IgnoreEOS: true}, {Prompt: prompt(41, 20), MaxTokens: 2, IgnoreEOS: true}})
	checkSteps(t, o, res, []step{{20, 0, 20, 1, 1}, {0, 1, 21, 0, 1}, {20, 0, 20, 1, 0}, {0, 1, 21, 0, 0}})
	if q := res.Truth[1].ServerQueueNs; q != stepEnd(res, 2) {
		t.Errorf("the second queued %d ns, want the first's two steps (%d)", q, stepEnd(res, 2))
	}
}
