package replay

import (
	"sync"
	"testing"

	"github.com/tokentrace/tokentrace/traces"
)

// TestRowsChunks: rows added across several chunks come back in order,
// whole (flat) and as the journal reads them (since); a chunk, once made,
// never moves (a view taken before later adds still reads the same rows);
// taken chunks put back go before the rows added since; reused chunks
// take the rows to come.
func TestRowsChunks(t *testing.T) {
	var s rows
	add := func(from, to int) {
		for i := from; i < to; i++ {
			rec := traces.Record{Seq: int64(i)}
			s.add(&rec)
		}
	}
	seqs := func(chunks [][]traces.Record) []int64 {
		var out []int64
		for _, c := range chunks {
			for _, r := range c {
				out = append(out, r.Seq)
			}
		}
		return out
	}
	want := func(what string, got []int64, from, to int) {
		t.Helper()
		if len(got) != to-from {
			t.Fatalf("%s: %d rows, want %d", what, len(got), to-from)
		}
		for i, v := range got {
			if v != int64(from+i) {
				t.Fatalf("%s: row %d is seq %d, want %d", what, i, v, from+i)
			}
		}
	}
	add(0, recChunk+10)
	first := &s.chunks[0][0]
	view := s.since(recChunk - 5)
	add(recChunk+10, 3*recChunk)
	if &s.chunks[0][0] != first {
		t.Fatal("a chunk moved when rows were added")
	}
	want("view taken before adds", seqs(view), recChunk-5, recChunk+10)
	want("since", seqs(s.since(7)), 7, 3*recChunk)
	if s.n != 3*recChunk || count(s.chunks) != s.n {
		t.Fatalf("n %d, rows in chunks %d", s.n, count(s.chunks))
	}

	taken := s.take()
	add(3*recChunk, 3*recChunk+3)
	s.putBack(taken)
	want("put back", seqs(s.since(0)), 0, 3*recChunk+3)

	s.take()
	s.reuse(taken)
	if len(s.spare) != len(taken) {
		t.Fatalf("%d spare chunks, want %d", len(s.spare), len(taken))
	}
	add(0, 2)
	if &s.chunks[0][0] != &taken[len(taken)-1][:1][0] {
		t.Error("a new chunk was made while a reused one was spare")
	}
	want("flat", seqs([][]traces.Record{s.flat()}), 0, 2)
	if s.n != 0 || s.flat() != nil {
		t.Error("flat did not empty the rows")
	}
}

// TestReqStack: what any number of goroutines push comes out of takeAll
// once each, and pushChain pushes a whole list.
func TestReqStack(t *testing.T) {
	var s reqStack
	const per, gs = 1000, 4
	var wg sync.WaitGroup
	for range gs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				s.push(&loopReq{})
			}
		}()
	}
	got := 0
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for finished := false; !finished; {
		select {
		case <-done:
			finished = true
		default:
		}
		for q := s.takeAll(); q != nil; q = q.next {
			got++
		}
	}
	if got != per*gs {
		t.Fatalf("took %d requests, pushed %d", got, per*gs)
	}
	a, b, c := &loopReq{}, &loopReq{}, &loopReq{}
	a.next, b.next = b, c
	s.push(&loopReq{})
	s.pushChain(a, c)
	n := 0
	for q := s.takeAll(); q != nil; q = q.next {
		n++
	}
	if n != 4 {
		t.Fatalf("%d requests after pushing a chain of 3 onto 1", n)
	}
}
