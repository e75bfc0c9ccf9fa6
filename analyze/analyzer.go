package analyze

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"sort"
	"strings"

	"github.com/tokentrace/tokentrace/traces"
)

// ErrNoRequests is returned when there is nothing to analyze.
var ErrNoRequests = errors.New("no requests to analyze")

// ErrNoOutcomes is returned when the rows carry no outcome columns: a trace
// that was never replayed.
var ErrNoOutcomes = errors.New("rows have no outcome (status is empty): this looks like a trace, not results; replay it first")

// row is the compact per-request state the Analyzer keeps (about 100 bytes,
// against several hundred for a traces.Record with its chunk lists).
type row struct {
	seq                      int64
	sched, sent, first, last int64
	sq, sp, sd               int64
	// skv and sdq are the server's KV transfer and decode-side queue
	// (NotReported without disaggregation).
	skv, sdq        int64
	in, out, cached int32
	group           int32
	// rep and pre are the serving and the prefill replica (ids into the
	// Analyzer's replica names; −1 = none).
	rep, pre int32
	status   uint8
	ok       bool
}

func (r *row) ttft() (float64, bool) {
	if r.first < 0 || r.sent < 0 {
		return 0, false
	}
	return float64(r.first - r.sent), true
}

func (r *row) e2e() (float64, bool) {
	if r.last < 0 || r.sent < 0 {
		return 0, false
	}
	return float64(r.last - r.sent), true
}

func (r *row) lateness() (float64, bool) {
	if r.sent < 0 || r.sched < 0 {
		return 0, false
	}
	return float64(r.sent - r.sched), true
}

// latenessOr0 is the lateness, 0 when unknown or negative (early).
func (r *row) latenessOr0() float64 {
	l, ok := r.lateness()
	if !ok || l < 0 {
		return 0
	}
	return l
}

func (r *row) tpot() (float64, bool) {
	t, ok1 := r.ttft()
	e, ok2 := r.e2e()
	if !ok1 || !ok2 || r.out <= 1 {
		return 0, false
	}
	return (e - t) / float64(r.out-1), true
}

// latencies are the row's latencies as the SLO judges them.
func (r *row) latencies() traces.Latencies {
	var l traces.Latencies
	l.TTFT, l.HasTTFT = r.ttft()
	l.TPOT, l.HasTPOT = r.tpot()
	l.E2E, l.HasE2E = r.e2e()
	return l
}

// uncached is the prompt tokens the server had to prefill.
func (r *row) uncached() float64 {
	u := r.in
	if r.cached > 0 {
		u -= r.cached
	}
	return float64(max(u, 0))
}

// end is when the request stopped occupying the server (−1 = unknown).
func (r *row) end() int64 { return max(r.last, r.first) }

// start is when the request left the client (or was due to).
func (r *row) start() int64 {
	if r.sent >= 0 {
		return r.sent
	}
	return r.sched
}

// Source describes one input file.
type Source struct {
	File    string      `json:"file"`
	Rows    int64       `json:"rows"`
	Skipped int64       `json:"skipped_rows,omitempty"`
	Meta    traces.Meta `json:"meta"`
}

// Analyzer accumulates records (Add) and produces a Report (Close). The zero
// value is not usable; call New. Not safe for concurrent use.
type Analyzer struct {
	o         Options
	rows      rowStore
	reqIDs    []string // parallel to rows with Options.KeepRequests
	noOutcome int64
	otherCls  int64  // rows left out by Options.Class
	lastSt    string // status and group of the previous row, to skip map lookups
	lastSID   uint8
	lastGK    string
	lastGID   int32
	statusIDs map[string]uint8
	statuses  []string
	groupIDs  map[string]int32
	groups    []string
	itl, itlT pooled
	gITL      []*[2]pooled // per group: per chunk, per token
	gExact    int          // exact values held by all group pools
	tokSec    []float64    // output tokens per second of the run (peak throughput)
	// itlEstimated counts requests whose per-token ITL uses estimated
	// chunk token counts.
	itlEstimated int
	sources      []Source
	warnings     []string
	samples      []traces.MetricsSample // scraped server metrics
	// seen counts the rows with an outcome. Past Options.ExactRows of them
	// the Analyzer streams (stream.go): all and gacc (per group) hold the
	// exact counters and sketches, rows a 1-in-2^level sample.
	seen  int64
	all   *acc
	gacc  []*acc
	level uint
	peak  peakSweep
	// sess and pfx are the session and prefix-cache sections (sessions.go,
	// prefixcache.go); bsWarned notes a second block size among the inputs.
	sess     *sessionAcc
	pfx      prefixAcc
	bsWarned bool
	// fl names the replicas the rows name (fleet.go).
	fl fleetAcc
}

