//go:build !linux

package h1

import "sync"

// lockNoPark is mu.Lock off Linux, where the dispatcher has no thread of its
// own (see nopark_linux.go).
func lockNoPark(mu *sync.Mutex) { mu.Lock() }
