package closeonce

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// TestCloser: the close function runs once, on Close or on the context's
// end, whichever comes first, and every Close returns its error.
func TestCloser(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		why         string
		cancelFirst bool
	}{
		{"Close before the context ends runs it once, and the context's end later does not run it again.", false},
		{"The context's end runs it; a later Close returns the same error without running it again.", true},
	} {
		var runs atomic.Int32
		do := func() error { runs.Add(1); return boom }
		ctx, cancel := context.WithCancel(context.Background())
		var c Closer
		c.Watch(ctx, do)
		if tc.cancelFirst {
			cancel()
			for deadline := time.Now().Add(5 * time.Second); runs.Load() == 0 && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond)
			}
		}
		if err := c.Close(do); err != boom {
			t.Errorf("%s Close = %v, want boom", tc.why, err)
		}
		if err := c.Close(do); err != boom {
			t.Errorf("%s a second Close = %v, want boom", tc.why, err)
		}
		cancel()
		time.Sleep(10 * time.Millisecond)
		if n := runs.Load(); n != 1 {
			t.Errorf("%s ran %d times, want once", tc.why, n)
		}
	}
}