// New returns an Analyzer with options o, from DefaultOptions (a zero
// field is a value like any other: Validate refuses one it cannot use).
func New(o Options) (*Analyzer, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	a := &Analyzer{o: o, statusIDs: map[string]uint8{}, groupIDs: map[string]int32{}}
	a.sess = newSessionAcc(o.SessionIdle, DefaultMaxOpenSessions)
	a.pfx = prefixAcc{cache: newBlockCache(o.KVBlocks), kvBlocks: o.KVBlocks, blockSize: o.BlockSize, window: reorderRows}
	a.itl.limit, a.itlT.limit = o.ITLExactLimit, o.ITLExactLimit
	return a, nil
}

// AddSource records an input file's metadata and read statistics for the
// report (and for Compare's metadata diff).
func (a *Analyzer) AddSource(s Source) { a.sources = append(a.sources, s) }

// Warnf adds a warning to the report.
func (a *Analyzer) Warnf(format string, args ...any) {
	a.warnings = append(a.warnings, fmt.Sprintf(format, args...))
}

func (a *Analyzer) groupOf(r *traces.Record) int32 {
	var k string
	switch a.o.By {
	case ByClass:
		k = r.Class
	case ByCategory:
		k = r.Category
	case ByModel:
		k = r.Model
	case ByReplica:
		k = r.Replica
	default:
		return 0
	}
	if len(a.groups) > 0 && k == a.lastGK {
		return a.lastGID
	}
	id, ok := a.groupIDs[k]
	if !ok {
		id = int32(len(a.groups))
		a.groupIDs[k] = id
		a.groups = append(a.groups, k)
		g := &[2]pooled{}
		g[0].limit, g[1].limit = a.o.ITLExactLimit, a.o.ITLExactLimit
		a.gITL = append(a.gITL, g)
	}
	a.lastGK, a.lastGID = k, id
	return id
}

// Add accumulates one record. Rows without an outcome (empty Status) are
// counted and skipped.
func (a *Analyzer) Add(r *traces.Record) {
	if !r.HasOutcome() {
		a.noOutcome++
		return
	}
	inClass := a.o.Class == "" || r.Class == a.o.Class
	repID, preID := a.fl.replicaIDs(r)
	a.pfx.add(r, inClass, cacheReplica(repID, preID)) // every row sent fills the server's cache
	if !inClass {
		a.otherCls++
		return
	}
	a.fl.count(repID, preID)
	w := a.newRow(r)
	w.rep, w.pre = repID, preID
	a.seen++
	a.sess.add(r, &w)
	if w.ok && w.sent >= 0 && w.end() >= w.sent {
		a.peak.add(w.sent, w.end())
	}
	a.keep(&w, r.RequestID)
	if w.ok {
		a.addChunks(r, &w)
	}
}

// statusID is status's index in a.statuses (the last of 256 stands for
// any further ones).
func (a *Analyzer) statusID(status string) uint8 {
	sid, ok := a.lastSID, status == a.lastSt && len(a.statuses) > 0
	if !ok {
		sid, ok = a.statusIDs[status]
	}
	if !ok {
		sid = uint8(min(len(a.statuses), 255))
		if len(a.statuses) < 256 {
			a.statusIDs[status] = sid
			a.statuses = append(a.statuses, status)
		}
	}
	a.lastSt, a.lastSID = status, sid
	return sid
}

