// Package backend_test keeps the dependency direction of STYLE.md true: the
// domain, the breaker and the router import no HTTP, SQL, Wails or NVML,
// directly or through another package.
package backend_test

import (
	"os/exec"
	"strings"
	"testing"
)

func TestCoreImportsNoAdapters(t *testing.T) {
	forbidden := []string{
		"net/http",
		"database/sql",
		"github.com/wailsapp/",
		"github.com/NVIDIA/go-nvml",
		"modernc.org/sqlite",
		"github.com/switchyard/switchyard/backend/upstream",
		"github.com/switchyard/switchyard/backend/history",
		"github.com/switchyard/switchyard/backend/httpapi",
		"github.com/switchyard/switchyard/backend/gpu",
	}
	for _, pkg := range []string{"fleet", "breaker", "router"} {
		path := "github.com/switchyard/switchyard/backend/" + pkg
		out, err := exec.Command("go", "list", "-deps", path).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", path, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, f := range forbidden {
				if dep == f || strings.HasPrefix(dep, f) {
					t.Errorf("%s imports %s", path, dep)
				}
			}
		}
	}
}

// deps lists the packages path imports, directly or not.
func deps(t *testing.T, path string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", path).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", path, err)
	}
	return strings.Fields(string(out))
}

// The composition root is imported only from the top: the binary (main.go,
// app.go and the commands), and the experiment and benchmark, which run a
// real Switchyard.
func TestOnlyTheTopImportsSystem(t *testing.T) {
	const system = "github.com/switchyard/switchyard/backend/system"
	allowed := map[string]bool{
		"github.com/switchyard/switchyard":                    true,
		"github.com/switchyard/switchyard/backend/experiment": true,
		"github.com/switchyard/switchyard/backend/bench":      true,
		system: true,
	}
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "github.com/switchyard/switchyard/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		for _, imp := range fields[1:] {
			if imp == system && !allowed[fields[0]] {
				t.Errorf("%s imports backend/system; only the top may", fields[0])
			}
		}
	}
}

// backend/gpu reads the machine and nothing else: what servers say of
// themselves is backend/upstream/report's, and decisions are
// backend/pressure's.
func TestGPUReadsTheMachineOnly(t *testing.T) {
	for _, dep := range deps(t, "github.com/switchyard/switchyard/backend/gpu") {
		for _, f := range []string{"net/http", "github.com/switchyard/switchyard/backend/upstream",
			"github.com/switchyard/switchyard/backend/router", "github.com/switchyard/switchyard/backend/pressure"} {
			if dep == f || strings.HasPrefix(dep, f+"/") {
				t.Errorf("backend/gpu imports %s", dep)
			}
		}
	}
}
