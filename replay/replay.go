package replay

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tokentrace/tokentrace/internal/cgroup"
	"github.com/tokentrace/tokentrace/internal/steal"
	"github.com/tokentrace/tokentrace/replay/internal/h1"
	"github.com/tokentrace/tokentrace/traces"
)

// Result is what a replay produced.
type Result struct {
	// Records are the sent requests with their outcome columns, by seq.
	Records []traces.Record
	// Meta is the results file metadata: the trace's metadata plus the
	// replay's target, model, speed, options, timing source and counts.
	Meta traces.Meta
	// Summary is the end-of-run summary.
	Summary Summary
	// Journal is the journal that holds the records when
	// Options.RecordsInJournal was set ("" otherwise); Write reads it.
	Journal string
	// Count is how many records the run produced: len(Records), or with
	// Options.RecordsInJournal those in the journal.
	Count int
}

// Metadata keys the replay sets in Meta.Extra.
const (
	MetaTarget          = "replay.target"
	MetaModel           = "replay.model"
	MetaSpeed           = "replay.speed"
	MetaOptions         = "replay.options"
	MetaRun             = "replay.run"
	MetaStartedAt       = "replay.started_at"
	MetaTimingSource    = "replay.server_timing_source"
	MetaTimingMatched   = "replay.server_timing_matched"
	MetaTimingUnmatched = "replay.server_timing_unmatched"
	MetaNotSent         = "replay.not_sent"
	MetaChatCalibration = "replay.chat_calibration"
	MetaShard           = "replay.shard"
	MetaLatenessP99     = "replay.lateness_p99_ns"
	MetaSessions        = "replay.sessions"
	// MetaSim is the built-in simulator's configuration as a target spec
	// (Options.SimTarget), so the run can be repeated with replay --target.
	MetaSim = "replay.sim"
)

// TimingSourceResponseMetrics is the MetaTimingSource value when server
// timings came from vLLM's per-request metrics object on the final usage
// chunk; TimingSourceNone when no request carried them.
const (
	TimingSourceResponseMetrics = "response_metrics"
	TimingSourceNone            = "none"
)

// item is one request to send.
type item struct {
	rec   *traces.Record // request columns (read only)
	sched time.Duration  // offset from the run start
	body  []byte
	path  string
	model string
	// Context growth (turncontext.go): prev is the context this turn extends
	// (taken when its body is built), grow this turn's own context while a
	// follow-up will extend it.
	prev, grow *turnCtx
	// textEst is the prompt tokens a grown chat turn counted for the text
	// it sends back, of textOut output tokens (observeText).
	textEst, textOut int
	seq              uint64 // a follow-up's place in push order (itemHeap)
}

// runner is one replay in progress.
type runner struct {
	o       Options
	base    string // base URL without trailing slash and without /v1
	client  *http.Client
	tr      *transport
	prompts *promptBuilder
	model   string
	chat    chatCalibration
	t0      time.Time
	clock   *ClockOffset // measured while waiting for StartAt (clock.go)

	stopPrep context.CancelFunc
	sendCtx  context.Context // cancelled when sending stops
	stopSend context.CancelFunc
	reqCtx   context.Context // cancelled when in-flight requests are abandoned
	abandon  context.CancelFunc

	work chan *item
	sem  chan struct{}
	// ack hands the P back to the dispatcher: a worker signals it as soon
	// as it starts on a dispatched item (see dispatch).
	ack chan struct{}
	wg  sync.WaitGroup

	sched *scheduler // what to send next and when (schedule.go)

	graph *graph // closed sessions: who waits for whom (sessions.go)

	textRatio textRatio // chat context growth (turncontext.go)
	// ctxOf holds finished calls' contexts for the follow-ups that
	// continue them (turncontext.go).
	ctxMu sync.Mutex
	ctxOf map[*traces.Record]*heldCtx

	fast sync.Pool // *fastReq (client.go)

	// The event loop (loop.go), when the run uses it; the dispatcher's
	// thread alone touches loop and loopFree.
	loop     *h1.Loop
	loopFree *loopReq // linked through next
	th       *dispatchThread
	// The loop's finished requests go to the collector (collect.go) on
	// finishedQ and come back on loopBack; slab holds the chunk columns
	// of the rows it makes.
	finishedQ, loopBack reqStack
	collStop, collDone  chan struct{}
	slab                slab

	mu        sync.Mutex
	done      rows // finished result rows (collect.go)
	journaled int
	jstop     chan struct{}
	sum       *summarizer // of every finished record (summary.go)
	feedErr   error       // the trace could not be read on

	defaultModel string
	hdrOnce      sync.Once
	hdr          http.Header
	// keep names the response headers that fill the fleet columns
	// (replica.go; nil = none).
	keep []string

	live liveStats

	// The run's parts between Run's steps (setUp, startClock, send,
	// finish).
	cleanups    []func() // atEnd
	jw          *journal // nil without Options.Journal
	jdone       chan error
	pdone       chan struct{}
	ready       chan []*item // prepared batches (prepare)
	prepDone    chan struct{}
	bg          *bgRun
	tw, sw      *cpuWatch     // throttling and steal (cpu.go)
	cg          *cgroup.CPU   // nil where unknown
	steal       *steal.Source // nil where unknown
	notRealtime string        // why the dispatcher is not real-time ("" when it is)
}

