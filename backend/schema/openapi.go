package schema

import (
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3gen"

	"github.com/switchyard/switchyard/backend/fleet"
)

// The OpenAPI document is made from the Go types of this package by
// kin-openapi's reflection (openapi3gen), so it can't say anything the
// types don't: every field is required (the API always sends it), a
// pointer is nullable, and the string types of the domain list their
// values.

// documented are the types that become component schemas, by name: the
// documents of the endpoints, and the payloads of the events.
var documented = []any{
	Status{}, Config{}, ConfigWritten{}, Team{}, TeamRequests{}, Requests{}, Request{}, Attempt{}, Reading{}, KeptOut{}, Stats{}, Demo{}, DemoServer{}, SetFault{}, Error{},
	StatusDelta{}, RequestStarted{}, AttemptStarted{}, AttemptEvent{}, RequestDone{}, BreakerEvent{}, GPUEvent{}, ConfigEvent{},
}

// enums are the values of the domain's string types.
var enums = map[reflect.Type][]any{
	reflect.TypeFor[fleet.Outcome]():      values(fleet.Outcomes),
	reflect.TypeFor[fleet.Fault]():        values(fleet.Faults),
	reflect.TypeFor[fleet.Failure]():      values(fleet.Failures),
	reflect.TypeFor[fleet.Status]():       values(fleet.Statuses),
	reflect.TypeFor[fleet.BreakerState](): values(fleet.BreakerStates),
	reflect.TypeFor[fleet.Protocol]():     values(fleet.Protocols),
	reflect.TypeFor[fleet.Provider]():     values(fleet.Providers),
}

