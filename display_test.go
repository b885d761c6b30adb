package main

import (
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// The window is opened only where the display answers: a DISPLAY or
// WAYLAND_DISPLAY that names nothing made GTK panic with a stack trace.
func TestDisplayProblem(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("displays are looked for on Linux only")
	}
	dir := t.TempDir()
	x11Dir = dir
	defer func() { x11Dir = "/tmp/.X11-unix" }()
	for _, name := range []string{"X5", "wayland-7"} {
		ln, err := net.Listen("unix", filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
	}
	os.WriteFile(filepath.Join(dir, "X6"), nil, 0o600) // a stale socket file
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	for _, tt := range []struct {
		name string
		env  func(string) string
		want string // "" when the window may open
	}{
		{"nothing set", env(), "no display found (DISPLAY and WAYLAND_DISPLAY are unset)"},
		{"an X display that answers", env("DISPLAY", ":5"), ""},
		{"with a screen number", env("DISPLAY", ":5.0"), ""},
		{"an X display that is not there", env("DISPLAY", ":77"), "DISPLAY=:77 does not answer"},
		{"a stale socket", env("DISPLAY", "unix:6"), "DISPLAY=unix:6 does not answer"},
		{"not a display", env("DISPLAY", "garbage"), "DISPLAY=garbage is not a display (host:number)"},
		{"a display over the network is left to GTK", env("DISPLAY", "h.invalid:10"), ""},
		{"a Wayland display that answers", env("WAYLAND_DISPLAY", "wayland-7", "XDG_RUNTIME_DIR", dir), ""},
		{"a Wayland display by its path", env("WAYLAND_DISPLAY", filepath.Join(dir, "wayland-7")), ""},
		{"a Wayland display that is not there", env("WAYLAND_DISPLAY", "wayland-9", "XDG_RUNTIME_DIR", dir), "WAYLAND_DISPLAY=wayland-9 does not answer"},
		{"a dead Wayland, a live X", env("WAYLAND_DISPLAY", "wayland-9", "XDG_RUNTIME_DIR", dir, "DISPLAY", ":5"), ""},
	} {
		got := displayProblem(tt.env)
		if tt.want == "" && got != "" || tt.want != "" && !strings.Contains(got, tt.want) {
			t.Errorf("%s: displayProblem() = %q; want %q", tt.name, got, tt.want)
		}
	}
}
