// Package closeonce closes a server once: when its Close is called, or
// when the context it was started with ends, whichever comes first (the
// simulator's fleet endpoint and each engine).
package closeonce

import (
	"context"
	"sync"
)

// Closer runs a close function once and keeps its error. The zero value
// closes only on Close.
type Closer struct {
	once    sync.Once
	err     error
	unwatch func() bool
}

// Watch makes ctx's end close with do. Call it once, before anything else
// can call Close.
func (c *Closer) Watch(ctx context.Context, do func() error) {
	c.unwatch = context.AfterFunc(ctx, func() { c.run(do) })
}

// Close runs do unless it ran already, stops watching the context, and
// returns do's error, the same every time.
func (c *Closer) Close(do func() error) error {
	if c.unwatch != nil {
		c.unwatch()
	}
	return c.run(do)
}

func (c *Closer) run(do func() error) error {
	c.once.Do(func() { c.err = do() })
	return c.err
}
