package formats

import (
	"math"
	"sort"
	"strconv"

	"github.com/tokentrace/tokentrace/traces"
)

// Exports to peer formats share three things: a tally of what the format
// cannot hold (said once per export, with counts, through
// ExportOptions.Lost), grouping rows into sessions for formats written
// session by session, and splitting a session's call graph into agents
// (a main chain and the subagents it spawns) for formats that nest them.

// lossReporter is implemented by export writers that count what their
// format cannot hold; losses is read after Close.
type lossReporter interface {
	losses() []traces.Text
}

// reportLosses hands w's losses to o.Lost.
func reportLosses(w traces.Writer, o ExportOptions) {
	if o.Lost == nil {
		return
	}
	if lr, ok := w.(lossReporter); ok {
		for _, l := range lr.losses() {
			o.Lost(l)
		}
	}
}

// exportDeps returns the seqs a row waits for: AfterSeqs and ParentSeq.
func exportDeps(r *traces.Record) []int64 {
	deps := r.AfterSeqs
	if r.ParentSeq >= 0 {
		for _, s := range deps {
			if s == r.ParentSeq {
				return deps
			}
		}
		deps = append(append([]int64(nil), deps...), r.ParentSeq)
	}
	return deps
}

// exportBuffer holds every row of an export whose format is written
// session by session (a session's rows are spread over the trace), and
// hands them out grouped at Close. It holds the whole trace: such formats
// need it, and say so.
type exportBuffer struct {
	recs []traces.Record
}

func (b *exportBuffer) Write(recs []traces.Record) (int, error) {
	b.recs = append(b.recs, recs...)
	return len(recs), nil
}

// groups returns the rows grouped by session (sessionGroups) and lets go
// of them.
func (b *exportBuffer) groups() [][]traces.Record {
	out := sessionGroups(b.recs)
	b.recs = nil
	return out
}

// sessionGroups sorts recs in (arrival, seq) order and groups them by
// session (a row without a session is a group of its own), groups in the
// order of their first row.
func sessionGroups(recs []traces.Record) [][]traces.Record {
	sort.SliceStable(recs, func(i, j int) bool {
		if recs[i].ArrivalNs != recs[j].ArrivalNs {
			return recs[i].ArrivalNs < recs[j].ArrivalNs
		}
		return recs[i].Seq < recs[j].Seq
	})
	var out [][]traces.Record
	at := map[int64]int{}
	for _, r := range recs {
		if r.Session == 0 {
			out = append(out, []traces.Record{r})
			continue
		}
		i, ok := at[r.Session]
		if !ok {
			i = len(out)
			at[r.Session] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], r)
	}
	return out
}

// exportAgent is one chain of calls in a session: the main agent (every
// call without a parent, and their continuations) or a subagent a call
// spawned.
type exportAgent struct {
	calls   []int // indexes into the group, in arrival order
	spawner int   // the call that spawned it; -1 for the main agent
}

// splitAgents splits a session (in arrival order) into agents. A call's
// continuation is its latest child (by arrival, then turn, then seq): the
// agent's next call; every other child starts a subagent. Calls without a
// parent all belong to the main agent (agent 0), or with separateRoots each
// starts an agent of its own (spawner −1). agentOf maps a call to its
// agent.
func splitAgents(recs []traces.Record, separateRoots bool) (agents []exportAgent, agentOf []int) {
	idx := make(map[int64]int, len(recs))
	for i := range recs {
		idx[recs[i].Seq] = i
	}
	parent := make([]int, len(recs))
	cont := make([]int, len(recs))
	for i := range cont {
		cont[i] = -1
	}
	later := func(a, b int) bool { // a after b as a child
		ra, rb := &recs[a], &recs[b]
		if ra.ArrivalNs != rb.ArrivalNs {
			return ra.ArrivalNs > rb.ArrivalNs
		}
		if ra.Turn != rb.Turn {
			return ra.Turn > rb.Turn
		}
		return ra.Seq > rb.Seq
	}
	for i := range recs {
		parent[i] = -1
		if p, ok := idx[recs[i].ParentSeq]; ok && recs[i].ParentSeq >= 0 && p < i {
			parent[i] = p
			if cont[p] < 0 || later(i, cont[p]) {
				cont[p] = i
			}
		}
	}
	agentOf = make([]int, len(recs))
	for i := range recs {
		p := parent[i]
		switch {
		case p < 0:
			// The first call in arrival order has no parent here, so the
			// main agent is always agent 0.
			if len(agents) == 0 || separateRoots {
				agents = append(agents, exportAgent{spawner: -1})
				agentOf[i] = len(agents) - 1
			} else {
				agentOf[i] = 0
			}
		case cont[p] == i:
			agentOf[i] = agentOf[p]
		default:
			agents = append(agents, exportAgent{spawner: p})
			agentOf[i] = len(agents) - 1
		}
		agents[agentOf[i]].calls = append(agents[agentOf[i]].calls, i)
	}
	return agents, agentOf
}

// appendHashIDs appends a line's hash_ids field, ids as a JSON array
// (Mooncake lines, the line formats that carry it, kv-cache-tester calls).
func appendHashIDs(b []byte, ids []int64) []byte {
	b = append(b, `, "hash_ids": [`...)
	for j, id := range ids {
		if j > 0 {
			b = append(b, ", "...)
		}
		b = strconv.AppendInt(b, id, 10)
	}
	return append(b, ']')
}

// appendDecimal appends v / 10^scale as a decimal with no trailing zeros
// (exact: 1500000 at scale 6 is "1.5").
func appendDecimal(b []byte, v int64, scale int) []byte {
	if v < 0 {
		b = append(b, '-')
		if v == math.MinInt64 {
			v = math.MaxInt64 // unreachable for times; never overflows
		} else {
			v = -v
		}
	}
	p := int64(1)
	for i := 0; i < scale; i++ {
		p *= 10
	}
	b = strconv.AppendInt(b, v/p, 10)
	frac := v % p
	if frac == 0 {
		return b
	}
	digits := strconv.FormatInt(frac, 10)
	for len(digits) < scale {
		digits = "0" + digits
	}
	for digits[len(digits)-1] == '0' {
		digits = digits[:len(digits)-1]
	}
	return append(append(b, '.'), digits...)
}

// lostPrefixKinds counts a row's warm prefix (system and tool tokens) and
// input kinds in formats that hold neither.
func lostPrefixKinds(t *importTally, r *traces.Record, format string) {
	if r.SystemTokens > 0 || r.ToolTokens > 0 {
		t.add("%d rows' warm prefix (system_tokens, tool_tokens) not representable in "+format, 1)
	}
	if r.InputKinds != "" {
		t.add("%d rows' input kinds (tool results) not representable in "+format, 1)
	}
}
