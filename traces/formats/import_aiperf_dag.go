package formats

import (
	"encoding/json"
	"io"
	"math"
	"sort"

	"github.com/tokentrace/tokentrace/internal/intern"
	"github.com/tokentrace/tokentrace/traces"
)

// NewAIPerfDAGReader reads AIPerf's DAG conversation files
// (--custom-dataset-type dag_jsonl or --graph-format dag_jsonl; schema in
// ai-dynamo/aiperf src/aiperf/dataset/loader/dag_jsonl_models.py and
// docs/benchmark-modes/dag.md @ 05440a0): one conversation per line,
//
//	{"session_id", "turns": [{"messages", "model", "max_tokens", "delay" (ms),
//	   "forks": [id | {"child", "background"}], "spawns": [id | {"children", "join_at"}]}],
//	 "pre_session_spawns": [id], "context_mode",
//	 "orchestrator": true, "spawns": [id], "rounds": N | [{"spawns", "think_time_ms"}], "think_time_ms"}
//
// A FORK child starts from its parent's history (prompt and reply); a SPAWN
// child starts fresh and the parent waits for it at join_at (a bare id: the
// next turn); an orchestrator sends nothing and fires its children, round
// after round (each round waits for all of the previous round's children).
// The file is read whole when it is opened (children may come before their
// parents); the importer holds a small entry per turn, never the text.
//
// Every turn that sends a request becomes a Record:
//   - Session: a root conversation (one no other names as a child) and all
//     its descendants, numbered from 1 in file order; Turn: the turn's
//     place in its own conversation, from 1.
//   - InputTokens: the prompt the turn sends, counted from the message
//     text at ChatBytesPerToken bytes per token (the format has no token
//     counts; said in a note): the turn's own messages plus, by AIPerf's
//     default context mode, the conversation's earlier messages and replies
//     (max_tokens each) and a FORK child's inherited history;
//     context_mode "message_array_with_responses" sends each turn's
//     messages alone. OutputTokens: max_tokens (0 when absent, noted).
//     Model: model.
//   - ParentSeq: the conversation's previous turn; a child's first turn:
//     the turn that forked or spawned it (none for pre_session_spawns and
//     an orchestrator's children). AfterSeqs: at a join, the previous turn
//     and the last turn of every child joined there; a later round's first
//     turns: the last turns of the previous round.
//   - ThinkNs: delay (a round's think_time_ms for its children).
//   - ArrivalNs: the file has no times: the earliest each call could be
//     sent if every reply were instant (its dependencies' arrival plus its
//     delay), so open-loop replay bunches calls up; replay with --sessions
//     closed.
//
// A line is malformed (skipped, *RowError) when it is not a conversation
// object or a count is negative; a session_id that repeats, a child that
// names no conversation, or a cycle makes the conversations involved
// single calls without links, counted in a note. Malformed lines are
// reported before any row.
func NewAIPerfDAGReader(r io.Reader, name string, o traces.OpenOptions) (traces.Reader, error) {
	d := &dagDecoder{name: name, byID: map[string]int{}}
	d.errs = readObjectLines(r, o, name, &d.line, d.parse)
	d.build()
	return newImportReader(r, d, traces.NewMeta(importSource("aiperf-dag", name)), o), nil
}

type dagLine struct {
	SessionID        string          `json:"session_id"`
	Turns            []dagLineTurn   `json:"turns"`
	Orchestrator     bool            `json:"orchestrator"`
	Spawns           []string        `json:"spawns"`
	Rounds           json.RawMessage `json:"rounds"`
	ThinkTimeMs      *json.Number    `json:"think_time_ms"`
	ContextMode      string          `json:"context_mode"`
	PreSessionSpawns []string        `json:"pre_session_spawns"`
}

type dagLineTurn struct {
	Messages  []chatMessage     `json:"messages"`
	Model     string            `json:"model"`
	MaxTokens *json.Number      `json:"max_tokens"`
	Delay     *json.Number      `json:"delay"`
	Forks     []json.RawMessage `json:"forks"`
	Spawns    []json.RawMessage `json:"spawns"`
}

