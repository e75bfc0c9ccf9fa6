package replay

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// ErrSessionGraph is wrapped by Run's error when Options.StrictSessions is
// set and a session's dependencies cannot be replayed (a cycle, a missing
// call, a call of another session).
var ErrSessionGraph = errors.New("replay: session dependencies cannot be replayed")

// SessionStats counts what a closed-session replay did with its follow-up
// calls (zero in open-loop replays).
type SessionStats struct {
	// FollowUps is the calls sent after their dependencies finished.
	FollowUps int
	// ThinkRecorded: think time from think_ns or from the dependencies'
	// finishes; ThinkEstimated: neither was known, so the call kept its
	// recorded spacing from its dependency's send, but never before that
	// dependency finished.
	ThinkRecorded, ThinkEstimated int
	// ThinkFromResults is how many of ThinkRecorded took a dependency's
	// finish from its last_token_ns, the trace being a replay's results
	// file without finish_ns (see FinishRule).
	ThinkFromResults int
	// FinishRule says where the dependencies' finishes came from:
	// FinishRuleTrace, or FinishRuleResults with the results file's clock.
	FinishRule string
	// ThinkCapped is the think times cut to Options.MaxThink.
	ThinkCapped int
	// TopLevelChained is the calls without parent_seq or after_seqs, in a
	// session where other calls carry them (an agent's top-level calls),
	// that wait for the previous top-level call; TopLevelOverlapped the
	// ones left at their recorded times because production sent them
	// before the previous one finished (finish_ns).
	TopLevelChained, TopLevelOverlapped int
	// SessionsCut is the sessions with calls not sent because sending
	// stopped first (Options.Duration, cancellation).
	SessionsCut int
	// SessionsOpenLoop is the sessions whose dependencies could not be
	// replayed (cycle, missing call, another session's call), sent open
	// loop at their recorded times instead; Problems names the first rows.
	SessionsOpenLoop int
	Problems         []string
	// Context growth (Options.NoContextGrowth unset): ContextGrown is the
	// calls sent as the prompt of the call they continue (the previous
	// turn, a fan-out's parent, a join's parent_seq), what the server
	// returned for it and new tokens; ContextOutputGuessed, of those, the ones whose
	// previous output came back without token ids (/v1/completions without
	// vLLM's return_token_ids), so ids of the run's own stand in for it
	// and the server's cache misses that part. ContextFresh is the turns
	// sent a fresh prompt because the trace's input was shorter than the
	// context (or the API changed); ContextLost the calls sent a fresh
	// prompt because the call they continue failed.
	ContextGrown, ContextOutputGuessed, ContextFresh, ContextLost int
}

// FinishRuleTrace and FinishRuleResults are what SessionStats.FinishRule
// starts with: finishes from finish_ns only, or, where it is absent, from
// last_token_ns of a replay's results file replayed as a trace.
const (
	FinishRuleTrace   = "finish_ns"
	FinishRuleResults = "finish_ns, else last_token_ns"
)

// finishClock places a call's finish on the arrival_ns clock. A replay's
// results file keeps each call's arrival_ns from the trace it replayed,
// but its last_token_ns is on that run's clock, which started at
// window_from of the arrival clock and ran speed times faster: its
// metadata says so (replay.started_at, replay.speed, replay.options). So
// such a file replayed again knows each call's finish, hence the think
// times, where the trace has no finish_ns.
type finishClock struct {
	results bool
	from    time.Duration
	speed   float64
}

// finishClockOf reads m: a replay's results file gives its run clock.
func finishClockOf(m traces.Meta) finishClock {
	if m.Extra[MetaStartedAt] == "" {
		return finishClock{}
	}
	speed, err := strconv.ParseFloat(m.Extra[MetaSpeed], 64)
	if err != nil || speed <= 0 {
		return finishClock{}
	}
	var opts struct {
		WindowFrom string `json:"window_from"`
	}
	var from time.Duration
	if s := m.Extra[MetaOptions]; s != "" {
		if json.Unmarshal([]byte(s), &opts) != nil {
			return finishClock{}
		}
		if opts.WindowFrom != "" {
			if from, err = time.ParseDuration(opts.WindowFrom); err != nil {
				return finishClock{}
			}
		}
	}
	return finishClock{results: true, from: from, speed: speed}
}

// rule is SessionStats.FinishRule.
func (c finishClock) rule() string {
	if !c.results {
		return FinishRuleTrace
	}
	return fmt.Sprintf("%s (a replay's results file: its run clock starts at %v of arrival_ns, speed %g)", FinishRuleResults, c.from, c.speed)
}

