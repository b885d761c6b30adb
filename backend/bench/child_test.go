package bench

import (
	"os"
	"strings"
	"testing"
)

// The children are this test binary, which plays them (TestMain).

// A child with a role it does not know says so, and startChild reports
// what it said instead of waiting for an address.
func TestChildUnknownRole(t *testing.T) {
	_, err := startChild(t.Context(), os.Args[0], childSpec{Role: "nope"})
	if err == nil || !strings.Contains(err.Error(), `no bench child role "nope"`) {
		t.Fatalf("startChild(nope) = %v; want the child's own error", err)
	}
}

// A child serves until its standard input closes, then stops cleanly.
func TestChildStops(t *testing.T) {
	c, err := startChild(t.Context(), os.Args[0], childSpec{Role: "upstream"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(c.url(), "http://127.0.0.1:") {
		t.Errorf("upstream child at %q; want a loopback URL", c.url())
	}
	if err := c.stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
}