// newRow is r's compact row: the server's prompt count where it gave one,
// the output tokens received.
func (a *Analyzer) newRow(r *traces.Record) row {
	sid := a.statusID(r.Status)
	in := r.InputTokens
	if r.ServerPromptTokens >= 0 {
		in = r.ServerPromptTokens
	}
	out, _ := r.ReceivedOutputTokens()
	return row{
		seq: r.Seq, sched: r.ScheduledNs, sent: r.SentNs, first: r.FirstTokenNs, last: r.LastTokenNs,
		sq: r.ServerQueueNs, sp: r.ServerPrefillNs, sd: r.ServerDecodeNs,
		skv: r.ServerKVTransferNs, sdq: r.ServerDecodeQueueNs,
		in: in, out: int32(min(out, math.MaxInt32)), cached: r.ServerCachedTokens,
		group: a.groupOf(r), status: sid, ok: r.OK(),
	}
}

// keep stores w: among the exact rows while they fit Options.ExactRows,
// else in the streaming summaries (switching to them at the first row
// past the budget).
func (a *Analyzer) keep(w *row, requestID string) {
	switch {
	case a.all != nil:
		a.addStreaming(w, requestID)
	case a.rows.n >= a.o.ExactRows:
		a.startStreaming()
		a.addStreaming(w, requestID)
	default:
		if a.o.KeepRequests {
			a.reqIDs = append(a.reqIDs, requestID)
		}
		a.rows.add(*w)
	}
}

// addTokensAt counts tok output tokens in second s of the run (a run's
// first 2^24 seconds).
func (a *Analyzer) addTokensAt(s int, tok float64) {
	if s >= len(a.tokSec) && s < 1<<24 {
		a.tokSec = append(a.tokSec, make([]float64, s+1-len(a.tokSec)+16)...)
	}
	if s < len(a.tokSec) {
		a.tokSec[s] += tok
	}
}

// chunkTokens says how r's streamed chunks' tokens are known: per chunk
// from the server (perTok), or, without per-chunk counts (no continuous
// usage stats) but with the server's output total, estimated as vLLM
// streams them: the first token alone, the rest in equal chunks of estTok
// (--stream-interval). Exact counts win wherever the server gives them.
func (a *Analyzer) chunkTokens(r *traces.Record) (perTok bool, estTok float64) {
	perTok = len(r.ChunkTokens) == len(r.ChunkNs)
	if !perTok && len(r.ChunkTokens) == 0 && len(r.ChunkNs) > 1 && r.ServerOutputTokens >= int32(len(r.ChunkNs)) {
		estTok = float64(r.ServerOutputTokens-1) / float64(len(r.ChunkNs)-1)
		a.itlEstimated++
	}
	return perTok, estTok
}

// addChunks counts a successful request's output tokens by the second
// they arrived and its inter-token gaps (per chunk, and per token where
// the chunks' tokens are known), pooled and in its group.
func (a *Analyzer) addChunks(r *traces.Record, w *row) {
	if len(r.ChunkNs) == 0 && r.LastTokenNs >= 0 && w.out > 0 {
		// A non-streamed response: its tokens count toward the peak at
		// the moment they arrived.
		if s := int(r.LastTokenNs / 1e9); s < 1<<24 {
			a.addTokensAt(s, float64(w.out))
		}
	}
	perTok, estTok := a.chunkTokens(r)
	var g *[2]pooled
	if a.o.By != "" {
		g = a.gITL[w.group]
	}
	for i, t := range r.ChunkNs {
		tok := 1.0
		switch {
		case perTok && r.ChunkTokens[i] >= 0:
			tok = float64(r.ChunkTokens[i])
		case estTok > 0 && i > 0:
			tok = estTok
		}
		if t >= 0 {
			a.addTokensAt(int(t/1e9), tok)
		}
		if i == 0 {
			continue
		}
		gap := float64(t - r.ChunkNs[i-1])
		a.itl.add(gap)
		if g != nil {
			a.gExact += g[0].add(gap)
		}
		if (perTok || estTok > 0) && tok > 0 {
			a.itlT.add(gap / tok)
			if g != nil {
				a.gExact += g[1].add(gap / tok)
			}
		}
	}
	// the groups' exact ITL values share one budget: past it, the group
	// that grows switches to its histogram.
	if g != nil && a.gExact > a.o.ITLExactLimit {
		a.gExact -= g[0].toHist() + g[1].toHist()
	}
}