// finish is rec's finish on the arrival clock, -1 when unknown; fromRun
// says it came from last_token_ns.
func (c finishClock) finish(rec *traces.Record) (ns int64, fromRun bool) {
	if rec.FinishNs >= 0 {
		return rec.FinishNs, false
	}
	if c.results && rec.LastTokenNs >= 0 {
		return int64(c.from) + int64(float64(rec.LastTokenNs)*c.speed), true
	}
	return -1, false
}

// doneAt is when a call was sent and finished, as offsets of the run.
type doneAt struct{ sent, finished time.Duration }

// graph holds the closed-session dependencies: which call waits for which.
// Each follow-up is queued when its last dependency finishes, at that
// finish plus its think time (scaled by Speed, capped by MaxThink).
type graph struct {
	deps     map[*traces.Record][]*traces.Record
	children map[*traces.Record][]*traces.Record
	// from is the dependency whose context a follow-up continues
	// (contextFrom); continued counts, per call, the follow-ups that
	// continue it.
	from      map[*traces.Record]*traces.Record
	continued map[*traces.Record]int

	mu       sync.Mutex
	waiting  map[*traces.Record]int
	done     map[*traces.Record]doneAt
	dropped  map[*traces.Record]bool
	cut      map[int64]bool // sessions with dropped calls
	stats    SessionStats
	speed    float64
	maxThink time.Duration
	clock    finishClock

	// A streaming graph (closedstream.go) holds the sessions under way
	// only: bySeq their calls, sessRecs and sessLeft each session's calls
	// and how many have yet to finish (or be dropped), after which it is
	// forgotten. moreProblems counts the problems past the first few.
	streaming    bool
	bySeq        map[int64]*traces.Record
	sessRecs     map[int64][]*traces.Record
	sessLeft     map[int64]int
	moreProblems int
}

// buildGraph finds every selected call's dependencies. A session whose
// calls carry parent_seq or after_seqs is replayed as the graph they draw,
// its top-level calls chained (chainTopLevel); any other session is a
// chain (each turn waits for the one before). A dependency outside the
// selection (window, shard) is dropped: the call is not held for
// something that will never be sent. all is the whole trace, to tell
// "outside the selection" from "not in the trace". meta is the trace's
// metadata: a replay's results file has finishes on its run clock
// (finishClock).
func buildGraph(sel []*traces.Record, all []traces.Record, o *Options, meta traces.Meta) (*graph, error) {
	g := newGraph(o, meta)
	bySeq := make(map[int64]*traces.Record, len(sel))
	sessions := map[int64][]*traces.Record{}
	var order []int64
	for _, rec := range sel {
		bySeq[rec.Seq] = rec
		if rec.Session == 0 {
			continue
		}
		if _, ok := sessions[rec.Session]; !ok {
			order = append(order, rec.Session)
		}
		sessions[rec.Session] = append(sessions[rec.Session], rec) // sel is in arrival order
	}
	var allSeqs map[int64]bool // built on first need: most traces never ask
	inTrace := func(seq int64) bool {
		if allSeqs == nil {
			allSeqs = make(map[int64]bool, len(all))
			for i := range all {
				allSeqs[all[i].Seq] = true
			}
		}
		return allSeqs[seq]
	}
	var problems []string
	for _, rec := range sel {
		problems = append(problems, sessionless(rec)...)
	}
	lookup := func(seq int64) (*traces.Record, bool) { r, ok := bySeq[seq]; return r, ok }
	for _, s := range order {
		problems = append(problems, g.addSession(s, sessions[s], lookup, inTrace)...)
	}
	if len(problems) > 0 && o.StrictSessions {
		return nil, fmt.Errorf("%w: %s", ErrSessionGraph, strings.Join(firstN(problems, 5), "; "))
	}
	g.stats.Problems = firstN(problems, 5)
	g.link(sel)
	return g, nil
}

// newGraph returns an empty graph for a run under o of a trace with
// metadata meta.
func newGraph(o *Options, meta traces.Meta) *graph {
	g := &graph{
		deps: map[*traces.Record][]*traces.Record{}, children: map[*traces.Record][]*traces.Record{},
		waiting: map[*traces.Record]int{}, done: map[*traces.Record]doneAt{}, dropped: map[*traces.Record]bool{},
		from: map[*traces.Record]*traces.Record{}, continued: map[*traces.Record]int{},
		cut: map[int64]bool{}, speed: o.Speed, maxThink: o.MaxThink, clock: finishClockOf(meta),
		bySeq: map[int64]*traces.Record{}, sessRecs: map[int64][]*traces.Record{}, sessLeft: map[int64]int{},
	}
	g.stats.FinishRule = g.clock.rule()
	return g
}