// Run replays recs (a trace in memory with metadata meta) against o.URL and
// returns what happened. Cancelling ctx stops sending; in-flight requests
// get o.Drain to finish, then they are abandoned and recorded as cancelled.
// A trace in a file is better replayed through Scan and Plan.Run, which do
// not hold it in memory.
func Run(ctx context.Context, recs []traces.Record, meta traces.Meta, o Options) (*Result, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	p, err := Scan(ctx, Records(recs, meta), o)
	if err != nil {
		return nil, err
	}
	return p.Run(ctx, meta, o)
}

// Run replays the planned trace (with metadata meta) against o.URL, reading
// it again a little ahead of the schedule, and returns what happened. o
// must select as it did in Scan. Cancelling ctx stops sending; in-flight
// requests get o.Drain to finish, then they are abandoned and recorded as
// cancelled.
func (p *Plan) Run(ctx context.Context, meta traces.Meta, o Options) (*Result, error) {
	if err := p.check(&o); err != nil {
		return nil, err
	}
	r := newRunner(o, meta)
	defer r.cleanUp()
	if err := r.setUp(ctx, p, meta); err != nil {
		return nil, err
	}
	r.startClock(ctx, p)
	end := r.send()
	return r.finish(ctx, p, meta, end)
}

// check refuses options Run cannot use, or that select other records than
// the plan holds.
func (p *Plan) check(o *Options) error {
	if err := o.Validate(); err != nil {
		return err
	}
	if selectionOf(o) != p.sel {
		return errors.New("replay: the options select other records than Scan planned for (window, shard, duration, speed, sessions, API and warm-up must be the same)")
	}
	if o.RecordsInJournal && o.Journal == "" {
		return optionErr("Options.RecordsInJournal", "needs %w", traces.OptionRef("Options.Journal"))
	}
	return nil
}

// newRunner sets up the HTTP side: the client (replay's own HTTP/1.1 one
// for plain http without a proxy), the prompt builder and the concurrency
// cap.
func newRunner(o Options, meta traces.Meta) *runner {
	r := &runner{o: o, sched: newScheduler(o.Sessions == SessionsClosed, o.Spin)}
	r.base = baseURL(o.URL)
	r.client = o.Client
	if r.client == nil {
		r.client = NewHTTPClient()
	}
	r.tr = &transport{base: r.base, client: r.client}
	r.keep = o.replicaHeaders()
	if o.Client == nil && !o.NetHTTP && !proxied(r.base) {
		if h, err := h1.New(r.base); err == nil {
			h.KeepHeaders(r.keep...)
			r.tr.h1 = h
			r.atEnd(h.CloseIdle)
		}
	}
	r.prompts = newPromptBuilder(&r.o, meta.BlockSize)
	if o.MaxConcurrency > 0 {
		r.sem = make(chan struct{}, o.MaxConcurrency)
	}
	r.sum = newSummarizer()
	return r
}

