package fleet

import (
	"time"

	"github.com/tokentrace/tokentrace/replay/sim"
)

// Route reasons (the route_reason column, the reason label of
// tokentrace_router_decisions_total).
const (
	ReasonRoundRobin       = "round-robin"       // the next replica in turn
	ReasonLeastOutstanding = "least-outstanding" // the fewest requests in flight
	ReasonSession          = "session"           // the session's replica
	ReasonSessionNew       = "session-new"       // a session's first request, placed by least outstanding
	ReasonNoSession        = "no-session"        // a request without a session, placed by least outstanding
	ReasonPrefix           = "prefix"            // the replica with the longest cached prefix
	ReasonLoad             = "load"              // no replica had a longer prefix: the queue (then in-flight count) decided
)

// reasons indexes the decision counters.
var reasons = []string{ReasonRoundRobin, ReasonLeastOutstanding, ReasonSession, ReasonSessionNew, ReasonNoSession, ReasonPrefix, ReasonLoad}

const (
	rRoundRobin = iota
	rLeastOutstanding
	rSession
	rSessionNew
	rNoSession
	rPrefix
	rLoad
	nReasons
)

// The prefix-aware policy is llm-d's inference scheduler in its P/D
// profile (deploy/config/pd-epp-config.yaml in llm-d-inference-scheduler):
// max-score-picker over prefix-cache-scorer (weight 2) and queue-scorer
// (weight 1), both from the Gateway API inference extension:
//
//   - prefix-cache-scorer (gateway-api-inference-extension,
//     pkg/epp/scheduling/framework/plugins/multi/prefix/plugin.go and
//     indexer.go): the router remembers, per replica, the block hashes of
//     the prompts it sent there (an LRU of lruCapacityPerServer entries,
//     31250 by default; here the replica's KV cache size in blocks) and
//     scores a replica by the share of the prompt's leading blocks it
//     holds, at most maxPrefixBlocksToMatch (256). It hashes 64-character
//     chunks of the prompt text; the simulator hashes the engine's own
//     token blocks, as llm-d's precise scorer does.
//   - queue-scorer (.../plugins/scorer/queue.go): (max − waiting) / (max −
//     min) of vllm:num_requests_waiting over the candidates, 1 when all
//     are equal. The simulator reads the engines' queues live, where the
//     gateway scrapes them every 50 ms.
//
// max-score-picker breaks ties at random; here the fewest requests in
// flight win a tie (llm-d's active-request-scorer's count), then the
// replica after the last choice, so equal replicas are used in turn.
const (
	prefixWeight    = 2
	queueWeight     = 1
	maxPrefixBlocks = 256
)

// sessionIdle is how long a session keeps its replica without a request:
// the affinity is the cookie a client would hold (llm-d's session-affinity
// scorer, pkg/plugins/scorer/session_affinity.go), forgotten when the
// session goes quiet so memory follows the live sessions.
const sessionIdle = 30 * time.Minute

// member is the router's view of one replica.
type member struct {
	rep         int // index in the fleet's replicas
	outstanding int
	index       blockLRU
	decisions   [nReasons]int64
}

// pool is a set of replicas the router chooses among (all of an
// aggregated fleet's, or one pool of a disaggregated one).
type pool struct {
	policy  string
	members []*member
	// waiting reports a replica's vllm:num_requests_waiting.
	waiting func(rep int) int
	next    int // round robin, and the rotation that breaks ties
	// sessions: session → member, last use.
	sessions   map[int64]sessionEntry
	sessionAdd int
}

type sessionEntry struct {
	m    int
	last int64
}

func newPool(policy string, reps []int, lruBlocks func(rep int) int, waiting func(rep int) int) *pool {
	p := &pool{policy: policy, waiting: waiting}
	for _, r := range reps {
		m := &member{rep: r}
		if policy == sim.RouterPrefixAware {
			m.index = newBlockLRU(lruBlocks(r))
		}
		p.members = append(p.members, m)
	}
	if policy == sim.RouterSessionAffinity {
		p.sessions = map[int64]sessionEntry{}
	}
	return p
}

// pick chooses a member for a request with the prompt's block hashes and
// session at time now, and records the choice (the request is then in
// flight there until done).
func (p *pool) pick(hashes []uint64, session int64, now int64) (*member, int) {
	var m *member
	var reason int
	switch p.policy {
	case sim.RouterRoundRobin:
		m, reason = p.members[p.next%len(p.members)], rRoundRobin
		p.next++
	case sim.RouterLeastOutstanding:
		m, reason = p.leastOutstanding(), rLeastOutstanding
	case sim.RouterSessionAffinity:
		m, reason = p.session(session, now)
	default:
		m, reason = p.prefixAware(hashes)
	}
	m.outstanding++
	m.decisions[reason]++
	if p.policy == sim.RouterPrefixAware {
		for _, h := range hashes[:min(len(hashes), maxPrefixBlocks)] {
			m.index.add(h)
		}
	}
	return m, reason
}

