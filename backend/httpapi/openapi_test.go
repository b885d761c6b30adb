package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/gpu"
	"github.com/switchyard/switchyard/backend/history"
	"github.com/switchyard/switchyard/backend/schema"
)

// fakeDemo is a demo fleet of one server.
type fakeDemo struct{ fault string }

func (d *fakeDemo) Demo() schema.Demo {
	return schema.Demo{
		Servers: []schema.DemoServer{{Candidate: "m1", Provider: "ollama", URL: "http://127.0.0.1:1", Fault: d.fault}},
		Faults:  []schema.DemoFault{{Name: "healthy", Label: "Healthy", Description: "answers normally"}},
	}
}

func (d *fakeDemo) SetFault(candidate, fault string) (schema.DemoServer, error) {
	if candidate != "m1" {
		return schema.DemoServer{}, errors.New("no demo server " + candidate)
	}
	d.fault = fault
	return d.Demo().Servers[0], nil
}

// Every answer of /switchyard/v1/ is what the OpenAPI document says it is:
// the document the UI's types are generated from cannot lie about a
// handler (issue 13, item 1).
func TestAnswersMatchTheOpenAPIDocument(t *testing.T) {
	store, err := history.Open(filepath.Join(t.TempDir(), "h.db"), history.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	now := time.Now().UTC()
	rec := fleet.RequestRecord{ID: "r1", StartedAt: now, Protocol: fleet.ProtocolOpenAI, RequestedModel: "auto",
		ServedCandidate: "m1", ServedModel: "model-1", Status: fleet.StatusOK, HTTPStatus: 200, TTFT: time.Second, Latency: 2 * time.Second,
		Attempts: []fleet.Attempt{
			{Candidate: "m0", Outcome: fleet.OutcomeBusy, Fault: fleet.FaultQueued, StartedAt: now, Deadline: time.Second, Duration: time.Second,
				Demoted: true, Reading: &fleet.GPUReading{GPU: 0, Source: "nvml", Reason: "free 0.6 GiB < 1 GiB"}},
			{Candidate: "m1", Outcome: fleet.OutcomeSuccess, StartedAt: now, TTFT: time.Second},
		}}
	if err := store.Record(t.Context(), rec); err != nil {
		t.Fatal(err)
	}
	at := now
	status := schema.NewStatus(schema.StatusInput{
		Version: "test", Listen: "127.0.0.1:8484", DefaultModel: "m1",
		Sample: &gpu.Sample{At: now, GPU: gpu.Snapshot{Available: true, At: now, Devices: []gpu.Device{{Index: 0, Name: "GPU", Processes: []gpu.Process{{PID: 1}}}}}},
		Config: schema.ConfigState{Path: "/x", Source: "file", Error: "bad", ErrorAt: &at},
	})
	s, _ := newTestServer(t, Options{
		History: store, Demo: &fakeDemo{fault: "healthy"},
		Status: func() schema.Status { return status },
		Config: func() schema.Config {
			return schema.Config{ConfigState: status.Config, YAML: "listen: 127.0.0.1:8484\n"}
		},
	})
	for _, tt := range []struct {
		method, path, route, body string
		want                      int
	}{
		{"GET", "/switchyard/v1/status", "", "", 200},
		{"GET", "/switchyard/v1/config", "", "", 200},
		{"GET", "/switchyard/v1/requests?limit=5", "/switchyard/v1/requests", "", 200},
		{"GET", "/switchyard/v1/requests?limit=nope", "/switchyard/v1/requests", "", 400},
		{"GET", "/switchyard/v1/requests/r1", "/switchyard/v1/requests/{id}", "", 200},
		{"GET", "/switchyard/v1/requests/nope", "/switchyard/v1/requests/{id}", "", 404},
		{"GET", "/switchyard/v1/stats?since=1h&bucket=1m", "/switchyard/v1/stats", "", 200},
		{"GET", "/switchyard/v1/stats?bucket=soon", "/switchyard/v1/stats", "", 400},
		{"GET", "/switchyard/v1/demo", "", "", 200},
		{"POST", "/switchyard/v1/demo/fault", "", `{"candidate":"m1","fault":"healthy"}`, 200},
		{"POST", "/switchyard/v1/demo/fault", "", `{"candidate":"zz","fault":"healthy"}`, 400},
	} {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			w := do(s, tt.method, tt.path, tt.body, nil)
			if w.Code != tt.want {
				t.Fatalf("status = %d; want %d (%s)", w.Code, tt.want, w.Body.String())
			}
			route := tt.route
			if route == "" {
				route = tt.path
			}
			if err := validateJSON(tt.method, route, w.Code, w.Body.Bytes()); err != nil {
				t.Error(err)
			}
		})
	}
	w := do(s, "GET", "/switchyard/v1/openapi.json", "", nil)
	if w.Code != 200 || !strings.Contains(w.Body.String(), `"openapi": "3.0.3"`) {
		t.Errorf("openapi.json: %d %s", w.Code, w.Body.String()[:min(200, w.Body.Len())])
	}
}