// atEnd has f run when Run returns, after what was registered later (as
// a defer in Run would).
func (r *runner) atEnd(f func()) { r.cleanups = append(r.cleanups, f) }

// cleanUp runs what atEnd registered, the last first.
func (r *runner) cleanUp() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

// setUp does everything before the clock starts: the model and the chat
// calibration, the journal (a run that cannot keep its journal does not
// start), the preflight check and the warm-up, and the first request
// bodies, built before the clock starts so the earliest deadlines find
// them ready. It also reads what can slow the replayer's own CPU.
func (r *runner) setUp(ctx context.Context, p *Plan, meta traces.Meta) error {
	o := &r.o
	if err := r.resolveModel(ctx, p.needModel); err != nil {
		return err
	}
	if p.needChat && !o.NoCalibrate {
		r.chat = r.calibrate(ctx)
	} else if p.needChat {
		r.chat = chatCalibration{perWord: 1, source: traces.Textf("none (%s)", traces.OptionRef("Options.NoCalibrate")).Say(o.Terms)}
	}
	if o.Journal != "" {
		var err error
		if r.jw, err = openJournal(o.Journal, r.resultMeta(meta)); err != nil {
			return err
		}
	}
	if err := r.preflight(ctx, p.head); err != nil {
		r.jw.abandon()
		return err
	}
	r.warmup(ctx, p.head)
	r.openLoop(ctx) // loop.go
	if r.loop == nil && r.tr.h1 != nil {
		r.tr.h1.KeepSpare(spareConns)
	}
	next, err := r.feed(p, meta)
	if err != nil {
		r.jw.abandon()
		return err
	}
	r.live.total = int64(p.Selected)
	r.live.keepLate = o.Progress != nil
	r.startPrepare(ctx, next)

	// The replayer's own CPU: the real-time class for the dispatcher where
	// the OS permits it, and the cgroup quota and the hypervisor's steal
	// that can stall the process.
	r.notRealtime = RealtimeNotAsked
	if !o.NoRealtime {
		if r.notRealtime = probeRealtime(); r.notRealtime != "" && o.Log != nil {
			fmt.Fprintf(o.Log, "replay: the dispatcher runs without the real-time class (%s): a busy neighbour on its core can delay sends by a scheduler slice, milliseconds\n", r.notRealtime)
		}
	}
	r.cg, _ = cgroup.Self()
	r.steal = steal.ForProcess()
	return nil
}

// feed is where the items come from: the plan's sorted records in memory,
// or the trace read again in streaming order.
func (r *runner) feed(p *Plan, meta traces.Meta) (feed, error) {
	r.work = make(chan *item)
	r.ack = make(chan struct{}, 1)
	if p.InMemory {
		static, err := r.plan(p.sorted, p.recs, meta)
		if err != nil {
			return nil, err
		}
		for _, it := range static {
			r.live.last = max(r.live.last, it.sched)
		}
		return sliceFeed(static), nil
	}
	f, closeFeed, err := r.openFeed(p) // closedstream.go
	if err != nil {
		return nil, err
	}
	r.atEnd(closeFeed)
	r.live.last = p.last
	return f, nil
}

// startPrepare starts building request bodies from next ahead of the
// dispatcher (prepare) and waits until the first batches are ready.
func (r *runner) startPrepare(ctx context.Context, next feed) {
	r.ready = make(chan []*item, prepBatches)
	primed := make(chan struct{})
	var prepCtx context.Context
	prepCtx, r.stopPrep = context.WithCancel(ctx)
	r.atEnd(r.stopPrep)
	r.prepDone = make(chan struct{})
	go func() {
		defer close(r.prepDone)
		r.prepare(prepCtx, next, r.ready, primed)
	}()
	select {
	case <-primed:
	case <-prepCtx.Done():
	}
}

