package system

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/switchyard/switchyard/backend/config"
	"github.com/switchyard/switchyard/backend/fleet"
)

// discover looks for local model servers (docs/DESIGN.md,
// "Discovery") and makes each of
// their models a candidate: Ollama's first (with thinking support from
// /api/show), then OpenAI-compatible servers'.
func (s *System) discover(ctx context.Context) []config.Candidate {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	var found []config.Candidate
	seen := map[string]bool{}
	add := func(c config.Candidate) {
		for seen[c.ID] {
			c.ID += "-2"
		}
		seen[c.ID] = true
		c.Priority = len(found) + 1
		c.Enabled = true
		found = append(found, c)
	}
	for _, base := range s.o.DiscoverOllama {
		models, err := s.ollama.Models(ctx, base)
		if err != nil {
			continue
		}
		s.o.Logf("found Ollama at %s with %d models", base, len(models))
		for _, m := range models {
			add(config.Candidate{ID: sanitizeID(m.Name), Provider: fleet.ProviderOllama, URL: base, Model: m.Name,
				SupportsThinking: m.Thinking, Embeddings: m.Embeds(), Size: uint64(max(m.Size, 0))})
		}
	}
	for _, base := range s.o.DiscoverOpenAI {
		models, err := s.openai.Models(ctx, base, "")
		if err != nil {
			continue
		}
		s.o.Logf("found an OpenAI-compatible server at %s with %d models", base, len(models))
		port := ""
		if u, err := url.Parse(base); err == nil {
			port = u.Port()
		}
		for _, m := range models {
			add(config.Candidate{ID: fmt.Sprintf("%s-%s", sanitizeID(m), port), Provider: fleet.ProviderOpenAI, URL: base, Model: m})
		}
	}
	return found
}
