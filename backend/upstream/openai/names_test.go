package openai

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/switchyard/switchyard/backend/openai/wire"
)

// The quick decoder knows the names of the chunk's objects that decode
// reads through wire's types; a field added there must be known here, or
// the two would disagree about a chunk that has it.
func TestQuickNamesAreWiresFields(t *testing.T) {
	for _, c := range []struct {
		names []string
		of    any
	}{
		{topNames, wire.Chunk{}},
		{choiceNames, wire.ChunkChoice{}},
		{deltaNames, wire.AssistantMessage{}},
		{usageNames, wire.Usage{}},
	} {
		typ := reflect.TypeOf(c.of)
		var fields []string
		for f := range typ.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			fields = append(fields, name)
		}
		if !slices.Equal(c.names, fields) {
			t.Errorf("quick decoder's names for %s = %q; want %q", typ, c.names, fields)
		}
	}
}