// startClock waits for Options.StartAt (measuring the target's clock
// meanwhile) and starts the run's clock: t0, the contexts that stop
// sending and abandon requests, the background loads, the throttling
// watch and the Duration timer.
func (r *runner) startClock(ctx context.Context, p *Plan) {
	o := &r.o
	if o.BeforeStart != nil {
		o.BeforeStart(ctx)
	}
	if !o.StartAt.IsZero() {
		r.clock = r.probeClock(ctx) // clock.go: while waiting for StartAt
		if d := time.Until(o.StartAt); d > 0 {
			select {
			case <-time.After(d - min(d, 5*time.Millisecond)):
			case <-ctx.Done():
			}
			for time.Now().Before(o.StartAt) {
			}
		}
		r.t0 = time.Now().Add(-time.Since(o.StartAt))
	} else {
		r.t0 = time.Now()
	}
	if o.OnStart != nil {
		o.OnStart(r.t0)
	}
	r.sendCtx, r.stopSend = context.WithCancel(ctx)
	go func() {
		<-r.sendCtx.Done()
		r.stopPrep()
	}()
	r.reqCtx, r.abandon = context.WithCancel(context.WithoutCancel(ctx))
	r.atEnd(r.stopSend)
	r.atEnd(r.abandon)
	r.bg = r.startBackground(p.maxSeq+1, p.head) // background.go
	r.tw = watchThrottling(r.cg, r.t0)
	r.sw = watchSteal(r.steal, r.t0)
	if o.Duration > 0 {
		t := time.AfterFunc(time.Until(r.t0.Add(o.Duration)), r.stopSend)
		r.atEnd(func() { t.Stop() })
	}
}

// send runs the journal and progress loops and the dispatcher until it
// has released every item, then waits for the requests in flight; when
// the run was cut short (ctx cancelled, Duration reached) it abandons
// them after Drain. It returns the run's length.
func (r *runner) send() time.Duration {
	if r.jw != nil {
		r.jstop = make(chan struct{})
		r.jdone = make(chan error, 1)
		go func() { r.jdone <- r.journalLoop(r.jw) }()
	}
	if r.o.Progress != nil {
		r.pdone = make(chan struct{})
		go r.progressLoop(r.pdone)
	}
	if r.loop != nil {
		r.startCollector() // collect.go
	}
	// The dispatcher gets an OS thread of its own, tuned for waking on time
	// (thread_linux.go); the thread it is locked to when it ends ends with
	// it.
	ddone, loopDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(loopDone)
		r.th, _ = startDispatchThread(r.t0, !r.o.NoRealtime)
		var clock waitClock = runClock{r.t0, r.th}
		if r.loop != nil {
			r.loop.Start(r.t0)
			lc := loopClock{runClock{r.t0, r.th}, r.loop}
			clock, r.sched.idle = lc, lc.idle
		}
		r.sched.th = r.th
		r.sched.start(r.sendCtx, r.ready, clock)
		r.dispatch()
		close(ddone)
		r.drainLoop() // the event loop's requests still in flight
	}()
	<-ddone

	allDone := make(chan struct{})
	go func() { r.wg.Wait(); close(allDone) }()
	select {
	case <-allDone:
	case <-r.sendCtx.Done():
		select {
		case <-allDone:
		case <-time.After(r.o.Drain):
			r.abandon()
			<-allDone
		}
	}
	<-loopDone // the event loop closed
	end := time.Since(r.t0)
	r.stopCollector()
	return end
}

