//go:build unix

package upstream

import (
	"errors"
	"net"
	"syscall"
)

// closedByPeer reports whether the server has closed nc, or sent on it
// unasked, while it was idle: a peek that does not block, one system call.
// A connection it can't look into is taken as open; a send on one the
// server did close is sent again (h1.send).
func closedByPeer(nc net.Conn) bool {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	closed := false
	var b [1]byte
	err = rc.Read(func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		// n == 0 with no error is the server's FIN; n > 0 is an answer
		// nobody asked for; EAGAIN is an open, quiet connection.
		closed = n > 0 || (n == 0 && err == nil) || (err != nil && !errors.Is(err, syscall.EAGAIN) && !errors.Is(err, syscall.EINTR))
		return true
	})
	return closed || err != nil
}
