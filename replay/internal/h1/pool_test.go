package h1

import (
	"sync"
	"testing"
)

// TestIdleStackConcurrent pushes and pops from several goroutines at once:
// every connection pushed is popped exactly once, the count ends at zero,
// and a single goroutine gets the newest connection first.
func TestIdleStackConcurrent(t *testing.T) {
	var s idleStack
	a, b := &conn{}, &conn{}
	s.push(a)
	s.push(b)
	if got := s.pop(); got != b {
		t.Fatalf("popped %p, want the newest %p", got, b)
	}
	if got := s.pop(); got != a || s.pop() != nil || s.len() != 0 {
		t.Fatalf("second pop %p (want %p), then the stack should be empty (len %d)", got, a, s.len())
	}

	const workers, per = 8, 2000
	var mu sync.Mutex
	popped := map[*conn]int{}
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := make([]*conn, per)
			for i := range mine {
				mine[i] = &conn{}
				s.push(mine[i])
				if i%3 == 0 {
					if c := s.pop(); c != nil {
						mu.Lock()
						popped[c]++
						mu.Unlock()
					}
				}
			}
		}()
	}
	wg.Wait()
	for c := s.pop(); c != nil; c = s.pop() {
		popped[c]++
	}
	if len(popped) != workers*per {
		t.Errorf("%d distinct connections popped, want %d", len(popped), workers*per)
	}
	for _, n := range popped {
		if n != 1 {
			t.Fatalf("a connection was popped %d times", n)
		}
	}
	if s.len() != 0 {
		t.Errorf("len %d after popping everything", s.len())
	}
}
