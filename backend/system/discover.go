package system

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/switchyard/switchyard/backend/config"
	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/upstream/ollama"
	"github.com/switchyard/switchyard/backend/upstream/openai"
)

// Probe is what one place where a local server may listen answered.
type Probe struct {
	Provider fleet.Provider
	URL      string
	Models   []ollama.Model // the models found (Name only for an OpenAI-compatible server)
	Err      error          // why nothing was found there
}

// defaultDiscovery fills in the places discovery looks at.
func defaultDiscovery(o *Options) {
	if o.DiscoverOllama == nil {
		o.DiscoverOllama = []string{"http://127.0.0.1:11434"}
	}
	if o.DiscoverOpenAI == nil {
		o.DiscoverOpenAI = []string{"http://127.0.0.1:8000/v1", "http://127.0.0.1:8080/v1"}
	}
}

// probe asks each place of o's discovery for its models, Ollama's first.
func probe(ctx context.Context, o Options, ol *ollama.Backend, oa *openai.Backend) []Probe {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	var out []Probe
	for _, base := range o.DiscoverOllama {
		models, err := ol.Models(ctx, base)
		out = append(out, Probe{Provider: fleet.ProviderOllama, URL: base, Models: models, Err: err})
	}
	for _, base := range o.DiscoverOpenAI {
		ids, err := oa.Models(ctx, base, "")
		p := Probe{Provider: fleet.ProviderOpenAI, URL: base, Err: err}
		for _, id := range ids {
			p.Models = append(p.Models, ollama.Model{Name: id})
		}
		out = append(out, p)
	}
	return out
}

// discover looks for local model servers (docs/DESIGN.md,
// "Discovery") and makes each of
// their models a candidate: Ollama's first (with thinking support from
// /api/show), then OpenAI-compatible servers'.
func (s *System) discover(ctx context.Context) []config.Candidate {
	return candidatesOf(probe(ctx, s.o, s.ollama, s.openai), s.o.Logf)
}

// candidatesOf makes a candidate of every model the probes found.
func candidatesOf(probes []Probe, logf func(string, ...any)) []config.Candidate {
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
	for _, p := range probes {
		if p.Err != nil {
			logf("looked for %s at %s: %s", serverKind(p.Provider), p.URL, probeWords(p.Err))
			continue
		}
		if p.Provider == fleet.ProviderOllama {
			logf("found Ollama at %s with %d models", p.URL, len(p.Models))
			for _, m := range p.Models {
				add(config.Candidate{ID: sanitizeID(strings.TrimSuffix(m.Name, ":latest")), Provider: fleet.ProviderOllama, URL: p.URL, Model: m.Name,
					SupportsThinking: m.Thinking, Embeddings: m.Embeds(), Size: uint64(max(m.Size, 0))})
			}
			continue
		}
		logf("found an OpenAI-compatible server at %s with %d models", p.URL, len(p.Models))
		port := ""
		if u, err := url.Parse(p.URL); err == nil {
			port = u.Port()
		}
		for _, m := range p.Models {
			add(config.Candidate{ID: fmt.Sprintf("%s-%s", sanitizeID(m.Name), port), Provider: fleet.ProviderOpenAI, URL: p.URL, Model: m.Name})
		}
	}
	return found
}

// serverKind names what discovery looks for at a place.
func serverKind(p fleet.Provider) string {
	if p == fleet.ProviderOllama {
		return "Ollama"
	}
	return "an OpenAI-compatible server"
}

// probeWords says why a place discovery looked at gave no models.
func probeWords(err error) string {
	if w := unreachableWords(err); w != "" {
		return "nothing answered (" + w + ")"
	}
	return "it answered, but not with a model list (" + err.Error() + ")"
}