// finish stops what still runs beside the run (background loads,
// progress, journal, body preparation) and makes the Result: the records
// by seq, the summary and the metadata. A failed journal write is a
// *JournalError, its journal renamed as incomplete; a trace that could not
// be read on is an error too; both come with the Result.
func (r *runner) finish(ctx context.Context, p *Plan, meta traces.Meta, end time.Duration) (*Result, error) {
	o := &r.o
	bgDone := r.bg.finish() // background rows are in r.done (and the journal)
	if r.pdone != nil {
		close(r.pdone)
	}
	var jerr error
	if r.jw != nil {
		close(r.jstop)
		jerr = <-r.jdone
	}
	r.stopPrep()
	<-r.prepDone
	r.mu.Lock()
	out := r.done.flat()
	sum := r.sum
	r.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	notSent := p.Selected - (int(sum.records) - bgDone)
	r.withClasses(out) // background.go
	res := &Result{Records: out, Meta: r.resultMeta(meta), Count: int(sum.records)}
	if o.RecordsInJournal {
		res.Journal = o.Journal
	}
	res.Summary = sum.summary(end)
	res.Summary.NotSent = notSent
	res.Summary.Realtime = r.notRealtime
	if r.cg != nil {
		res.Summary.CPUQuota = r.cg.String()
	}
	finishThrottling(r.tw, &res.Meta, &res.Summary)
	finishSteal(r.sw, &res.Meta, &res.Summary)
	if r.graph != nil {
		res.Summary.Sessions = r.graph.summary()
	}
	r.finishMeta(&res.Meta, &res.Summary)
	r.bg.annotate(&res.Meta)
	r.addRunInfo(ctx, &res.Meta) // runinfo.go
	if o.Progress != nil && !o.ProgressLines {
		fmt.Fprint(o.Progress, "\r\033[K")
	}
	if jerr != nil {
		je := &JournalError{Path: o.Journal, Err: jerr}
		if p := IncompleteJournalPath(o.Journal); os.Rename(o.Journal, p) == nil {
			je.Path = p
			if res.Journal != "" {
				res.Journal = p
			}
		}
		return res, je
	}
	if r.feedErr != nil {
		return res, fmt.Errorf("replay: stopped early: %w", r.feedErr)
	}
	return res, nil
}

// ErrNothingToSend is returned when the trace, or the part of it the
// options select, has no records: a run of nothing measures nothing.
var ErrNothingToSend = errors.New("no records to send")

// nothingToSend says which option left nothing to send, from the whole
// trace's record count and arrival span.
func nothingToSend(total int, lo, hi int64, o *Options) error {
	if total == 0 {
		return fmt.Errorf("%w: the trace is empty", ErrNothingToSend)
	}
	span := fmt.Sprintf("the trace's %d records arrive from %v to %v", total, time.Duration(lo), time.Duration(hi))
	if o.WindowFrom > 0 || o.WindowTo > 0 {
		return fmt.Errorf("%w: %w", ErrNothingToSend, optionErr("Options.WindowFrom, Options.WindowTo", "[%v, %v) selects none of them; %s", o.WindowFrom, o.WindowTo, span))
	}
	if o.ShardCount > 1 {
		return fmt.Errorf("%w: %w", ErrNothingToSend, optionErr("Options.ShardIndex, Options.ShardCount", "shard %d/%d holds none of the trace's %d records", o.ShardIndex, o.ShardCount, total))
	}
	return fmt.Errorf("%w: %w", ErrNothingToSend, optionErr("Options.Duration", "%v selects none of them; %s", o.Duration, span))
}

// baseURL strips a trailing slash and /v1 from u.
func baseURL(u string) string {
	u = strings.TrimRight(u, "/")
	u = strings.TrimSuffix(u, "/v1")
	return u
}

// RedactURL returns u without credentials, query or fragment.
func RedactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(unparsable URL)"
	}
	p.User = nil
	p.RawQuery = ""
	p.Fragment = ""
	return p.String()
}

// proxied reports whether the environment sends requests to base through a
// proxy (then net/http does the requests).
func proxied(base string) bool {
	req, err := http.NewRequest(http.MethodGet, base, nil)
	if err != nil {
		return true
	}
	u, err := http.ProxyFromEnvironment(req)
	return err != nil || u != nil
}

// NewHTTPClient returns the client replay uses: keep-alive connections
// without a per-host cap, no compression, HTTP/1.1.
func NewHTTPClient() *http.Client {
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          0,
		MaxIdleConnsPerHost:   1 << 20,
		MaxConnsPerHost:       0,
		IdleConnTimeout:       90 * time.Second,
		DisableCompression:    true,
		ForceAttemptHTTP2:     false,
		WriteBufferSize:       8 << 10,
		ReadBufferSize:        4 << 10,
		ExpectContinueTimeout: 0,
	}
	return &http.Client{Transport: tr}
}

