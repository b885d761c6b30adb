package system

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"

	"github.com/switchyard/switchyard/backend/config"
	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/router"
	"github.com/switchyard/switchyard/backend/team"
)

// openTeam makes this Switchyard a node of the team cfg names (SPEC 6.6,
// docs/DESIGN.md "Teams"); without team.database_env it does nothing. The
// team connects once Run starts it, off the request path.
func (s *System) openTeam(cfg config.Config) error {
	env := cfg.Team.DatabaseEnv
	if env == "" {
		return nil
	}
	url := s.o.Getenv(env)
	if url == "" {
		return fmt.Errorf("team.database_env: $%s is empty or unset: set it to the team's PostgreSQL connection string", env)
	}
	node, err := nodeName(cfg)
	if err != nil {
		return err
	}
	s.team, err = team.New(team.Options{
		URL: url, Node: node, Version: s.o.Version, ConfigHash: configHash(cfg),
		History: s.store, InFlight: s.inflight, OpenFor: cfg.Selection.OpenDuration, ProbeFor: cfg.Selection.FirstTokenTimeout,
		Retention: cfg.History.Retention, Logf: s.o.Logf,
	})
	if err != nil {
		return fmt.Errorf("team.database_env: $%s: %w", env, err)
	}
	s.team.Update(cfg.Candidates(s.o.Getenv))
	return nil
}

// nodeName is team.node, or the host name.
func nodeName(cfg config.Config) (string, error) {
	if cfg.Team.Node != "" {
		return cfg.Team.Node, nil
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		return "", fmt.Errorf("team.node: unset, and the host name is unknown (%v): name this node", err)
	}
	return host, nil
}

// configHash names the part of a config that nodes of a team share (the
// candidates, the selection's rules and the GPU policy) in the team's nodes
// list, so that nodes routing by different configs show it. What is each
// node's own (its address, key, origins, history, team name) and how the
// file is written (comments, order) do not count.
func configHash(cfg config.Config) string {
	shared, _ := json.Marshal(struct {
		Selection config.Selection
		GPU       config.GPU
		Chat      config.Chat
	}{cfg.Selection, cfg.GPU, cfg.Chat})
	h := sha256.Sum256(shared)
	return hex.EncodeToString(h[:6])
}

// inflight is this node's own in-flight count per candidate.
func (s *System) inflight() map[string]int {
	out := map[string]int{}
	for _, st := range s.router.States() {
		out[st.Candidate.ID] = st.InFlight
	}
	return out
}

// evidence is the team as the router reads it; nil without a team (a nil
// *team.Team in the interface would not be nil).
func (s *System) evidence() router.Evidence {
	if s.team == nil {
		return nil
	}
	return s.team
}

// observers are the router's observers: the hub, the metrics, the
// history's breaker log, and the team when there is one.
func (s *System) observers() observers {
	obs := observers{s.hub, s.metrics, breakerRecorder{s.store}}
	if s.team != nil {
		obs = append(obs, s.team)
	}
	return obs
}

// updateTeam tells the team the candidates in force.
func (s *System) updateTeam(cands []fleet.Candidate) {
	if s.team != nil {
		s.team.Update(cands)
	}
}

// noteTeamChange says that an edit of the team block applies at the next
// start: the node keeps its team, name and connection until then.
func (s *System) noteTeamChange(prev, next config.Team) {
	switch {
	case prev == next:
		return
	case next == s.teamInForce:
		s.o.Logf("config: team.database_env and team.node are back to those in force")
		return
	case s.team == nil:
		s.o.Logf("config: team.database_env and team.node apply at the next start; this node is in no team until then")
	default:
		s.o.Logf("config: team.database_env and team.node apply at the next start; this node keeps its team until then")
	}
	if next.DatabaseEnv != "" && s.o.Getenv(next.DatabaseEnv) == "" {
		// The next start would refuse it: say so now, not then.
		s.o.Logf("config: team.database_env: $%s is empty or unset in this process: set it before the next start, which needs it", next.DatabaseEnv)
	}
}
