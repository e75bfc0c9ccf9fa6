package twin

import (
	"context"
	"fmt"
	"hash/fnv"
	"iter"
	"strconv"

	"github.com/tokentrace/tokentrace/sim"
	"github.com/tokentrace/tokentrace/traces"
)

// PromptFunc builds the prompt token ids a row's request sends: the
// replayer's (replay.PromptTokens), so that a simulation sees the shared
// prefixes a replay showed the server. nil means DefaultPrompt.
type PromptFunc func(r *traces.Record) []int32

// DefaultPrompt is a prompt of the row's InputTokens ids whose first
// PrefixTokens are its category's (shared by every row of the category)
// and the rest its own (seeded by its seq): prefix caching sees the
// trace's shared prefixes, though not the exact ids a replay sends.
func DefaultPrompt(r *traces.Record) []int32 {
	n := max(int(r.InputTokens), 1)
	ids := make([]int32, n)
	shared := 0
	if r.Category != "" {
		shared = min(int(r.PrefixTokens), n)
	}
	h := fnv.New64a()
	h.Write([]byte(r.Category))
	cat := h.Sum64()
	for i := range ids {
		x := uint64(r.Seq)<<20 ^ uint64(i)
		if i < shared {
			x = cat ^ uint64(i)<<1
		}
		ids[i] = int32(1000 + splitmix(x)%100000)
	}
	return ids
}

func splitmix(x uint64) uint64 {
	x += 0x9E3779B97F4A7C15
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9
	x = (x ^ (x >> 27)) * 0x94D049BB133111EB
	return x ^ (x >> 31)
}

// outputTokens is the output a row's request produced: what the server or
// the chunks say, else (a trace, or a log without usage) its target.
func outputTokens(r *traces.Record) int {
	if r.HasOutcome() && (r.ServerOutputTokens >= 0 || len(r.ChunkNs) > 0) {
		n, _ := r.ReceivedOutputTokens()
		return n
	}
	return int(r.OutputTokens)
}

// PredictOptions configure Predict. Start from DefaultPredictOptions: a
// zero field is a value like any other, which Validate refuses where
// Predict cannot use it.
type PredictOptions struct {
	// Prompt builds each request's prompt. Defaults to DefaultPrompt.
	Prompt PromptFunc
	// Run labels the predicted rows. Defaults to "twin".
	Run string
	// ReorderWindow is how far out of send order the rows may come (ns);
	// 0: rows come in send order. Defaults to DefaultReorderWindow.
	ReorderWindow int64
}

// DefaultPredictOptions returns every PredictOptions default.
func DefaultPredictOptions() PredictOptions {
	return PredictOptions{Prompt: DefaultPrompt, Run: "twin", ReorderWindow: DefaultReorderWindow}
}

// Validate reports the first option Predict cannot use, naming it in a
// *traces.OptionError.
func (po PredictOptions) Validate() error {
	switch {
	case po.Prompt == nil:
		return traces.OptionErrorf("twin", "PredictOptions.Prompt", "must be set (DefaultPrompt, or a replay's prompts)")
	case po.ReorderWindow < 0:
		return traces.OptionErrorf("twin", "PredictOptions.ReorderWindow", "must be >= 0 (0 holds none), got %d", po.ReorderWindow)
	}
	return nil
}

// PredictResult is what Predict reports besides the rows.
type PredictResult struct {
	// Requests is the number of requests simulated; Skipped the rows that
	// were not (a failed request of a measured run: the twin does not
	// model faults); Late the rows too far out of send order.
	Requests, Skipped, Late int64
	// Sim is the simulation's result.
	Sim *sim.Result
}

// Predict runs the requests of rows (a results file's, or a trace's) on
// the simulator o offline, in virtual time: each request arrives when it
// was sent (a trace's rows: at their arrival), with its prompt, its
// received output length (a trace's rows: their target), its session. The
// predicted rows go to emit as a replay's results would look: send time =
// arrival, first and last token, every chunk's time, the server's timings,
// and the source row's seq, session, turn, prefix, category and class. Rows come in the order
// requests finish.
func Predict(ctx context.Context, o sim.Options, rows iter.Seq2[traces.Record, error], po PredictOptions, emit func(traces.Record) error) (*PredictResult, error) {
	if err := po.Validate(); err != nil {
		return nil, err
	}
	o.ChunkTimes = true
	o.TruthOut = ""
	// The measured server answered these requests: the twin admits every
	// one its cache can hold.
	o = o.AdmitLongest(o.NumGPUBlocks * o.BlockSize)
	type source struct {
		seq, session    int64
		turn, prefix    int32
		category, class string
	}
	src := map[int64]source{}
	res := &PredictResult{}
	reqs := func(yield func(sim.Request, error) bool) {
		for r, err := range bySent(rows, po.ReorderWindow, &res.Late) {
			if err != nil {
				yield(sim.Request{}, err)
				return
			}
			if r.HasOutcome() && !r.OK() {
				res.Skipped++
				continue
			}
			out := max(outputTokens(&r), 1)
			src[res.Requests] = source{r.Seq, r.Session, r.Turn, r.PrefixTokens, r.Category, r.Class}
			q := sim.Request{
				ID: "twin-" + strconv.FormatInt(r.Seq, 10), ArrivalNs: sentAt(&r), Prompt: po.Prompt(&r),
				MaxTokens: out, MinTokens: out, IgnoreEOS: true, Session: r.Session,
			}
			res.Requests++
			if !yield(q, nil) {
				return
			}
		}
	}
	sr, err := sim.Simulate(ctx, o, reqs, func(t traces.Record) error {
		s := src[t.Seq]
		delete(src, t.Seq)
		t.Seq, t.Session, t.Turn, t.PrefixTokens, t.Category, t.Class, t.Run = s.seq, s.session, s.turn, s.prefix, s.category, s.class, po.Run
		t.ScheduledNs, t.SentNs = t.ArrivalNs, t.ArrivalNs
		return emit(t)
	})
	res.Sim = sr
	if err != nil {
		return res, fmt.Errorf("twin: predict: %w", err)
	}
	return res, nil
}