// Query parameters of the history endpoints are checked, each with its own
// message.
func TestHistoryQueries(t *testing.T) {
	store, err := history.Open(filepath.Join(t.TempDir(), "h.db"), history.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	s, _ := newTestServer(t, Options{History: store})
	for _, tt := range []struct {
		path, want string
		code       int
	}{
		{"/switchyard/v1/requests?limit=0", "limit: expected a positive integer", 400},
		{"/switchyard/v1/requests?limit=x", "limit: expected a positive integer", 400},
		{"/switchyard/v1/requests?fallback=maybe", "fallback: expected true or false", 400},
		{"/switchyard/v1/requests?status=failed", `status: \"failed\" is not a status (ok, error, client_abort, upstream_error_after_commit, shutdown)`, 400},
		{"/switchyard/v1/requests?status=" + strings.Repeat("s", 5000), "is not a status", 400},
		{"/switchyard/v1/requests?status=shutdown", `{"requests":[]}`, 200},
		{"/switchyard/v1/requests?since=yesterday", "since: expected an RFC 3339 time", 400},
		{"/switchyard/v1/requests?until=2026-13-01", "until: expected an RFC 3339 time", 400},
		{"/switchyard/v1/requests?limit=3&fallback=true&status=ok&served=m1&since=2026-01-01T00:00:00Z", `{"requests":[]}`, 200},
		{"/switchyard/v1/stats?since=-1h", "since: expected a positive duration", 400},
		{"/switchyard/v1/stats?bucket=10ms", "bucket: at least 1s", 400},
		{"/switchyard/v1/stats?since=720h&bucket=1s", "at most 10000 buckets", 400},
		{"/switchyard/v1/stats?since=720h&bucket=301s", "bucket: a whole number of minutes for a window over 1h0m0s", 400},
		{"/switchyard/v1/stats?since=1h&bucket=17s", `"ttft":[]`, 200},
		{"/switchyard/v1/stats?since=1h&bucket=1m", `"ttft":[]`, 200},
		{"/switchyard/v1/requests/" + strings.Repeat("r", 60000), "no request rrr", 404},
	} {
		w := do(s, "GET", tt.path, "", nil)
		if w.Code != tt.code || !strings.Contains(w.Body.String(), tt.want) {
			t.Errorf("GET %s = %d %s; want %d with %q", fleet.ClipTo(tt.path, 100), w.Code, fleet.ClipTo(w.Body.String(), 200), tt.code, tt.want)
		}
		if w.Body.Len() > 1<<10 {
			t.Errorf("GET %s echoed %d bytes; want the caller's text clipped", fleet.ClipTo(tt.path, 100), w.Body.Len())
		}
	}
	s, _ = newTestServer(t, Options{})
	for _, path := range []string{"/switchyard/v1/requests", "/switchyard/v1/stats", "/switchyard/v1/demo", "/switchyard/v1/status", "/switchyard/v1/config"} {
		if w := do(s, "GET", path, "", nil); w.Code != 404 {
			t.Errorf("GET %s without its source = %d; want 404", path, w.Code)
		}
	}
}

// validateJSON checks body, a JSON answer of method path with status code,
// against the OpenAPI document: what every handler test asks of its answers.
func validateJSON(method, path string, code int, body []byte) error {
	item := schema.OpenAPI().Paths.Find(path)
	if item == nil {
		return fmt.Errorf("%s is not in the OpenAPI document", path)
	}
	op := item.GetOperation(method)
	if op == nil {
		return fmt.Errorf("%s %s is not in the OpenAPI document", method, path)
	}
	resp := op.Responses.Status(code)
	if resp == nil || resp.Value == nil {
		return fmt.Errorf("%s %s: status %d is not in the OpenAPI document", method, path, code)
	}
	mt := resp.Value.Content.Get("application/json")
	if mt == nil {
		return fmt.Errorf("%s %s: status %d has no JSON schema", method, path, code)
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	s := mt.Schema
	if s.Ref != "" {
		s = schema.OpenAPI().Components.Schemas[strings.TrimPrefix(s.Ref, "#/components/schemas/")]
	}
	if err := s.Value.VisitJSON(v); err != nil {
		return fmt.Errorf("%s %s answered what the document does not allow: %w", method, path, err)
	}
	return nil
}
