//go:build !unix

package h1

import "net"

// connClosed cannot peek here: a connection the server closed while idle
// is found when the request fails (and is retried then).
func connClosed(net.Conn) bool { return false }
