//go:build unix

package h1

import (
	"net"
	"syscall"
)

// peekClosed says whether the connection on socket fd was closed by the
// server, or sent what nobody asked for, while it sat idle: a
// non-blocking peek finds its end of stream, a reset or bytes waiting.
// It reads nothing.
func peekClosed(fd int) bool {
	var b [1]byte
	n, _, err := syscall.Recvfrom(fd, b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	switch {
	case err == syscall.EAGAIN || err == syscall.EWOULDBLOCK || err == syscall.EINTR:
		return false // alive, nothing to read
	case err != nil:
		return true
	}
	return n >= 0 // 0: the server closed it; more: unasked-for bytes
}

// connClosed is peekClosed for a net.Conn (false when it has no socket).
func connClosed(nc net.Conn) bool {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	closed := false
	if rc.Control(func(fd uintptr) { closed = peekClosed(int(fd)) }) != nil {
		return false
	}
	return closed
}
