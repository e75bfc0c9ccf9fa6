//go:build linux

package h1

import (
	"syscall"
	"unsafe"
)

// The loop's thread makes its system calls raw (syscall.RawSyscall): none
// of them blocks, and a raw call keeps the goroutine's P, where package
// syscall's wrappers let the runtime take it away during the call and
// make the caller wait for one after it (replay's dispatcher drives the
// loop and must not wait for a P).

func rawSocket(family int) (int, error) {
	fd, _, e := syscall.RawSyscall(syscall.SYS_SOCKET, uintptr(family), syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC|syscall.SOCK_NONBLOCK, 0)
	if e != 0 {
		return -1, e
	}
	return int(fd), nil
}

func rawSetsockoptInt(fd, level, opt, v int) {
	x := int32(v)
	syscall.RawSyscall6(syscall.SYS_SETSOCKOPT, uintptr(fd), uintptr(level), uintptr(opt), uintptr(unsafe.Pointer(&x)), 4, 0)
}

func rawGetsockoptInt(fd, level, opt int) (int, error) {
	var x int32
	n := uint32(4)
	_, _, e := syscall.RawSyscall6(syscall.SYS_GETSOCKOPT, uintptr(fd), uintptr(level), uintptr(opt), uintptr(unsafe.Pointer(&x)), uintptr(unsafe.Pointer(&n)), 0)
	if e != 0 {
		return 0, e
	}
	return int(x), nil
}

// rawConnect starts connecting fd (non-blocking) to sa, an IPv4 or IPv6
// address; syscall.EINPROGRESS means under way.
func rawConnect(fd int, sa syscall.Sockaddr) error {
	var p unsafe.Pointer
	var n uintptr
	switch a := sa.(type) {
	case *syscall.SockaddrInet4:
		r := &syscall.RawSockaddrInet4{Family: syscall.AF_INET, Addr: a.Addr}
		port := (*[2]byte)(unsafe.Pointer(&r.Port))
		port[0], port[1] = byte(a.Port>>8), byte(a.Port)
		p, n = unsafe.Pointer(r), unsafe.Sizeof(*r)
	case *syscall.SockaddrInet6:
		r := &syscall.RawSockaddrInet6{Family: syscall.AF_INET6, Addr: a.Addr, Scope_id: a.ZoneId}
		port := (*[2]byte)(unsafe.Pointer(&r.Port))
		port[0], port[1] = byte(a.Port>>8), byte(a.Port)
		p, n = unsafe.Pointer(r), unsafe.Sizeof(*r)
	default:
		return syscall.EAFNOSUPPORT
	}
	_, _, e := syscall.RawSyscall(syscall.SYS_CONNECT, uintptr(fd), uintptr(p), n)
	if e != 0 {
		return e
	}
	return nil
}

func rawEpollCtl(ep, op, fd int, ev *epollEvent) error {
	_, _, e := syscall.RawSyscall6(syscall.SYS_EPOLL_CTL, uintptr(ep), uintptr(op), uintptr(fd), uintptr(unsafe.Pointer(ev)), 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

func rawClose(fd int) { syscall.RawSyscall(syscall.SYS_CLOSE, uintptr(fd), 0, 0) }
