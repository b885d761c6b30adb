package schema

import (
	"time"

	"github.com/switchyard/switchyard/backend/team"
)

// TeamLink is this node's link to its team (Status.team): "team link
// offline" when Link is "offline".
type TeamLink struct {
	Node string `json:"node"`
	// Link is "online" while the node reaches the team database, else
	// "offline" (with the last error, since LinkSince); requests are routed
	// on the node's own state either way.
	Link      string    `json:"link"`
	LinkSince time.Time `json:"link_since"`
	LinkError string    `json:"link_error"`
}

// Team is GET /switchyard/v1/team: this node's link, the team's nodes and
// the shared servers with what each node reports of them.
type Team struct {
	TeamLink
	// Shipped is how many history records this node shipped since it
	// started.
	Shipped int64        `json:"shipped"`
	Nodes   []TeamNode   `json:"nodes"`
	Servers []TeamServer `json:"servers"`
}

// TeamNode is one node as the team database last said.
type TeamNode struct {
	Name       string    `json:"name"`
	Version    string    `json:"version"`
	ConfigHash string    `json:"config_hash"`
	LastSeen   time.Time `json:"last_seen"`
	// Link is "online" when the node was seen within three heartbeats.
	Link string `json:"link"`
}

// TeamServer is one model on one shared server (its server_key, or its
// URL's scheme://host:port), with each node's latest report, this node's
// first.
type TeamServer struct {
	Server  string       `json:"server"`
	Model   string       `json:"model"`
	Reports []TeamReport `json:"reports"`
}

// TeamReport is one node's latest word on a shared server.
type TeamReport struct {
	Node string `json:"node"`
	// Status is ok, breaker_open, probe_failed, busy, loading or
	// model_missing.
	Status string     `json:"status"`
	Detail string     `json:"detail"`
	At     *time.Time `json:"at"`    // by this node's clock; null before this node's first report
	Until  *time.Time `json:"until"` // when a failing report stops counting; null for ok
	// InFlight is how many of that node's requests run there.
	InFlight int `json:"in_flight"`
	// Current: the report still counts in this node's routing.
	Current bool `json:"current"`
}

// NewTeamLink is a team's link as the status shows it.
func NewTeamLink(st team.Status) TeamLink {
	return TeamLink{Node: st.Node, Link: st.Link, LinkSince: st.LinkSince, LinkError: st.LinkError}
}

// NewTeam is a team's state as the API shows it.
func NewTeam(st team.Status) Team {
	out := Team{TeamLink: NewTeamLink(st), Shipped: st.Shipped, Nodes: []TeamNode{}, Servers: []TeamServer{}}
	for _, n := range st.Nodes {
		out.Nodes = append(out.Nodes, TeamNode{Name: n.Name, Version: n.Version, ConfigHash: n.ConfigHash, LastSeen: n.LastSeen, Link: n.Link})
	}
	for _, s := range st.Servers {
		srv := TeamServer{Server: s.Server, Model: s.Model, Reports: []TeamReport{}}
		for _, r := range s.Reports {
			tr := TeamReport{Node: r.Node, Status: r.Status, Detail: r.Detail, InFlight: r.InFlight, Current: r.Current}
			if !r.At.IsZero() {
				at := r.At
				tr.At = &at
			}
			if !r.Until.IsZero() {
				until := r.Until
				tr.Until = &until
			}
			srv.Reports = append(srv.Reports, tr)
		}
		out.Servers = append(out.Servers, srv)
	}
	return out
}

// TeamRequests is GET /switchyard/v1/team/requests: the team's newest
// shipped requests, of every node or of one.
type TeamRequests struct {
	Requests []TeamRequest `json:"requests"`
}

// TeamRequest is one request of the team's history with the node that
// served it.
type TeamRequest struct {
	Node string `json:"node"`
	Request
}

// NewTeamRequests is the team's records as the API shows them.
func NewTeamRequests(recs []team.Record) TeamRequests {
	out := TeamRequests{Requests: make([]TeamRequest, 0, len(recs))}
	for _, r := range recs {
		out.Requests = append(out.Requests, TeamRequest{Node: r.Node, Request: NewRequest(r.RequestRecord)})
	}
	return out
}
