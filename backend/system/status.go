package system

import (
	"context"

	"github.com/switchyard/switchyard/backend/httpapi"
	"github.com/switchyard/switchyard/backend/schema"
	"github.com/switchyard/switchyard/backend/simfleet"
	"github.com/switchyard/switchyard/backend/team"
)

// Status returns the status document.
func (s *System) Status() schema.Status {
	s.mu.Lock()
	cfg, cs := s.cfg, s.configStatus()
	s.mu.Unlock()
	in := schema.StatusInput{
		Version: s.o.Version, Demo: s.demo != nil, Listen: s.Addr(), ListenTaken: s.listenTaken,
		DefaultModel: cfg.Chat.DefaultModel, DeepThinkingModel: cfg.Chat.DeepThinkingModel, Hedge: cfg.Selection.Hedge,
		MinSamples: cfg.Selection.MinSamples,
		Candidates: s.router.States(), TTFT: s.learner.Stats, Unreachable: s.unreachable, Config: cs, History: s.store.Health(),
	}
	if smp, ok := s.sampler.Latest(); ok {
		in.Sample = &smp
	}
	if s.team != nil {
		st := s.team.Status()
		in.Team = &st
	}
	return schema.NewStatus(in)
}

// teamAPI is the team as the API shows it; nil without a team.
func (s *System) teamAPI() httpapi.Team {
	if s.team == nil {
		return nil
	}
	return teamAPI{s.team}
}

type teamAPI struct{ t *team.Team }

func (a teamAPI) Doc() schema.Team { return schema.NewTeam(a.t.Status()) }

func (a teamAPI) Requests(ctx context.Context, node string, limit int) (schema.TeamRequests, error) {
	recs, err := a.t.Requests(ctx, node, limit)
	return schema.NewTeamRequests(recs), err
}

// configStatus is called with s.mu held.
func (s *System) configStatus() schema.ConfigState {
	cs := schema.ConfigState{Path: s.cfgPath, Source: string(s.source)}
	if s.rejected != nil {
		at := s.rejectedAt
		cs.Error, cs.ErrorAt = s.rejected.Error(), &at
	}
	return cs
}

// Config returns GET /switchyard/v1/config.
func (s *System) Config() schema.Config {
	s.mu.Lock()
	defer s.mu.Unlock()
	return schema.Config{ConfigState: s.configStatus(), YAML: s.cfgText}
}

// demoControl exposes the demo fleet's fault injection to the API; nil out
// of demo mode.
func (s *System) demoControl() httpapi.Demo {
	if s.demo == nil {
		return nil
	}
	gpuOf := make(map[string]int)
	for i, c := range s.demo.Candidates() {
		gpuOf[c.ID] = i // as demoChat placed them
	}
	return demoAPI{simfleet.NewDemo(s.demo, func(id string, on bool) {
		s.demoGPUs.SetPressure(gpuOf[id], on)
		// Read the GPUs at once: the next request, and the UI, see it.
		s.sampler.Sample(context.Background())
	})}
}

// demoAPI is simfleet's demo control as the API shows it.
type demoAPI struct{ d *simfleet.Demo }

func (a demoAPI) Demo() schema.Demo {
	out := schema.Demo{Servers: []schema.DemoServer{}, Faults: []schema.DemoFault{}}
	for _, srv := range a.d.Servers() {
		out.Servers = append(out.Servers, schema.DemoServer(srv))
	}
	for _, f := range a.d.Faults() {
		out.Faults = append(out.Faults, schema.DemoFault{Name: f.Name, Label: f.Label, Description: f.Description, Arg: f.Arg})
	}
	return out
}

func (a demoAPI) SetFault(candidate, fault string) (schema.DemoServer, error) {
	srv, err := a.d.SetFault(candidate, fault)
	return schema.DemoServer(srv), err
}