// leastOutstanding is the member with the fewest requests in flight, the
// first after the last choice among equals.
func (p *pool) leastOutstanding() *member {
	n := len(p.members)
	start := p.next % n
	best := p.members[start]
	for k := 1; k < n; k++ {
		if m := p.members[(start+k)%n]; m.outstanding < best.outstanding {
			best = m
		}
	}
	p.next++
	return best
}

func (p *pool) session(session int64, now int64) (*member, int) {
	if session == 0 {
		return p.leastOutstanding(), rNoSession
	}
	if e, ok := p.sessions[session]; ok && now-e.last <= int64(sessionIdle) {
		p.sessions[session] = sessionEntry{e.m, now}
		return p.members[e.m], rSession
	}
	m := p.leastOutstanding()
	for i, x := range p.members {
		if x == m {
			p.sessions[session] = sessionEntry{i, now}
		}
	}
	p.sessionAdd++
	if p.sessionAdd >= 4096 && p.sessionAdd >= len(p.sessions)/2 {
		p.sessionAdd = 0
		for k, e := range p.sessions {
			if now-e.last > int64(sessionIdle) {
				delete(p.sessions, k)
			}
		}
	}
	return m, rSessionNew
}

// prefixAware scores every member 2·prefix + 1·queue (see prefixWeight)
// and takes the best.
func (p *pool) prefixAware(hashes []uint64) (*member, int) {
	total := min(len(hashes), maxPrefixBlocks)
	minW, maxW := int(^uint(0)>>1), -1
	for _, m := range p.members {
		w := p.waiting(m.rep)
		minW, maxW = min(minW, w), max(maxW, w)
	}
	n := len(p.members)
	start := p.next % n
	p.next++
	var best *member
	bestScore, bestMatch, maxMatch := -1.0, 0, 0
	for k := range n {
		m := p.members[(start+k)%n]
		match := 0
		if total > 0 {
			match = m.index.leading(hashes[:total])
		}
		maxMatch = max(maxMatch, match)
		score := queueWeight * 1.0
		if maxW != minW {
			score = queueWeight * float64(maxW-p.waiting(m.rep)) / float64(maxW-minW)
		}
		if total > 0 {
			score += prefixWeight * float64(match) / float64(total)
		}
		if score > bestScore || score == bestScore && m.outstanding < best.outstanding {
			best, bestScore, bestMatch = m, score, match
		}
	}
	if bestMatch > 0 && bestMatch == maxMatch {
		return best, rPrefix
	}
	return best, rLoad
}

// blockLRU is a set of block hashes with least-recently-used eviction at
// a fixed capacity: the router's guess of what a replica caches.
type blockLRU struct {
	capacity   int
	idx        map[uint64]int32
	hash       []uint64
	prev, next []int32
	head, tail int32 // head: most recent
}

func newBlockLRU(capacity int) blockLRU {
	return blockLRU{capacity: max(capacity, 1), idx: map[uint64]int32{}, head: -1, tail: -1}
}

// leading is how many of hashes, from the first, the set holds.
func (l *blockLRU) leading(hashes []uint64) int {
	for i, h := range hashes {
		if _, ok := l.idx[h]; !ok {
			return i
		}
	}
	return len(hashes)
}

func (l *blockLRU) unlink(i int32) {
	p, n := l.prev[i], l.next[i]
	if p >= 0 {
		l.next[p] = n
	} else {
		l.head = n
	}
	if n >= 0 {
		l.prev[n] = p
	} else {
		l.tail = p
	}
}

func (l *blockLRU) pushFront(i int32) {
	l.prev[i], l.next[i] = -1, l.head
	if l.head >= 0 {
		l.prev[l.head] = i
	} else {
		l.tail = i
	}
	l.head = i
}

// add makes h the most recent entry, evicting the least recent one when
// full.
func (l *blockLRU) add(h uint64) {
	if i, ok := l.idx[h]; ok {
		if i != l.head {
			l.unlink(i)
			l.pushFront(i)
		}
		return
	}
	var i int32
	if len(l.hash) < l.capacity {
		i = int32(len(l.hash))
		l.hash = append(l.hash, h)
		l.prev = append(l.prev, -1)
		l.next = append(l.next, -1)
	} else {
		i = l.tail
		l.unlink(i)
		delete(l.idx, l.hash[i])
		l.hash[i] = h
	}
	l.idx[h] = i
	l.pushFront(i)
}
