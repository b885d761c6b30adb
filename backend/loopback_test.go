package backend_test

import (
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestNothingNamesAnotherMachine holds the rule that every test (Go, the
// frontend's, the end-to-end ones), script
// and shipped example talks only to this machine: each URL and IP address
// in them is loopback (or the unspecified address, to bind), a reserved
// name that never resolves (.invalid, .example, .test, .localhost), or a
// documentation address that is routed nowhere (RFC 5737), so that no test
// and no `switchyard check --config backend/config/example.yaml` can reach
// another machine.
func TestNothingNamesAnotherMachine(t *testing.T) {
	// The host follows a user and password when there is one.
	url := regexp.MustCompile(`(?i)\b(?:https?|wss?)://(?:[^@/\s"'\x60]*@)?(\[[0-9a-f:]+\]|[a-z0-9][a-z0-9.-]*)`)
	ipv4 := regexp.MustCompile(`(?:^|[^0-9.])((?:\d{1,3}\.){3}\d{1,3})(?:[^0-9.]|$)`)
	var files []string
	filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			switch name {
			case "node_modules", ".git", ".tools", "build", "dist", "docs", "test-artifacts":
				return filepath.SkipDir
			}
			return nil
		}
		rel := filepath.ToSlash(path)
		switch {
		case strings.HasSuffix(name, "_test.go"), strings.Contains(name, ".test.ts"),
			strings.HasPrefix(rel, "../e2e/") && (strings.HasSuffix(name, ".mjs") || strings.HasSuffix(name, ".js")),
			strings.HasPrefix(rel, "../scripts/"), strings.HasPrefix(rel, "../.ci/"),
			strings.HasSuffix(name, "example.yaml"), rel == "../README.md", rel == "../Makefile":
			files = append(files, path)
		}
		return nil
	})
	if len(files) < 20 {
		t.Fatalf("found only %d files to read: run from backend/", len(files))
	}
	for _, path := range files {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(data), "\n") {
			for _, m := range url.FindAllStringSubmatch(line, -1) {
				if !thisMachineOnly(m[1]) {
					t.Errorf("%s:%d: %s names another machine", path, i+1, m[0])
				}
			}
			for _, m := range ipv4.FindAllStringSubmatch(line, -1) {
				if !thisMachineOnly(m[1]) {
					t.Errorf("%s:%d: %s is another machine's address", path, i+1, m[1])
				}
			}
		}
	}
}

// documentation are the address blocks RFC 5737 sets aside for examples.
var documentation = []netip.Prefix{
	netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("198.51.100.0/24"), netip.MustParsePrefix("203.0.113.0/24"),
}

func thisMachineOnly(host string) bool {
	host = strings.TrimSuffix(strings.Trim(strings.ToLower(host), "[]"), ".") // "localhost." is localhost
	if ip, err := netip.ParseAddr(host); err == nil {
		if ip.IsLoopback() || ip.IsUnspecified() {
			return true
		}
		for _, p := range documentation {
			if p.Contains(ip) {
				return true
			}
		}
		return false
	}
	if host == "localhost" {
		return true
	}
	for _, tld := range []string{".invalid", ".example", ".test", ".localhost"} {
		if strings.HasSuffix(host, tld) {
			return true
		}
	}
	return false
}
