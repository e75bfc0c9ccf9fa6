// Package tcptest serves raw TCP on loopback for tests that speak HTTP/1.1
// by hand (malformed heads, one-shot connections, silent servers), where
// net/http's server would not say what the test needs.
package tcptest

import (
	"net"
	"testing"
)

// Serve listens on a free loopback port until the test ends and runs
// handle on each connection it accepts, in a goroutine of its own, closing
// the connection when handle returns. It returns the address (host:port).
func Serve(tb testing.TB, handle func(c net.Conn)) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				handle(c)
			}()
		}
	}()
	return ln.Addr().String()
}