// ShardOf is the shard (0..n-1) a record belongs to: by session when it has
// one (a session stays on one replayer), else by seq.
func ShardOf(rec *traces.Record, n int) int {
	key := uint64(rec.Seq) ^ 0x5eed
	if rec.Session != 0 {
		key = uint64(rec.Session) ^ 0x5e55
	}
	return int(splitmix64(key) % uint64(n))
}

func scaled(d time.Duration, speed float64) time.Duration {
	if speed == 1 {
		return d
	}
	return time.Duration(float64(d) / speed)
}

// plan returns the items scheduled from the trace. In closed-session mode
// only the calls that wait for nothing are; each follow-up is queued when
// its dependencies finish (r.graph).
func (r *runner) plan(sel []*traces.Record, all []traces.Record, meta traces.Meta) ([]*item, error) {
	at := r.o.at
	var static []*item
	if r.o.Sessions != SessionsClosed {
		static = make([]*item, len(sel))
		for i, rec := range sel {
			static[i] = &item{rec: rec, sched: at(rec)}
		}
		return static, nil
	}
	g, err := buildGraph(sel, all, &r.o, meta)
	if err != nil {
		return nil, err
	}
	r.graph = g
	r.ctxOf = map[*traces.Record]*heldCtx{}
	for _, rec := range sel {
		if g.isFollowUp(rec) {
			r.sched.outstanding.Add(1)
			continue
		}
		static = append(static, &item{rec: rec, sched: at(rec)})
	}
	return static, nil
}

// followUp queues the calls that were waiting for rec (closed sessions),
// now that it finished; when sending has stopped or a call falls after
// Duration, it and everything that waits for it are dropped.
//
// grown is rec's context when a follow-up continues it (nil when rec
// failed or nothing continues it); rec keeps it until it is handed to
// each follow-up that continues it, which may come ready only at another
// dependency's finish (a join).
func (r *runner) followUp(rec, res *traces.Record, finished time.Duration, grown *turnCtx) {
	sent := finished
	if res.SentNs >= 0 {
		sent = time.Duration(res.SentNs)
	}
	if r.keepsContext(rec) {
		r.holdContext(rec, grown)
	}
	for _, it := range r.graph.finished(rec, doneAt{sent: sent, finished: finished}) {
		if r.sendCtx.Err() != nil || (r.o.Duration > 0 && it.sched > r.o.Duration) {
			r.sched.outstanding.Add(-int64(1 + r.graph.dropSelf(it.rec)))
			r.releaseContext(it.rec)
			continue
		}
		if r.grownFrom(it.rec) != nil {
			if it.prev = r.releaseContext(it.rec); it.prev == nil {
				r.graph.count(func(s *SessionStats) { s.ContextLost++ })
			}
		}
		r.build(it)
		r.sched.push(it)
		r.sched.outstanding.Add(-1)
	}
	r.sched.poke()
}

// prepare hands items to the dispatcher in batches of prepBatch, at most
// prepBatches ahead. One at a time, the dispatcher's every receive woke
// this goroutine onto the dispatcher's P, where an idle P then spun to
// steal it, once per request.
const (
	prepBatch      = 256
	prepBatchBytes = 4 << 20
	prepBatches    = 4
)

// prepare builds request bodies ahead of the dispatcher, in schedule
// order, from next; primed closes once the first prepBatches batches are
// ready (or fewer, at the end), so the clock starts with them built.
func (r *runner) prepare(ctx context.Context, next feed, ready chan<- []*item, primed chan<- struct{}) {
	defer close(ready)
	sent := 0
	prime := func() {
		if sent >= 0 {
			close(primed)
			sent = -1
		}
	}
	defer prime()
	failed := false
	for !failed {
		// A batch ends at prepBatch items or prepBatchBytes of bodies, so
		// long prompts do not pile up in memory.
		var b []*item
		size := 0
		for len(b) < prepBatch && size < prepBatchBytes {
			it, err := next()
			if err != nil {
				r.feedFailed(err)
				failed = true
				break
			}
			if it == nil {
				break
			}
			r.build(it)
			size += len(it.body)
			b = append(b, it)
		}
		if len(b) == 0 {
			return
		}
		if !handOff(ctx, ready, b) {
			return
		}
		if sent >= 0 {
			if sent++; sent == prepBatches {
				prime()
			}
		}
	}
}

