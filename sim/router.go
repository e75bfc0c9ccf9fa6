package sim

import (
	"slices"
	"time"

	"github.com/tokentrace/tokentrace/internal/u64map"
)

// Router policies of a fleet (Fleet.Router). Each is a row of policies,
// with the route reasons its choices give.
const (
	RouterRoundRobin       = "round-robin"
	RouterLeastOutstanding = "least-outstanding"
	RouterSessionAffinity  = "session-affinity"
	RouterPrefixAware      = "prefix-aware"
)

// Route reasons (the route_reason column, the reason label of
// tokentrace_router_decisions_total): why a policy chose a replica.
const (
	ReasonRoundRobin       = "round-robin"       // the next replica in turn
	ReasonLeastOutstanding = "least-outstanding" // the fewest requests in flight
	ReasonSession          = "session"           // the session's replica
	ReasonSessionNew       = "session-new"       // a session's first request, placed by least outstanding
	ReasonNoSession        = "no-session"        // a request without a session, placed by least outstanding
	ReasonPrefix           = "prefix"            // the replica with the longest cached prefix
	ReasonLoad             = "load"              // no replica had a longer prefix: the queue (then in-flight count) decided
)

// policy is a router policy: its name, the route reasons its choices give
// (each replica counts its choices by reason, exposed from the start so
// rates work at once), and how it picks a pool's member for a request
// with the prompt's block hashes and session at time now, returning the
// index of its reason.
type policy struct {
	name    string
	reasons []string
	pick    func(p *pool, hashes []uint64, session int64, now int64) (*member, int)
	// prefix: the policy scores prompts' block hashes, kept per pool in a
	// prefix index (the endpoint hashes each body for it).
	prefix bool
}

// policies is the one list of router policies, in the order Routers
// lists them: a new policy is a row here (with its Router and Reason
// constants) and its pick.
var policies = []policy{
	{name: RouterRoundRobin, reasons: []string{ReasonRoundRobin}, pick: (*pool).roundRobin},
	{name: RouterLeastOutstanding, reasons: []string{ReasonLeastOutstanding}, pick: (*pool).leastOutstandingPick},
	{name: RouterSessionAffinity, reasons: []string{ReasonSession, ReasonSessionNew, ReasonNoSession}, pick: (*pool).session},
	{name: RouterPrefixAware, reasons: []string{ReasonPrefix, ReasonLoad}, pick: (*pool).prefixAware, prefix: true},
}

// The indexes of the reasons a pick returns, as its policy's row lists
// them.
const (
	whySession, whySessionNew, whyNoSession = 0, 1, 2 // session-affinity
	whyPrefix, whyLoad                      = 0, 1    // prefix-aware
)

// Routers lists the router policies.
var Routers = policyNames()

func policyNames() []string {
	names := make([]string, len(policies))
	for i, p := range policies {
		names[i] = p.name
	}
	return names
}

// RouterOfReason is the router policy whose choices give the route
// reason ("" for none): what a results file's route_reason column says
// about the router that served it.
func RouterOfReason(reason string) string {
	for _, p := range policies {
		if slices.Contains(p.reasons, reason) {
			return p.name
		}
	}
	return ""
}

// policyNamed is the policy called name (nil when none is).
func policyNamed(name string) *policy {
	for i := range policies {
		if policies[i].name == name {
			return &policies[i]
		}
	}
	return nil
}

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
	rep         int   // index in the fleet's replicas
	pos         int32 // index in the pool
	outstanding int
	decisions   []int64 // by the index of the policy's reason
}