// AddReader drains a traces.Reader into the Analyzer, checking ctx between
// batches.
func (a *Analyzer) AddReader(ctx context.Context, rd traces.Reader) error {
	a.setBlockSize(rd.Meta().BlockSize)
	return drain(ctx, rd, a.Add)
}

// setBlockSize takes an input's block size (Meta.BlockSize) for the
// implied prefix-cache rate unless Options.BlockSize gives one; the first
// input's wins.
func (a *Analyzer) setBlockSize(bs int) {
	switch {
	case bs <= 0 || a.o.BlockSize > 0 || bs == a.pfx.blockSize:
	case a.pfx.blockSize == 0:
		a.pfx.blockSize = bs
	case !a.bsWarned:
		a.bsWarned = true
		a.Warnf("inputs have different block sizes (%d, %d): the implied prefix-cache rate counts %d tokens per block", a.pfx.blockSize, bs, a.pfx.blockSize)
	}
}

// drain calls fn with every record of rd, checking ctx between batches; a
// truncated file's rows before the damage count (the caller warns). With
// more than one CPU the file is decoded a batch ahead on another goroutine.
func drain(ctx context.Context, rd traces.Reader, fn func(*traces.Record)) error {
	if runtime.GOMAXPROCS(0) > 1 {
		return drainAhead(ctx, rd, fn)
	}
	buf := make([]traces.Record, 4096)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, err := rd.Read(buf)
		for i := range buf[:n] {
			fn(&buf[i])
		}
		if err == io.EOF {
			return nil // a salvaged file ends at its damage (Options.Read.Salvage)
		}
		if err != nil {
			return err
		}
	}
}

// drainAhead is drain with rd decoded a few batches ahead on another
// goroutine (traces.AllAhead).
func drainAhead(ctx context.Context, rd traces.Reader, fn func(*traces.Record)) error {
	n := 0
	for rec, err := range traces.AllAhead(rd) {
		if err != nil {
			return err
		}
		if n++; n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		fn(&rec)
	}
	return ctx.Err()
}

// Analyze analyzes records already in memory.
func Analyze(ctx context.Context, recs []traces.Record, o Options) (*Report, error) {
	a, err := New(o)
	if err != nil {
		return nil, err
	}
	for i := range recs {
		if i%65536 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		a.Add(&recs[i])
	}
	return a.Close(ctx)
}

// AnalyzeFiles streams the named results files (any traces codec; "-" is
// stdin) through one Analyzer: shards of one run, or several runs pooled.
func AnalyzeFiles(ctx context.Context, names []string, o Options) (*Report, error) {
	if len(names) == 0 {
		return nil, fmt.Errorf("%w: no results files given", ErrNoRequests)
	}
	a, err := New(o)
	if err != nil {
		return nil, err
	}
	versions := map[string]bool{}
	for _, name := range names {
		if err := a.addFile(ctx, name); err != nil {
			return nil, err
		}
		versions[a.sources[len(a.sources)-1].Meta.SchemaVersion] = true
	}
	if len(versions) > 1 {
		vs := make([]string, 0, len(versions))
		for v := range versions {
			vs = append(vs, v)
		}
		sort.Strings(vs)
		a.Warnf("files have different schema versions (%s); compatible minor versions were read together", strings.Join(vs, ", "))
	}
	rep, err := a.Close(ctx)
	if err != nil {
		return nil, fmt.Errorf("analyze %s: %w", strings.Join(names, ", "), err)
	}
	return rep, nil
}

