package validate

import (
	"cmp"
	"fmt"
	"slices"

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

// transplant builds the counterfactual workload: syn with property prop of
// real. It returns a reason instead when the property cannot be built from
// these workloads (e.g. the real one has no sessions). blockSize is the
// replay's block size for traces whose metadata does not say.
//
// Requests are matched by rank: the i-th request of one workload in arrival
// order stands for the request at the same relative position in the other
// (i·N/M), so a transplant keeps where in the trace a property occurs (a
// burst, a run of long prompts) and the synthetic workload keeps all of
// its own other properties.
func transplant(prop string, real, syn Workload, blockSize int) (Workload, string) {
	if ok, why := transplantable(prop, real, syn); !ok {
		return Workload{}, why
	}
	w, why := build(prop, real, syn, blockSize)
	if why == "" && sameRequests(w.Records, syn.Records) {
		return Workload{}, "the synthetic workload already has the real " + prop + ": nothing to transplant"
	}
	return w, why
}

func build(prop string, real, syn Workload, blockSize int) (Workload, string) {
	switch prop {
	case PropPromptLengths:
		return transplantLengths(real, syn, func(r *traces.Record) *int32 { return &r.InputTokens }, "with real prompt lengths"), ""
	case PropOutputLengths:
		return transplantLengths(real, syn, func(r *traces.Record) *int32 { return &r.OutputTokens }, "with real output lengths"), ""
	case PropArrivals:
		return transplantArrivals(real, syn), ""
	case PropPrefixReuse:
		return transplantPrefixes(real, syn), ""
	case PropSessions:
		return transplantSessions(real, syn, blockSize), ""
	}
	return Workload{}, fmt.Sprintf("unknown property %q", prop)
}

// transplantable reports whether prop can be built from these workloads,
// and why not.
func transplantable(prop string, real, syn Workload) (bool, string) {
	switch prop {
	case PropArrivals:
		if len(real.Records) < 2 {
			return false, "the real workload has fewer than two requests: it has no arrival process"
		}
	case PropPrefixReuse:
		if !sharesPrefixes(real.Records) && !sharesPrefixes(syn.Records) {
			return false, "neither workload has shared prefixes (no prefix blocks, no category with prefix tokens): nothing to transplant"
		}
	case PropSessions:
		if !hasFollowUps(real.Records) {
			return false, "the real workload has no sessions (no session with two or more requests)"
		}
	}
	return true, ""
}

// sameRequests reports whether a and b send the same requests: the same
// arrivals, lengths, prefixes and sessions.
func sameRequests(a, b []traces.Record) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := &a[i], &b[i]
		if x.ArrivalNs != y.ArrivalNs || x.InputTokens != y.InputTokens || x.OutputTokens != y.OutputTokens ||
			x.Category != y.Category || x.PrefixTokens != y.PrefixTokens || x.Session != y.Session ||
			!slices.Equal(x.PrefixBlocks, y.PrefixBlocks) {
			return false
		}
	}
	return true
}

// counterfactual starts a workload from syn's metadata.
func counterfactual(syn Workload, what string, n int) Workload {
	return Workload{Name: syn.Name + " " + what, Meta: syn.Meta, Records: make([]traces.Record, 0, n)}
}

// arrivalOrder is the order of recs by (arrival, seq).
func arrivalOrder(recs []traces.Record) []int32 {
	ord := make([]int32, len(recs))
	for i := range ord {
		ord[i] = int32(i)
	}
	slices.SortStableFunc(ord, func(a, b int32) int {
		ra, rb := &recs[a], &recs[b]
		if c := cmp.Compare(ra.ArrivalNs, rb.ArrivalNs); c != 0 {
			return c
		}
		return cmp.Compare(ra.Seq, rb.Seq)
	})
	return ord
}

// at is the index, among m, standing for rank i of n.
func at(i, n, m int) int { return int(int64(i) * int64(m) / int64(n)) }

// transplantLengths gives each synthetic request the real value at its
// own quantile: the synthetic request with the k-th smallest value gets
// the real value of the same rank. The order of lengths over time, their
// pairing with arrivals and prefixes stay the synthetic workload's; a
// shared prefix is cut to a shorter prompt.
func transplantLengths(real, syn Workload, field func(*traces.Record) *int32, what string) Workload {
	rv := make([]int32, len(real.Records))
	for i := range real.Records {
		rv[i] = *field(&real.Records[i])
	}
	slices.Sort(rv)
	ord := make([]int32, len(syn.Records))
	for i := range ord {
		ord[i] = int32(i)
	}
	slices.SortStableFunc(ord, func(a, b int32) int {
		return cmp.Compare(*field(&syn.Records[a]), *field(&syn.Records[b]))
	})
	w := counterfactual(syn, what, len(syn.Records))
	w.Records = append(w.Records, syn.Records...)
	n := len(ord)
	for k, i := range ord {
		r := &w.Records[i]
		*field(r) = rv[at(2*k+1, 2*n, len(rv))] // the middle of the rank's share
		r.PrefixTokens = min(r.PrefixTokens, r.InputTokens)
	}
	return w
}

