package twin

import (
	"math"

	"github.com/tokentrace/tokentrace/internal/minheap"
)

// The features of a step (or a sum of steps): the step model's terms.
const (
	featFixed   = iota // steps
	featPrefill        // prompt tokens computed
	featDecode         // decoding sequences
	featAttn           // context tokens read
	nFeat
)

// obs is one observation of the step model: y (ns) = θ·x.
type obs struct {
	y float64
	x [nFeat]float64
}

// stepRow is what the step reconstruction keeps of a row in flight.
type stepRow struct {
	sent   int64
	chunks []int64
	k      int   // index of the next chunk
	prompt int   // prompt tokens
	fresh  int   // prompt tokens the engine computed (not cached; 1 for a remote prefill)
	prev   int64 // cluster of the last chunk (-1: none yet)
	first  bool  // the first chunk was seen
	// remote: a disaggregated request's decode side, whose prompt a
	// prefill replica computed (sent is when it reached this replica).
	remote bool
	// idle: the engine held nothing when the row arrived.
	idle bool
}

// stepEvent is a row's arrival (k = -1) or its chunk k at t.
type stepEvent struct {
	t   int64
	k   int
	row *stepRow
}

// stepEventFirst orders the events by time; at one time, chunks before
// arrivals: an engine ends its step, then admits what arrived.
func stepEventFirst(a, b *stepEvent) bool {
	return a.t < b.t || a.t == b.t && a.k > b.k
}

// steps reconstructs one engine's steps from the chunks of the streaming
// requests it served. A streaming request gets one chunk per step it
// decodes in (stream interval 1), so the chunks of the requests in flight
// cluster at the steps' ends; the time between two clusters that the
// same request has consecutive chunks in is one step. Its contents: the
// requests with a chunk there (the decoders, each reading its context)
// and the requests whose first token came there (whose prompt the step
// computed). A step is kept only where nothing can hide in it: no request
// waited at the server through it (it might have been computing a chunk of
// its prompt), and every request that got its first token there arrived
// during the step before.
type steps struct {
	// jitter is the widest spread of one step's chunks at the client.
	jitter int64
	events []stepEvent // a min-heap by stepEventFirst
	// pending are the rows that arrived and have no first token yet, by
	// arrival (lazily cleaned).
	pending []*stepRow // a min-heap by sentFirst
	active  int        // rows arrived and not done

	open             []stepEvent // the cluster being gathered
	lastT            int64
	cluster          int64 // id of the last closed cluster
	end, before      int64 // ends of the last two clusters (-1: none)
	lastEnd          int64 // end of the last cluster, for idle arrivals
	keep             func(obs)
	decodeSteps      int64 // steps kept with decoders
	idleSteps        int64 // first steps from idle kept
	droppedAmbiguous int64

	// The batch limit's evidence: the most requests in one step, and how
	// many steps held that many while a request waited at the server.
	maxBatch int
	waitedAt map[int]int64
	// maxTokens is the most tokens a kept step computed: the token budget
	// is at least that.
	maxTokens int
}

func newSteps(jitter int64, keep func(obs)) *steps {
	return &steps{jitter: jitter, cluster: -1, end: -1, before: -1, lastEnd: -1, keep: keep, waitedAt: map[int]int64{}}
}

// add takes a row in send order.
func (s *steps) add(r *stepRow) {
	r.prev = -1
	minheap.Push(&s.events, stepEvent{t: r.sent, k: -1, row: r}, stepEventFirst)
	for i, t := range r.chunks {
		minheap.Push(&s.events, stepEvent{t: t, k: i, row: r}, stepEventFirst)
	}
}

// advance handles every event before until: no row added later can have
// one (rows come in send order and chunks follow sends).
func (s *steps) advance(until int64) {
	for len(s.events) > 0 && s.events[0].t < until-s.jitter {
		ev := minheap.Pop(&s.events, stepEventFirst)
		if len(s.open) > 0 && ev.t > s.lastT+s.jitter {
			s.close()
		}
		if ev.k < 0 {
			ev.row.idle = s.active == 0 && len(s.open) == 0 && s.lastEnd <= ev.t
			s.active++
			minheap.Push(&s.pending, ev.row, sentFirst)
			continue
		}
		s.open = append(s.open, ev)
		s.lastT = ev.t
	}
}

// flush handles every event left.
func (s *steps) flush() {
	s.advance(math.MaxInt64)
	if len(s.open) > 0 {
		s.close()
	}
}

// close ends the cluster of chunks gathered: one step's end.
func (s *steps) close() {
	s.cluster++
	end := s.open[0].t
	var x [nFeat]float64
	x[featFixed] = 1
	usable, adjacent := true, false
	var alone *stepRow
	for _, ev := range s.open {
		r := ev.row
		if ev.k == 0 {
			r.first = true
			x[featPrefill] += float64(r.fresh)
			x[featAttn] += float64(r.prompt)
			if !r.remote && (s.before < 0 || r.sent < s.before) {
				usable = false // it may have computed part of its prompt a step earlier
			}
			alone = r
		} else {
			x[featDecode]++
			x[featAttn] += float64(r.prompt + ev.k)
			if r.prev == s.cluster-1 {
				adjacent = true
			} else {
				usable = false // it skipped a step: preempted, or a chunk lost
			}
		}
		r.prev = s.cluster
		if ev.k == len(r.chunks)-1 {
			s.active--
		}
	}
	batch := len(s.open)
	for len(s.pending) > 0 && s.pending[0].first {
		minheap.Pop(&s.pending, sentFirst)
	}
	if len(s.pending) > 0 && s.end >= 0 && s.pending[0].sent < s.end {
		// A request was at the server when the step began and did not
		// finish its prompt in it: it waited, or computed a chunk.
		usable = false
		s.waitedAt[batch]++
	}
	s.maxBatch = max(s.maxBatch, batch)
	switch {
	case usable && adjacent && s.end >= 0:
		s.keep(obs{y: float64(end - s.end), x: x})
		s.decodeSteps++
		s.maxTokens = max(s.maxTokens, int(x[featPrefill]+x[featDecode]))
	case batch == 1 && alone != nil && alone.idle && !alone.remote && (len(s.pending) == 0 || s.pending[0].sent >= end):
		// The first step after idle: it began when the request arrived.
		s.keep(obs{y: float64(end - alone.sent), x: x})
		s.idleSteps++
		s.maxTokens = max(s.maxTokens, int(x[featPrefill]))
	default:
		s.droppedAmbiguous++
	}
	s.before, s.end, s.lastEnd = s.end, end, s.lastT
	s.open = s.open[:0]
}

// sentFirst orders the rows waiting for their first token by send time.
func sentFirst(a, b **stepRow) bool { return (*a).sent < (*b).sent }
