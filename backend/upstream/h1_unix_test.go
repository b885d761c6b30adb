//go:build unix

package upstream

import (
	"errors"
	"net"
	"syscall"
	"testing"
)

// A server that closes a kept-alive connection while it is idle (as
// llama-server does after 5 s) costs no request: the idle connection is
// seen closed and dropped, and when that is not seen, the request that
// found the connection dead before any answer is sent again on a new one.
func TestH1ServerClosedIdleConnection(t *testing.T) {
	for _, tt := range []struct {
		name  string
		stale func(*h1Conn) bool
	}{
		{"seen closed", nil},
		{"sent again", func(*h1Conn) bool { return false }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			u, conns := rawServer(t, okAnswer, true)
			p := NewPool(Settings{})
			h := p.h1(u)
			if tt.stale != nil {
				h.stale = tt.stale
			}
			for i := range 3 {
				if b := sendBody(t, p, u, "/x"); b != "ok" {
					t.Fatalf("request %d answered %q", i, b)
				}
				// The server has closed the connection; wait until its
				// end is readable here, so the next request finds it so.
				h.mu.Lock()
				idle := append([]*h1Conn(nil), h.idle...)
				h.mu.Unlock()
				for _, cn := range idle {
					waitReadable(t, cn.nc)
				}
			}
			if n := conns(); n != 3 {
				t.Errorf("%d connections; want 3", n)
			}
		})
	}
}

// waitReadable blocks until nc has something to read (or its end).
func waitReadable(t *testing.T, nc net.Conn) {
	t.Helper()
	rc, err := nc.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var b [1]byte
	rc.Read(func(fd uintptr) bool {
		_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return !errors.Is(err, syscall.EAGAIN)
	})
}