// blockUses counts in how many requests each prefix block occurs, up to 2.
func blockUses(recs []traces.Record) map[int64]uint8 {
	uses := map[int64]uint8{}
	for i := range recs {
		for _, b := range recs[i].PrefixBlocks {
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

// transplantArrivals puts the synthetic requests, in their own order, at
// the real workload's arrival times: as many requests as the real one has,
// so rate and burstiness are the real ones. With fewer synthetic requests
// than real ones each is used again in turn (the repeat's own prefix
// blocks and its session renamed, so it is a new request of the same
// shape); with more, an even subset is used.
func transplantArrivals(real, syn Workload) Workload {
	ro, so := arrivalOrder(real.Records), arrivalOrder(syn.Records)
	uses := blockUses(syn.Records)
	var maxSess int64
	for i := range syn.Records {
		maxSess = max(maxSess, syn.Records[i].Session)
	}
	copies := make([]int32, len(syn.Records))
	w := counterfactual(syn, "with real arrivals", len(real.Records))
	for i, ri := range ro {
		si := so[at(i, len(ro), len(so))]
		k := copies[si]
		copies[si]++
		r := syn.Records[si]
		r.Seq, r.ArrivalNs = int64(i), real.Records[ri].ArrivalNs
		r.PrefixBlocks = renameBlocks(r.PrefixBlocks, int(k), uses)
		if r.Session != 0 {
			r.Session += int64(k) * (maxSess + 1)
		}
		r.ParentSeq, r.AfterSeqs = traces.NotReported, nil // seqs are new
		w.Records = append(w.Records, r)
	}
	return w
}

// sharesPrefixes reports whether any request carries a shared prefix.
func sharesPrefixes(recs []traces.Record) bool {
	for i := range recs {
		if len(recs[i].PrefixBlocks) > 0 || (recs[i].Category != "" && recs[i].PrefixTokens > 0) {
			return true
		}
	}
	return false
}

// transplantPrefixes keeps the synthetic requests (arrivals, lengths) and
// gives each the prefix of the real request at its rank: category, prefix
// tokens and prefix blocks (the blocks at the real block size), cut to the
// synthetic prompt's length. The real requests are thinned to the
// synthetic size by whole conversations, so that a turn's reuse of the
// turn before survives; a real request used twice shares with the others
// what it shared, and its own blocks are renamed.
func transplantPrefixes(real, syn Workload) Workload {
	ro, so := arrivalOrder(real.Records), arrivalOrder(syn.Records)
	ro = wholeConversations(real.Records, ro, len(so))
	uses := blockUses(real.Records)
	copies := make([]int32, len(real.Records))
	w := counterfactual(syn, "with real prefix reuse", len(syn.Records))
	w.Records = append(w.Records, syn.Records...)
	bs := real.Meta.BlockSize
	if sharesBlocks(real.Records) {
		w.Meta.BlockSize = bs
	}
	for j, si := range so {
		ri := ro[at(j, len(so), len(ro))]
		k := copies[ri]
		copies[ri]++
		src, r := &real.Records[ri], &w.Records[si]
		r.Category = src.Category
		r.PrefixTokens = min(src.PrefixTokens, r.InputTokens)
		blocks := src.PrefixBlocks
		if bs > 0 {
			blocks = blocks[:min(len(blocks), (int(r.InputTokens)+bs-1)/bs)]
		}
		r.PrefixBlocks = renameBlocks(blocks, int(k), uses)
	}
	return w
}

func sharesBlocks(recs []traces.Record) bool {
	for i := range recs {
		if len(recs[i].PrefixBlocks) > 0 {
			return true
		}
	}
	return false
}

// hasFollowUps reports whether some session has two or more requests.
func hasFollowUps(recs []traces.Record) bool {
	seen := map[int64]bool{}
	for i := range recs {
		if s := recs[i].Session; s != 0 {
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

// transplantSessions keeps the synthetic requests' arrivals and their
// first turns, and lays the real workload's conversations over them (whole
// conversations, thinned to the synthetic size): where the real request at
// a synthetic request's rank continues an earlier real request (the
// previous one of its session) and that one stands for an earlier
// synthetic request, the synthetic request becomes its follow-up.
// A follow-up resends its predecessor's prompt and answer plus the new
// tokens the real turn added (its input = previous input + previous output
// + new tokens; a real turn whose input did not grow starts a fresh prompt
// in the same session), shares the predecessor's prompt blocks, keeps its
// category and takes the real think time. Requests without blocks get
// blocks first (their category prefix shared at block granularity), so
// the sharing is expressed the same way for every request.
func transplantSessions(real, syn Workload, blockSize int) Workload {
	ro, so := arrivalOrder(real.Records), arrivalOrder(syn.Records)
	ro = wholeConversations(real.Records, ro, len(so))
	// The previous request of each real session, by index.
	prev := make([]int32, len(real.Records))
	last := map[int64]int32{}
	for _, ri := range ro {
		prev[ri] = -1
		if s := real.Records[ri].Session; s != 0 {
			if p, ok := last[s]; ok {
				prev[ri] = p
			}
			last[s] = ri
		}
	}
	w := counterfactual(syn, "with real sessions", len(syn.Records))
	w.Records = append(w.Records, syn.Records...)
	bs := syn.Meta.BlockSize
	if !sharesBlocks(syn.Records) {
		bs = sessionBlockSize
	} else if bs <= 0 {
		bs = blockSize
	}
	w.Meta.BlockSize = bs
	var next int64 = 1 << 62 // fresh block ids, far from any trace's
	fresh := func(n int) []int64 {
		out := make([]int64, n)
		for i := range out {
			out[i] = next
			next++
		}
		return out
	}
	nb := func(tokens int32) int { return (int(tokens) + bs - 1) / bs }
	var sessions int64
	lastC := make([]int32, len(real.Records)) // real index → synthetic index standing for it, +1
	for j, si := range so {
		ri := ro[at(j, len(so), len(ro))]
		r, src := &w.Records[si], &real.Records[ri]
		r.Session, r.Turn, r.ParentSeq, r.AfterSeqs = 0, 0, traces.NotReported, nil
		lastC[ri] = int32(si) + 1
		p := prev[ri]
		if p < 0 || lastC[p] == 0 {
			// A first turn: its own prompt, in blocks; a session of its
			// own when the real request starts one.
			if len(r.PrefixBlocks) == 0 {
				r.PrefixBlocks = categoryBlocks(r, bs, fresh)
			}
			if src.Session != 0 {
				sessions++
				r.Session, r.Turn = sessions, 1
			}
			continue
		}
		pc, srcPrev := &w.Records[lastC[p]-1], &real.Records[p]
		r.Session, r.Turn = pc.Session, pc.Turn+1
		r.ParentSeq, r.ThinkNs = pc.Seq, src.ThinkNs
		r.Category, r.PrefixTokens = pc.Category, pc.PrefixTokens
		added := int64(src.InputTokens) - int64(srcPrev.InputTokens) - int64(srcPrev.OutputTokens)
		if added < 0 { // a fresh prompt in the same conversation
			r.PrefixBlocks = categoryBlocks(r, bs, fresh)
			continue
		}
		r.InputTokens = int32(min(int64(pc.InputTokens)+int64(pc.OutputTokens)+added, 1<<30))
		shared := pc.PrefixBlocks[:min(len(pc.PrefixBlocks), int(pc.InputTokens)/bs)]
		blocks := make([]int64, 0, nb(r.InputTokens))
		blocks = append(blocks, shared...)
		r.PrefixBlocks = append(blocks, fresh(nb(r.InputTokens)-len(shared))...)
	}
	return w
}

// wholeConversations thins the real requests (in arrival order) to about
// n, keeping or dropping whole sessions: an even share of the sessions
// and single requests in order of their first request. Thinning request by
// request would cut conversations apart, and a follow-up whose predecessor
// is gone is no follow-up.
func wholeConversations(recs []traces.Record, ord []int32, n int) []int32 {
	if n >= len(ord) {
		return ord
	}
	frac := float64(n) / float64(len(ord))
	keep := map[int64]bool{}
	var units int
	out := make([]int32, 0, n+n/8)
	for _, i := range ord {
		s := recs[i].Session
		k, seen := keep[s]
		if s == 0 || !seen {
			k = int(float64(units+1)*frac) > int(float64(units)*frac)
			units++
			if s != 0 {
				keep[s] = k
			}
		}
		if k {
			out = append(out, i)
		}
	}
	if len(out) == 0 {
		return ord
	}
	return out
}

// categoryBlocks expresses a request's prompt as blocks: its category
// prefix's whole blocks (the same ids for every request of the category)
// and fresh blocks for the rest.
func categoryBlocks(r *traces.Record, bs int, fresh func(int) []int64) []int64 {
	n := (int(r.InputTokens) + bs - 1) / bs
	var blocks []int64
	if r.Category != "" && r.PrefixTokens > 0 {
		h := hashCategory(r.Category)
		for i := range min(int(r.PrefixTokens)/bs, n) {
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