// handOff puts b in ready, false when ctx ends first. It never blocks on
// the channel: a goroutine blocked sending is woken by the receive and
// queued on the receiver's P, the dispatcher's, which the dispatcher
// yields only to itself (thread_linux.go). While ready is full it polls,
// from 1 ms apart up to prepPollMax (a batch lasts 25 ms at 10k req/s).
func handOff(ctx context.Context, ready chan<- []*item, b []*item) bool {
	wait := time.Millisecond
	for {
		select {
		case ready <- b:
			return true
		case <-ctx.Done():
			return false
		default:
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false
		}
		wait = min(2*wait, prepPollMax)
	}
}

// prepPollMax bounds the wait of a full hand-off (handOff).
const prepPollMax = 50 * time.Millisecond

// feedFailed stops the run when the trace cannot be read on: what was
// sent is kept, Run reports the error.
func (r *runner) feedFailed(err error) {
	r.mu.Lock()
	r.feedErr = err
	r.mu.Unlock()
	if r.o.Log != nil {
		fmt.Fprintf(r.o.Log, "replay: %v: no more requests are sent\n", err)
	}
}

// build fills it's path, model and body.
func (r *runner) build(it *item) {
	rec := it.rec
	it.model = r.o.MapModel(rec, r.defaultModel) // modelmap.go
	api := r.o.API
	if !r.o.ForceAPI && rec.API != "" {
		api = rec.API
	}
	if it.prev != nil || r.keepsContext(rec) {
		it.body = r.grownBody(it, api)
		it.prev = nil
	} else {
		it.body = r.body(rec, api, it.model, 0)
	}
	if api == traces.APIChat {
		it.path = "/v1/chat/completions"
	} else {
		it.path = "/v1/completions"
	}
}

// body renders the JSON request body.
func (r *runner) body(rec *traces.Record, api, model string, unique uint64) []byte {
	b, _, _ := r.bodyOf(rec, api, model, false, func(b []byte) []byte { return r.freshPrompt(b, rec, api, unique) })
	return b
}

// freshPrompt appends rec's prompt array from the trace alone: its
// input_tokens of token ids, or one user message of calibrated words.
func (r *runner) freshPrompt(b []byte, rec *traces.Record, api string, unique uint64) []byte {
	in := max(int(rec.InputTokens), 1)
	if api == traces.APIChat {
		b = append(b, `[{"role":"user","content":"`...)
		b = r.prompts.appendWords(b, rec, r.chat.words(in), unique)
		return append(b, `"}]`...)
	}
	return r.prompts.appendTokenIDs(b, rec, in, unique)
}

// grownBody renders it's body from the context it extends (it.prev), or a
// fresh one when there is none or it is longer than the trace's input, and
// keeps it's own context when a follow-up will extend it. Called once per
// item.
func (r *runner) grownBody(it *item, api string) []byte {
	rec, prev := it.rec, it.prev
	fresh := prev == nil || prev.api != api
	returnIDs := false
	if r.keepsContext(rec) {
		it.grow = &turnCtx{api: api, promptTokens: max(int(rec.InputTokens), 1)}
		returnIDs = api != traces.APIChat && !r.o.NoVLLMExtensions
	}
	var guessed bool
	b, start, end := r.bodyOf(rec, api, it.model, returnIDs, func(b []byte) []byte {
		if !fresh {
			var ok bool
			if b, ok, guessed = r.grownPrompt(b, it, prev, api); ok {
				return b
			}
			fresh = true
		}
		return r.freshPrompt(b, rec, api, 0)
	})
	r.graph.count(func(s *SessionStats) {
		switch {
		case prev == nil:
		case fresh:
			s.ContextFresh++
		default:
			s.ContextGrown++
			if guessed {
				s.ContextOutputGuessed++
			}
		}
	})
	if it.grow != nil {
		it.grow.prompt = b[start:end:end]
	}
	return b
}

