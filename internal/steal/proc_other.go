//go:build !linux

package steal

// ForProcess is nil off Linux: there is no /proc/stat to read.
func ForProcess() *Source { return nil }
