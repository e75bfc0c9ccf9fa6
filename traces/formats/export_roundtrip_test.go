package formats_test

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/traces"
	"github.com/tokentrace/tokentrace/traces/formats"
)

// roundTripAgentic is a trace with an agentic session (a main chain whose
// first call spawns two subagents, one of two calls, that the main chain's
// next call joins) and a plain chat session starting later. Think times are
// explicit, finish times known, and no call starts before a call it waits
// for ends (so timing-based formats can see the graph).
func roundTripAgentic() ([]traces.Record, traces.Meta) {
	nr := int64(traces.NotReported)
	type c struct {
		seq, session, arrivalMs, finishMs, thinkMs, parent int64
		after                                              []int64
		turn, in, out                                      int32
		model                                              string
	}
	calls := []c{
		{0, 1, 0, 2000, nr, nr, nil, 1, 1000, 50, "big"},
		{1, 2, 1000, 1500, nr, nr, nil, 1, 100, 10, "small"},
		{2, 1, 2500, 3500, 500, 0, nil, 2, 300, 20, "small"},           // subagent A
		{3, 1, 2600, 4200, 600, 0, nil, 3, 400, 30, "small"},           // subagent B
		{4, 2, 3000, 3200, 1500, 1, nil, 2, 160, 10, "small"},          // the chat's next turn
		{5, 1, 4000, 5000, 500, 2, nil, 4, 420, 10, "small"},           // A's second call
		{6, 1, 6000, 8000, 1000, 0, []int64{5, 3}, 5, 1250, 40, "big"}, // the join: waits for A and B
		{7, 1, 9000, 9500, 1000, 6, nil, 6, 1350, 5, "big"},
	}
	var recs []traces.Record
	for _, x := range calls {
		r := traces.NewRecord()
		r.Seq, r.Session, r.Turn = x.seq, x.session, x.turn
		r.ArrivalNs, r.FinishNs = x.arrivalMs*1e6, x.finishMs*1e6
		if x.thinkMs >= 0 {
			r.ThinkNs = x.thinkMs * 1e6
		}
		r.ParentSeq, r.AfterSeqs = x.parent, x.after
		r.InputTokens, r.OutputTokens, r.Model = x.in, x.out, x.model
		recs = append(recs, r)
	}
	return recs, traces.NewMeta("test:agentic")
}

// exportT exports a copy of recs with m as format and returns the file and
// the export's loss notes.
func exportT(t *testing.T, format string, recs []traces.Record, m traces.Meta) (*bytes.Buffer, []string) {
	t.Helper()
	var buf bytes.Buffer
	var lost []string
	if _, err := formats.Export(context.Background(), format, &buf, traces.NewSliceReader(slices.Clone(recs), m),
		with(formats.DefaultExportOptions(), func(o *formats.ExportOptions) { o.Lost = func(s traces.Text) { lost = append(lost, s.String()) } })); err != nil {
		t.Fatal(err)
	}
	return &buf, lost
}

// peerTrace is one trace a peer tool's reader is tried on.
type peerTrace struct {
	name string
	recs []traces.Record
	m    traces.Meta
}

// peerTraces are the agentic fixture (kv-cache-tester's trace_0291), the
// test's own agentic trace and the plain one.
func peerTraces(t *testing.T) []peerTrace {
	w291, wm, _ := importAllT(t, "weka", publicTraces+"weka_trace_0291.json", true)
	agentic, am := roundTripAgentic()
	plain, pm := roundTripPlain()
	return []peerTrace{{"trace_0291", w291, wm}, {"agentic", agentic, am}, {"plain", plain, pm}}
}

// roundTripPlain is a plain trace: independent requests at nanosecond
// arrivals with prefix blocks of 16 tokens (shared prefixes included).
func roundTripPlain() ([]traces.Record, traces.Meta) {
	var recs []traces.Record
	next := int64(100)
	for i := 0; i < 40; i++ {
		r := traces.NewRecord()
		r.Seq = int64(i)
		r.ArrivalNs = int64(i)*123_456_789 + int64(i%7)*1000 + 300*int64(i%3)
		r.InputTokens = int32(17 + 29*(i%11))
		r.OutputTokens = int32(1 + 13*(i%5))
		nb := (int(r.InputTokens) + 15) / 16
		for b := 0; b < nb; b++ {
			if b < 2 && i%3 == 0 { // a shared two-block prefix on every third row
				r.PrefixBlocks = append(r.PrefixBlocks, int64(b+1))
			} else {
				r.PrefixBlocks = append(r.PrefixBlocks, next)
				next++
			}
		}
		recs = append(recs, r)
	}
	m := traces.NewMeta("test:plain")
	m.BlockSize = 16
	return recs, m
}

