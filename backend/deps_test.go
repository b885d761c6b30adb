// Package backend_test keeps the dependency direction of STYLE.md true: the
// domain, the breaker and the router import no HTTP, SQL, Wails or NVML,
// directly or through another package.
package backend_test

import (
	"os/exec"
	"strings"
	"testing"
)

const mod = "github.com/switchyard/switchyard/"

// badDeps are, for each package, what it must not import, directly or
// through another package, and why (tailscale's deptest habit: a ban
// without its reason is soon lifted by someone who needs it).
var badDeps = map[string]map[string]string{
	"backend/fleet":   core,
	"backend/breaker": core,
	"backend/router":  core,
	"backend/deadline": {
		"net/http":               "it learns from samples in memory; it asks no server",
		mod + "backend/upstream": "residency comes in as a func from system, not from the poller",
		mod + "backend/router":   "it implements router.Deadlines; the router must not be needed to test it",
		mod + "backend/history":  "samples are seeded by system from the history, not read by the learner",
	},
}

// core is what the domain, the breaker and the router never import: they
// decide, and the edges translate (STYLE.md).
var core = map[string]string{
	"net/http":                  "upstreams are fleet.Backends; HTTP is the adapters' and the API's",
	"database/sql":              "records go out through router.Recorder",
	"github.com/wailsapp/":      "only app.go touches Wails",
	"github.com/NVIDIA/go-nvml": "GPU pressure comes in through router.Pressure",
	"modernc.org/sqlite":        "records go out through router.Recorder",
	mod + "backend/upstream":    "adapters implement fleet.Backend; the router must not know wire formats",
	mod + "backend/history":     "records go out through router.Recorder",
	mod + "backend/httpapi":     "the edge chooses statuses and headers from the router's domain values",
	mod + "backend/gpu":         "GPU pressure comes in through router.Pressure",
}

func TestBadDeps(t *testing.T) {
	for pkg, bad := range badDeps {
		for _, dep := range deps(t, mod+pkg) {
			for f, why := range bad {
				if dep == f || strings.HasPrefix(dep, strings.TrimSuffix(f, "/")+"/") {
					t.Errorf("%s imports %s: %s", pkg, dep, why)
				}
			}
		}
	}
}

// directBadDeps are, for each package, what its own files must not import,
// and why.
var directBadDeps = map[string]map[string]string{
	"backend/router": {
		"encoding/json": "the router routes fleet values; the upstream's JSON is assembled at the edge (httpapi), where the dialects live",
	},
	// pressure decides what servers' reports mean; the facts come from
	// upstream/report in its own types.
	"backend/pressure": {
		mod + "backend/upstream/ollama": "it decides on report's facts, not on an adapter's wire types",
		mod + "backend/upstream/openai": "it decides on report's facts, not on an adapter's wire types",
		mod + "backend/upstream":        "it asks no server",
		"net/http":                      "it asks no server",
	},
}

func TestDirectBadDeps(t *testing.T) {
	for pkg, bad := range directBadDeps {
		out, err := exec.Command("go", "list", "-f", `{{join .Imports " "}}`, mod+pkg).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", pkg, err)
		}
		for _, imp := range strings.Fields(string(out)) {
			if why, ok := bad[imp]; ok {
				t.Errorf("%s imports %s: %s", pkg, imp, why)
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