// sessionless names rec's problem when it has dependencies but no session.
func sessionless(rec *traces.Record) []string {
	if rec.Session == 0 && (rec.ParentSeq >= 0 || len(rec.AfterSeqs) > 0) {
		return []string{fmt.Sprintf("row seq %d has dependencies but no session", rec.Seq)}
	}
	return nil
}

// addSession finds the dependencies of session s's selected calls (recs,
// in arrival order): bySeq finds a selected call, inTrace tells a call
// outside the selection from one not in the trace. A session whose
// dependencies cannot be replayed gets none (open loop); its problems are
// returned. Call link for recs afterwards.
func (g *graph) addSession(s int64, recs []*traces.Record, bySeq func(int64) (*traces.Record, bool), inTrace func(int64) bool) (bad []string) {
	dag := false
	for _, rec := range recs {
		dag = dag || rec.ParentSeq >= 0 || len(rec.AfterSeqs) > 0
	}
	if !dag {
		for i := 1; i < len(recs); i++ {
			g.deps[recs[i]] = []*traces.Record{recs[i-1]}
		}
		return nil
	}
	deps := map[*traces.Record][]*traces.Record{}
	chained, overlapped := chainTopLevel(recs, deps, g.clock)
	for _, rec := range recs {
		want := slices.Clone(rec.AfterSeqs)
		if rec.ParentSeq >= 0 && !slices.Contains(want, rec.ParentSeq) {
			want = append(want, rec.ParentSeq)
		}
		for _, seq := range want {
			d, ok := bySeq(seq)
			switch {
			case seq == rec.Seq:
				bad = append(bad, fmt.Sprintf("row seq %d waits for itself", rec.Seq))
			case !ok && inTrace(seq):
				// outside the window or shard: not waited for
			case !ok:
				bad = append(bad, fmt.Sprintf("row seq %d waits for seq %d, which is not in the trace", rec.Seq, seq))
			case d.Session != s:
				bad = append(bad, fmt.Sprintf("row seq %d (session %d) waits for seq %d of session %d", rec.Seq, s, seq, d.Session))
			default:
				deps[rec] = append(deps[rec], d)
			}
		}
	}
	if len(bad) == 0 {
		if c := cycle(recs, deps); c != "" {
			bad = append(bad, c)
		}
	}
	if len(bad) > 0 {
		g.stats.SessionsOpenLoop++
		return bad // replayed open loop: no dependencies
	}
	g.stats.TopLevelChained += chained
	g.stats.TopLevelOverlapped += overlapped
	for rec, d := range deps {
		g.deps[rec] = d
	}
	return nil
}

// continuedBy is how many follow-ups continue rec's context.
func (g *graph) continuedBy(rec *traces.Record) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.continued[rec]
}

// link records who waits for whom among recs (after addSession): the
// counts each follow-up waits on, and whose context it continues.
func (g *graph) link(recs []*traces.Record) {
	for _, rec := range recs {
		ds := g.deps[rec]
		if len(ds) == 0 {
			continue
		}
		g.waiting[rec] = len(ds)
		for _, d := range ds {
			g.children[d] = append(g.children[d], rec)
		}
		f := contextFrom(rec, ds)
		g.from[rec] = f
		g.continued[f]++
	}
}

// chainTopLevel makes each top-level call of a graph session (no
// parent_seq), when it waits for nothing else, wait for the previous
// top-level call in arrival order (recs' order): an agent's own turns
// follow one another, and its subagents' calls hang off them by
// parent_seq. A join (after_seqs) keeps its own dependencies but is the
// top-level call the next one waits for. A call that production sent
// before the previous top-level call finished (its finish_ns after this
// arrival) did not wait for it and keeps its recorded time.
func chainTopLevel(recs []*traces.Record, deps map[*traces.Record][]*traces.Record, clock finishClock) (chained, overlapped int) {
	var prev *traces.Record
	for _, rec := range recs {
		if rec.ParentSeq >= 0 {
			continue
		}
		var prevFinish int64 = -1
		if prev != nil {
			prevFinish, _ = clock.finish(prev)
		}
		switch {
		case prev == nil || len(rec.AfterSeqs) > 0:
		case prevFinish >= 0 && prevFinish > rec.ArrivalNs:
			overlapped++
		default:
			deps[rec] = append(deps[rec], prev)
			chained++
		}
		prev = rec
	}
	return chained, overlapped
}

func firstN(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], fmt.Sprintf("and %d more", len(s)-n))
	}
	return s
}

