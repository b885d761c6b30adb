package system

import (
	"testing"

	"github.com/switchyard/switchyard/backend/config"
)

// Discovery's default is the first model that chats, and its deep-thinking
// choice the first that thinks.
func TestDiscoveredChat(t *testing.T) {
	for _, tc := range []struct {
		name       string
		found      []config.Candidate
		def, think string
	}{
		{"one chat model", []config.Candidate{{ID: "llama3"}}, "llama3", ""},
		{"an embedder first", []config.Candidate{{ID: "nomic", Embeddings: true}, {ID: "llama3"}}, "llama3", ""},
		{"a thinker", []config.Candidate{{ID: "llama3"}, {ID: "qwen3", SupportsThinking: true}}, "llama3", "qwen3"},
		{"only embedders", []config.Candidate{{ID: "nomic", Embeddings: true}}, "nomic", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := discoveredChat(tc.found)
			if got.DefaultModel != tc.def || got.DeepThinkingModel != tc.think || len(got.Candidates) != len(tc.found) {
				t.Errorf("discoveredChat() = default %q, deep %q, %d candidates; want %q, %q, %d",
					got.DefaultModel, got.DeepThinkingModel, len(got.Candidates), tc.def, tc.think, len(tc.found))
			}
		})
	}
}
