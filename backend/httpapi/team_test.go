package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
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
	s, _ = newTestServer(t, Options{Team: fixedTeam{doc}})
	w := do(s, "GET", "/switchyard/v1/team", "", nil)
	var got schema.Team
	if err := json.Unmarshal(w.Body.Bytes(), &got); w.Code != http.StatusOK || err != nil || got.Link != "offline" || got.Node != "a" {
		t.Errorf("GET /team = %d %s; want 200 with node a offline", w.Code, w.Body.String())
	}
	w = do(s, "GET", "/switchyard/v1/team/requests?node=b&limit=7", "", nil)
	var reqs schema.TeamRequests
	if err := json.Unmarshal(w.Body.Bytes(), &reqs); w.Code != http.StatusOK || err != nil || len(reqs.Requests) != 1 || reqs.Requests[0].Node != "b" || reqs.Requests[0].ID != "7" {
		t.Errorf("GET /team/requests?node=b&limit=7 = %d %s; want node b's one request", w.Code, w.Body.String())
	}
	if w := do(s, "GET", "/switchyard/v1/team/requests?limit=x", "", nil); w.Code != http.StatusBadRequest {
		t.Errorf("GET /team/requests?limit=x = %d; want 400", w.Code)
	}
	if w := do(s, "GET", "/switchyard/v1/team/requests?node=down", "", nil); w.Code != http.StatusServiceUnavailable {
		t.Errorf("GET /team/requests with the database down = %d; want 503", w.Code)
	}
}

type fixedTeam struct{ doc schema.Team }

func (f fixedTeam) Doc() schema.Team { return f.doc }

func (f fixedTeam) Requests(_ context.Context, node string, limit int) (schema.TeamRequests, error) {
	if node == "down" {
		return schema.TeamRequests{}, errors.New("connect: refused")
	}
	return schema.TeamRequests{Requests: []schema.TeamRequest{{Node: node, Request: schema.Request{ID: strconv.Itoa(limit)}}}}, nil
}
