package validate

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/tokentrace/tokentrace/traces"
)

// The properties an ablation transplants from the real workload into the
// synthetic one, one at a time.
const (
	PropPromptLengths = "prompt lengths"
	PropOutputLengths = "output lengths"
	PropArrivals      = "arrivals"
	PropPrefixReuse   = "prefix reuse"
	PropSessions      = "sessions"
)

// Properties lists the transplanted properties in the order an ablation
// builds them.
var Properties = []string{PropPromptLengths, PropOutputLengths, PropArrivals, PropPrefixReuse, PropSessions}

// transplant builds the counterfactual workload: recipient with property
// prop of donor (the synthetic workload with a property of the real one;
// for a complement, the other way round). It returns a reason instead when
// the property cannot be built from these workloads (e.g. the donor has no
// sessions). blockSize is the replay's block size for traces whose
// metadata does not say.
//
// Requests are matched by rank: the i-th request of one workload in arrival
// order stands for the request at the same relative position in the other
// (i·N/M), so a transplant keeps where in the trace a property occurs (a
// burst, a run of long prompts) and the recipient keeps all of its own
// other properties.
func transplant(prop string, donor, recipient Workload, blockSize int) (Workload, string) {
	if ok, why := transplantable(prop, donor, recipient); !ok {
		return Workload{}, why
	}
	w, why := build(prop, donor, recipient, blockSize)
	if why == "" && sameRequests(w.reqs, recipient.reqs) {
		return Workload{}, fmt.Sprintf("the %s workload already has the %s %s: nothing to transplant", recipient.Name, donor.Name, prop)
	}
	return w, why
}

// transplantAll builds recipient with every property of props taken from
// donor, one after the other in Properties order (lengths and arrivals
// before prefixes, prefixes before the sessions that share them), or the
// reason the first that cannot be built gives. The workload is named for
// all of them.
func transplantAll(props []string, donor, recipient Workload, blockSize int) (Workload, string) {
	w := recipient
	var done []string
	for _, p := range Properties {
		if !slices.Contains(props, p) {
			continue
		}
		next, why := transplant(p, donor, w, blockSize)
		if why != "" {
			return Workload{}, p + ": " + why
		}
		w = next
		done = append(done, p)
	}
	w.Name = recipient.Name + " with " + donor.Name + " " + strings.Join(done, " and ")
	return w, ""
}

func build(prop string, donor, recipient Workload, blockSize int) (Workload, string) {
	what := "with " + donor.Name + " " + prop
	switch prop {
	case PropPromptLengths:
		return transplantLengths(donor, recipient, func(r *request) *int32 { return &r.in }, what), ""
	case PropOutputLengths:
		return transplantLengths(donor, recipient, func(r *request) *int32 { return &r.out }, what), ""
	case PropArrivals:
		return transplantArrivals(donor, recipient, what), ""
	case PropPrefixReuse:
		return transplantPrefixes(donor, recipient, what), ""
	case PropSessions:
		return transplantSessions(donor, recipient, blockSize, what), ""
	}
	return Workload{}, fmt.Sprintf("unknown property %q", prop)
}

// transplantable reports whether prop can be built from these workloads,
// and why not.
func transplantable(prop string, donor, recipient Workload) (bool, string) {
	switch prop {
	case PropArrivals:
		if len(donor.reqs) < 2 {
			return false, fmt.Sprintf("the %s workload has fewer than two requests: it has no arrival process", donor.Name)
		}
	case PropPrefixReuse:
		if !sharesPrefixes(donor.reqs) && !sharesPrefixes(recipient.reqs) {
			return false, "neither workload has shared prefixes (no prefix blocks, no category with prefix tokens): nothing to transplant"
		}
	case PropSessions:
		if !hasFollowUps(donor.reqs) {
			return false, fmt.Sprintf("the %s workload has no sessions (no session with two or more requests)", donor.Name)
		}
	}
	return true, ""
}

