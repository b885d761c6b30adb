package system

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
)

// learned is what a candidate's server said about its model.
type learned struct {
	thinking, levels  bool
	embeds, embedOnly bool
}

// learnModels asks the server of each enabled Ollama candidate what its
// model can do (/api/show) and puts that in force: thinking support (the
// server's word wins over the config's), reasoning levels; a model the
// server does not have is a configuration fault, shown at once rather than
// at the first request. Servers that do not answer keep what was known.
func (s *System) learnModels(ctx context.Context) {
	var found []string
	missing := map[string]bool{}
	for _, st := range s.router.States() {
		missing[st.Candidate.ID] = st.Missing != ""
	}
	for _, t := range s.router.Fleet().Targets {
		c := t.Candidate
		if c.Enabled && c.Provider != fleet.ProviderOllama && missing[c.ID] && s.listsModel(ctx, c) {
			// An OpenAI-compatible server that said once it has no such
			// model (vLLM while it swaps, llama-swap) lists it again.
			found = append(found, c.ID)
		}
		if !c.Enabled || c.Provider != fleet.ProviderOllama {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		m, err := s.ollama.Show(sctx, c.URL, c.Model)
		cancel()
		var se *fleet.StatusError
		switch {
		case errors.As(err, &se) && se.StatusCode == 404:
			s.router.Missing(c.ID, fmt.Sprintf("%s does not serve model %q (%s): check the candidate's model, or pull it", c.URL, c.Model, se.Message))
			s.o.Logf("candidate %s: %s has no model %q: check the config or pull the model", c.ID, c.URL, c.Model)
			continue
		case err != nil:
			continue
		}
		s.mu.Lock()
		s.learned[c.ID] = learned{thinking: m.Thinking, levels: m.ThinkLevels(), embeds: m.Embeds(), embedOnly: m.EmbedOnly()}
		s.mu.Unlock()
		found = append(found, c.ID)
	}
	for _, id := range found {
		s.router.Found(id)
	}
	s.mu.Lock()
	cfg := s.cfg
	s.mu.Unlock()
	s.router.Update(s.routerFleet(cfg))
}

// listsModel reports whether c's OpenAI-compatible server lists c's
// model on /v1/models. A server that does not answer lists nothing.
func (s *System) listsModel(ctx context.Context, c fleet.Candidate) bool {
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ids, err := s.openai.Models(sctx, c.URL, c.APIKey)
	return err == nil && slices.ContainsFunc(ids, func(id string) bool { return fleet.SameModel(id, c.Model) })
}

// applyLearned puts what servers said about their models into c.
func (s *System) applyLearned(c fleet.Candidate) fleet.Candidate {
	s.mu.Lock()
	l, ok := s.learned[c.ID]
	s.mu.Unlock()
	if ok {
		c.SupportsThinking, c.ThinkLevels = l.thinking, l.levels
		c.Embeds = c.Embeds || l.embeds
		c.EmbedOnly = l.embedOnly
	}
	return c
}

// watchModels learns at once, again after each config change, and every
// interval while some candidate's model is missing or its server has not
// said yet what the model can do (it did not answer), so that a model
// pulled after start, or a server that was down at start, is routed to as
// its model can be (thinking) without a restart. It returns when ctx is
// done.
func (s *System) watchModels(ctx context.Context, interval time.Duration) {
	s.learnModels(ctx)
	s.relearnModels(ctx, interval)
}

// relearnModels is watchModels after its first round.
func (s *System) relearnModels(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.relearn:
			s.learnModels(ctx)
		case <-t.C:
			if s.anyMissing() || s.anyUnlearned() {
				s.learnModels(ctx)
			}
		}
	}
}

func (s *System) anyMissing() bool {
	for _, st := range s.router.States() {
		if st.Missing != "" {
			return true
		}
	}
	return false
}

// anyUnlearned reports whether an enabled Ollama candidate's server has
// not said what its model can do.
func (s *System) anyUnlearned() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.router.Fleet().Targets {
		if _, ok := s.learned[t.Candidate.ID]; t.Candidate.Enabled && t.Candidate.Provider == fleet.ProviderOllama && !ok {
			return true
		}
	}
	return false
}
