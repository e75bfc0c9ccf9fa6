package replay

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tokentrace/tokentrace/internal/commalist"
	"github.com/tokentrace/tokentrace/traces"
)

// Defaults of a Background load and of the trace's class beside one.
const (
	DefaultBackgroundClass       = "batch"
	DefaultBackgroundConcurrency = 16
	DefaultBackgroundInput       = 1024
	DefaultBackgroundOutput      = 256
	DefaultTraceClass            = "interactive"
)

// MetaBackground is the results metadata key holding the background loads
// (their specs, as given to ParseBackground) and MetaBackgroundAbandoned
// the number of background requests still in flight when the trace ended
// (cancelled and not written).
const (
	MetaBackground          = "replay.background"
	MetaBackgroundAbandoned = "replay.background_abandoned"
)

// Background is a closed-loop load run beside the open-loop trace, like an
// offline batch job sharing the server with interactive users: Concurrency
// workers each send a request of Input prompt tokens and Output output
// tokens, wait for its last token, and send the next, from the run's start
// until every trace request has finished. Every background request is in
// the results with Class set (request id RUN-CLASS-N, seq after the trace's).
type Background struct {
	// Class labels the load's requests. Defaults to "batch".
	Class string
	// Concurrency is the number of closed-loop workers. Defaults to 16.
	Concurrency int
	// Input is the prompt length in tokens (unique prompts, no shared
	// prefix). Defaults to 1024.
	Input int
	// Output is the output length in tokens. Defaults to 256.
	Output int
}

// String renders b in ParseBackground's syntax.
func (b Background) String() string {
	return fmt.Sprintf("class=%s,concurrency=%d,input=%d,output=%d", b.Class, b.Concurrency, b.Input, b.Output)
}

// ParseBackground parses "class=batch,concurrency=256,input=1024,output=256"
// (any subset; missing keys take the defaults). Errors name the input ("background").
func ParseBackground(s string) (Background, error) {
	b := Background{Class: DefaultBackgroundClass, Concurrency: DefaultBackgroundConcurrency,
		Input: DefaultBackgroundInput, Output: DefaultBackgroundOutput}
	err := commalist.Each(s, func(part string) error {
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			return optionErr("background", "%q: want key=value (class, concurrency, input, output)", part)
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if k == "class" {
			if v == "" || strings.ContainsAny(v, " \t\r\n,") {
				return optionErr("background", "class %q: want a non-empty name without spaces", v)
			}
			b.Class = v
			return nil
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return optionErr("background", "%s=%q: want an integer", k, v)
		}
		switch k {
		case "concurrency":
			b.Concurrency = n
		case "input":
			b.Input = n
		case "output":
			b.Output = n
		default:
			return optionErr("background", "unknown key %q (want class, concurrency, input, output)", k)
		}
		return nil
	})
	if err != nil {
		return b, err
	}
	if err := errors.Join(validateBackground([]Background{b})...); err != nil {
		return b, err
	}
	return b, nil
}

func validateBackground(bs []Background) []error {
	var errs []error
	seen := map[string]bool{}
	for _, b := range bs {
		if b.Concurrency < 1 {
			errs = append(errs, optionErr("Options.Background", "concurrency must be >= 1, got %d", b.Concurrency))
		}
		if b.Input < 1 {
			errs = append(errs, optionErr("Options.Background", "input must be >= 1, got %d", b.Input))
		}
		if b.Output < 1 {
			errs = append(errs, optionErr("Options.Background", "output must be >= 1, got %d", b.Output))
		}
		if b.Class == "" {
			errs = append(errs, optionErr("Options.Background", "class must not be empty"))
		}
		if seen[b.Class] {
			errs = append(errs, optionErr("Options.Background", "class %q given twice", b.Class))
		}
		seen[b.Class] = true
	}
	return errs
}

// bgRun is the background loads of one replay in progress.
type bgRun struct {
	r         *runner
	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	finishedN atomic.Int64
	n         atomic.Int64
	seq0      int64
	sel       []*traces.Record
	once      sync.Once
	model     string
	stop      atomic.Bool
	lost      atomic.Int64
}

