// Command agentic writes a synthetic agentic trace for replay's
// closed-session benchmarks, as JSONL in arrival order, streaming (its
// memory follows the sessions under way, not their number): -sessions
// sessions starting at -rate per second, each a chain of main calls with
// think times (think_ns), where about a third of the main calls fan out
// into 2-3 subagents of 1-3 calls each (parent_seq) that the next main
// call joins (after_seqs). -chain sets the main chain's mean length; the
// default gives about 10 calls per session.
//
//	go run ./bench/agentic -sessions 1000000 -rate 200 > agentic.jsonl
package main

import (
	"bufio"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"time"

	"github.com/tokentrace/tokentrace/internal/minheap"
)

type call struct {
	at      int64 // arrival, ns
	sess    *session
	idx     int   // within the session
	parent  int   // local index, -1 for none
	after   []int // local indices
	thinkNs int64 // -1 for a session's first call
	in, out int
}

type session struct {
	id   int64
	seqs []int64 // global seq by local index, -1 until written
	left int     // calls not yet written
}

// callFirst orders the calls by their time, then session and index.
func callFirst(a, b **call) bool {
	x, y := *a, *b
	if x.at != y.at {
		return x.at < y.at
	}
	if x.sess.id != y.sess.id {
		return x.sess.id < y.sess.id
	}
	return x.idx < y.idx
}

func main() {
	n := flag.Int("sessions", 1000, "sessions")
	rate := flag.Float64("rate", 100, "session starts per second")
	calls := flag.Int("chain", 7, "mean length of a session's main chain (subagents come on top)")
	service := flag.Duration("service", 2*time.Second, "recorded time a call takes (placed between a call and its follow-up's arrival)")
	seed := flag.Uint64("seed", 1, "random seed")
	flag.Parse()
	rng := rand.New(rand.NewPCG(*seed, 11))
	w := bufio.NewWriterSize(os.Stdout, 1<<20)
	defer w.Flush()
	var h []*call // a min-heap by callFirst
	var seq int64
	var line []byte
	emit := func(c *call) {
		s := c.sess
		s.seqs[c.idx] = seq
		line = append(line[:0], `{"seq":`...)
		line = strconv.AppendInt(line, seq, 10)
		line = append(line, `,"session":`...)
		line = strconv.AppendInt(line, s.id, 10)
		line = append(line, `,"arrival_ns":`...)
		line = strconv.AppendInt(line, c.at, 10)
		line = append(line, `,"input_tokens":`...)
		line = strconv.AppendInt(line, int64(c.in), 10)
		line = append(line, `,"output_tokens":`...)
		line = strconv.AppendInt(line, int64(c.out), 10)
		if c.parent >= 0 {
			line = append(line, `,"parent_seq":`...)
			line = strconv.AppendInt(line, s.seqs[c.parent], 10)
		}
		if len(c.after) > 0 {
			line = append(line, `,"after_seqs":[`...)
			for i, a := range c.after {
				if i > 0 {
					line = append(line, ',')
				}
				line = strconv.AppendInt(line, s.seqs[a], 10)
			}
			line = append(line, ']')
		}
		if c.thinkNs >= 0 {
			line = append(line, `,"think_ns":`...)
			line = strconv.AppendInt(line, c.thinkNs, 10)
		}
		line = append(line, "}\n"...)
		w.Write(line)
		seq++
		if s.left--; s.left == 0 {
			s.seqs = nil
		}
	}
	svc := int64(*service)
	var start float64
	for id := int64(1); id <= int64(*n); id++ {
		start += rng.ExpFloat64() / *rate
		at := int64(start * 1e9)
		// Everything before this session's start is final: write it.
		for len(h) > 0 && h[0].at < at {
			emit(minheap.Pop(&h, callFirst))
		}
		s := &session{id: id}
		var cs []*call
		add := func(at int64, parent int, after []int, think int64) *call {
			c := &call{at: at, sess: s, idx: len(cs), parent: parent, after: after, thinkNs: think,
				in: 200 + rng.IntN(2000), out: 4 + rng.IntN(60)}
			cs = append(cs, c)
			return c
		}
		think := func() int64 { return int64(time.Duration(200+rng.IntN(3000)) * time.Millisecond) }
		prev := add(at, -1, nil, -1)
		for len(cs) < 2**calls-3 && (len(cs) < 2 || rng.IntN(*calls) != 0) {
			if rng.IntN(3) == 0 {
				join := []int{prev.idx}
				last := prev.at
				for range 2 + rng.IntN(2) {
					t := think()
					c := add(prev.at+svc+t, prev.idx, nil, t)
					for range rng.IntN(3) {
						t := think()
						c = add(c.at+svc+t, c.idx, nil, t)
					}
					join = append(join, c.idx)
					last = max(last, c.at)
				}
				t := think()
				prev = add(last+svc+t, -1, join, t)
				continue
			}
			t := think()
			prev = add(prev.at+svc+t, prev.idx, nil, t)
		}
		s.seqs = make([]int64, len(cs))
		s.left = len(cs)
		for _, c := range cs {
			minheap.Push(&h, c, callFirst)
		}
	}
	for len(h) > 0 {
		emit(minheap.Pop(&h, callFirst))
	}
	fmt.Fprintf(os.Stderr, "agentic: %d sessions, %d calls\n", *n, seq)
}
