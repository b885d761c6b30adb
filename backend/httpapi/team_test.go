package httpapi

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/switchyard/switchyard/backend/schema"
)

func TestTeamEndpoint(t *testing.T) {
	s, _ := newTestServer(t, Options{})
	if w := do(s, "GET", "/switchyard/v1/team", "", nil); w.Code != http.StatusNotFound {
		t.Errorf("GET /team without a team = %d; want 404", w.Code)
	}
	doc := schema.Team{TeamLink: schema.TeamLink{Node: "a", Link: "offline", LinkError: "connect: refused"},
		Nodes: []schema.TeamNode{}, Servers: []schema.TeamServer{}}
	s, _ = newTestServer(t, Options{Team: func() schema.Team { return doc }})
	w := do(s, "GET", "/switchyard/v1/team", "", nil)
	var got schema.Team
	if err := json.Unmarshal(w.Body.Bytes(), &got); w.Code != http.StatusOK || err != nil || got.Link != "offline" || got.Node != "a" {
		t.Errorf("GET /team = %d %s; want 200 with node a offline", w.Code, w.Body.String())
	}
}