// startBackground starts the closed-loop workers (nil when there are none).
// seq0 is the first seq given to background requests.
func (r *runner) startBackground(seq0 int64, sel []*traces.Record) *bgRun {
	if len(r.o.Background) == 0 {
		return nil
	}
	b := &bgRun{r: r, seq0: seq0, sel: sel}
	b.ctx, b.cancel = context.WithCancel(r.reqCtx)
	for _, spec := range r.o.Background {
		for w := 0; w < spec.Concurrency; w++ {
			b.wg.Add(1)
			go b.worker(spec)
		}
	}
	return b
}

func (b *bgRun) worker(spec Background) {
	defer b.wg.Done()
	r := b.r
	b.once.Do(func() { b.model = r.backgroundModel(b.sel) })
	model := b.model
	backoff := time.Duration(0)
	for !b.stop.Load() && b.ctx.Err() == nil {
		if backoff > 0 {
			// A failing server (wrong model, overload refusals) must not
			// turn the closed loop into a busy loop.
			select {
			case <-time.After(backoff):
			case <-b.ctx.Done():
				return
			}
		}
		n := b.n.Add(1) - 1
		rec := traces.NewRecord()
		rec.Seq = b.seq0 + n
		rec.Class = spec.Class
		rec.Model = model
		rec.InputTokens = int32(spec.Input)
		rec.OutputTokens = int32(spec.Output)
		rec.API = traces.APICompletions
		rec.Run = r.o.Run
		rec.RequestID = r.o.Run + "-" + spec.Class + "-" + strconv.FormatInt(n, 10)
		body := r.body(&rec, traces.APICompletions, model, uint64(n)+1<<40)
		now := time.Since(r.t0)
		rec.ArrivalNs = int64(now)
		rec.ScheduledNs = int64(now)
		sendOne(b.ctx, r.tr, "/v1/completions", body, r.headers(), r.o.Timeout, r.t0, r.extras(), &rec, nil)
		if b.stop.Load() && rec.Status == traces.StatusClientError {
			b.lost.Add(1) // cut off at the end of the run: not a result
			return
		}
		r.finished(&rec) // results, journal and live progress, like trace rows
		b.finishedN.Add(1)
		if rec.OK() {
			backoff = 0
		} else {
			backoff = min(max(2*backoff, 10*time.Millisecond), time.Second)
		}
	}
}

// finish stops the workers, cancels their in-flight requests (they are
// not recorded) and returns how many background requests finished; those
// are in r.done with the trace's.
func (b *bgRun) finish() int {
	if b == nil {
		return 0
	}
	b.stop.Store(true)
	b.cancel()
	b.wg.Wait()
	return int(b.finishedN.Load())
}

// annotate records the background loads in the metadata.
func (b *bgRun) annotate(m *traces.Meta) {
	if b == nil {
		return
	}
	var specs []string
	for _, s := range b.r.o.Background {
		specs = append(specs, s.String())
	}
	m.Set(MetaBackground, strings.Join(specs, ";"))
	m.Set(MetaBackgroundAbandoned, strconv.FormatInt(b.lost.Load(), 10))
}

// traceClass is the class a trace record is sent and recorded with.
func (r *runner) traceClass(rec *traces.Record) string {
	if rec.Class != "" || len(r.o.Background) == 0 {
		return rec.Class
	}
	return r.o.TraceClass
}

// withClasses gives trace records without a class the trace class (when
// background loads ran; background rows have theirs).
func (r *runner) withClasses(out []traces.Record) {
	if len(r.o.Background) == 0 {
		return
	}
	for i := range out {
		out[i].Class = r.traceClass(&out[i])
	}
}

// backgroundModel is the model background requests name: --model, else
// the (mapped) model of the first trace record, else the server's first
// model.
func (r *runner) backgroundModel(sel []*traces.Record) string {
	if r.o.Model != "" {
		return r.o.Model
	}
	if len(sel) > 0 {
		if m := r.o.MapModel(sel[0], r.defaultModel); m != "" {
			return m
		}
	}
	if r.defaultModel != "" {
		return r.defaultModel
	}
	// No record without a model made resolveModel ask the server: ask now
	// (on a copy: the request builder reads r.defaultModel concurrently).
	tmp := &runner{o: r.o, base: r.base, client: r.client}
	tmp.o.Model = ""
	if err := tmp.resolveModel(r.sendCtx, true); err != nil {
		return ""
	}
	return tmp.defaultModel
}