// rtCall is a call in a comparable form: times relative to its session's
// first arrival, links as indexes in its session's arrival order.
type rtCall struct {
	abs                    int64 // arrival in the trace
	arrival, finish, think int64
	wait                   int64 // arrival − the latest finish among its deps; -1 without deps
	in, out                int32
	model                  string
	parent                 int
	deps                   []int // every dependency, sorted
	reduced                []int // deps without those implied through another
	blocks                 []int // prefix blocks renumbered by first appearance in the trace
}

// rtCanon groups records by session (order of first arrival; a row without
// a session is a group of its own) in arrival order.
func rtCanon(recs []traces.Record) [][]rtCall {
	groups := formats.SessionGroups(slices.Clone(recs))
	blockIDs := map[int64]int{}
	var out [][]rtCall
	for _, g := range groups {
		idx := map[int64]int{}
		for i, r := range g {
			idx[r.Seq] = i
		}
		var calls []rtCall
		for _, r := range g {
			c := rtCall{abs: r.ArrivalNs, arrival: r.ArrivalNs - g[0].ArrivalNs, finish: -1, think: r.ThinkNs, in: r.InputTokens, out: r.OutputTokens, model: r.Model, parent: -1}
			if r.FinishNs >= 0 {
				c.finish = r.FinishNs - g[0].ArrivalNs
			}
			if p, ok := idx[r.ParentSeq]; ok && r.ParentSeq >= 0 {
				c.parent = p
			}
			seen := map[int]bool{}
			for _, s := range append(slices.Clone(r.AfterSeqs), r.ParentSeq) {
				if j, ok := idx[s]; ok && s >= 0 && !seen[j] {
					seen[j] = true
					c.deps = append(c.deps, j)
				}
			}
			sort.Ints(c.deps)
			c.wait = -1
			if len(c.deps) > 0 {
				latest := int64(-1)
				for _, d := range c.deps {
					latest = max(latest, g[d].FinishNs)
				}
				if latest >= 0 {
					c.wait = r.ArrivalNs - latest
				}
			}
			for _, b := range r.PrefixBlocks {
				if _, ok := blockIDs[b]; !ok {
					blockIDs[b] = len(blockIDs)
				}
				c.blocks = append(c.blocks, blockIDs[b])
			}
			calls = append(calls, c)
		}
		// Transitive reduction of the dependencies.
		var reach func(from, to int, depth int) bool
		reach = func(from, to int, depth int) bool { // to is reachable from from through deps
			for _, d := range calls[from].deps {
				if d == to || (depth < len(calls) && reach(d, to, depth+1)) {
					return true
				}
			}
			return false
		}
		for i := range calls {
			for _, d := range calls[i].deps {
				implied := false
				for _, e := range calls[i].deps {
					if e != d && reach(e, d, 0) {
						implied = true
					}
				}
				if !implied {
					calls[i].reduced = append(calls[i].reduced, d)
				}
			}
		}
		out = append(out, calls)
	}
	return out
}

// rtFields names what a format carries; each is compared after the trip.
type rtFields struct {
	groups   bool  // sessions (else every row is compared in one flat list)
	arrival  int64 // resolution in ns (0 = not carried)
	finish   bool
	think    bool
	subThink bool  // a subagent's first think time too
	wait     int64 // each call's wait after its latest dependency, to this many ns (0 = not compared)
	model    bool
	deps     string // "exact", "reduced" (timing formats), "chain" (parent = previous call) or ""
	blocks   bool
}