// sameRequests reports whether a and b send the same requests: the same
// arrivals, lengths, prefixes and sessions.
func sameRequests(a, b []request) bool {
	return slices.EqualFunc(a, b, func(x, y request) bool {
		return x.arrival == y.arrival && x.in == y.in && x.out == y.out && x.category == y.category &&
			x.prefix == y.prefix && x.session == y.session && slices.Equal(x.blocks, y.blocks)
	})
}

// counterfactual starts a workload from the recipient's metadata. Its
// requests are in arrival order, as every transplant builds them.
func counterfactual(recipient Workload, what string, n int) Workload {
	return Workload{Name: recipient.Name + " " + what, Meta: recipient.Meta, reqs: make([]request, 0, n)}
}

// at is the index, among m, standing for rank i of n.
func at(i, n, m int) int { return int(int64(i) * int64(m) / int64(n)) }

// transplantLengths gives each recipient request (a synthetic one) the
// donor's (the real) value at its own quantile: the request with the k-th
// smallest value gets the donor's value of the same rank. The order of
// lengths over time, their pairing with arrivals and prefixes stay the
// recipient's; a shared prefix is cut to a shorter prompt.
func transplantLengths(donor, recipient Workload, field func(*request) *int32, what string) Workload {
	rv := make([]int32, len(donor.reqs))
	for i := range donor.reqs {
		rv[i] = *field(&donor.reqs[i])
	}
	slices.Sort(rv)
	ord := make([]int32, len(recipient.reqs))
	for i := range ord {
		ord[i] = int32(i)
	}
	slices.SortStableFunc(ord, func(a, b int32) int {
		return cmp.Compare(*field(&recipient.reqs[a]), *field(&recipient.reqs[b]))
	})
	w := counterfactual(recipient, what, len(recipient.reqs))
	w.reqs = append(w.reqs, recipient.reqs...)
	n := len(ord)
	for k, i := range ord {
		r := &w.reqs[i]
		*field(r) = rv[at(2*k+1, 2*n, len(rv))] // the middle of the rank's share
		r.prefix = min(r.prefix, r.in)
	}
	return w
}

// blockUses counts in how many requests each prefix block occurs, up to 2.
func blockUses(reqs []request) map[int64]uint8 {
	uses := map[int64]uint8{}
	for i := range reqs {
		for _, b := range reqs[i].blocks {
			if uses[b] < 2 {
				uses[b]++
			}
		}
	}
	return uses
}

// renameBlocks returns blocks for the copy-th repeat of a request: the
// blocks only this request has (uses 1) get new ids, so a repeat shares
// with the others what the original shared, and no more.
func renameBlocks(blocks []int64, copyN int, uses map[int64]uint8) []int64 {
	if copyN == 0 || len(blocks) == 0 {
		return blocks
	}
	out := make([]int64, len(blocks))
	for i, b := range blocks {
		out[i] = b
		if uses[b] < 2 {
			out[i] = int64(mix64(uint64(b)^uint64(copyN)*0x9e3779b97f4a7c15) >> 1)
		}
	}
	return out
}

func mix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// transplantArrivals puts the recipient's requests (the synthetic ones),
// in their own order, at the donor's (the real workload's) arrival times:
// as many requests as the donor has, so rate and burstiness are the
// donor's. With fewer recipient requests than donor ones each is used
// again in turn (the repeat's own prefix
// blocks and its session renamed, so it is a new request of the same
// shape); with more, an even subset is used.
func transplantArrivals(donor, recipient Workload, what string) Workload {
	uses := blockUses(recipient.reqs)
	var maxSess int64
	for i := range recipient.reqs {
		maxSess = max(maxSess, recipient.reqs[i].session)
	}
	copies := make([]int32, len(recipient.reqs))
	w := counterfactual(recipient, what, len(donor.reqs))
	for i := range donor.reqs {
		si := at(i, len(donor.reqs), len(recipient.reqs))
		k := copies[si]
		copies[si]++
		r := recipient.reqs[si]
		r.seq, r.arrival = int64(i), donor.reqs[i].arrival
		r.blocks = renameBlocks(r.blocks, int(k), uses)
		if r.session != 0 {
			r.session += int64(k) * (maxSess + 1)
		}
		r.parent, r.after = traces.NotReported, nil // seqs are new
		w.reqs = append(w.reqs, r)
	}
	return w
}

