package system

// Where the fleet comes from, the product's rule for it: the config file;
// with none, the servers discovery finds on this machine, the first that
// chats as the default; with none found, or when asked, the demo fleet.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/switchyard/switchyard/backend/config"
	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/simfleet"
)

// readConfig reads the config file, or takes the embedded default.
func (s *System) readConfig() error {
	path := s.o.ConfigPath
	if path == "" {
		path = config.DefaultPath(s.o.ConfigHome)
	}
	s.cfgPath = path
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		cfg, err := config.Load(path)
		if err != nil && s.o.Demo && s.o.ConfigPath == "" {
			// The demo replaces the candidates anyway: a broken file of
			// the user's own, not named, must not keep them from trying
			// it. Said, and left alone.
			s.o.Logf("%v", err)
			s.o.Logf("the demo runs on the default settings; the file above stays as it is")
			s.cfg, s.source = config.Default(), ""
			return nil
		}
		if err != nil {
			return err
		}
		s.cfg, s.cfgText, s.source = cfg, string(data), SourceFile
	case errors.Is(err, fs.ErrNotExist) && s.o.ConfigPath == "":
		s.cfg, s.source = config.Default(), ""
	case errors.Is(err, fs.ErrNotExist):
		return config.ErrNoFile(path)
	default:
		return fmt.Errorf("config %s: %w", path, err)
	}
	return nil
}

// startFleet starts the demo fleet when asked for, or looks for local
// servers when there is no config file, and the demo fleet when none
// answers.
func (s *System) startFleet(ctx context.Context) error {
	if s.o.Demo {
		return s.startDemo()
	}
	if s.source == "" {
		found := s.discover(ctx)
		if len(found) == 0 {
			s.o.Logf("no local Ollama or OpenAI-compatible server answered; starting the demo fleet")
			return s.startDemo()
		}
		s.cfg.Chat = discoveredChat(found)
		s.source = SourceDiscovered
		s.cfgText = generatedConfig(s.cfg)
	}
	return nil
}

// The demo fleet's first-token ceiling, and the samples after which its
// deadlines are learned.
const (
	DemoFirstTokenTimeout = 8 * time.Second
	DemoMinSamples        = 5
)

func (s *System) startDemo() error {
	f, err := simfleet.StartDemo()
	if err != nil {
		return fmt.Errorf("start the demo fleet: %w", err)
	}
	s.demo = f
	s.cfg.Chat = demoChat(f)
	// The demo's embedding models make embeddings only, as their servers
	// would say: chats never try them.
	for _, c := range s.cfg.Chat.Candidates {
		if c.Embeddings {
			s.learned[c.ID] = learned{embeds: true, embedOnly: true}
		}
	}
	// Deadlines that make a stall visible in seconds, as a learned one
	// would, rather than the minute a real fleet allows an unknown model.
	s.cfg.Selection.FirstTokenTimeout = DemoFirstTokenTimeout
	s.cfg.Selection.MinSamples = DemoMinSamples
	if s.source == SourceFile {
		s.demoFrom = s.cfgPath
	}
	s.source = SourceDemo
	s.cfgText = demoConfig(s.cfg, s.demoFrom)
	return nil
}

// demoChat makes the demo fleet's servers the candidates, each on a
// simulated GPU of its own (see simfleet.GPUs): the demo's vram_pressure
// fault fills it.
// The embedding models the demo servers serve beside their chat model are
// candidates too, after the chat ones, on their server's GPU.
func demoChat(f *simfleet.Fleet) config.Chat {
	var chat, embed config.Chat
	cands := f.Candidates()
	for i, c := range cands {
		chat.Candidates = append(chat.Candidates, config.Candidate{
			ID: c.ID, Provider: c.Provider, URL: c.URL, Model: c.Model, Priority: c.Priority,
			Enabled: true, SupportsThinking: c.SupportsThinking, GPUs: []int{i}, Parallel: c.Slots,
		})
		if chat.DefaultModel == "" {
			chat.DefaultModel = c.ID
		}
		if chat.DeepThinkingModel == "" && c.SupportsThinking && c.Provider == fleet.ProviderOpenAI {
			chat.DeepThinkingModel = c.ID
		}
		for _, m := range f.Server(c.ID).Config().Models {
			if m.Embedding {
				embed.Candidates = append(embed.Candidates, config.Candidate{
					ID: sanitizeID(strings.TrimSuffix(m.Name, ":latest")), Provider: c.Provider, URL: c.URL, Model: m.Name, Priority: len(cands) + len(embed.Candidates) + 1,
					Enabled: true, Embeddings: true, GPUs: []int{i}, Parallel: c.Slots,
				})
			}
		}
	}
	chat.Candidates = append(chat.Candidates, embed.Candidates...)
	return chat
}

// discoveredChat is the chat section of a fleet found by discovery: every
// candidate found, the first that chats (not only embeds) as the default,
// and the first that thinks as the deep-thinking choice.
func discoveredChat(found []config.Candidate) config.Chat {
	chat := config.Chat{Candidates: found, DefaultModel: found[0].ID}
	for _, c := range found {
		if !c.Embeddings || c.SupportsThinking {
			chat.DefaultModel = c.ID
			break
		}
	}
	for _, c := range found {
		if c.SupportsThinking {
			chat.DeepThinkingModel = c.ID
			break
		}
	}
	return chat
}