func (a *Analyzer) addFile(ctx context.Context, name string) error {
	rd, err := traces.OpenWith(name, a.o.Read)
	if err != nil {
		return err // it names the file
	}
	defer rd.Close()
	before := a.seen
	before0 := a.noOutcome
	if err := a.AddReader(ctx, rd); err != nil {
		return fmt.Errorf("read results %s: %w", name, err)
	}
	st := rd.Stats()
	a.AddSource(Source{File: name, Rows: st.Rows, Skipped: st.Skipped, Meta: rd.Meta()})
	a.addSamplesFor(name)
	for _, n := range st.Notes(name, fmt.Sprintf("the implied prefix-cache rate puts them back in order within %d rows; nothing else depends on order", reorderRows)) {
		a.Warnf("%s", n)
	}
	switch {
	case st.Rows == 0:
		a.Warnf("%s: no rows", name)
	case a.seen == before && a.noOutcome > before0:
		a.Warnf("%s: %d row(s) without outcome (not replayed) were ignored", name, a.noOutcome-before0)
	}
	return nil
}

// Close computes the Report. It returns ErrNoRequests when no row had an
// outcome (ErrNoOutcomes when there were rows, but none replayed).
func (a *Analyzer) Close(ctx context.Context) (*Report, error) {
	if a.seen == 0 {
		if a.otherCls > 0 {
			return nil, fmt.Errorf("%w: no row of class %q (%d rows of other classes)", ErrNoRequests, a.o.Class, a.otherCls)
		}
		if a.noOutcome > 0 {
			return nil, fmt.Errorf("%d row(s): %w", a.noOutcome, ErrNoOutcomes)
		}
		return nil, fmt.Errorf("%w: the input is empty", ErrNoRequests)
	}
	rep := &Report{opts: a.o, rows: a.rows, reqIDs: a.reqIDs, Sources: a.sources, Warnings: a.warnings, scale: 1,
		replicas: a.fl.names, fleetServed: a.fl.served, fleetPrefilled: a.fl.prefilled, fleetNamed: a.fl.named, fleetPD: a.fl.pd}
	if a.noOutcome > 0 {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("%d row(s) without outcome (not replayed) were ignored", a.noOutcome))
	}
	if a.otherCls > 0 {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("class %s only: %d row(s) of other classes left out", a.o.Class, a.otherCls))
	}
	rep.Summary, rep.samples = a.summarize(nil, &a.itl, &a.itlT)
	if a.all != nil {
		// streaming: the Summary from the accumulators, ITL as pooled;
		// the sample's sorted values stay for Compare and the charts.
		itl, itlT := rep.ITL, rep.ITLPerToken
		rep.Summary = a.all.summary(a.statuses, a.o.SLO)
		rep.ITL, rep.ITLPerToken = itl, itlT
		rep.acc, rep.itlSk = a.all, a.itl.sk
		rep.scale = 1 << a.level
		rep.Sampling = &Sampling{ExactRows: a.o.ExactRows, Rows: a.seen, Kept: a.rows.n, OneIn: 1 << a.level, terms: a.o.Terms,
			RelativeError: logHistRelErr, Sampled: sampledSections}
		if a.peak.broken {
			rep.Sampling.Sampled = append(slices.Clone(sampledSections), "peak_concurrency")
		}
	}
	// The 1-s bins start at the run's start, so the last one is partial;
	// a peak below the run's mean would only reflect that.
	rep.Summary.Throughput.PeakOutputTokensPerS = max(slices.Max(append(a.tokSec, 0)), rep.Summary.Throughput.OutputTokensPerS)
	rep.Summary.ITLPerTokenEstimated = a.itlEstimated
	if rep.Completed == 0 {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("no successful requests (all %d failed): latency statistics are empty", rep.Failed))
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if a.o.By != "" {
		order := make([]int32, len(a.groups))
		for i := range order {
			order[i] = int32(i)
		}
		slices.SortFunc(order, func(x, y int32) int { return cmp.Compare(a.groups[x], a.groups[y]) })
		members := make([][]int32, len(a.groups))
		if a.all == nil {
			for i := range a.rows.n {
				g := a.rows.at(i).group
				members[g] = append(members[g], int32(i))
			}
		}
		for _, g := range order {
			var s Summary
			if a.all == nil {
				s, _ = a.summarize(members[g], &a.gITL[g][0], &a.gITL[g][1])
			} else {
				s = a.gacc[g].summary(a.statuses, a.o.SLO)
				s.ITL, s.ITLPerToken = a.gITL[g][0].dist(), a.gITL[g][1].dist()
			}
			members[g] = nil
			s.Throughput.PeakOutputTokensPerS = 0
			rep.Groups = append(rep.Groups, Group{By: a.o.By, Value: a.groups[g], Summary: s})
		}
	}
	rep.load = computeLoad(&a.rows)
	rep.load.scaleBy(rep.scale)
	rep.Summary.PeakConcurrency = rep.load.peak
	if a.all != nil && !a.peak.broken {
		rep.Summary.PeakConcurrency = a.peak.peak
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rep.Sessions = a.sess.result()
	var pw []string
	rep.PrefixCache, pw = a.pfx.result(a.o.KVBlocks, a.o.Terms)
	rep.Warnings = append(rep.Warnings, pw...)
	if rep.ShardClocks = shardClocks(a.sources); rep.ShardClocks != nil {
		rep.Warnings = append(rep.Warnings, rep.ShardClocks.warnings()...)
	}
	rep.computeFleetLoad()                   // fleet.go
	rep.ReplayClock = replayClock(a.sources) // evidence.go
	rep.SimLateness = simLateness(a.sources) // simlateness.go
	pooled, byInstance := splitSamples(a.samples)
	rep.attribute(byInstance)
	rep.fleetSection() // fleet.go
	rep.windows()
	if len(pooled) == 0 && len(byInstance) == 0 {
		rep.Notes = append(rep.Notes, rep.metricsMissingNote()) // evidence.go
	}
	rep.serverLoad(pooled)
	rep.series = pooled                // sorted by serverLoad; the HTML incident timeline draws them
	rep.instanceLoad(byInstance)       // instances.go
	rep.crossCheck(pooled, byInstance) // crosscheck.go
	rep.missingSeries(pooled)          // seriesmissing.go
	rep.diagnose()
	if rep.ClientThrottling = rep.throttling(); rep.ClientThrottling != nil {
		rep.Attribution.Diagnosis = append(rep.Attribution.Diagnosis, rep.ClientThrottling.note())
	}
	if rep.ClientSteal = rep.steal(); rep.ClientSteal != nil && rep.ClientSteal.LateRequests > 0 {
		rep.Attribution.Diagnosis = append(rep.Attribution.Diagnosis, rep.ClientSteal.note())
	}
	return rep, nil
}

