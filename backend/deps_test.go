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
