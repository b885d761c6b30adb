//go:build unix

package upstream

import (
	"errors"
	"syscall"
)

// peer is what closedByPeer keeps of a connection: its raw connection and
// the function it peeks with, made once, not once a request.
type peer struct {
	rc     syscall.RawConn
	peek   func(fd uintptr) bool
	closed bool
}

// closedByPeer reports whether the server has closed cn, or sent on it
// unasked, while it was idle: a peek that does not block, one system call.
// A connection it can't look into is taken as open; a send on one the
// server did close is sent again (h1.send).
func closedByPeer(cn *h1Conn) bool {
	p := &cn.peer
	if p.peek == nil {
		sc, ok := cn.nc.(syscall.Conn)
		if !ok {
			return false
		}
		rc, err := sc.SyscallConn()
		if err != nil {
			return true
		}
		p.rc = rc
		p.peek = func(fd uintptr) bool {
			var b [1]byte
			n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			// n == 0 with no error is the server's FIN; n > 0 is an
			// answer nobody asked for; EAGAIN is an open, quiet
			// connection.
			p.closed = n > 0 || (n == 0 && err == nil) || (err != nil && !errors.Is(err, syscall.EAGAIN) && !errors.Is(err, syscall.EINTR))
			return true
		}
	}
	p.closed = false
	err := p.rc.Read(p.peek)
	return p.closed || err != nil
}
