package engine

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/tokentrace/tokentrace/traces"
)

// Arrival is a request arriving at an offline simulation (sim.Simulate,
// Simulate, NewRequest).
type Arrival struct {
	// ID becomes the truth row's RequestID.
	ID string
	// ArrivalNs is the arrival offset from the simulation start.
	ArrivalNs int64
	// Prompt is the prompt's token ids (prefix caching hashes them).
	Prompt []int32
	// MaxTokens caps the output; 0 means up to the context length.
	MaxTokens int
	// MinTokens is the minimum output length.
	MinTokens int
	// IgnoreEOS makes the output exactly MaxTokens long.
	IgnoreEOS bool
	// Priority orders the waiting queue under the "priority" policy.
	Priority int
	// Session is the request's session (0 = none): a fleet's
	// session-affinity router keeps a session on one replica.
	Session int64
}

// StepStat is the engine state after one simulated step.
type StepStat struct {
	StartNs, EndNs       int64
	Running, Waiting     int
	PrefillTokens        int
	DecodeSeqs           int
	ContextTokens        int
	KVUsage              float64
	PreemptionsSoFar     int64
	PrefixHitTokensSoFar int64
}

// Result is what Simulate returns.
type Result struct {
	// Truth has one row per request, in input order (see Server.Truth).
	Truth []traces.Record
	// Steps has one entry per engine step.
	Steps []StepStat
}

// Simulate runs one engine offline in virtual time: requests arrive at
// their ArrivalNs, steps take their modelled durations, nothing sleeps. It
// is deterministic for given options and requests. Requests whose prompt
// plus MaxTokens exceeds MaxModelLen are rejected with an error row
// (status http_error, 400), as the server would.
//
// It is the reference: callers run the simulator with sim.Simulate (a
// stream, a fleet or one engine), whose one-engine run is checked against
// this list-based loop, which also reports every step (Result.Steps) for
// step-level tests.
func Simulate(ctx context.Context, o Options, reqs []Arrival) (*Result, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	st := newStats(o.MaxModelLen)
	e := newEngine(o, st)
	res := &Result{Truth: make([]traces.Record, len(reqs))}
	e.onFinish = func(r *request, status string) { res.Truth[r.seq] = truthRecord(r, status) }
	order := make([]int, len(reqs))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return reqs[order[a]].ArrivalNs < reqs[order[b]].ArrivalNs })
	var pending []*request
	for _, i := range order {
		q := reqs[i]
		if q.ID == "" {
			q.ID = "sim-" + itoa(i)
		}
		r, err := buildRequest(o, q.ID, int64(i), traces.APICompletions, q.Prompt, "", genParams{
			maxTokens: q.MaxTokens, minTokens: q.MinTokens, ignoreEOS: q.IgnoreEOS, priority: q.Priority})
		r.arrival = q.ArrivalNs
		if err != nil {
			t := traces.NewRecord()
			t.Seq, t.ArrivalNs, t.RequestID, t.InputTokens = int64(i), q.ArrivalNs, q.ID, int32(len(q.Prompt))
			t.Run, t.Status, t.HTTPStatus, t.Error = "sim", traces.StatusHTTPError, 400, "context length exceeded"
			res.Truth[i] = t
			continue
		}
		pending = append(pending, r)
	}
	now := int64(0)
	for k := 0; ; k++ {
		if k%1024 == 0 && ctx.Err() != nil {
			return res, ctx.Err()
		}
		for len(pending) > 0 && pending[0].arrival <= now {
			e.add(pending[0])
			pending = pending[1:]
		}
		d, ok := e.plan(now)
		if !ok {
			if !e.idle() && (len(pending) == 0 || pending[0].arrival <= now) {
				return res, fmt.Errorf("sim: engine stalled at %d ns with %d waiting and %d running", now, len(e.waiting), len(e.running))
			}
			if len(pending) == 0 {
				break
			}
			now = max(now, pending[0].arrival)
			continue
		}
		end := now + int64(d)
		e.commit(end)
		res.Steps = append(res.Steps, StepStat{
			StartNs: now, EndNs: end, Running: len(e.running), Waiting: len(e.waiting),
			PrefillTokens: e.prefillTokens, DecodeSeqs: e.decodeSeqs, ContextTokens: e.ctxTokens,
			KVUsage: e.kv.usage(), PreemptionsSoFar: st.preemptions, PrefixHitTokensSoFar: st.prefixHits,
		})
		now = end
	}
	return res, nil
}

// genParams are a request's sampling parameters that matter to the engine.
type genParams struct {
	maxTokens int // 0 = up to the context length
	minTokens int
	ignoreEOS bool
	priority  int
}

// errContextLength is returned by buildRequest for over-long requests; msg
// is vLLM's wording.
type errContextLength struct{ msg string }

func (e *errContextLength) Error() string { return e.msg }

// buildRequest makes an engine request: checks the context length like
// vLLM, hashes the prompt blocks (keeping what output blocks chain on) and draws the output length.
func buildRequest(o Options, id string, seq int64, api string, prompt []int32, salt string, p genParams) (*request, error) {
	r := newRequest()
	r.id, r.seq, r.api, r.model, r.priority = id, seq, api, o.Model, p.priority
	r.promptLen = len(prompt)
	n := len(prompt)
	if n >= o.MaxModelLen && p.maxTokens == 0 || n > o.MaxModelLen {
		return r, &errContextLength{msg: "This model's maximum context length is " + itoa(o.MaxModelLen) +
			" tokens. However, your request has " + itoa(n) + " input tokens. Please reduce the length of the input messages."}
	}
	maxTok := p.maxTokens
	if maxTok == 0 {
		maxTok = o.MaxModelLen - n
	} else if n+maxTok > o.MaxModelLen {
		return r, &errContextLength{msg: "'max_tokens' or 'max_completion_tokens' is too large: " + itoa(maxTok) +
			". This model's maximum context length is " + itoa(o.MaxModelLen) + " tokens and your request has " +
			itoa(n) + " input tokens (" + itoa(maxTok) + " > " + itoa(o.MaxModelLen) + " - " + itoa(n) + ")."}
	}
	r.maxTokens = maxTok
	r.maxOut = maxTok
	if !p.ignoreEOS {
		// Geometric: after each token the model emits EOS with probability 1/mean.
		u := float64(mix64(uint64(o.Seed)^strHash(id))>>11) / (1 << 53)
		pr := 1 / float64(o.MeanOutputTokens)
		draw := 1 + int(math.Floor(math.Log1p(-u)/math.Log1p(-pr)))
		if pr >= 1 {
			draw = 1
		}
		draw = max(draw, p.minTokens, 1)
		if draw < maxTok {
			r.maxOut, r.stopByEOS = draw, true
		}
	}
	if !o.DisablePrefixCaching {
		r.hashes = blockHashes(prompt, o.BlockSize, salt)
		r.seed = hashSeed(salt)
		r.tail = slices.Clone(prompt[len(r.hashes)*o.BlockSize:])
	}
	return r, nil
}

func strHash(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}