// samples are a report's sorted per-request values in nanoseconds, kept for
// Compare's bootstrap and the HTML charts.
type samples struct {
	ttft, ttftSched, tpot, e2e, e2eSched, lateness, itl, itlTok []float64
}

// setRates sets s's throughput from its counts and duration and, with an
// SLO, its goodput from good, the requests that met it (summarize and
// acc.summary alike).
func (s *Summary) setRates(good int, slo traces.SLO) {
	if s.DurationS > 0 {
		s.Throughput.RequestsPerS = float64(s.Completed) / s.DurationS
		s.Throughput.OutputTokensPerS = float64(s.OutputTokens) / s.DurationS
		s.Throughput.TotalTokensPerS = float64(s.InputTokens+s.OutputTokens) / s.DurationS
	}
	if !slo.IsZero() {
		s.SLO = &slo
		gp, ratio := 0.0, 0.0
		if s.DurationS > 0 {
			gp = float64(good) / s.DurationS
		}
		if s.Requests > 0 {
			ratio = float64(good) / float64(s.Requests)
		}
		s.Goodput, s.GoodRequests, s.GoodRatio = &gp, &good, &ratio
	}
}

// summarize computes the Summary of the rows idx (nil = every row).
func (a *Analyzer) summarize(idx []int32, itl, itlT *pooled) (Summary, samples) {
	var m [nMetrics]sample
	n := len(idx)
	if idx == nil {
		n = a.rows.n
	}
	for k := range m {
		m[k].v = make([]float64, 0, n)
	}
	addFigure := func(k int, ns float64) { m[k].add(ns) }
	c := newTally()
	for k := range n {
		i := k
		if idx != nil {
			i = int(idx[k])
		}
		r := a.rows.at(i)
		c.add(r, &a.o.SLO)
		r.figures(addFigure)
	}
	s := c.summary(a.statuses, a.o.SLO)
	sortAll(&m[mTTFT], &m[mTTFTSched], &m[mTPOT], &m[mE2E], &m[mE2ESched], &m[mLate], &itl.exact, &itlT.exact)
	s.TTFT, s.TTFTScheduled = m[mTTFT].dist(), m[mTTFTSched].dist()
	s.TPOT, s.E2E, s.E2EScheduled = m[mTPOT].dist(), m[mE2E].dist(), m[mE2ESched].dist()
	s.Lateness = m[mLate].dist()
	s.ITL, s.ITLPerToken = itl.dist(), itlT.dist()
	smp := samples{ttft: m[mTTFT].v, ttftSched: m[mTTFTSched].v, tpot: m[mTPOT].v, e2e: m[mE2E].v, e2eSched: m[mE2ESched].v, lateness: m[mLate].v}
	if !itl.approx {
		smp.itl = itl.exact.sort()
	}
	if !itlT.approx {
		smp.itlTok = itlT.exact.sort()
	}
	return s, smp
}