// sharesPrefixes reports whether any request carries a shared prefix.
func sharesPrefixes(reqs []request) bool {
	for i := range reqs {
		if len(reqs[i].blocks) > 0 || (reqs[i].category != "" && reqs[i].prefix > 0) {
			return true
		}
	}
	return false
}

// transplantPrefixes keeps the recipient's requests (arrivals, lengths)
// and gives each the prefix of the donor's request at its rank: category,
// prefix tokens and prefix blocks (the blocks at the donor's block size),
// cut to the recipient's prompt length. The donor's requests are thinned
// to the recipient's size by whole conversations, so that a turn's reuse
// of the turn before survives; a donor request used twice shares with the
// others what it shared, and its own blocks are renamed.
func transplantPrefixes(donor, recipient Workload, what string) Workload {
	ro := wholeConversations(donor.reqs, len(recipient.reqs))
	uses := blockUses(donor.reqs)
	copies := make([]int32, len(donor.reqs))
	w := counterfactual(recipient, what, len(recipient.reqs))
	w.reqs = append(w.reqs, recipient.reqs...)
	bs := donor.Meta.BlockSize
	if sharesBlocks(donor.reqs) {
		w.Meta.BlockSize = bs
	}
	for j := range w.reqs {
		ri := ro[at(j, len(w.reqs), len(ro))]
		k := copies[ri]
		copies[ri]++
		src, r := &donor.reqs[ri], &w.reqs[j]
		r.category = src.category
		r.prefix = min(src.prefix, r.in)
		blocks := src.blocks
		if bs > 0 {
			blocks = blocks[:min(len(blocks), (int(r.in)+bs-1)/bs)]
		}
		r.blocks = renameBlocks(blocks, int(k), uses)
	}
	return w
}

func sharesBlocks(reqs []request) bool {
	for i := range reqs {
		if len(reqs[i].blocks) > 0 {
			return true
		}
	}
	return false
}

// hasFollowUps reports whether some session has two or more requests.
func hasFollowUps(reqs []request) bool {
	seen := map[int64]bool{}
	for i := range reqs {
		if s := reqs[i].session; s != 0 {
			if seen[s] {
				return true
			}
			seen[s] = true
		}
	}
	return false
}

// sessionBlockSize is the block size the sessions transplant gives a
// workload without prefix blocks: small, so a follow-up shares almost all
// of its predecessor's prompt (the simulator caches 16-token blocks).
const sessionBlockSize = 64