// dagTurn is what the importer keeps of a turn.
type dagTurn struct {
	own      int64 // tokens of its own messages
	out      int32
	model    string
	delayNs  int64
	hasDelay bool
	noOut    bool
}

// dagBranch is a child conversation started by a turn.
type dagBranch struct {
	child  string
	fork   bool // inherits the parent's history
	joinAt int  // the parent's turn that waits for it; -1 = none
}

type dagConv struct {
	id         string
	line       int64
	turns      []dagTurn
	branches   [][]dagBranch // per turn
	pre        []string
	orch       bool
	rounds     [][]string // orchestrator rounds (one round when not gated)
	roundThink []int64
	isolated   bool // message_array_with_responses
	hasParent  bool
}

type dagDecoder struct {
	heldRows[traces.Record]
	name     string
	line     int64
	convs    []*dagConv
	byID     map[string]int
	models   intern.Strings
	tally    importTally
	sessions int64
}

func (d *dagDecoder) notes() []traces.Text { return d.tally.notes() }

func (d *dagDecoder) next(rec *traces.Record) error {
	row, err := d.take()
	if err == nil {
		*rec = row
	}
	return err
}

// dagMs parses milliseconds into nanoseconds (absent = 0).
func dagMs(n *json.Number) (int64, error) {
	if n == nil {
		return 0, nil
	}
	return parseScaled(string(*n), 6)
}

func (d *dagDecoder) parse(line []byte) error {
	bad := func(format string, a ...any) error { return importRowError(d.name, d.line, format, a...) }
	var l dagLine
	if err := json.Unmarshal(line, &l); err != nil {
		return bad("not a DAG conversation: want {\"session_id\", \"turns\": [{\"messages\": [...], ...}]}")
	}
	if l.SessionID == "" {
		return bad("no \"session_id\"")
	}
	c := &dagConv{id: l.SessionID, line: d.line, orch: l.Orchestrator, pre: l.PreSessionSpawns,
		isolated: l.ContextMode == "message_array_with_responses"}
	for _, t := range l.Turns {
		own, ok := chatMessagesTokens(t.Messages)
		if !ok {
			return bad("a message's content is neither text nor a list of parts")
		}
		turn := dagTurn{own: own, model: d.models.Of(t.Model)}
		if t.MaxTokens != nil {
			v, err := parseCount(string(*t.MaxTokens))
			if err != nil {
				return bad("max_tokens: %v", err)
			}
			turn.out = v
		} else {
			turn.noOut = true
		}
		var err error
		if turn.delayNs, err = dagMs(t.Delay); err != nil {
			return bad("delay: %v", err)
		}
		turn.hasDelay = t.Delay != nil
		var br []dagBranch
		for _, f := range t.Forks {
			var id string
			if json.Unmarshal(f, &id) != nil {
				var obj struct {
					Child string `json:"child"`
				}
				if json.Unmarshal(f, &obj) != nil || obj.Child == "" {
					return bad("a forks entry is neither an id nor {\"child\": id}")
				}
				id = obj.Child
			}
			br = append(br, dagBranch{child: id, fork: true, joinAt: -1})
		}
		for _, s := range t.Spawns {
			var id string
			if json.Unmarshal(s, &id) == nil {
				br = append(br, dagBranch{child: id, joinAt: len(c.turns) + 1})
				continue
			}
			var obj struct {
				Children []string     `json:"children"`
				JoinAt   *json.Number `json:"join_at"`
			}
			if json.Unmarshal(s, &obj) != nil || len(obj.Children) == 0 {
				return bad("a spawns entry is neither an id nor {\"children\": [...], \"join_at\": N}")
			}
			at := len(c.turns) + 1
			if obj.JoinAt != nil {
				v, err := parseCount(string(*obj.JoinAt))
				if err != nil {
					return bad("join_at: %v", err)
				}
				at = int(v)
			}
			for _, ch := range obj.Children {
				br = append(br, dagBranch{child: ch, joinAt: at})
			}
		}
		c.turns = append(c.turns, turn)
		c.branches = append(c.branches, br)
	}
	if c.orch {
		think, err := dagMs(l.ThinkTimeMs)
		if err != nil {
			return bad("think_time_ms: %v", err)
		}
		var n int
		var list []struct {
			Spawns      []string     `json:"spawns"`
			ThinkTimeMs *json.Number `json:"think_time_ms"`
		}
		switch {
		case len(l.Rounds) == 0 || string(l.Rounds) == "null":
			c.rounds, c.roundThink = [][]string{l.Spawns}, []int64{0}
		case json.Unmarshal(l.Rounds, &n) == nil && n >= 0 && n <= 10000:
			for k := 0; k < n; k++ {
				c.rounds = append(c.rounds, l.Spawns)
				c.roundThink = append(c.roundThink, think)
			}
		case json.Unmarshal(l.Rounds, &list) == nil:
			for _, r := range list {
				t := think
				if r.ThinkTimeMs != nil {
					if t, err = dagMs(r.ThinkTimeMs); err != nil {
						return bad("think_time_ms: %v", err)
					}
				}
				c.rounds = append(c.rounds, r.Spawns)
				c.roundThink = append(c.roundThink, t)
			}
		default:
			return bad("rounds is neither a count nor a list of rounds")
		}
	} else if len(c.turns) == 0 {
		return bad("no turns")
	}
	if _, dup := d.byID[c.id]; dup {
		d.tally.add("%d conversations repeat an earlier session_id and were skipped", 1)
		return nil
	}
	d.byID[c.id] = len(d.convs)
	d.convs = append(d.convs, c)
	return nil
}

