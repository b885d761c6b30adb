package router

import (
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
)

// Evidence is what other nodes of a team report of candidates' servers
// (SPEC 6.6). It reads memory only and must not block.
type Evidence interface {
	Remote(c fleet.Candidate, now time.Time) Remote
}

// Remote is the other nodes' evidence about one candidate's server.
type Remote struct {
	Out      bool // two or more nodes report it failing: excluded like an open breaker until Until
	Until    time.Time
	Suspect  bool   // one node reports it failing: demoted
	Reason   string // plain words, for the record: "node b: breaker open since 18:41"
	InFlight int    // other nodes' requests running on it now
}

// remote is deps.Evidence's report of c, the zero Remote without a team.
func (r *Router) remote(c fleet.Candidate, now time.Time) Remote {
	if r.deps.Evidence == nil {
		return Remote{}
	}
	return r.deps.Evidence.Remote(c, now)
}
