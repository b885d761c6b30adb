package simfleet

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
)

// Member is one server of a fleet and the router candidate it is known as.
type Member struct {
	// ID is the candidate id; it also names the server when Config.Name is
	// empty.
	ID string
	// Priority is the candidate's priority (lower is tried earlier).
	Priority int
	// Config is the server's configuration.
	Config Config
}

// Fleet is a set of running simulated servers, each known as one
// candidate. Its methods are safe for concurrent use; the caller closes it.
type Fleet struct {
	members []Member // sorted by priority, then id
	servers map[string]*Server
}

// StartFleet starts one server per member. On error it closes the servers
// it started.
func StartFleet(members []Member) (*Fleet, error) {
	f := &Fleet{servers: make(map[string]*Server, len(members))}
	for _, m := range members {
		if m.ID == "" || f.servers[m.ID] != nil {
			f.Close()
			return nil, fmt.Errorf("simfleet: empty or duplicate member id %q", m.ID)
		}
		if m.Config.Name == "" {
			m.Config.Name = m.ID
		}
		s, err := Start(m.Config)
		if err != nil {
			f.Close()
			return nil, err
		}
		f.servers[m.ID] = s
		f.members = append(f.members, m)
	}
	slices.SortStableFunc(f.members, func(a, b Member) int {
		return cmp.Or(cmp.Compare(a.Priority, b.Priority), cmp.Compare(a.ID, b.ID))
	})
	return f, nil
}

// DemoMembers returns the demo fleet: two Ollama servers ("qwen3-8b", a
// thinking model, and "llama3.2-3b") and two OpenAI-compatible servers in
// vLLM's dialect ("qwen3-32b-vllm", thinking, and "mistral-7b-llamacpp"),
// with realistic first-token delays, token pacing and load times. Each is
// the candidate of its first model. Beside it, qwen3-8b's Ollama serves
// the embedding model nomic-embed-text (768 dimensions) and qwen3-32b-vllm
// serves Qwen/Qwen3-Embedding-0.6B (1024 dimensions). llama3.2-3b is an
// older Ollama whose tool calls carry no id (Config.LegacyToolCalls), so
// that clients meet what Switchyard makes of that. Each answers a few
// topics at length, in markdown (Config.Topics).
func DemoMembers() []Member {
	members := []Member{
		{ID: "qwen3-8b", Priority: 1, Config: Config{
			Provider: fleet.ProviderOllama,
			Models: []Model{
				{Name: "qwen3:8b", Thinking: true, Arch: "qwen3", ContextLength: 40960, Dimensions: 4096, SizeBytes: 5_200_000_000},
				{Name: "nomic-embed-text:latest", Embedding: true, Arch: "nomic-bert", ContextLength: 2048, Dimensions: 768, SizeBytes: 274_302_450},
			},
			TTFT: 250 * time.Millisecond, TokenGap: 25 * time.Millisecond,
			LoadTime: 1500 * time.Millisecond,
		}},
		{ID: "llama3.2-3b", Priority: 2, Config: Config{
			Provider: fleet.ProviderOllama,
			Models: []Model{
				{Name: "llama3.2:3b", Arch: "llama", ContextLength: 131072, Dimensions: 3072, SizeBytes: 2_000_000_000},
			},
			TTFT: 150 * time.Millisecond, TokenGap: 20 * time.Millisecond,
			LoadTime:        800 * time.Millisecond,
			LegacyToolCalls: true,
		}},
		{ID: "qwen3-32b-vllm", Priority: 3, Config: Config{
			Provider: fleet.ProviderOpenAI,
			Models: []Model{
				{Name: "Qwen/Qwen3-32B", Thinking: true, Arch: "qwen3", ContextLength: 40960, Dimensions: 5120, SizeBytes: 20_000_000_000},
				{Name: "Qwen/Qwen3-Embedding-0.6B", Embedding: true, Arch: "qwen3", ContextLength: 32768, Dimensions: 1024, SizeBytes: 1_200_000_000},
			},
			TTFT: 600 * time.Millisecond, TokenGap: 40 * time.Millisecond,
		}},
		{ID: "mistral-7b-llamacpp", Priority: 4, Config: Config{
			Provider: fleet.ProviderOpenAI,
			Models: []Model{
				{Name: "mistral-7b-instruct-v0.3", Arch: "llama", ContextLength: 32768, Dimensions: 4096, SizeBytes: 4_400_000_000},
			},
			TTFT: 300 * time.Millisecond, TokenGap: 30 * time.Millisecond,
		}},
	}
	for i := range members {
		members[i].Config.Topics = true // the demo shows long and formatted answers
	}
	return members
}

// StartDemo starts the demo fleet of DemoMembers.
func StartDemo() (*Fleet, error) { return StartFleet(DemoMembers()) }

// FastTTFT is the first-token delay of the servers of StartFast.
const FastTTFT = time.Millisecond

// StartFast starts n servers for tests and benchmarks: ids "fast-1" to
// "fast-n" with priorities 1 to n, each serving one thinking model named
// like its id, with a FastTTFT first-token delay and no gap between tokens.
// They speak provider p, or alternately Ollama and OpenAI (Ollama first)
// when p is empty.
func StartFast(n int, p fleet.Provider) (*Fleet, error) {
	members := make([]Member, n)
	for i := range members {
		id := fmt.Sprintf("fast-%d", i+1)
		provider := p
		if provider == "" {
			provider = []fleet.Provider{fleet.ProviderOllama, fleet.ProviderOpenAI}[i%2]
		}
		members[i] = Member{ID: id, Priority: i + 1, Config: Config{
			Provider: provider,
			Models:   []Model{{Name: id, Thinking: true}},
			TTFT:     FastTTFT,
		}}
	}
	return StartFleet(members)
}

// Candidates returns the fleet's candidates in priority order.
func (f *Fleet) Candidates() []fleet.Candidate {
	out := make([]fleet.Candidate, len(f.members))
	for i, m := range f.members {
		out[i] = f.servers[m.ID].Candidate(m.ID, m.Priority)
	}
	return out
}

// Server returns the server of candidate id, or nil.
func (f *Fleet) Server(id string) *Server { return f.servers[id] }

// Close closes every server and waits for them.
func (f *Fleet) Close() {
	var wg sync.WaitGroup
	for _, s := range f.servers {
		wg.Go(s.Close)
	}
	wg.Wait()
}

// ErrNoServer is returned for a candidate id that is not a member of the
// fleet.
var ErrNoServer = errors.New("simfleet: no such server")

// SetFault sets the fault of the server of candidate id.
func (f *Fleet) SetFault(id string, fault Fault) error {
	s := f.servers[id]
	if s == nil {
		return fmt.Errorf("set fault of %q: %w", id, ErrNoServer)
	}
	return s.SetFault(fault)
}