// cycle returns a message naming a row on a dependency cycle, or "".
func cycle(recs []*traces.Record, deps map[*traces.Record][]*traces.Record) string {
	indeg := map[*traces.Record]int{}
	kids := map[*traces.Record][]*traces.Record{}
	for _, r := range recs {
		indeg[r] = len(deps[r])
		for _, d := range deps[r] {
			kids[d] = append(kids[d], r)
		}
	}
	var queue []*traces.Record
	for _, r := range recs {
		if indeg[r] == 0 {
			queue = append(queue, r)
		}
	}
	seen := 0
	for len(queue) > 0 {
		r := queue[0]
		queue = queue[1:]
		seen++
		for _, k := range kids[r] {
			if indeg[k]--; indeg[k] == 0 {
				queue = append(queue, k)
			}
		}
	}
	if seen == len(recs) {
		return ""
	}
	for _, r := range recs {
		if indeg[r] > 0 {
			return fmt.Sprintf("row seq %d is on a dependency cycle", r.Seq)
		}
	}
	return ""
}

// isFollowUp says rec waits for other calls (it is not scheduled from the
// trace's clock).
func (g *graph) isFollowUp(rec *traces.Record) bool { return len(g.deps[rec]) > 0 }

// finished records that rec finished and returns the follow-ups that now
// have every dependency done, with their send offsets.
func (g *graph) finished(rec *traces.Record, at doneAt) (ready []*item) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.done[rec] = at
	for _, c := range g.children[rec] {
		if g.dropped[c] {
			continue
		}
		if g.waiting[c]--; g.waiting[c] == 0 {
			ready = append(ready, &item{rec: c, sched: g.schedule(c)})
		}
	}
	g.ended(rec)
	return ready
}

// schedule is c's send offset: its dependencies' last finish plus its
// think time. Called with g.mu held, every dependency done.
func (g *graph) schedule(c *traces.Record) time.Duration {
	var base time.Duration
	known, fromRun := true, false
	var lastFinish int64 = -1
	for _, d := range g.deps[c] {
		base = max(base, g.done[d].finished)
		f, run := g.clock.finish(d)
		if f < 0 {
			known = false
		}
		fromRun = fromRun || run
		lastFinish = max(lastFinish, f)
	}
	g.stats.FollowUps++
	var think time.Duration
	switch {
	case c.ThinkNs >= 0:
		think = scaled(time.Duration(c.ThinkNs), g.speed)
		g.stats.ThinkRecorded++
	case known:
		think = scaled(time.Duration(max(0, c.ArrivalNs-lastFinish)), g.speed)
		g.stats.ThinkRecorded++
		if fromRun {
			g.stats.ThinkFromResults++
		}
	default:
		// No finish recorded: keep the recorded spacing from each
		// dependency's send, never before it finished. Against a server as
		// fast as production's this is the recorded think time.
		at := base
		for _, d := range g.deps[c] {
			at = max(at, g.done[d].sent+scaled(time.Duration(c.ArrivalNs-d.ArrivalNs), g.speed))
		}
		think = at - base
		g.stats.ThinkEstimated++
	}
	if g.maxThink > 0 && think > g.maxThink {
		think = g.maxThink
		g.stats.ThinkCapped++
	}
	return base + think
}

// drop marks rec and every call that (transitively) waits for it as never
// to be sent, and returns how many follow-ups that removes.
func (g *graph) drop(rec *traces.Record) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	stack := []*traces.Record{rec}
	for len(stack) > 0 {
		r := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, c := range g.children[r] {
			if !g.dropped[c] {
				g.dropped[c] = true
				g.cut[c.Session] = true
				n++
				stack = append(stack, c)
				g.ended(c)
			}
		}
	}
	return n
}

// dropSelf drops rec itself (its dependencies finished too late or after
// sending stopped) and everything that waits for it; it returns how many
// follow-ups besides rec that removes.
func (g *graph) dropSelf(rec *traces.Record) int {
	g.mu.Lock()
	g.dropped[rec] = true
	g.cut[rec.Session] = true
	g.ended(rec)
	g.mu.Unlock()
	return g.drop(rec)
}

// count updates the counts.
func (g *graph) count(f func(*SessionStats)) {
	g.mu.Lock()
	f(&g.stats)
	g.mu.Unlock()
}

// summary returns the counts (call after the run).
func (g *graph) summary() SessionStats {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.stats
	s.SessionsCut = len(g.cut)
	if g.moreProblems > 0 {
		s.Problems = append(s.Problems[:len(s.Problems):len(s.Problems)], fmt.Sprintf("and %d more", g.moreProblems))
	}
	return s
}