// dagCall is a call of a tree before seqs are given.
type dagCall struct {
	rec   traces.Record
	deps  []int // indexes of calls it waits for (first = its parent)
	order int
}

// build turns the conversations into Records, tree by tree.
func (d *dagDecoder) build() {
	d.markChildren()
	calls := 0
	for _, root := range d.convs {
		if root.hasParent {
			continue
		}
		t := dagTree{d: d, visiting: map[*dagConv]bool{}}
		t.walk(root, 0, nil, 0, 0)
		if len(t.calls) == 0 {
			continue
		}
		d.emit(t.calls, calls)
		d.sessions++
		calls += len(t.calls)
	}
	if calls > 0 {
		d.tally.add("the format has no token counts: the input of all %d calls was estimated from the message text at 4 bytes per token", int64(calls))
		d.tally.sayText(traces.Textf("the format has no times: arrivals are the earliest each call could go if replies were instant (replay with %s closed)", replaySessions))
	}
}

// child is the conversation named id, or nil.
func (d *dagDecoder) child(id string) *dagConv {
	if i, ok := d.byID[id]; ok {
		return d.convs[i]
	}
	return nil
}

// markChildren marks the conversations another one names as a child (the
// rest are the roots of trees) and counts the names of no conversation.
func (d *dagDecoder) markChildren() {
	missing := int64(0)
	for _, c := range d.convs {
		mark := func(id string) {
			if ch := d.child(id); ch != nil && ch != c {
				ch.hasParent = true
			} else if ch == nil {
				missing++
			}
		}
		for _, br := range c.branches {
			for _, b := range br {
				mark(b.child)
			}
		}
		for _, id := range c.pre {
			mark(id)
		}
		for _, r := range c.rounds {
			for _, id := range r {
				mark(id)
			}
		}
	}
	d.tally.add("%d children name no conversation in the file and were left out", missing)
}

// dagTree gathers the calls of one tree of conversations as walk emits
// them.
type dagTree struct {
	d        *dagDecoder
	calls    []dagCall
	visiting map[*dagConv]bool
}

