//go:build !linux

package replay

// tuneGC leaves the collector alone off Linux (see gctune_linux.go).
func tuneGC() (restore func()) { return func() {} }