// bodyOf renders a JSON request body whose prompt (the "prompt" array, or
// the chat "messages") prompt appends; start and end delimit that array in
// the body. returnIDs asks vLLM to return the output's token ids.
func (r *runner) bodyOf(rec *traces.Record, api, model string, returnIDs bool, prompt func([]byte) []byte) (b []byte, start, end int) {
	in := max(int(rec.InputTokens), 1)
	out := int(rec.OutputTokens)
	if out < 1 {
		out = 1
	}
	b = make([]byte, 0, 160+in*6)
	b = append(b, `{"model":`...)
	b = strconv.AppendQuote(b, model)
	if api == traces.APIChat {
		b = append(b, `,"messages":`...)
	} else {
		b = append(b, `,"prompt":`...)
	}
	start = len(b)
	b = prompt(b)
	end = len(b)
	if returnIDs {
		b = append(b, `,"return_token_ids":true`...)
	}
	b = append(b, `,"max_tokens":`...)
	b = strconv.AppendInt(b, int64(out), 10)
	if !r.o.NoVLLMExtensions {
		b = append(b, `,"ignore_eos":true,"min_tokens":`...)
		b = strconv.AppendInt(b, int64(out), 10)
	}
	b = append(b, `,"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":`...)
	b = strconv.AppendBool(b, r.o.ContinuousUsage)
	b = append(b, `}}`...)
	return b, start, end
}

// dispatch sends every item the scheduler releases, at its deadline,
// until it releases none.
func (r *runner) dispatch() {
	for {
		pick := r.sched.next()
		if pick == nil {
			return
		}
		r.live.scheduled.Add(1)
		r.wg.Add(1)
		if r.sendCtx.Err() == nil && (r.sendLoop(pick) || r.startFast(pick)) {
			continue
		}
		r.th.loosen() // it wakes a worker and waits for it
		select {
		case r.work <- pick:
		default:
			go r.worker(pick)
		}
		// Let the worker run now on this P (it sits in runnext) and wait
		// for it to start: its ack puts the dispatcher back in this P's
		// runnext, so the dispatcher runs again as soon as the worker blocks
		// on the network. runtime.Gosched here would put the dispatcher on
		// the global run queue, behind every runnable goroutine of the
		// process, once per request: under load (many open streams, an
		// in-process server, GC workers, CPU-bound goroutines) that wait
		// grows without bound and every later request is late.
		<-r.ack
	}
}

func (r *runner) worker(it *item) {
	for {
		r.ack <- struct{}{}
		r.do(it)
		r.wg.Done()
		select {
		case it = <-r.work:
		case <-r.reqCtx.Done():
			return
		}
	}
}

// spareConns is how many idle connections the plain-http client keeps
// ready (h1.Client.KeepSpare; it refills to twice as many), so that the
// dispatcher rarely finds the pool empty and has to hand a request to a
// worker to dial. At 10k req/s on one pinned core, alternating 10 s runs:
// 8 spares gave maxima of 10.9, 2.8 and 2.7 ms, 32 gave 3.7, 3.9 and 3.4 ms.
const spareConns = 32

// extraProcs is how many Ps TuneProcess adds to GOMAXPROCS per concurrent
// run: one the dispatcher keeps (thread_linux.go), and one more, so that
// what it wakes (the dialer, the goroutine that prepares requests) and
// what runs beside it (the collector, the journal) find an idle P rather
// than queue on the dispatcher's.
const extraProcs = 2

// TuneProcess prepares the process for runs replays at once: GOMAXPROCS
// gets extraProcs more Ps per run, and the garbage collector runs rarely
// (on Linux a heap goal of at least 256 MB, GOGC 100 above it, under a soft
// memory limit of a quarter of RAM, unless GOGC or GOMEMLIMIT is set),
// because each collection can stall the dispatcher. These are
// process-wide settings, so programs call it (the CLI does, once per
// command); the library never does. restore undoes it.
func TuneProcess(runs int) (restore func()) {
	base := runtime.GOMAXPROCS(0)
	runtime.GOMAXPROCS(base + max(runs, 1)*extraProcs)
	gc := tuneGC()
	return func() {
		gc()
		runtime.GOMAXPROCS(base)
	}
}
