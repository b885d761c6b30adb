package team

import (
	"slices"
	"strings"
	"time"
)

// Status is what the node knows of its team, for the API and the UI.
type Status struct {
	Node string
	// Link is LinkOnline while both of the node's connections work, else
	// LinkOffline ("team link offline"), with the last error and since
	// when.
	Link      string
	LinkSince time.Time
	LinkError string
	// Shipped is how many records the node shipped since it started.
	Shipped int64
	Nodes   []Node
	Servers []Server
}

// Node is one member of the team, as the database last said.
type Node struct {
	Name, Version, ConfigHash string
	LastSeen                  time.Time // by this node's clock
	Link                      string    // LinkOnline: seen within three heartbeats
}

// Server is one shared (server, model) pair with each node's word on it.
type Server struct {
	Server, Model string
	Reports       []Report // this node's first, then by node name
}

// Report is one node's latest evidence on a server.
type Report struct {
	Node     string
	Status   string // StatusOK, StatusBreakerOpen, ...
	Detail   string
	At       time.Time // by this node's clock
	Until    time.Time // when it stops counting; zero for StatusOK
	InFlight int
	// Current: it still counts now. A failure counts until Until, unless
	// this node has seen the server answer since.
	Current bool
}

// Status reports the node's link, the nodes and the shared servers.
func (t *Team) Status() Status {
	now := t.o.Now()
	st := Status{Node: t.o.Node, Link: LinkOnline, Shipped: t.shipped.Load()}
	for i := range t.links {
		l := &t.links[i]
		l.mu.Lock()
		// The working connection's error first: the listener waits for
		// its migration, and says only "not connected yet" meanwhile.
		if !l.up && st.Link != LinkOffline {
			st.Link, st.LinkError = LinkOffline, l.err
		}
		if l.since.After(st.LinkSince) {
			st.LinkSince = l.since
		}
		l.mu.Unlock()
	}
	t.nodesMu.Lock()
	st.Nodes = slices.Clone(t.nodes)
	t.nodesMu.Unlock()
	// The list is as the database last said; its links age by this
	// node's clock, so a node not heard of for three heartbeats (this one's
	// own link offline included) is not shown online.
	for i := range st.Nodes {
		n := &st.Nodes[i]
		switch {
		case n.Name == t.o.Node:
			n.Link = st.Link
		case now.Sub(n.LastSeen) > 3*t.o.Heartbeat:
			n.Link = LinkOffline
		default:
			n.Link = LinkOnline
		}
	}

	e := t.ev
	e.mu.Lock()
	defer e.mu.Unlock()
	seen := map[target]bool{}
	for _, tg := range e.byID {
		if seen[tg] {
			continue
		}
		seen[tg] = true
		srv := Server{Server: tg.server, Model: tg.model}
		var okAt time.Time // a success this node saw after a report cancels it, as in Remote
		if m := e.local[tg]; m != nil {
			okAt = m.okAt
			r := Report{Node: t.o.Node, Status: m.status, Detail: m.detail, InFlight: m.inflight, Current: true}
			if !m.sent.IsZero() {
				r.At = m.sent
			}
			srv.Reports = append(srv.Reports, r)
		}
		var others []Report
		for node, h := range e.remote[tg] {
			r := Report{Node: node, Status: h.status, Detail: h.detail, At: h.at, InFlight: h.inflight}
			if h.status != StatusOK {
				r.Until = h.until
				r.Current = now.Before(h.until) && h.at.After(okAt)
			} else {
				r.Current = true
			}
			if !now.Before(h.inflightUntil) {
				r.InFlight = 0
			}
			others = append(others, r)
		}
		slices.SortFunc(others, func(a, b Report) int { return strings.Compare(a.Node, b.Node) })
		srv.Reports = append(srv.Reports, others...)
		st.Servers = append(st.Servers, srv)
	}
	slices.SortFunc(st.Servers, func(a, b Server) int {
		return strings.Compare(a.Server+" "+a.Model, b.Server+" "+b.Model)
	})
	return st
}
