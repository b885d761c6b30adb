package schema

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// The committed docs/openapi.json, from which the UI's TypeScript types are
// generated, is the document the Go types make. Regenerate it with
// SWITCHYARD_UPDATE_OPENAPI=1 go test ./backend/schema (make openapi).
func TestOpenAPIIsCommitted(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "openapi.json")
	got := OpenAPIJSON()
	if os.Getenv("SWITCHYARD_UPDATE_OPENAPI") != "" {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v: run make openapi", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from what the Go types of backend/schema make: run make openapi, and commit it", path)
	}
}

func TestOpenAPIIsValid(t *testing.T) {
	if err := OpenAPI().Validate(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"Status", "Request", "Attempt", "AttemptStarted", "GPUEvent", "ConfigEvent", "Demo"} {
		if OpenAPI().Components.Schemas[name] == nil {
			t.Errorf("no component schema %s", name)
		}
	}
}