// Round trips: tokentrace → FORMAT → tokentrace equals the original on
// every field FORMAT carries, for the agentic trace (fan-out and joins)
// and the plain one; what it cannot carry is said in the export's notes.
func TestExportRoundTrips(t *testing.T) {
	agentic, am := roundTripAgentic()
	plain, pm := roundTripPlain()
	for _, tc := range []struct {
		name, format string
		agentic      bool
		carried      rtFields
		notes        []string // phrases the loss notes must contain
	}{
		{"weka nests subagents after the call that spawned them; joins and session offsets are lost.", "weka", true,
			rtFields{groups: true, arrival: 1, finish: true, think: true, model: true, deps: "parents"},
			[]string{"2 join dependencies not representable in weka", "1 session start offsets", "2 think times of a subagent's first call"}},
		{"aiperf-dag keeps sessions, parents, joins, think times and counts; arrivals are lower bounds.", "aiperf-dag", true,
			rtFields{groups: true, think: true, subThink: true, model: true, deps: "exact"},
			[]string{"8 arrival times (AIPerf's DAG has delays only", "8 finish times not representable"}},
		{"inference-perf keeps the graph up to transitivity and each call's wait after its dependencies (spans laid out anew).", "inference-perf", true,
			rtFields{groups: true, wait: 1e6, model: true, deps: "reduced"},
			[]string{"2 sessions' span times were laid out anew"}},
		{"aiperf keeps every call's prompt as AIPerf sends it and its arrival; each agent chain is a session of its own.", "aiperf", true,
			rtFields{arrival: 1},
			[]string{"2 calls whose prompt does not hold their parent's prompt and reply (subagents, compactions) start an AIPerf session of their own", "1 joins not representable in aiperf", "8 rows' model not representable in aiperf"}},
		{"sglang-agentic keeps each agent chain's counts, not times.", "sglang-agentic", true,
			rtFields{},
			[]string{"8 arrival times", "2 subagent links"}},
		{"vllm keeps arrivals and counts of the agentic trace, nothing of its sessions.", "vllm", true,
			rtFields{arrival: 1}, []string{"8 rows' session and turn not representable in vllm", "6 parent links not representable in vllm"}},
		{"vllm keeps a plain trace whole: arrivals to the ns, counts and blocks.", "vllm", false,
			rtFields{arrival: 1, blocks: true}, []string{"hash_ids are 16-token blocks"}},
		{"guidellm keeps a plain trace whole.", "guidellm", false,
			rtFields{arrival: 1, blocks: true}, nil},
		{"aiperf keeps a plain trace whole (hash_ids of the trace's block size).", "aiperf", false,
			rtFields{arrival: 1, blocks: true}, nil},
		{"mooncake keeps a plain trace to the ms; its 16-token blocks are re-cut to Mooncake's 512.", "mooncake", false,
			rtFields{arrival: 1e6}, []string{"hash_ids re-cut from the trace's 16-token blocks to 512-token blocks"}},
		{"azure keeps arrivals (to 100 ns, from the first row) and counts.", "azure", false,
			rtFields{arrival: 100}, []string{"rows' prefix blocks and categories not representable in azure"}},
		{"weka keeps a plain trace's counts and blocks; each row is a conversation at 0.", "weka", false,
			rtFields{groups: true, blocks: true}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recs, m := plain, pm
			if tc.agentic {
				recs, m = agentic, am
			}
			buf, lost := exportT(t, tc.format, recs, m)
			in := tc.format
			if in == "mooncake" {
				in = "mooncake"
			}
			back, _, err := importStringT(t, in, "trip", buf.String(), true)
			if err != nil {
				t.Fatalf("import %s: %v\n%s", in, err, buf.String())
			}
			rtCompare(t, rtCanon(recs), rtCanon(back), tc.carried, tc.format)
			notes := strings.Join(lost, "\n")
			for _, n := range tc.notes {
				if !strings.Contains(notes, n) {
					t.Errorf("loss notes lack %q:\n%s", n, notes)
				}
			}
		})
	}
}

