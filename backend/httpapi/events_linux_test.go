//go:build linux

package httpapi

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// An events stream's socket holds at most eventsSendBuffer for a caller
// that does not read, not the megabytes the kernel's autotuning would let
// pile up before its writes stall (issue 20, item 9: 747 KB queued 65 s
// after the subscriber stopped reading).
func TestEventsSendBufferIsSmall(t *testing.T) {
	s, _ := newTestServer(t, Options{})
	srv := httptest.NewUnstartedServer(s)
	srv.Config = s.HTTPServer()
	conns := make(chan net.Conn, 1)
	srv.Config.ConnState = func(c net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns <- c
		}
	}
	srv.Start()
	defer srv.Close()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", srv.URL+"/switchyard/v1/events", nil)
	req.Host = "127.0.0.1:8484"
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("events = %d", resp.StatusCode)
	}
	raw, err := (<-conns).(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var got int
	raw.Control(func(fd uintptr) { got, err = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF) })
	if err != nil {
		t.Fatal(err)
	}
	want := 2 * eventsSendBuffer // Linux doubles what it is given, up to twice wmem_max
	if b, err := os.ReadFile("/proc/sys/net/core/wmem_max"); err == nil {
		if m, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			want = min(want, 2*m)
		}
	}
	if got != want {
		t.Errorf("SO_SNDBUF of the events stream = %d; want %d", got, want)
	}
}