func values[T ~string](vs []T) []any {
	out := make([]any, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}

// OpenAPI returns the OpenAPI 3 document of /switchyard/v1/. It is built
// once; callers must not modify it.
func OpenAPI() *openapi3.T { return openAPI() }

var openAPI = sync.OnceValue(func() *openapi3.T {
	doc, err := build()
	if err != nil {
		panic("schema: " + err.Error()) // the types are fixed: a test catches this
	}
	return doc
})

// OpenAPIJSON is the document as served and committed (indented JSON,
// ending in a newline).
func OpenAPIJSON() []byte {
	b, err := json.MarshalIndent(OpenAPI(), "", "  ")
	if err != nil {
		panic("schema: " + err.Error())
	}
	return append(b, '\n')
}

func build() (*openapi3.T, error) {
	schemas := openapi3.Schemas{}
	gen := openapi3gen.NewGenerator(
		openapi3gen.CreateComponentSchemas(openapi3gen.ExportComponentSchemasOptions{ExportComponentSchemas: true, ExportTopLevelSchema: true}),
		openapi3gen.SchemaCustomizer(func(_ string, t reflect.Type, _ reflect.StructTag, s *openapi3.Schema) error {
			if vs, ok := enums[t]; ok {
				s.Enum = vs
			}
			return nil
		}),
	)
	types := map[string]reflect.Type{}
	for _, v := range documented {
		if _, err := gen.NewSchemaRefForValue(v, schemas); err != nil {
			return nil, err
		}
		types[reflect.TypeOf(v).Name()] = reflect.TypeOf(v)
	}
	for t := range gen.Types {
		if t.Kind() == reflect.Struct && t.PkgPath() == reflect.TypeFor[Status]().PkgPath() {
			types[t.Name()] = t
		}
	}
	for name, s := range schemas {
		if t, ok := types[name]; ok {
			tighten(s.Value, t)
		}
	}
	schemas["EventType"] = openapi3.NewSchemaRef("", openapi3.NewStringSchema().WithEnum(values(EventTypes)...))
	doc := &openapi3.T{
		OpenAPI: "3.0.3",
		Info: &openapi3.Info{
			Title:       "Switchyard's own API",
			Version:     "1",
			Description: "Status, history, live events and demo controls of a Switchyard router (docs/API.md).",
		},
		Components: &openapi3.Components{Schemas: schemas},
		Paths:      openapi3.NewPaths(),
	}
	for _, e := range endpoints {
		op := openapi3.NewOperation()
		op.Summary = e.summary
		op.OperationID = e.id
		for _, q := range e.query {
			op.AddParameter(openapi3.NewQueryParameter(q).WithSchema(openapi3.NewStringSchema()))
		}
		if strings.Contains(e.path, "{id}") {
			op.AddParameter(openapi3.NewPathParameter("id").WithSchema(openapi3.NewStringSchema()))
		}
		if e.body != "" {
			op.RequestBody = &openapi3.RequestBodyRef{Value: openapi3.NewRequestBody().WithRequired(true).
				WithJSONSchemaRef(ref(e.body))}
		}
		if e.stream {
			op.AddResponse(http.StatusOK, openapi3.NewResponse().WithDescription(e.summary).
				WithContent(openapi3.Content{"text/event-stream": openapi3.NewMediaType().WithSchema(openapi3.NewStringSchema())}))
		} else {
			op.AddResponse(http.StatusOK, openapi3.NewResponse().WithDescription(e.summary).WithJSONSchemaRef(ref(e.ok)))
		}
		for _, code := range e.errors {
			op.AddResponse(code, openapi3.NewResponse().WithDescription(http.StatusText(code)).WithJSONSchemaRef(ref("Error")))
		}
		item := doc.Paths.Find(e.path)
		if item == nil {
			item = &openapi3.PathItem{}
			doc.Paths.Set(e.path, item)
		}
		item.SetOperation(e.method, op)
	}
	loader := openapi3.NewLoader()
	if err := loader.ResolveRefsIn(doc, nil); err != nil {
		return nil, err
	}
	return doc, doc.Validate(loader.Context)
}

// endpoint is one operation of the document.
type endpoint struct {
	method, path, id, summary string
	query                     []string
	body                      string // request body schema, "" for none
	ok                        string // 200 schema
	stream                    bool   // 200 is text/event-stream
	errors                    []int
}

const prefix = "/switchyard/v1"

var endpoints = []endpoint{
	{method: "GET", path: prefix + "/status", id: "status", summary: "Candidates, breakers, GPUs, host, config and history health.", ok: "Status"},
	{method: "GET", path: prefix + "/config", id: "config", summary: "The config in force.", ok: "Config"},
	{method: "POST", path: prefix + "/config/write", id: "writeConfig", ok: "ConfigWritten", errors: []int{404, 409},
		summary: "Write the config in force, when it came from discovery, as the config file at the default path; never over an existing file."},
	{method: "GET", path: prefix + "/team", id: "team", summary: "The team: this node's link, the nodes, and what each reports of the shared servers (SPEC 6.6).", ok: "Team", errors: []int{404}},
	{method: "GET", path: prefix + "/team/requests", id: "teamRequests", summary: "The team's newest shipped requests, of every node or of one (node), with attempts.",
		query: []string{"node", "limit"}, ok: "TeamRequests", errors: []int{400, 404, 503}},
	{method: "GET", path: prefix + "/requests", id: "requests", summary: "The history, newest first, with attempts.",
		query: []string{"limit", "served", "fallback", "status", "since", "until", "before"}, ok: "Requests", errors: []int{400}},
	{method: "GET", path: prefix + "/requests/{id}", id: "request", summary: "One request with its attempts.", ok: "Request", errors: []int{404}},
	{method: "GET", path: prefix + "/stats", id: "stats", summary: "TTFT and failover rate per time bucket.",
		query: []string{"since", "bucket"}, ok: "Stats", errors: []int{400}},
	{method: "GET", path: prefix + "/events", id: "events", stream: true,
		summary: "Live events as Server-Sent Events: the event field names the type, the data is its payload (see the EventType values)."},
	{method: "GET", path: prefix + "/demo", id: "demo", summary: "The demo fleet's servers and the faults they can be given.", ok: "Demo", errors: []int{404}},
	{method: "POST", path: prefix + "/demo/fault", id: "setFault", summary: "Give a demo server a fault.", body: "SetFault", ok: "DemoServer", errors: []int{400, 404}},
}

func ref(name string) *openapi3.SchemaRef {
	return openapi3.NewSchemaRef("#/components/schemas/"+name, nil)
}

// tighten makes every property of s, the schema of struct type t,
// required, and the pointer ones nullable.
func tighten(s *openapi3.Schema, t reflect.Type) {
	if s == nil {
		return
	}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && name == "" {
			tighten(s, f.Type)
			continue
		}
		prop, ok := s.Properties[name]
		if !ok {
			continue
		}
		if !slices.Contains(s.Required, name) {
			s.Required = append(s.Required, name)
		}
		if f.Type.Kind() != reflect.Pointer {
			continue
		}
		if prop.Ref != "" {
			// A $ref can't be nullable itself (OpenAPI 3.0).
			s.Properties[name] = &openapi3.SchemaRef{Value: &openapi3.Schema{
				Nullable: true, AllOf: openapi3.SchemaRefs{openapi3.NewSchemaRef(prop.Ref, nil)},
			}}
			continue
		}
		prop.Value.Nullable = true
	}
	slices.Sort(s.Required)
}