// rtCompare checks the fields f names.
func rtCompare(t *testing.T, want, got [][]rtCall, f rtFields, format string) {
	t.Helper()
	flat := func(gs [][]rtCall) [][]rtCall {
		if f.groups {
			return gs
		}
		var all []rtCall
		for _, g := range gs {
			all = append(all, g...)
		}
		sort.SliceStable(all, func(i, j int) bool { return all[i].abs < all[j].abs })
		for i := range all {
			all[i].arrival = all[i].abs
		}
		return [][]rtCall{all}
	}
	if format == "sglang-agentic" {
		// One conversation per agent chain: compare the counts of every
		// call, in any grouping.
		var w, g []string
		for _, gr := range want {
			for _, c := range gr {
				w = append(w, fmt.Sprintf("%d/%d", c.in, c.out))
			}
		}
		for _, gr := range got {
			for _, c := range gr {
				g = append(g, fmt.Sprintf("%d/%d", c.in, c.out))
			}
		}
		sort.Strings(w)
		sort.Strings(g)
		if !reflect.DeepEqual(w, g) {
			t.Errorf("counts %v, want %v", g, w)
		}
		return
	}
	want, got = flat(want), flat(got)
	if len(want) != len(got) {
		t.Fatalf("%d groups, want %d", len(got), len(want))
	}
	var baseW, baseG int64
	if !f.groups && len(want) > 0 && len(want[0]) > 0 {
		baseW, baseG = want[0][0].arrival, got[0][0].arrival
	}
	for gi := range want {
		if len(want[gi]) != len(got[gi]) {
			t.Fatalf("group %d: %d calls, want %d", gi, len(got[gi]), len(want[gi]))
		}
		for i := range want[gi] {
			w, g := want[gi][i], got[gi][i]
			where := fmt.Sprintf("group %d call %d", gi, i)
			if w.in != g.in || w.out != g.out {
				t.Errorf("%s: tokens %d/%d, want %d/%d", where, g.in, g.out, w.in, w.out)
			}
			if f.arrival > 0 {
				if d := (g.arrival - baseG) - (w.arrival - baseW); d < -f.arrival/2 || d > f.arrival/2 {
					t.Errorf("%s: arrival %d, want %d (to %d ns)", where, g.arrival-baseG, w.arrival-baseW, f.arrival)
				}
			}
			if f.finish && w.finish != g.finish {
				if d := g.finish - w.finish; f.arrival <= 1 || d < -f.arrival/2 || d > f.arrival/2 {
					t.Errorf("%s: finish %d, want %d", where, g.finish, w.finish)
				}
			}
			if f.think && w.think != g.think {
				// A subagent's first call: only formats with subThink keep it.
				if !(f.subThink == false && g.think == traces.NotReported && w.parent >= 0 && isSubagentStart(want[gi], i)) {
					t.Errorf("%s: think %d, want %d", where, g.think, w.think)
				}
			}
			if d := g.wait - w.wait; f.wait > 0 && (d < -f.wait/2 || d > f.wait/2) {
				t.Errorf("%s: wait %d, want %d (to %d ns)", where, g.wait, w.wait, f.wait)
			}
			if f.model && w.model != g.model {
				t.Errorf("%s: model %q, want %q", where, g.model, w.model)
			}
			if f.blocks && !reflect.DeepEqual(w.blocks, g.blocks) {
				t.Errorf("%s: blocks %v, want %v", where, g.blocks, w.blocks)
			}
			switch f.deps {
			case "exact":
				if !reflect.DeepEqual(w.deps, g.deps) || w.parent != g.parent {
					t.Errorf("%s: parent %d deps %v, want %d %v", where, g.parent, g.deps, w.parent, w.deps)
				}
			case "parents":
				if w.parent != g.parent {
					t.Errorf("%s: parent %d, want %d", where, g.parent, w.parent)
				}
			case "reduced":
				if !reflect.DeepEqual(w.reduced, g.reduced) {
					t.Errorf("%s: direct deps %v, want %v", where, g.reduced, w.reduced)
				}
			case "chain-only":
				// Sessions are chains: each call follows the previous one.
				if i > 0 && g.parent != i-1 {
					t.Errorf("%s: parent %d, want the previous call", where, g.parent)
				}
			}
		}
	}
}

// isSubagentStart reports whether call i of a group starts a subagent:
// its parent has a later child (the parent chain's continuation).
func isSubagentStart(g []rtCall, i int) bool {
	p := g[i].parent
	for j := i + 1; j < len(g); j++ {
		if g[j].parent == p {
			return true
		}
	}
	return false
}

// Real upstream files survive a trip through their own format: the
// kv-cache-tester conversation with two subagents, inference-perf's fan-in
// trace and AIPerf's mixed DAG come back with the same calls, times,
// counts and links.
func TestExportRoundTripsUpstreamFiles(t *testing.T) {
	for _, tc := range []struct {
		format, file string
		carried      rtFields
	}{
		{"weka", "weka_trace_0291.json", rtFields{groups: true, arrival: 1, finish: true, think: true, model: true, deps: "exact", blocks: true}},
		{"inference-perf", "inference-perf_fan_in_dependencies.json", rtFields{groups: true, wait: 1e6, model: true, deps: "reduced"}},
		{"aiperf-dag", "aiperf_mixed_full.dag.jsonl", rtFields{groups: true, arrival: 1, think: true, subThink: true, model: true, deps: "exact"}},
		// The spine's rounds (every chain of a round waits for every chain
		// of the last) come back as spawns from one chain: those joins are
		// lost, and said.
		{"aiperf-dag", "aiperf_orchestrator_spine_per_round.dag.jsonl", rtFields{groups: true, think: true, subThink: true}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			recs, m, _ := importAllT(t, tc.format, publicTraces+tc.file, true)
			buf, lost := exportT(t, tc.format, recs, m)
			if tc.carried.deps == "" && !strings.Contains(strings.Join(lost, "\n"), "2 dependencies (a join on another call") {
				t.Errorf("the lost joins are not said: %q", lost)
			}
			back, _, err := importStringT(t, tc.format, "trip", buf.String(), true)
			if err != nil {
				t.Fatal(err)
			}
			rtCompare(t, rtCanon(recs), rtCanon(back), tc.carried, tc.format)
		})
	}
}
