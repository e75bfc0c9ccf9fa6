//go:build linux

package steal

import (
	"syscall"
	"unsafe"
)

// ForProcess is the steal of the CPUs this process may run on (its
// affinity: a replayer pinned with taskset counts its own cores only), or
// of the whole machine where the affinity cannot be read. It is nil where
// /proc/stat has no steal to read.
func ForProcess() *Source {
	s := &Source{Path: "/proc/stat", CPUs: affinity()}
	if _, err := s.Read(); err != nil {
		return nil
	}
	return s
}

// affinity lists the CPUs the calling thread may run on (nil when unknown).
func affinity() []int {
	var mask [1024 / 64]uint64
	n, _, e := syscall.RawSyscall(syscall.SYS_SCHED_GETAFFINITY, 0, unsafe.Sizeof(mask), uintptr(unsafe.Pointer(&mask[0])))
	if e != 0 {
		return nil
	}
	var cpus []int
	for i := 0; i < int(n)*8 && i < len(mask)*64; i++ {
		if mask[i/64]&(1<<(i%64)) != 0 {
			cpus = append(cpus, i)
		}
	}
	return cpus
}