// walk emits a conversation's turns; inherit is the FORK history, deps the
// calls its first turn waits for, think its first turn's think time when
// it is a round's. It returns the index of its last call (-1 when it sends
// nothing).
func (t *dagTree) walk(c *dagConv, inherit int64, deps []int, think int64, depth int) int {
	d := t.d
	if t.visiting[c] || depth > 64 {
		d.tally.add("%d conversations in a cycle (or nested deeper than 64) were cut from their parents", 1)
		return -1
	}
	t.visiting[c] = true
	defer func() { t.visiting[c] = false }()
	for _, id := range c.pre {
		if ch := d.child(id); ch != nil {
			t.walk(ch, 0, nil, 0, depth+1)
		}
	}
	if c.orch {
		t.walkRounds(c, deps, depth)
		return -1
	}
	acc := inherit
	prev := -1
	var joins map[int][]int // turn → children's last calls joined there
	for k, tu := range c.turns {
		r := traces.NewRecord()
		if c.isolated {
			acc = 0
		}
		acc += tu.own
		r.InputTokens = int32(min(acc, math.MaxInt32))
		r.OutputTokens = tu.out
		r.Model = tu.model
		r.Turn = int32(k + 1)
		r.ThinkNs = tu.delayNs
		var my []int
		if prev >= 0 {
			my = append(my, prev)
		} else {
			my = append(my, deps...)
			r.ThinkNs = think + min(tu.delayNs, math.MaxInt64-think)
			if len(deps) == 0 && think == 0 && !tu.hasDelay {
				r.ThinkNs = traces.NotReported // a root's first turn: nothing to think after
			}
		}
		my = append(my, joins[k]...)
		if tu.noOut {
			d.tally.add("%d turns without max_tokens were given 0 output tokens (the format leaves the length to the server)", 1)
		}
		t.calls = append(t.calls, dagCall{rec: r, deps: my, order: len(t.calls)})
		prev = len(t.calls) - 1
		acc += int64(tu.out)
		for _, b := range c.branches[k] {
			ch := d.child(b.child)
			if ch == nil {
				continue
			}
			in := int64(0)
			if b.fork {
				in = acc
			}
			last := t.walk(ch, in, []int{prev}, 0, depth+1)
			if b.joinAt > k && b.joinAt < len(c.turns) && last >= 0 {
				if joins == nil {
					joins = map[int][]int{}
				}
				joins[b.joinAt] = append(joins[b.joinAt], last)
			} else if !b.fork && last >= 0 {
				d.tally.add("%d spawns join at no later turn of their parent (join_at out of range): not joined", 1)
			}
		}
	}
	return prev
}

// walkRounds walks an orchestrator's rounds: each round's conversations
// wait for the last calls of the round before (the first round for deps).
func (t *dagTree) walkRounds(c *dagConv, deps []int, depth int) {
	prevLasts := deps
	for k, round := range c.rounds {
		var lasts []int
		for _, id := range round {
			if ch := t.d.child(id); ch != nil {
				if l := t.walk(ch, 0, prevLasts, c.roundThink[k], depth+1); l >= 0 {
					lasts = append(lasts, l)
				}
			}
		}
		if len(lasts) > 0 {
			prevLasts = lasts
		}
	}
}

// emit gives a tree's calls their arrivals, the earliest each call could
// go if replies were instant, then seqs in arrival order from first, and
// queues them as the next session's rows.
func (d *dagDecoder) emit(tree []dagCall, first int) {
	arr := make([]int64, len(tree))
	for i := range tree {
		at := int64(0)
		for _, j := range tree[i].deps {
			at = max(at, arr[j])
		}
		think := max(tree[i].rec.ThinkNs, 0)
		if at > math.MaxInt64-think {
			at = math.MaxInt64 - think
		}
		arr[i] = at + think
	}
	idx := make([]int, len(tree))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return arr[idx[a]] < arr[idx[b]] })
	seq := make([]int64, len(tree))
	for pos, i := range idx {
		seq[i] = int64(first + pos)
	}
	num := d.sessions + 1
	for _, i := range idx {
		c := &tree[i]
		c.rec.Session = num
		c.rec.ArrivalNs = arr[i]
		if len(c.deps) > 0 {
			c.rec.ParentSeq = seq[c.deps[0]]
			if len(c.deps) > 1 {
				for _, j := range c.deps {
					c.rec.AfterSeqs = append(c.rec.AfterSeqs, seq[j])
				}
			}
		}
		d.rows = append(d.rows, c.rec)
	}
}