// load is the in-flight state seen by each successful request when it was
// sent, over the whole run.
type load struct {
	inflight []int32   // per row index: other requests in flight at send (−1: not counted)
	prompt   []float64 // per row index: prompt tokens in flight at send
	peak     int
}

// scaleBy scales the in-flight counts and tokens of a 1-in-f sample to
// estimates for the whole run.
func (l *load) scaleBy(f int64) {
	if f <= 1 {
		return
	}
	for i, v := range l.inflight {
		if v >= 0 {
			l.inflight[i] = int32(min(int64(v)*f, math.MaxInt32))
		}
	}
	for i := range l.prompt {
		l.prompt[i] *= float64(f)
	}
	l.peak = int(min(int64(l.peak)*f, math.MaxInt32))
}

// computeLoad sweeps the successful requests' [sent, end) intervals.
func computeLoad(rows *rowStore) load {
	type ev struct {
		t int64
		i int32
	}
	var starts []int32 // row indices by send time
	var ends []ev
	for i := range rows.n {
		r := rows.at(i)
		if r.ok && r.sent >= 0 && r.end() >= r.sent {
			starts = append(starts, int32(i))
			ends = append(ends, ev{r.end(), int32(i)})
		}
	}
	l := load{inflight: make([]int32, rows.n), prompt: make([]float64, rows.n)}
	for i := range l.inflight {
		l.inflight[i] = -1
	}
	bySent := func(x, y int32) int { return cmp.Compare(rows.at(int(x)).sent, rows.at(int(y)).sent) }
	if !slices.IsSortedFunc(starts, bySent) { // results usually come in send order
		slices.SortFunc(starts, bySent)
	}
	slices.SortFunc(ends, func(x, y ev) int { return cmp.Compare(x.t, y.t) })
	var startedTok, endedTok float64
	e := 0
	for j, i := range starts {
		r := rows.at(int(i))
		for e < len(ends) && ends[e].t <= r.sent {
			endedTok += float64(rows.at(int(ends[e].i)).in)
			e++
		}
		l.inflight[i] = int32(max(j-e, 0))
		l.prompt[i] = max(startedTok-endedTok, 0)
		startedTok += float64(r.in)
		l.peak = max(l.peak, j-e+1)
	}
	return l
}

// rowStore holds rows in fixed chunks, so growing never copies them (10 M
// rows stay one copy in memory).
type rowStore struct {
	chunks [][]row
	n      int
}

const rowChunkBits = 16

func (s *rowStore) at(i int) *row { return &s.chunks[i>>rowChunkBits][i&(1<<rowChunkBits-1)] }

func (s *rowStore) add(r row) {
	if s.n>>rowChunkBits == len(s.chunks) {
		s.chunks = append(s.chunks, make([]row, 0, 1<<rowChunkBits))
	}
	c := &s.chunks[len(s.chunks)-1]
	*c = append(*c, r)
	s.n++
}
