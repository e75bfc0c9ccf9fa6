//go:build !linux

package h1

import (
	"context"
	"errors"
	"time"
)

// Loop is Linux only (see loop_linux.go); elsewhere NewLoop fails and the
// caller keeps to Client.
type Loop struct{}

// NewLoop fails off Linux.
func (h *Client) NewLoop(context.Context, time.Duration, int) (*Loop, error) {
	return nil, errors.New("h1: loop: Linux only")
}

func (l *Loop) Start(time.Time)          {}
func (l *Loop) Inflight() int            { return 0 }
func (l *Loop) Send(*LoopJob) bool       { return false }
func (l *Loop) Wait(time.Duration, bool) {}
func (l *Loop) Abandon(error)            {}
func (l *Loop) Close()                   {}
func (l *Loop) Connects() int            { return 0 }