// transplantSessions keeps the recipient's arrivals and first turns (the
// synthetic workload's), and lays the donor's conversations (the real
// ones) over them (whole conversations, thinned to the recipient's size):
// where the donor request at a recipient request's rank continues an
// earlier donor request (the previous one of its session) and that one
// stands for an earlier recipient request, the recipient request becomes
// its follow-up.
// A follow-up resends its predecessor's prompt and answer plus the new
// tokens the real turn added (its input = previous input + previous output
// + new tokens; a real turn whose input did not grow starts a fresh prompt
// in the same session), shares the predecessor's prompt blocks, keeps its
// category and takes the real think time. Requests without blocks get
// blocks first (their category prefix shared at block granularity), so
// the sharing is expressed the same way for every request.
func transplantSessions(donor, recipient Workload, blockSize int, what string) Workload {
	ro := wholeConversations(donor.reqs, len(recipient.reqs))
	// The previous request of each donor session, by index.
	prev := make([]int32, len(donor.reqs))
	last := map[int64]int32{}
	for _, ri := range ro {
		prev[ri] = -1
		if s := donor.reqs[ri].session; s != 0 {
			if p, ok := last[s]; ok {
				prev[ri] = p
			}
			last[s] = ri
		}
	}
	w := counterfactual(recipient, what, len(recipient.reqs))
	w.reqs = append(w.reqs, recipient.reqs...)
	bs := recipient.Meta.BlockSize
	if !sharesBlocks(recipient.reqs) {
		bs = sessionBlockSize
	} else if bs <= 0 {
		bs = blockSize
	}
	w.Meta.BlockSize = bs
	fresh := freshBlocks(1 << 62) // far from any trace's block ids
	nb := func(tokens int32) int { return (int(tokens) + bs - 1) / bs }
	var sessions int64
	lastC := make([]int32, len(donor.reqs)) // donor index → synthetic index standing for it, +1
	for j := range w.reqs {
		ri := ro[at(j, len(w.reqs), len(ro))]
		r, src := &w.reqs[j], &donor.reqs[ri]
		r.session, r.turn, r.parent, r.after = 0, 0, traces.NotReported, nil
		lastC[ri] = int32(j) + 1
		p := prev[ri]
		if p < 0 || lastC[p] == 0 {
			// A first turn: its own prompt, in blocks; a session of its
			// own when the donor request starts one.
			if len(r.blocks) == 0 {
				r.blocks = categoryBlocks(r, bs, fresh)
			}
			if src.session != 0 {
				sessions++
				r.session, r.turn = sessions, 1
			}
			continue
		}
		pc, srcPrev := &w.reqs[lastC[p]-1], &donor.reqs[p]
		r.session, r.turn = pc.session, pc.turn+1
		r.parent, r.think = pc.seq, src.think
		r.category, r.prefix = pc.category, pc.prefix
		added := int64(src.in) - int64(srcPrev.in) - int64(srcPrev.out)
		if added < 0 { // a fresh prompt in the same conversation
			r.blocks = categoryBlocks(r, bs, fresh)
			continue
		}
		r.in = int32(min(int64(pc.in)+int64(pc.out)+added, 1<<30))
		shared := pc.blocks[:min(len(pc.blocks), int(pc.in)/bs)]
		blocks := make([]int64, 0, nb(r.in))
		blocks = append(blocks, shared...)
		r.blocks = append(blocks, fresh(nb(r.in)-len(shared))...)
	}
	return w
}

// freshBlocks hands out n new block ids at a time, counting up from next.
func freshBlocks(next int64) func(n int) []int64 {
	return func(n int) []int64 {
		out := make([]int64, n)
		for i := range out {
			out[i] = next
			next++
		}
		return out
	}
}

// wholeConversations thins the real requests (in arrival order) to about
// n, keeping or dropping whole sessions: an even share of the sessions
// and single requests in order of their first request. Thinning request by
// request would cut conversations apart, and a follow-up whose predecessor
// is gone is no follow-up.
func wholeConversations(reqs []request, n int) []int32 {
	all := func() []int32 {
		out := make([]int32, len(reqs))
		for i := range out {
			out[i] = int32(i)
		}
		return out
	}
	if n >= len(reqs) {
		return all()
	}
	frac := float64(n) / float64(len(reqs))
	keep := map[int64]bool{}
	var units int
	out := make([]int32, 0, n+n/8)
	for i := range reqs {
		s := reqs[i].session
		k, seen := keep[s]
		if s == 0 || !seen {
			k = int(float64(units+1)*frac) > int(float64(units)*frac)
			units++
			if s != 0 {
				keep[s] = k
			}
		}
		if k {
			out = append(out, int32(i))
		}
	}
	if len(out) == 0 {
		return all()
	}
	return out
}

// categoryBlocks expresses a request's prompt as blocks: its category
// prefix's whole blocks (the same ids for every request of the category)
// and fresh blocks for the rest.
func categoryBlocks(r *request, bs int, fresh func(int) []int64) []int64 {
	n := (int(r.in) + bs - 1) / bs
	var blocks []int64
	if r.category != "" && r.prefix > 0 {
		h := hashCategory(r.category)
		for i := range min(int(r.prefix)/bs, n) {
			blocks = append(blocks, int64(mix64(h+uint64(i))>>2)|1<<61)
		}
	}
	return append(blocks, fresh(n-len(blocks))...)
}

func hashCategory(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}
