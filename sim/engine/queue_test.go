package engine

import (
	"errors"
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/traces"
)

// TestContextLength: a request is refused as vLLM refuses it (its
// message), else its output is capped by max_tokens or, without one, by
// what the context has left.
func TestContextLength(t *testing.T) {
	o := stepOptions() // MaxModelLen 256
	for _, tc := range []struct {
		why               string
		prompt, maxTokens int
		refused           string // a part of vLLM's message; "" = accepted
		maxOut            int
	}{
		{"A prompt and max_tokens that fill the context exactly are accepted.", 200, 56, "", 56},
		{"One token more is refused, naming both numbers.", 200, 57, "'max_tokens' or 'max_completion_tokens' is too large: 57", 0},
		{"Without max_tokens the output may fill the rest of the context.", 200, 0, "", 56},
		{"Without max_tokens a prompt that fills the context leaves no room: refused.", 256, 0, "maximum context length is 256 tokens. However, your request has 256 input tokens", 0},
		{"A prompt longer than the context is refused whatever max_tokens says.", 257, 1, "your request has 257 input tokens", 0},
	} {
		r, err := buildRequest(o, "x", 0, traces.APICompletions, prompt(1, tc.prompt), "", genParams{maxTokens: tc.maxTokens, ignoreEOS: true})
		var cl *errContextLength
		switch {
		case tc.refused == "" && err != nil:
			t.Errorf("%s: %v", tc.why, err)
		case tc.refused != "" && (!errors.As(err, &cl) || !strings.Contains(cl.msg, tc.refused)):
			t.Errorf("%s: error %v, want one containing %q", tc.why, err, tc.refused)
		case tc.refused == "" && r.maxOut != tc.maxOut:
			t.Errorf("%s: %d output tokens, want %d", tc.why, r.maxOut, tc.maxOut)
		}
	}
}

// TestWaitingOrder: with one sequence at a time, requests run in the
// order the policy queues them: FCFS by arrival whatever their priority;
// priority by the lower value, then by arrival, then by position.
func TestWaitingOrder(t *testing.T) {
	reqs := []Arrival{
		{ArrivalNs: 0, Prompt: prompt(1, 4), MaxTokens: 1, IgnoreEOS: true, Priority: 0}, // runs first: alone at 0
		{ArrivalNs: 10, Prompt: prompt(2, 4), MaxTokens: 1, IgnoreEOS: true, Priority: 3},
		{ArrivalNs: 20, Prompt: prompt(3, 4), MaxTokens: 1, IgnoreEOS: true, Priority: 1},
		{ArrivalNs: 30, Prompt: prompt(4, 4), MaxTokens: 1, IgnoreEOS: true, Priority: 1},
		{ArrivalNs: 30, Prompt: prompt(5, 4), MaxTokens: 1, IgnoreEOS: true, Priority: -2},
		{ArrivalNs: 20, Prompt: prompt(6, 4), MaxTokens: 1, IgnoreEOS: true, Priority: 1},
	}
	for _, tc := range []struct {
		policy string
		order  []int
	}{
		{"fcfs", []int{0, 1, 2, 5, 3, 4}},
		{"priority", []int{0, 4, 2, 5, 3, 1}},
	} {
		o := stepOptions()
		o.MaxNumSeqs, o.Policy = 1, tc.policy
		res := simulate(t, o, reqs)
		for k := 1; k < len(tc.order); k++ {
			a, b := res.Truth[tc.order[k-1]], res.Truth[tc.order[k]]
			if a.FirstTokenNs >= b.FirstTokenNs {
				t.Errorf("%s: request %d's first token at %d, not before request %d's at %d", tc.policy, tc.order[k-1], a.FirstTokenNs, tc.order[k], b.FirstTokenNs)
			}
		}
	}
}

// TestStreamIntervalPublishes: the engine publishes a request's first
// token at once, then every StreamInterval tokens, and its end whenever
// it comes.
func TestStreamIntervalPublishes(t *testing.T) {
	for _, tc := range []struct {
		interval, tokens int
		want             string
	}{
		{1, 4, "1 2 3 4"},
		{3, 8, "1 4 7 8"},
		{5, 3, "1 3"},
	} {
		o := stepOptions()
		o.StreamInterval = tc.interval
		e := newEngine(o, newStats(o.MaxModelLen))
		var got []string
		e.onPublish = func(r *request) { got = append(got, itoa(r.numOut)) }
		r, err := buildRequest(o, "x", 0, traces.APICompletions, prompt(1, 8), "", genParams{maxTokens: tc.tokens, ignoreEOS: true})
		if err != nil {
			t.Fatal(err)
		}
		e.add(r)
		for now := int64(0); ; {
			d, ok := e.plan(now)
			if !ok {
				break
			}
			now += int64(d)
			e.commit(now)
		}
		if s := strings.Join(got, " "); s != tc.want {
			t.Errorf("interval %d, %d tokens: published at %s, want %s", tc.interval, tc.tokens, s, tc.want)
		}
	}
}

// TestAbortsFreeBlocks: requests whose client went away leave the queue
// and the batch at the next step, with a disconnect row, and give their
// blocks back.
func TestAbortsFreeBlocks(t *testing.T) {
	o := stepOptions()
	o.MaxNumSeqs = 1
	e := newEngine(o, newStats(o.MaxModelLen))
	rows := map[string]string{}
	e.onFinish = func(r *request, status string) { rows[r.id] = status }
	var reqs []*request
	for i, id := range []string{"running", "waiting", "kept"} {
		r, err := buildRequest(o, id, int64(i), traces.APICompletions, prompt(uint64(i), 10), "", genParams{maxTokens: 5, ignoreEOS: true})
		if err != nil {
			t.Fatal(err)
		}
		e.add(r)
		reqs = append(reqs, r)
	}
	d, _ := e.plan(0)
	e.commit(int64(d))
	if e.kv.nfree == o.NumGPUBlocks || len(e.running) != 1 {
		t.Fatalf("after one step: %d free blocks, %d running; want some held, 1 running", e.kv.nfree, len(e.running))
	}
	reqs[0].abort.Store(true)
	reqs[1].abort.Store(true)
	e.aborts = 2
	e.reapAborts(int64(d))
	if rows["running"] != traces.StatusDisconnect || rows["waiting"] != traces.StatusDisconnect || len(rows) != 2 {
		t.Errorf("rows %v, want disconnect rows for the two aborted requests only", rows)
	}
	if e.kv.nfree != o.NumGPUBlocks || len(e.running) != 0 || len(e.waiting) != 1 || e.waiting[0].id != "kept" {
		t.Errorf("%d of %d blocks free, %d running, waiting %d; want all free and the kept request waiting", e.kv.nfree, o.NumGPUBlocks, len(e.running), len(e.waiting))
	}
	if c := (Meter{e.st}).Counters(); c.Aborted != 2 || c.Running != 0 || c.Waiting != 1 {
		t.Errorf("counters %+v, want 2 aborted, 0 running, 1 waiting", c)
	}
}
