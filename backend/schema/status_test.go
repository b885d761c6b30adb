package schema

import (
	"strings"
	"testing"
	"time"

	"github.com/switchyard/switchyard/backend/deadline"
	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/router"
)

// What the team reports of a server shows on its candidate, as routing
// uses it: one node's report demotes it, two keep it out until a time.
func TestStatusShowsTheTeamsWord(t *testing.T) {
	until := time.Date(2026, 12, 7, 0, 26, 33, 0, time.UTC)
	doc := NewStatus(StatusInput{
		Candidates: []router.CandidateState{
			{Candidate: fleet.Candidate{ID: "suspect"}, Team: router.Remote{Suspect: true, Reason: "node b: breaker open since 00:25:58"}},
			{Candidate: fleet.Candidate{ID: "out"}, Team: router.Remote{Out: true, Until: until, Reason: "node a: …; node b: …"}},
			{Candidate: fleet.Candidate{ID: "fine"}},
		},
		TTFT: func(string) deadline.Stats { return deadline.Stats{} },
	})
	s, o, f := doc.Candidates[0], doc.Candidates[1], doc.Candidates[2]
	if !s.Demoted || s.Pressure == nil || s.Pressure.Source != router.TeamSource || !strings.Contains(s.Pressure.Reason, "node b: breaker open") || s.KeptOut != nil {
		t.Errorf("suspect = demoted %v, pressure %+v, kept out %+v; want demoted by the team", s.Demoted, s.Pressure, s.KeptOut)
	}
	if o.KeptOut == nil || !o.KeptOut.Until.Equal(until) || o.KeptOut.Reason == "" || o.Demoted {
		t.Errorf("out = kept out %+v, demoted %v; want kept out until %v", o.KeptOut, o.Demoted, until)
	}
	if f.Demoted || f.KeptOut != nil {
		t.Errorf("fine = %+v; want neither", f)
	}
}