// pool is a set of replicas the router chooses among (all of an
// aggregated fleet's, or one pool of a disaggregated one).
type pool struct {
	policy  *policy
	members []*member
	index   *prefixIndex // prefix-aware only
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

func newPool(name string, reps []int, lruBlocks func(rep int) int, waiting func(rep int) int) *pool {
	p := &pool{policy: policyNamed(name), waiting: waiting}
	var capacities []int
	for i, r := range reps {
		p.members = append(p.members, &member{rep: r, pos: int32(i), decisions: make([]int64, len(p.policy.reasons))})
		if p.policy.prefix {
			capacities = append(capacities, lruBlocks(r))
		}
	}
	if p.policy.prefix {
		p.index = newPrefixIndex(capacities)
	}
	return p
}

// pick chooses a member for a request with the prompt's block hashes and
// session at time now, and records the choice (the request is then in
// flight there until done).
func (p *pool) pick(hashes []uint64, session int64, now int64) (*member, int) {
	m, why := p.policy.pick(p, hashes, session, now)
	m.outstanding++
	m.decisions[why]++
	if p.index != nil {
		for _, h := range hashes[:min(len(hashes), maxPrefixBlocks)] {
			p.index.add(m.pos, h)
		}
	}
	return m, why
}

// roundRobin is the next member in turn.
func (p *pool) roundRobin([]uint64, int64, int64) (*member, int) {
	m := p.members[p.next%len(p.members)]
	p.next++
	return m, 0
}

// leastOutstandingPick is leastOutstanding as a policy's pick.
func (p *pool) leastOutstandingPick([]uint64, int64, int64) (*member, int) {
	return p.leastOutstanding(), 0
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

// session keeps a session on the member its first request went to (by
// least outstanding), while the session is not idle.
func (p *pool) session(_ []uint64, session int64, now int64) (*member, int) {
	if session == 0 {
		return p.leastOutstanding(), whyNoSession
	}
	if e, ok := p.sessions[session]; ok && now-e.last <= int64(sessionIdle) {
		p.sessions[session] = sessionEntry{e.m, now}
		return p.members[e.m], whySession
	}
	m := p.leastOutstanding()
	if p.sessions == nil {
		p.sessions = map[int64]sessionEntry{}
	}
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
	return m, whySessionNew
}

// prefixAware scores every member 2·prefix + 1·queue (see prefixWeight)
// and takes the best.
func (p *pool) prefixAware(hashes []uint64, _, _ int64) (*member, int) {
	total := min(len(hashes), maxPrefixBlocks)
	minW, maxW := int(^uint(0)>>1), -1
	for _, m := range p.members {
		w := p.waiting(m.rep)
		minW, maxW = min(minW, w), max(maxW, w)
	}
	n := len(p.members)
	start := p.next % n
	p.next++
	maxMatch := 0
	if total > 0 {
		maxMatch = p.index.leading(hashes[:total])
	}
	var best *member
	bestScore, bestMatch := -1.0, 0
	for k := range n {
		m := p.members[(start+k)%n]
		match := 0
		if maxMatch > 0 {
			match = p.index.match[m.pos]
		}
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
		return best, whyPrefix
	}
	return best, whyLoad
}

// prefixIndex is the router's guess of what each replica of a pool caches:
// per replica, the block hashes of the prompts sent there, least recently
// used evicted at the replica's capacity (GIE's indexer: a hash → replicas
// table and an LRU per replica). One table serves the pool, so scoring a
// prompt costs a lookup per matched block, not one per replica.
type prefixIndex struct {
	ents    u64map.Map // block hash → entry
	entHash []uint64
	entHead []int32 // first node of the entry's chain, -1 = none
	freeEnt []int32
	// A node is one (entry, member) pair: in the member's LRU list (prev,
	// next) and in the entry's chain.
	nodeEnt, nodeMem, prev, next, chain []int32
	// Per member: LRU head (most recent), tail, size, capacity.
	head, tail, size, capacity []int32
	// match is scoring's scratch: leading blocks per member.
	match []int
}

func newPrefixIndex(capacities []int) *prefixIndex {
	x := &prefixIndex{match: make([]int, len(capacities))}
	for _, c := range capacities {
		x.head = append(x.head, -1)
		x.tail = append(x.tail, -1)
		x.size = append(x.size, 0)
		x.capacity = append(x.capacity, int32(max(c, 1)))
	}
	return x
}

// leading sets match[m] to how many of hashes, from the first, member m
// holds, and returns the most any holds.
func (x *prefixIndex) leading(hashes []uint64) int {
	clear(x.match)
	for i, h := range hashes {
		e, ok := x.ents.Get(h)
		if !ok {
			return i
		}
		alive := 0
		for n := x.entHead[e]; n >= 0; n = x.chain[n] {
			if m := x.nodeMem[n]; x.match[m] == i {
				x.match[m]++
				alive++
			}
		}
		if alive == 0 {
			return i
		}
	}
	return len(hashes)
}

// add makes h member m's most recent block, evicting its least recent one
// when it is full.
func (x *prefixIndex) add(m int32, h uint64) {
	pe, ok := x.ents.Upsert(h)
	e := *pe
	if ok {
		for n := x.entHead[e]; n >= 0; n = x.chain[n] {
			if x.nodeMem[n] == m {
				if n != x.head[m] {
					x.unlink(n)
					x.pushFront(n)
				}
				return
			}
		}
	} else {
		if k := len(x.freeEnt); k > 0 {
			e = x.freeEnt[k-1]
			x.freeEnt = x.freeEnt[:k-1]
			x.entHash[e], x.entHead[e] = h, -1
		} else {
			e = int32(len(x.entHash))
			x.entHash = append(x.entHash, h)
			x.entHead = append(x.entHead, -1)
		}
		*pe = e
	}
	var n int32
	if x.size[m] < x.capacity[m] {
		n = int32(len(x.nodeEnt))
		x.nodeEnt = append(x.nodeEnt, 0)
		x.nodeMem = append(x.nodeMem, m)
		x.prev = append(x.prev, -1)
		x.next = append(x.next, -1)
		x.chain = append(x.chain, -1)
		x.size[m]++
	} else {
		n = x.tail[m]
		x.unlink(n)
		x.unchain(n)
	}
	x.nodeEnt[n] = e
	x.chain[n] = x.entHead[e]
	x.entHead[e] = n
	x.pushFront(n)
}

// unchain takes node n out of its entry's chain, and drops the entry when
// no member holds it any more.
func (x *prefixIndex) unchain(n int32) {
	e := x.nodeEnt[n]
	if x.entHead[e] == n {
		x.entHead[e] = x.chain[n]
	} else {
		for p := x.entHead[e]; p >= 0; p = x.chain[p] {
			if x.chain[p] == n {
				x.chain[p] = x.chain[n]
				break
			}
		}
	}
	if x.entHead[e] < 0 {
		x.ents.Delete(x.entHash[e])
		x.freeEnt = append(x.freeEnt, e)
	}
}

func (x *prefixIndex) unlink(n int32) {
	m := x.nodeMem[n]
	p, nx := x.prev[n], x.next[n]
	if p >= 0 {
		x.next[p] = nx
	} else {
		x.head[m] = nx
	}
	if nx >= 0 {
		x.prev[nx] = p
	} else {
		x.tail[m] = p
	}
}

func (x *prefixIndex) pushFront(n int32) {
	m := x.nodeMem[n]
	x.prev[n], x.next[n] = -1, x.head[m]
	if x.head[m] >= 0 {
		x.prev[x.head[m]] = n
	} else {
		x.tail[m] = n
	}
	x.head[m] = n
}
