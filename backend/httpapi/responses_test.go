package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ollama/ollama/api"
	oa "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/packages/respjson"
	"github.com/openai/openai-go/v3/responses"

	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/router"
	"github.com/switchyard/switchyard/backend/simfleet"
	"github.com/switchyard/switchyard/backend/upstream"
	"github.com/switchyard/switchyard/backend/upstream/ollama"
	"github.com/switchyard/switchyard/backend/upstream/openai"
)

// responsesAPI serves Switchyard's API on a real port, routing to targets
// in their order (the first is the default), and returns its base URL.
func responsesAPI(t *testing.T, rec router.Recorder, targets ...router.Target) string {
	t.Helper()
	_, base := responsesServer(t, rec, targets...)
	return base
}

// responsesServer is responsesAPI, returning the server too.
func responsesServer(t *testing.T, rec router.Recorder, targets ...router.Target) (*Server, string) {
	t.Helper()
	rt := router.New(router.Fleet{
		Targets: targets, DefaultModel: targets[0].Candidate.ID,
		Settings: router.Settings{FirstTokenTimeout: 10 * time.Second, StallTimeout: time.Minute},
	}, router.Deps{Recorder: rec})
	ts := httptest.NewUnstartedServer(nil)
	s := New(Options{Router: rt, Listen: ts.Listener.Addr().String()})
	ts.Config.Handler = s
	ts.Start()
	t.Cleanup(ts.Close)
	return s, ts.URL
}

// upstreams returns cands as targets behind the real upstream adapters.
func upstreams(t *testing.T, cands ...fleet.Candidate) []router.Target {
	pool := upstream.NewPool(upstream.Settings{})
	t.Cleanup(pool.CloseIdle)
	backends := map[fleet.Provider]fleet.Backend{fleet.ProviderOllama: ollama.New(pool), fleet.ProviderOpenAI: openai.New(pool)}
	targets := make([]router.Target, len(cands))
	for i, c := range cands {
		targets[i] = router.Target{Candidate: c, Backend: backends[c.Provider]}
	}
	return targets
}

// simFleet starts n fast simulated servers speaking p ("" alternates,
// Ollama first) and a Switchyard in front of them.
func simFleet(t *testing.T, n int, p fleet.Provider, rec router.Recorder) (*simfleet.Fleet, string) {
	t.Helper()
	f, err := simfleet.StartFast(n, p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f, responsesAPI(t, rec, upstreams(t, f.Candidates()...)...)
}

func postResponses(t *testing.T, ctx context.Context, base, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "POST", base+"/v1/responses", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// sseEvent is one event of a Responses stream.
type sseEvent struct {
	Name string
	Data map[string]any
}

// readEvents reads a whole Responses stream, checking its framing: each
// event's name is its data's type, and sequence numbers count from 0.
func readEvents(t *testing.T, body io.Reader) []sseEvent {
	t.Helper()
	var events []sseEvent
	sc := bufio.NewScanner(body)
	sc.Buffer(nil, 1<<20)
	var ev sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if ev.Name == "" || ev.Data == nil {
				t.Fatalf("event %d is missing its name or data", len(events))
			}
			if ev.Data["type"] != ev.Name {
				t.Errorf("event %q has data of type %v", ev.Name, ev.Data["type"])
			}
			if seq, _ := ev.Data["sequence_number"].(float64); int(seq) != len(events) {
				t.Errorf("event %d (%s) has sequence_number %v", len(events), ev.Name, ev.Data["sequence_number"])
			}
			events = append(events, ev)
			ev = sseEvent{}
		case strings.HasPrefix(line, "event: "):
			ev.Name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev.Data); err != nil {
				t.Fatalf("event %q: data is not JSON: %v", ev.Name, err)
			}
		default:
			t.Fatalf("not an SSE line: %q", line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if ev.Name != "" {
		t.Fatalf("the stream ended inside event %q", ev.Name)
	}
	return events
}

// shape is the events' names, a run of one delta event written once with
// a "+", and each output item event with its item's type.
func shape(events []sseEvent) []string {
	var out []string
	for _, e := range events {
		name := e.Name
		if item, ok := e.Data["item"].(map[string]any); ok {
			name += fmt.Sprintf("(%v@%v)", item["type"], e.Data["output_index"])
		}
		if strings.HasSuffix(name, ".delta") {
			name += "+"
			if len(out) > 0 && out[len(out)-1] == name {
				continue
			}
		}
		out = append(out, name)
	}
	return out
}

// deltas joins the deltas of the events named name.
func deltas(events []sseEvent, name string) string {
	var b strings.Builder
	for _, e := range events {
		if e.Name == name {
			b.WriteString(e.Data["delta"].(string))
		}
	}
	return b.String()
}

// final returns the response of the stream's last event, which must be
// named name.
func final(t *testing.T, events []sseEvent, name string) map[string]any {
	t.Helper()
	if len(events) == 0 || events[len(events)-1].Name != name {
		t.Fatalf("last event is not %s:\n%s", name, strings.Join(shape(events), "\n"))
	}
	return events[len(events)-1].Data["response"].(map[string]any)
}

// outputs returns a response's output items.
func outputs(resp map[string]any) []map[string]any {
	var out []map[string]any
	for _, o := range resp["output"].([]any) {
		out = append(out, o.(map[string]any))
	}
	return out
}

// messageText returns the text of a message output item.
func messageText(item map[string]any) string {
	return item["content"].([]any)[0].(map[string]any)["text"].(string)
}

var (
	textShape = []string{"response.created", "response.in_progress",
		"response.output_item.added(message@0)", "response.content_part.added", "response.output_text.delta+",
		"response.output_text.done", "response.content_part.done", "response.output_item.done(message@0)", "response.completed"}
	reasoningShape = []string{"response.created", "response.in_progress",
		"response.output_item.added(reasoning@0)", "response.reasoning_summary_text.delta+", "response.reasoning_summary_text.done",
		"response.output_item.done(reasoning@0)",
		"response.output_item.added(message@1)", "response.content_part.added", "response.output_text.delta+",
		"response.output_text.done", "response.content_part.done", "response.output_item.done(message@1)", "response.completed"}
)

// A plain answer, streamed and not, from each kind of upstream: the text
// is the upstream's, the model is the served candidate's, the id holds the
// request id.
func TestResponsesText(t *testing.T) {
	for _, p := range fleet.Providers {
		t.Run(string(p), func(t *testing.T) {
			f, base := simFleet(t, 1, p, nil)
			want := f.Server("fast-1").Answer("fast-1")

			resp := postResponses(t, t.Context(), base, `{"model":"auto","input":"hello","instructions":"be brief","max_output_tokens":200,"temperature":0.5}`)
			var body map[string]any
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != 200 {
				t.Fatalf("status %d, %v", resp.StatusCode, err)
			}
			if body["object"] != "response" || body["status"] != "completed" || body["model"] != "fast-1" || body["completed_at"] == nil {
				t.Errorf("response = %v", body)
			}
			if id := resp.Header.Get("X-Switchyard-Request-Id"); id == "" || body["id"] != "resp_"+id {
				t.Errorf("id = %v; want resp_ and the request id %q", body["id"], id)
			}
			out := outputs(body)
			if len(out) != 1 || out[0]["type"] != "message" || messageText(out[0]) != want {
				t.Errorf("output = %v; want one message %q", out, want)
			}
			usage := body["usage"].(map[string]any)
			if usage["input_tokens"].(float64) < 1 || usage["output_tokens"].(float64) < 1 {
				t.Errorf("usage = %v", usage)
			}

			resp = postResponses(t, t.Context(), base, `{"model":"auto","stream":true,"input":[{"role":"user","content":[{"type":"input_text","text":"hello"}]}]}`)
			if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
				t.Fatalf("status %d, Content-Type %q", resp.StatusCode, ct)
			}
			events := readEvents(t, resp.Body)
			if got := shape(events); !slices.Equal(got, textShape) {
				t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(textShape, "\n"))
			}
			if got := deltas(events, "response.output_text.delta"); got != want {
				t.Errorf("streamed text %q; want %q", got, want)
			}
			done := final(t, events, "response.completed")
			if out := outputs(done); len(out) != 1 || messageText(out[0]) != want || done["model"] != "fast-1" || done["status"] != "completed" {
				t.Errorf("completed response = %v", done)
			}
			if id := resp.Header.Get("X-Switchyard-Request-Id"); done["id"] != "resp_"+id {
				t.Errorf("id = %v; want resp_%s", done["id"], id)
			}
		})
	}
}

// reasoning.effort turns thinking on: the reasoning comes first, as its own
// output item, then the message.
func TestResponsesReasoning(t *testing.T) {
	f, base := simFleet(t, 1, fleet.ProviderOllama, nil)
	thinking, answer := f.Server("fast-1").Thinking("fast-1"), f.Server("fast-1").Answer("fast-1")

	resp := postResponses(t, t.Context(), base, `{"model":"auto","stream":true,"input":"why?","reasoning":{"effort":"high","summary":"auto"}}`)
	events := readEvents(t, resp.Body)
	if got := shape(events); !slices.Equal(got, reasoningShape) {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(reasoningShape, "\n"))
	}
	if got := deltas(events, "response.reasoning_summary_text.delta"); got != thinking {
		t.Errorf("reasoning %q; want %q", got, thinking)
	}
	if got := deltas(events, "response.output_text.delta"); got != answer {
		t.Errorf("text %q; want %q", got, answer)
	}
	out := outputs(final(t, events, "response.completed"))
	if len(out) != 2 || out[0]["type"] != "reasoning" || out[1]["type"] != "message" || messageText(out[1]) != answer {
		t.Errorf("output = %v", out)
	}

	resp = postResponses(t, t.Context(), base, `{"model":"auto","input":"why?","reasoning":{"effort":"high"}}`)
	var body map[string]any
	json.NewDecoder(resp.Body).Decode(&body)
	out = outputs(body)
	if len(out) != 2 || out[0]["type"] != "reasoning" || out[0]["summary"].([]any)[0].(map[string]any)["text"] != thinking || messageText(out[1]) != answer {
		t.Errorf("output = %v", out)
	}

	resp = postResponses(t, t.Context(), base, `{"model":"auto","stream":true,"input":"why?"}`)
	if got := shape(readEvents(t, resp.Body)); !slices.Equal(got, textShape) {
		t.Errorf("without reasoning.effort the events are\n%s", strings.Join(got, "\n"))
	}
}

// toolUpstream is an Ollama server (POST /api/chat) with a model that has
// one tool, get_weather. It streams NDJSON as Ollama streams a tool call:
// the whole call in one line, without an id. Once the conversation holds
// the tool's result it answers with text; a prompt that mentions
// "preamble" gets a sentence before the call.
type toolUpstream struct {
	mu   sync.Mutex
	reqs []api.ChatRequest
}

const toolAnswer = "It is 21 degrees in Paris."

func (u *toolUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req api.ChatRequest
	if r.URL.Path != "/api/chat" || json.NewDecoder(r.Body).Decode(&req) != nil || len(req.Messages) == 0 {
		http.Error(w, `{"error":"bad request"}`, http.StatusBadRequest)
		return
	}
	u.mu.Lock()
	u.reqs = append(u.reqs, req)
	u.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-ndjson")
	line := func(message string) {
		fmt.Fprintf(w, `{"model":%q,"created_at":"2026-03-01T12:00:00Z","message":%s,"done":false}`+"\n", req.Model, message)
	}
	last := req.Messages[len(req.Messages)-1]
	if last.Role == "tool" {
		line(`{"role":"assistant","content":"It is 21 degrees"}`)
		line(`{"role":"assistant","content":" in Paris."}`)
	} else {
		if strings.Contains(last.Content, "preamble") {
			line(`{"role":"assistant","content":"Let me look that up."}`)
		}
		line(`{"role":"assistant","content":"","tool_calls":[{"function":{"index":0,"name":"get_weather","arguments":{"city":"Paris"}}}]}`)
	}
	fmt.Fprintf(w, `{"model":%q,"created_at":"2026-03-01T12:00:01Z","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop","total_duration":1000,"prompt_eval_count":12,"eval_count":7}`+"\n", req.Model)
}

func (u *toolUpstream) requests() []api.ChatRequest {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.reqs)
}

// toolFleet starts a toolUpstream and a Switchyard in front of it.
func toolFleet(t *testing.T) (*toolUpstream, string) {
	u := &toolUpstream{}
	ts := httptest.NewServer(u)
	t.Cleanup(ts.Close)
	return u, responsesAPI(t, nil, upstreams(t, fleet.Candidate{ID: "tools", Provider: fleet.ProviderOllama, URL: ts.URL, Model: "tool-model", Enabled: true, Local: true})...)
}

const weatherTool = `{"type":"function","name":"get_weather","description":"The weather in a city.","strict":false,` +
	`"parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}}`

// A function tool, both ways: the model's call goes out as a function_call
// with a call_id (made by Switchyard, as Ollama gives none), and the
// caller's function_call_output comes back in as the tool's result.
func TestResponsesToolRoundTrip(t *testing.T) {
	for _, stream := range []bool{true, false} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			u, base := toolFleet(t)
			resp := postResponses(t, t.Context(), base, fmt.Sprintf(`{"model":"auto","stream":%v,"input":"Weather in Paris?","tools":[%s]}`, stream, weatherTool))
			var out []map[string]any
			if stream {
				events := readEvents(t, resp.Body)
				want := []string{"response.created", "response.in_progress", "response.output_item.added(function_call@0)",
					"response.function_call_arguments.delta+", "response.function_call_arguments.done", "response.output_item.done(function_call@0)", "response.completed"}
				if got := shape(events); !slices.Equal(got, want) {
					t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
				out = outputs(final(t, events, "response.completed"))
			} else {
				var body map[string]any
				json.NewDecoder(resp.Body).Decode(&body)
				out = outputs(body)
			}
			callID := "call_" + resp.Header.Get("X-Switchyard-Request-Id") + "_0"
			if len(out) != 1 || out[0]["type"] != "function_call" || out[0]["name"] != "get_weather" ||
				out[0]["arguments"] != `{"city":"Paris"}` || out[0]["call_id"] != callID {
				t.Fatalf("output = %v; want one get_weather call with call_id %s", out, callID)
			}

			resp = postResponses(t, t.Context(), base, fmt.Sprintf(`{"model":"auto","stream":%v,"tools":[%s],"input":[
				{"role":"user","content":"Weather in Paris?"},
				{"type":"function_call","call_id":%q,"name":"get_weather","arguments":"{\"city\":\"Paris\"}"},
				{"type":"function_call_output","call_id":%q,"output":"21 degrees"}]}`, stream, weatherTool, callID, callID))
			var text string
			if stream {
				events := readEvents(t, resp.Body)
				text = deltas(events, "response.output_text.delta")
				final(t, events, "response.completed")
			} else {
				var body map[string]any
				json.NewDecoder(resp.Body).Decode(&body)
				text = messageText(outputs(body)[0])
			}
			if text != toolAnswer {
				t.Errorf("answer %q; want %q", text, toolAnswer)
			}

			reqs := u.requests()
			if len(reqs) != 2 {
				t.Fatalf("the upstream got %d requests; want 2", len(reqs))
			}
			if tools := reqs[0].Tools; len(tools) != 1 || tools[0].Function.Name != "get_weather" || tools[0].Function.Parameters.Properties.Len() != 1 {
				t.Errorf("tools sent upstream = %+v", tools)
			}
			msgs := reqs[1].Messages
			if len(msgs) != 3 || msgs[1].Role != "assistant" || len(msgs[1].ToolCalls) != 1 || msgs[1].ToolCalls[0].ID != callID ||
				msgs[1].ToolCalls[0].Function.Name != "get_weather" || msgs[2].Role != "tool" || msgs[2].Content != "21 degrees" ||
				msgs[2].ToolCallID != callID || msgs[2].ToolName != "get_weather" {
				t.Errorf("conversation sent upstream = %+v", msgs)
			}
		})
	}
}

// A tool's output may be a list of content parts, as OpenAI's Responses
// API (and Ollama since v0.33) allows: its text reaches the model as the
// tool's result, though the pinned Ollama module decodes only a string.
func TestResponsesToolOutputParts(t *testing.T) {
	u, base := toolFleet(t)
	resp := postResponses(t, t.Context(), base, fmt.Sprintf(`{"model":"auto","tools":[%s],"input":[
		{"role":"user","content":"Weather in Paris?"},
		{"type":"function_call","call_id":"call_1","name":"get_weather","arguments":"{\"city\":\"Paris\"}"},
		{"type":"function_call_output","call_id":"call_1","output":[{"type":"input_text","text":"21 degrees"},{"type":"input_text","text":"sunny"}]}]}`, weatherTool))
	var body map[string]any
	json.NewDecoder(resp.Body).Decode(&body)
	if resp.StatusCode != 200 || messageText(outputs(body)[0]) != toolAnswer {
		t.Fatalf("= %d %v; want 200 with the answer %q", resp.StatusCode, body, toolAnswer)
	}
	reqs := u.requests()
	if len(reqs) != 1 {
		t.Fatalf("the upstream got %d requests; want 1", len(reqs))
	}
	if msgs := reqs[0].Messages; len(msgs) != 3 || msgs[2].Role != "tool" || msgs[2].Content != "21 degrees\nsunny" || msgs[2].ToolName != "get_weather" {
		t.Errorf("conversation sent upstream = %+v; want the tool's result \"21 degrees\\nsunny\"", msgs)
	}
}

// Text before a tool call is a message item of its own, closed before the
// call's item, and both are in the response.
func TestResponsesTextBeforeToolCall(t *testing.T) {
	_, base := toolFleet(t)
	body := fmt.Sprintf(`{"model":"auto","stream":true,"input":"Weather in Paris? (preamble)","tools":[%s]}`, weatherTool)
	events := readEvents(t, postResponses(t, t.Context(), base, body).Body)
	want := []string{"response.created", "response.in_progress",
		"response.output_item.added(message@0)", "response.content_part.added", "response.output_text.delta+",
		"response.output_text.done", "response.content_part.done", "response.output_item.done(message@0)",
		"response.output_item.added(function_call@1)", "response.function_call_arguments.delta+", "response.function_call_arguments.done",
		"response.output_item.done(function_call@1)", "response.completed"}
	if got := shape(events); !slices.Equal(got, want) {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, e := range events {
		if e.Name == "response.output_text.done" && e.Data["text"] != "Let me look that up." {
			t.Errorf("output_text.done text = %v", e.Data["text"])
		}
	}
	check := func(out []map[string]any) {
		t.Helper()
		if len(out) != 2 || out[0]["type"] != "message" || messageText(out[0]) != "Let me look that up." || out[1]["type"] != "function_call" {
			t.Errorf("output = %v; want the message, then the call", out)
		}
	}
	check(outputs(final(t, events, "response.completed")))

	var whole map[string]any
	json.NewDecoder(postResponses(t, t.Context(), base, strings.Replace(body, `"stream":true`, `"stream":false`, 1)).Body).Decode(&whole)
	check(outputs(whole))
}

// A tool call an OpenAI-style upstream streams in fragments reaches the
// caller as one whole call, with the upstream's id.
func TestResponsesMergesToolCallFragments(t *testing.T) {
	base := responsesAPI(t, nil, router.Target{Candidate: fleet.Candidate{ID: "m1", Model: "model-1", Enabled: true}, Backend: fragmentBackend{}})
	events := readEvents(t, postResponses(t, t.Context(), base, `{"model":"auto","stream":true,"input":"weather?"}`).Body)
	out := outputs(final(t, events, "response.completed"))
	if len(out) != 1 || out[0]["call_id"] != "call_1" || out[0]["name"] != "get_weather" || out[0]["arguments"] != `{"location":"Paris"}` {
		t.Errorf("output = %v; want one whole get_weather(location=Paris), call_1", out)
	}
	if n := strings.Count(strings.Join(shape(events), " "), "output_item.added"); n != 1 {
		t.Errorf("%d items added; want 1", n)
	}
}

// chunksBackend answers every request with its chunks.
type chunksBackend []fleet.Chunk

func (b chunksBackend) Open(context.Context, fleet.Candidate, *fleet.Request) (fleet.Stream, error) {
	return &sliceStream{chunks: slices.Clone(b)}, nil
}

// An answer cut at max_output_tokens is incomplete, not completed.
func TestResponsesIncomplete(t *testing.T) {
	cut := chunksBackend{{Content: "Once upon"}, {Content: " a time", FinishReason: "length", Usage: &fleet.Usage{PromptTokens: 3, CompletionTokens: 4}}}
	base := responsesAPI(t, nil, router.Target{Candidate: fleet.Candidate{ID: "m1", Model: "model-1", Enabled: true}, Backend: cut})
	events := readEvents(t, postResponses(t, t.Context(), base, `{"model":"auto","stream":true,"input":"a story","max_output_tokens":4}`).Body)
	resp := final(t, events, "response.incomplete")
	if resp["status"] != "incomplete" || resp["incomplete_details"].(map[string]any)["reason"] != "max_output_tokens" {
		t.Errorf("response = %v", resp)
	}
	var body map[string]any
	json.NewDecoder(postResponses(t, t.Context(), base, `{"model":"auto","input":"a story","max_output_tokens":4}`).Body).Decode(&body)
	if body["status"] != "incomplete" || body["incomplete_details"].(map[string]any)["reason"] != "max_output_tokens" || messageText(outputs(body)[0]) != "Once upon a time" {
		t.Errorf("response = %v", body)
	}
}

// A primary that fails before its first token is replaced silently: the
// answer is the secondary's, and the headers say so.
func TestResponsesFailover(t *testing.T) {
	for _, stream := range []bool{true, false} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			f, base := simFleet(t, 2, "", nil)
			if err := f.SetFault("fast-1", simfleet.Fault{Kind: simfleet.FaultStatus, Status: 500}); err != nil {
				t.Fatal(err)
			}
			resp := postResponses(t, t.Context(), base, fmt.Sprintf(`{"model":"auto","stream":%v,"input":"hello"}`, stream))
			if resp.StatusCode != 200 || resp.Header.Get("X-Switchyard-Fallback") != "true" || resp.Header.Get("X-Switchyard-Served-Model") != "fast-2" {
				t.Fatalf("status %d, headers %v", resp.StatusCode, resp.Header)
			}
			var out map[string]any
			if stream {
				out = final(t, readEvents(t, resp.Body), "response.completed")
			} else {
				json.NewDecoder(resp.Body).Decode(&out)
			}
			if want := f.Server("fast-2").Answer("fast-2"); out["model"] != "fast-2" || messageText(outputs(out)[0]) != want {
				t.Errorf("response = %v; want fast-2's answer %q", out, want)
			}
		})
	}
}

// An upstream that dies after the first token ends the stream with an
// error event: no completed event, and only the text that server sent.
func TestResponsesMidStreamFailure(t *testing.T) {
	f, base := simFleet(t, 2, "", nil)
	if err := f.SetFault("fast-1", simfleet.Fault{Kind: simfleet.FaultDieAfter, AfterTokens: 3}); err != nil {
		t.Fatal(err)
	}
	resp := postResponses(t, t.Context(), base, `{"model":"auto","stream":true,"input":"hello"}`)
	events := readEvents(t, resp.Body)
	last := events[len(events)-1]
	if last.Name != "error" || last.Data["code"] != "upstream_error" || last.Data["message"] == "" {
		t.Errorf("last event = %v; want an error event", last)
	}
	for _, e := range events {
		if e.Name == "response.completed" {
			t.Error("a failed stream has a response.completed event")
		}
	}
	if got, want := deltas(events, "response.output_text.delta"), strings.Join(f.Server("fast-1").AnswerTokens("fast-1")[:3], ""); got != want {
		t.Errorf("text %q; want fast-1's first three tokens %q", got, want)
	}
}

// recorder hands over the records the router writes.
type recorder chan fleet.RequestRecord

func (r recorder) Record(_ context.Context, rec fleet.RequestRecord) error {
	r <- rec
	return nil
}

// A caller that leaves mid-stream stops the upstream, and the request is
// recorded as its abort.
func TestResponsesClientAbort(t *testing.T) {
	rec := make(recorder, 1)
	f, base := simFleet(t, 1, fleet.ProviderOllama, rec)
	if err := f.SetFault("fast-1", simfleet.Fault{Kind: simfleet.FaultSlow, Gap: time.Hour}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	resp := postResponses(t, ctx, base, `{"model":"auto","stream":true,"input":"hello"}`)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() && sc.Text() != "event: response.output_text.delta" {
	}
	cancel()
	wait, stop := context.WithTimeout(t.Context(), 10*time.Second)
	defer stop()
	if err := f.Server("fast-1").WaitStats(wait, func(s simfleet.Stats) bool { return s.Cancelled == 1 }); err != nil {
		t.Fatalf("the upstream was not stopped: %v (%+v)", err, f.Server("fast-1").Stats())
	}
	select {
	case r := <-rec:
		if r.Status != fleet.StatusClientAbort {
			t.Errorf("recorded status %q; want %q", r.Status, fleet.StatusClientAbort)
		}
	case <-wait.Done():
		t.Fatal("the request was not recorded")
	}
}

// What cannot be honoured is refused in OpenAI's error shape, before
// routing; what is harmless is accepted.
func TestResponsesRefused(t *testing.T) {
	tests := []struct {
		name, body string
		status     int
		want       string
	}{
		{"malformed JSON", `{"model":`, 400, "malformed JSON"},
		{"a field of the wrong type", `{"model":"auto","input":"x","temperature":"hot"}`, 400, `field \"temperature\": expected a number, got JSON string`},
		{"a body of the wrong type", `["x"]`, 400, `the body: expected an object, got JSON array`},
		{"a field of Switchyard's of the wrong type", `{"model":"auto","input":"x","previous_response_id":7}`, 400, `field \"previous_response_id\"`},
		{"no input", `{"model":"auto"}`, 400, "input: required"},
		{"an unknown previous_response_id", `{"model":"auto","input":"x","previous_response_id":"resp_1"}`, 400, `previous_response_id: no response \"resp_1\" is kept here`},
		{"conversation", `{"model":"auto","input":"x","conversation":"conv_1"}`, 400, "conversation:"},
		{"background", `{"model":"auto","input":"x","background":true}`, 400, "background:"},
		{"a stored prompt", `{"model":"auto","input":"x","prompt":{"id":"pmpt_1"}}`, 400, "prompt:"},
		{"a built-in tool", `{"model":"auto","input":"x","tools":[{"type":"web_search"}]}`, 400, `tools[0]: \"web_search\" is a tool OpenAI runs`},
		{"file_search next to a function", `{"model":"auto","input":"x","tools":[` + weatherTool + `,{"type":"file_search","vector_store_ids":["vs_1"]}]}`, 400, "tools[1]"},
		{"a forced tool", `{"model":"auto","input":"x","tools":[` + weatherTool + `],"tool_choice":"required"}`, 400, "tool_choice"},
		{"an unknown item_reference", `{"model":"auto","input":[{"role":"user","content":"x"},{"type":"item_reference","id":"msg_1"}]}`, 400, `input[1]: item_reference \"msg_1\" names no item kept here`},
		{"an item_reference without an id", `{"model":"auto","input":[{"type":"item_reference"}]}`, 400, "input[0].id: required"},
		{"an unknown item", `{"model":"auto","input":[{"type":"computer_call_output","call_id":"c"}]}`, 400, "unknown input item type"},
		{"an image by file_id", `{"model":"auto","input":[{"role":"user","content":[{"type":"input_text","text":"what is it?"},{"type":"input_image","file_id":"file_1","detail":"auto"}]}]}`, 400, "input[0].content[1]: an image by file_id"},
		{"an item of the wrong shape", `{"model":"auto","input":[{"type":"function_call_output","call_id":"c","output":7}]}`, 400, "input[0]:"},
		{"an image in a tool result", `{"model":"auto","input":[{"type":"function_call_output","call_id":"c","output":[{"type":"input_image","image_url":"data:image/png;base64,AA=="}]}]}`, 400,
			`input[0].output[0]: a tool result passes on text parts only (input_text), not \"input_image\"`},
		{"an unknown role", `{"model":"auto","input":[{"role":"tool","content":"x"}]}`, 400, `input[0].role: \"tool\" is not a role`},
		{"temperature out of range", `{"model":"auto","input":"x","temperature":3}`, 400, "temperature: 3 is out of range"},
		{"max_output_tokens 0", `{"model":"auto","input":"x","max_output_tokens":0}`, 400, "max_output_tokens: 0 is not a positive number"},
		{"json_schema without a schema", `{"model":"auto","input":"x","text":{"format":{"type":"json_schema","name":"x"}}}`, 400, "text.format.schema: required"},
		{"an unknown format", `{"model":"auto","input":"x","text":{"format":{"type":"yaml"}}}`, 400, "text.format.type"},
		{"a function without a name", `{"model":"auto","input":"x","tools":[{"type":"function","parameters":{}}]}`, 400, "tools[0].name: required"},
		{"harmless fields", `{"model":"auto","input":"x","store":true,"include":["reasoning.encrypted_content"],"metadata":{"k":"v"},"user":"u",` +
			`"parallel_tool_calls":false,"truncation":"auto","service_tier":"auto","tool_choice":"auto","text":{"verbosity":"low"},"reasoning":{"summary":"auto"}}`, 200, `"status":"completed"`},
		{"developer and assistant messages", `{"model":"auto","input":[{"role":"developer","content":"be brief"},{"role":"user","content":"x"},` +
			`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"y"}]},{"role":"user","content":"z"}]}`, 200, `"status":"completed"`},
		{"json_object", `{"model":"auto","input":"x","text":{"format":{"type":"json_object"}}}`, 200, `"status":"completed"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, b := newTestServer(t, Options{})
			w := do(s, "POST", "/v1/responses", tt.body, nil)
			if w.Code != tt.status || !strings.Contains(w.Body.String(), tt.want) {
				t.Fatalf("= %d %s; want %d with %s", w.Code, w.Body.String(), tt.status, tt.want)
			}
			if tt.status != 200 {
				var e struct {
					Error struct {
						Message string  `json:"message"`
						Type    string  `json:"type"`
						Param   *string `json:"param"`
						Code    *string `json:"code"`
					} `json:"error"`
				}
				if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error.Type != "invalid_request_error" || e.Error.Message == "" {
					t.Errorf("not an OpenAI error: %s", w.Body.String())
				}
				if b.calls.Load() != 0 {
					t.Error("a refused request was routed")
				}
			}
		})
	}
}

// The request Switchyard routes says what the caller asked for.
func TestResponsesRequestConversion(t *testing.T) {
	s, _ := newTestServer(t, Options{})
	convert := func(body string) *fleet.Request {
		t.Helper()
		q, err := s.readResponses([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		req, err := q.toFleet()
		if err != nil {
			t.Fatal(err)
		}
		return req
	}
	req := convert(`{"model":"auto","instructions":"be brief","input":[{"role":"developer","content":"no jokes"},
		{"role":"user","content":[{"type":"input_text","text":"hi"},{"type":"input_image","image_url":"data:image/png;base64,iVBORw0KGgo="}]}],
		"reasoning":{"effort":"low"},"max_output_tokens":50,"top_p":0.9,"text":{"format":{"type":"json_schema","name":"out","schema":{"type":"object","properties":{"b":{},"a":{}}}}},
		"tools":[` + weatherTool + `]}`)
	if req.Stream || !req.Thinking || req.ThinkLevel != "low" || *req.Options.MaxTokens != 50 || *req.Options.TopP != 0.9 || req.Options.Temperature != nil {
		t.Errorf("request = %+v, options %+v", req, req.Options)
	}
	if roles := []string{req.Messages[0].Role, req.Messages[1].Role, req.Messages[2].Role}; !slices.Equal(roles, []string{"system", "system", "user"}) {
		t.Errorf("roles = %v", roles)
	}
	if m := req.Messages[2]; m.Content != "hi" || len(m.Images) != 1 || m.Images[0] != "iVBORw0KGgo=" {
		t.Errorf("user message = %+v", m)
	}
	if string(req.Format) != `{"type":"object","properties":{"b":{},"a":{}}}` {
		t.Errorf("format = %s", req.Format)
	}
	if len(req.Tools) != 1 || !strings.Contains(string(req.Tools[0].Function.Parameters), `"properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false`) {
		t.Errorf("tools = %+v; want the parameters as sent", req.Tools)
	}
	req = convert(`{"input":"x","stream":true,"reasoning":{"effort":"none"},"tools":[` + weatherTool + `],"tool_choice":"none","text":{"format":{"type":"json_object"}}}`)
	if !req.Stream || !req.NoThinking || req.Tools != nil || string(req.Format) != `"json"` {
		t.Errorf("stream, effort none, tool_choice none, json_object: %+v", req)
	}
}

// The official Go SDK reads every event and response without finding a
// required field missing or of the wrong type, or an event it does not
// know: what it accepts, every OpenAI client accepts.
func TestResponsesOpenAISDK(t *testing.T) {
	f, base := simFleet(t, 1, fleet.ProviderOllama, nil)
	_, toolBase := toolFleet(t)
	client := func(base string) oa.Client {
		return oa.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	}
	c := client(base)
	answer, thinking := f.Server("fast-1").Answer("fast-1"), f.Server("fast-1").Thinking("fast-1")
	text := responses.ResponseNewParams{Model: "auto", Input: responses.ResponseNewParamsInputUnion{OfString: oa.String("hello")}}

	t.Run("New", func(t *testing.T) {
		resp, err := c.Responses.New(t.Context(), text)
		if err != nil {
			t.Fatal(err)
		}
		checkParsed(t, "response", reflect.ValueOf(*resp))
		if resp.OutputText() != answer || resp.Model != "fast-1" || resp.Status != responses.ResponseStatusCompleted {
			t.Errorf("text %q, model %q, status %q", resp.OutputText(), resp.Model, resp.Status)
		}
	})

	t.Run("NewStreaming", func(t *testing.T) {
		params := text
		params.Reasoning.Effort = "medium"
		var got, reasoning string
		var completed *responses.Response
		stream := c.Responses.NewStreaming(t.Context(), params)
		for i := 0; stream.Next(); i++ {
			ev := stream.Current()
			checkParsed(t, fmt.Sprintf("event %d (%s)", i, ev.Type), reflect.ValueOf(ev))
			switch v := ev.AsAny().(type) {
			case responses.ResponseTextDeltaEvent:
				got += v.Delta
			case responses.ResponseReasoningSummaryTextDeltaEvent:
				reasoning += v.Delta
			case responses.ResponseCompletedEvent:
				completed = &v.Response
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if got != answer || reasoning != thinking || completed == nil || completed.OutputText() != answer {
			t.Errorf("text %q, reasoning %q, completed %v", got, reasoning, completed)
		}
	})

	t.Run("function tool round trip", func(t *testing.T) {
		c := client(toolBase)
		var params map[string]any
		json.Unmarshal([]byte(weatherTool), &params)
		params = params["parameters"].(map[string]any)
		tools := []responses.ToolUnionParam{responses.ToolParamOfFunction("get_weather", params, false)}
		input := responses.ResponseInputParam{responses.ResponseInputItemParamOfMessage("Weather in Paris? (preamble)", responses.EasyInputMessageRoleUser)}
		first, err := c.Responses.New(t.Context(), responses.ResponseNewParams{Model: "auto", Tools: tools, Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input}})
		if err != nil {
			t.Fatal(err)
		}
		checkParsed(t, "response", reflect.ValueOf(*first))
		var call *responses.ResponseFunctionToolCall
		for _, item := range first.Output {
			if fc, ok := item.AsAny().(responses.ResponseFunctionToolCall); ok {
				call = &fc
			}
		}
		if call == nil || call.CallID == "" || call.Name != "get_weather" || call.Arguments != `{"city":"Paris"}` || first.OutputText() != "Let me look that up." {
			t.Fatalf("output %+v", first.Output)
		}
		result := responses.ResponseInputItemParamOfFunctionCallOutput("21 degrees")
		result.OfFunctionCallOutput.CallID = param.NewOpt(call.CallID)
		input = append(input, responses.ResponseInputItemParamOfFunctionCall(call.Arguments, call.CallID, call.Name), result)
		stream := c.Responses.NewStreaming(t.Context(), responses.ResponseNewParams{Model: "auto", Tools: tools, Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input}})
		var got string
		for i := 0; stream.Next(); i++ {
			ev := stream.Current()
			checkParsed(t, fmt.Sprintf("event %d (%s)", i, ev.Type), reflect.ValueOf(ev))
			got += ev.AsResponseOutputTextDelta().Delta
		}
		if err := stream.Err(); err != nil || got != toolAnswer {
			t.Errorf("answer %q, %v", got, err)
		}

		stream = c.Responses.NewStreaming(t.Context(), responses.ResponseNewParams{Model: "auto", Tools: tools, Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input[:1]}})
		for i := 0; stream.Next(); i++ {
			ev := stream.Current()
			checkParsed(t, fmt.Sprintf("event %d (%s)", i, ev.Type), reflect.ValueOf(ev))
		}
		if err := stream.Err(); err != nil {
			t.Error(err)
		}
	})

	t.Run("error event", func(t *testing.T) {
		if err := f.SetFault("fast-1", simfleet.Fault{Kind: simfleet.FaultDieAfter, AfterTokens: 2}); err != nil {
			t.Fatal(err)
		}
		defer f.SetFault("fast-1", simfleet.Fault{})
		stream := c.Responses.NewStreaming(t.Context(), text)
		var last responses.ResponseStreamEventUnion
		for i := 0; stream.Next(); i++ {
			last = stream.Current()
			checkParsed(t, fmt.Sprintf("event %d (%s)", i, last.Type), reflect.ValueOf(last))
		}
		if e := last.AsError(); last.Type != "error" || e.Code != "upstream_error" || e.Message == "" {
			t.Errorf("last event %s", last.RawJSON())
		}
	})

	t.Run("unknown previous_response_id", func(t *testing.T) {
		params := text
		params.PreviousResponseID = oa.String("resp_1")
		_, err := c.Responses.New(t.Context(), params)
		var apiErr *oa.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Type != "invalid_request_error" ||
			apiErr.Param != "previous_response_id" || apiErr.Code != "previous_response_not_found" {
			t.Errorf("err = %v", err)
		}
	})

	t.Run("previous_response_id", func(t *testing.T) {
		u, toolBase := toolFleet(t)
		c := client(toolBase)
		var params map[string]any
		json.Unmarshal([]byte(weatherTool), &params)
		tools := []responses.ToolUnionParam{responses.ToolParamOfFunction("get_weather", params["parameters"].(map[string]any), false)}
		first, err := c.Responses.New(t.Context(), responses.ResponseNewParams{Model: "auto", Tools: tools,
			Input: responses.ResponseNewParamsInputUnion{OfString: oa.String("Weather in Paris?")}})
		if err != nil {
			t.Fatal(err)
		}
		if len(first.Output) != 1 || first.Output[0].Type != "function_call" {
			t.Fatalf("output %+v", first.Output)
		}
		call := first.Output[0].AsFunctionCall()
		result := responses.ResponseInputItemParamOfFunctionCallOutput("21 degrees")
		result.OfFunctionCallOutput.CallID = param.NewOpt(call.CallID)
		stream := c.Responses.NewStreaming(t.Context(), responses.ResponseNewParams{Model: "auto", Tools: tools, PreviousResponseID: oa.String(first.ID),
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{result}}})
		var second *responses.Response
		for i := 0; stream.Next(); i++ {
			ev := stream.Current()
			checkParsed(t, fmt.Sprintf("event %d (%s)", i, ev.Type), reflect.ValueOf(ev))
			if done, ok := ev.AsAny().(responses.ResponseCompletedEvent); ok {
				second = &done.Response
			}
		}
		if err := stream.Err(); err != nil || second == nil {
			t.Fatalf("stream: %v", err)
		}
		if second.OutputText() != toolAnswer || second.PreviousResponseID != first.ID || !strings.Contains(second.RawJSON(), `"store":true`) {
			t.Errorf("text %q, previous_response_id %q in %s", second.OutputText(), second.PreviousResponseID, second.RawJSON())
		}
		msgs := u.requests()[1].Messages
		if len(msgs) != 3 || msgs[0].Content != "Weather in Paris?" || len(msgs[1].ToolCalls) != 1 || msgs[1].ToolCalls[0].ID != call.CallID ||
			msgs[2].Role != "tool" || msgs[2].ToolName != "get_weather" {
			t.Errorf("conversation sent upstream = %+v", msgs)
		}
	})
}

// TestResponsesOpenAISDKIncomplete checks that the SDK reads an
// incomplete answer as one.
func TestResponsesOpenAISDKIncomplete(t *testing.T) {
	cut := chunksBackend{{Content: "Once upon", FinishReason: "length"}}
	base := responsesAPI(t, nil, router.Target{Candidate: fleet.Candidate{ID: "m1", Model: "model-1", Enabled: true}, Backend: cut})
	c := oa.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	params := responses.ResponseNewParams{Model: "auto", Input: responses.ResponseNewParamsInputUnion{OfString: oa.String("a story")}, MaxOutputTokens: oa.Int(2)}
	stream := c.Responses.NewStreaming(t.Context(), params)
	var last responses.ResponseStreamEventUnion
	for i := 0; stream.Next(); i++ {
		last = stream.Current()
		checkParsed(t, fmt.Sprintf("event %d (%s)", i, last.Type), reflect.ValueOf(last))
	}
	if r := last.AsResponseIncomplete().Response; last.Type != "response.incomplete" || r.IncompleteDetails.Reason != "max_output_tokens" || r.OutputText() != "Once upon" {
		t.Errorf("last event %s", last.RawJSON())
	}
	resp, err := c.Responses.New(t.Context(), params)
	if err != nil || resp.Status != responses.ResponseStatusIncomplete {
		t.Errorf("status %v, %v", resp, err)
	}
}

// checkParsed fails t for every field of v, a value the openai-go SDK
// decoded, that the SDK found to be of another type than it expects, for
// every required field it found missing (but those of notSent), and for
// every union whose variant it does not know: it accepts all of these
// without an error, and its caller finds them empty.
func checkParsed(t *testing.T, path string, v reflect.Value) {
	t.Helper()
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			checkParsed(t, path, v.Elem())
		}
	case reflect.Slice:
		for i := range v.Len() {
			checkParsed(t, fmt.Sprintf("%s[%d]", path, i), v.Index(i))
		}
	case reflect.Struct:
		if as := v.MethodByName("AsAny"); as.IsValid() && as.Type().NumIn() == 0 {
			variant := as.Call(nil)[0]
			if variant.IsNil() {
				t.Errorf("%s: a variant the SDK does not know: %v", path, v.FieldByName("Type"))
				return
			}
			checkParsed(t, path, variant)
			return
		}
		meta := v.FieldByName("JSON")
		if !meta.IsValid() {
			return
		}
		for i := range v.NumField() {
			f := v.Type().Field(i)
			m := meta.FieldByName(f.Name)
			if !f.IsExported() || f.Name == "JSON" || !m.IsValid() {
				continue
			}
			name := strings.Split(f.Tag.Get("json"), ",")[0]
			field := m.Interface().(respjson.Field)
			switch {
			case field.Raw() == respjson.Omitted:
				if f.Tag.Get("api") == "required" && !notSent[name] {
					t.Errorf("%s.%s: missing", path, name)
				}
			case !field.Valid() && field.Raw() != respjson.Null:
				t.Errorf("%s.%s: %s is not what the SDK expects", path, name, fleet.ClipTo(field.Raw(), 200))
			case field.Valid():
				checkParsed(t, path+"."+name, v.Field(i))
			}
		}
	}
}

// notSent are the required fields of the newest Responses API that Ollama's
// translation does not write: accounts, OpenAI's own tools and its prompt
// cache, which a local model has none of.
var notSent = map[string]bool{"access_programs": true, "tool_usage": true, "cache_write_tokens": true}

// responseOf reads a response: the body's, or that of the stream's last
// event, which must be response.completed.
func responseOf(t *testing.T, resp *http.Response, stream bool) map[string]any {
	t.Helper()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	if stream {
		return final(t, readEvents(t, resp.Body), "response.completed")
	}
	var body map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	return body
}

// The AI SDK's second turn: the items of the first answer come back as
// item_references, which Switchyard replaces with the items it sent. The
// ids hold the request id, the same in every event that names an item.
func TestResponsesItemReference(t *testing.T) {
	for _, stream := range []bool{true, false} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			u, base := toolFleet(t)
			resp := postResponses(t, t.Context(), base, fmt.Sprintf(`{"model":"auto","stream":%v,"input":"Weather in Paris? (preamble)","tools":[%s]}`, stream, weatherTool))
			id := resp.Header.Get("X-Switchyard-Request-Id")
			var first map[string]any
			if stream {
				events := readEvents(t, resp.Body)
				for _, e := range events {
					itemID := e.Data["item_id"]
					if item, ok := e.Data["item"].(map[string]any); ok {
						itemID = item["id"]
					}
					if itemID != nil && itemID != "msg_"+id && itemID != "fc_"+id+"_0" {
						t.Errorf("%s names item %v; want msg_%s or fc_%s_0", e.Name, itemID, id, id)
					}
				}
				first = final(t, events, "response.completed")
			} else {
				first = responseOf(t, resp, false)
			}
			out := outputs(first)
			if first["store"] != true || len(out) != 2 || out[0]["id"] != "msg_"+id || out[1]["id"] != "fc_"+id+"_0" {
				t.Fatalf("response = %v; want store true, msg_%s then fc_%s_0", first, id, id)
			}
			callID := out[1]["call_id"].(string)

			second := responseOf(t, postResponses(t, t.Context(), base, fmt.Sprintf(`{"model":"auto","stream":%v,"tools":[%s],"input":[
				{"role":"user","content":[{"type":"input_text","text":"Weather in Paris? (preamble)"}]},
				{"type":"item_reference","id":"msg_%s"},{"type":"item_reference","id":"fc_%s_0"},
				{"type":"function_call_output","call_id":%q,"output":"21 degrees"}]}`, stream, weatherTool, id, id, callID)), stream)
			if out := outputs(second); len(out) != 1 || messageText(out[0]) != toolAnswer || out[0]["id"] == "msg_"+id {
				t.Errorf("output = %v; want %q under an id of its own", out, toolAnswer)
			}
			msgs := u.requests()[1].Messages
			if len(msgs) != 3 || msgs[1].Role != "assistant" || msgs[1].Content != "Let me look that up." ||
				len(msgs[1].ToolCalls) != 1 || msgs[1].ToolCalls[0].ID != callID || msgs[1].ToolCalls[0].Function.Name != "get_weather" ||
				msgs[2].Role != "tool" || msgs[2].ToolName != "get_weather" || msgs[2].Content != "21 degrees" {
				t.Errorf("conversation sent upstream = %+v", msgs)
			}
		})
	}
}

// convBackend answers every request with reasoning, then text, and keeps
// the requests it got.
type convBackend struct {
	mu   sync.Mutex
	reqs []fleet.Request
}

func (b *convBackend) Open(_ context.Context, _ fleet.Candidate, r *fleet.Request) (fleet.Stream, error) {
	b.mu.Lock()
	b.reqs = append(b.reqs, *r)
	b.mu.Unlock()
	return &sliceStream{chunks: []fleet.Chunk{{Reasoning: "Think"}, {Reasoning: " twice."}, {Content: "Answer."}, {FinishReason: "stop"}}}, nil
}

func (b *convBackend) requests() []fleet.Request {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.reqs)
}

// convAPI serves Switchyard in front of a convBackend.
func convAPI(t *testing.T) (*convBackend, *Server, string) {
	b := &convBackend{}
	s, base := responsesServer(t, nil, router.Target{Candidate: fleet.Candidate{ID: "m1", Model: "model-1", Enabled: true, SupportsThinking: true}, Backend: b})
	return b, s, base
}

// A reasoning item referenced goes back to the model as the thinking of
// the message after it; streamed, its id is the response's in every event.
func TestResponsesReasoningReference(t *testing.T) {
	for _, stream := range []bool{true, false} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			b, _, base := convAPI(t)
			resp := postResponses(t, t.Context(), base, fmt.Sprintf(`{"model":"auto","stream":%v,"input":"why?","reasoning":{"effort":"low"}}`, stream))
			id := resp.Header.Get("X-Switchyard-Request-Id")
			var first map[string]any
			if stream {
				events := readEvents(t, resp.Body)
				for _, e := range events {
					if strings.HasPrefix(e.Name, "response.reasoning") && e.Data["item_id"] != "rs_"+id {
						t.Errorf("%s names item %v; want rs_%s", e.Name, e.Data["item_id"], id)
					}
				}
				first = final(t, events, "response.completed")
			} else {
				first = responseOf(t, resp, false)
			}
			if out := outputs(first); len(out) != 2 || out[0]["id"] != "rs_"+id || out[1]["id"] != "msg_"+id {
				t.Fatalf("output = %v; want rs_%s, msg_%s", out, id, id)
			}
			postResponses(t, t.Context(), base, fmt.Sprintf(`{"model":"auto","stream":%v,"input":[{"role":"user","content":"why?"},
				{"type":"item_reference","id":"rs_%s"},{"type":"item_reference","id":"msg_%s"},{"role":"user","content":"sure?"}]}`, stream, id, id))
			msgs := b.requests()[1].Messages
			if len(msgs) != 3 || msgs[1].Role != "assistant" || msgs[1].Thinking != "Think twice." || msgs[1].Content != "Answer." || msgs[2].Content != "sure?" {
				t.Errorf("conversation sent upstream = %+v", msgs)
			}
		})
	}
}

// previous_response_id puts that response's input and output before the
// new input, through a chain of responses; the response names it.
func TestResponsesPreviousResponseID(t *testing.T) {
	for _, stream := range []bool{true, false} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			u, base := toolFleet(t)
			first := responseOf(t, postResponses(t, t.Context(), base, fmt.Sprintf(`{"model":"auto","stream":%v,"input":"Weather in Paris?","tools":[%s]}`, stream, weatherTool)), stream)
			if first["previous_response_id"] != nil {
				t.Errorf("previous_response_id = %v; want null", first["previous_response_id"])
			}
			callID := outputs(first)[0]["call_id"]
			second := responseOf(t, postResponses(t, t.Context(), base, fmt.Sprintf(`{"model":"auto","stream":%v,"tools":[%s],"previous_response_id":%q,
				"input":[{"type":"function_call_output","call_id":%q,"output":"21 degrees"}]}`, stream, weatherTool, first["id"], callID)), stream)
			if second["previous_response_id"] != first["id"] || messageText(outputs(second)[0]) != toolAnswer {
				t.Errorf("response = %v", second)
			}
			responseOf(t, postResponses(t, t.Context(), base, fmt.Sprintf(`{"model":"auto","stream":%v,"tools":[%s],"previous_response_id":%q,"input":"And in Rome?"}`,
				stream, weatherTool, second["id"])), stream)
			msgs := u.requests()[2].Messages
			roles := make([]string, len(msgs))
			for i, m := range msgs {
				roles[i] = m.Role
			}
			if !slices.Equal(roles, []string{"user", "assistant", "tool", "assistant", "user"}) || msgs[0].Content != "Weather in Paris?" ||
				msgs[2].ToolName != "get_weather" || msgs[3].Content != toolAnswer || msgs[4].Content != "And in Rome?" {
				t.Errorf("conversation sent upstream = %+v", msgs)
			}
		})
	}
}

// A response made with store: false says so and is not kept: neither its
// items nor it can be named later.
func TestResponsesStoreFalse(t *testing.T) {
	for _, stream := range []bool{true, false} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			_, base := simFleet(t, 1, fleet.ProviderOllama, nil)
			resp := postResponses(t, t.Context(), base, fmt.Sprintf(`{"model":"auto","stream":%v,"store":false,"input":"hello"}`, stream))
			id := resp.Header.Get("X-Switchyard-Request-Id")
			if stream {
				for _, e := range readEvents(t, resp.Body) {
					if r, ok := e.Data["response"].(map[string]any); ok && r["store"] != false {
						t.Errorf("%s: store = %v", e.Name, r["store"])
					}
				}
			} else if body := responseOf(t, resp, false); body["store"] != false {
				t.Errorf("store = %v", body["store"])
			}
			for _, body := range []string{
				`{"model":"auto","input":[{"type":"item_reference","id":"msg_` + id + `"}]}`,
				`{"model":"auto","input":"again","previous_response_id":"resp_` + id + `"}`,
			} {
				if resp := postResponses(t, t.Context(), base, body); resp.StatusCode != 400 {
					t.Errorf("%s = %d; want 400", body, resp.StatusCode)
				}
			}
		})
	}
}

// An unknown or expired reference is a 400 in OpenAI's shape that names
// the parameter and says what to do.
func TestResponsesUnknownReference(t *testing.T) {
	_, s, base := convAPI(t)
	clock := &storeClock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	s.responseStore().set.Now = clock.Now
	resp := postResponses(t, t.Context(), base, `{"model":"auto","input":"why?"}`)
	id := resp.Header.Get("X-Switchyard-Request-Id")
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	clock.advance(time.Hour)

	tests := []struct {
		name, body, param, code, want string
	}{
		{"an unknown item", `{"model":"auto","input":[{"type":"item_reference","id":"msg_nope"}]}`, "input", "", "store: false"},
		{"an expired item", `{"model":"auto","input":[{"type":"item_reference","id":"msg_` + id + `"}]}`, "input", "", "send the item itself"},
		{"an expired response", `{"model":"auto","input":"x","previous_response_id":"resp_` + id + `"}`, "previous_response_id", "previous_response_not_found", "send the whole conversation"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := postResponses(t, t.Context(), base, tt.body)
			var e struct {
				Error struct {
					Message, Type string
					Param, Code   *string
				}
			}
			if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || resp.StatusCode != 400 {
				t.Fatalf("status %d, %v", resp.StatusCode, err)
			}
			code := ""
			if e.Error.Code != nil {
				code = *e.Error.Code
			}
			if e.Error.Type != "invalid_request_error" || e.Error.Param == nil || *e.Error.Param != tt.param || code != tt.code || !strings.Contains(e.Error.Message, tt.want) {
				t.Errorf("error = %+v; want param %s, code %q, a message with %q", e.Error, tt.param, tt.code, tt.want)
			}
		})
	}
}

// failingBackend streams its chunks, then fails.
type failingBackend []fleet.Chunk

func (b failingBackend) Open(context.Context, fleet.Candidate, *fleet.Request) (fleet.Stream, error) {
	return &failingStream{chunks: slices.Clone(b)}, nil
}

type failingStream struct{ chunks []fleet.Chunk }

func (s *failingStream) Recv() (fleet.Chunk, error) {
	if len(s.chunks) == 0 {
		return fleet.Chunk{}, errors.New("connection reset")
	}
	c := s.chunks[0]
	s.chunks = s.chunks[1:]
	return c, nil
}

func (s *failingStream) Close() error { return nil }

// A stream cut short, by the upstream or by the caller, keeps what the
// caller was sent: the AI SDK keeps a stopped answer in the chat and
// names it in the next turn.
func TestResponsesKeepsCutStreams(t *testing.T) {
	check := func(t *testing.T, s *Server, id, text string) {
		t.Helper()
		raw, ok := s.responseStore().item("msg_" + id)
		var item map[string]any
		json.Unmarshal(raw, &item)
		if !ok || item["status"] != "incomplete" || messageText(item) != text {
			t.Errorf("kept item = %s; want an incomplete message %q", raw, text)
		}
		if _, ok := s.responseStore().conversation("resp_" + id); !ok {
			t.Error("the response is not kept")
		}
	}

	t.Run("upstream failure", func(t *testing.T) {
		b := failingBackend{{Content: "Once"}, {Content: " upon"}}
		s, base := responsesServer(t, nil, router.Target{Candidate: fleet.Candidate{ID: "m1", Model: "model-1", Enabled: true}, Backend: b})
		resp := postResponses(t, t.Context(), base, `{"model":"auto","stream":true,"input":"a story"}`)
		if events := readEvents(t, resp.Body); events[len(events)-1].Name != "error" {
			t.Fatalf("last event %s; want error", events[len(events)-1].Name)
		}
		check(t, s, resp.Header.Get("X-Switchyard-Request-Id"), "Once upon")
	})

	t.Run("client abort", func(t *testing.T) {
		f, err := simfleet.StartFast(1, fleet.ProviderOllama)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(f.Close)
		if err := f.SetFault("fast-1", simfleet.Fault{Kind: simfleet.FaultSlow, Gap: time.Hour}); err != nil {
			t.Fatal(err)
		}
		// The handler's end is what the test waits for.
		rt := router.New(router.Fleet{Targets: upstreams(t, f.Candidates()...), DefaultModel: "fast-1"}, router.Deps{})
		ts := httptest.NewUnstartedServer(nil)
		s := New(Options{Router: rt, Listen: ts.Listener.Addr().String()})
		served := make(chan struct{}, 1)
		ts.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.ServeHTTP(w, r)
			served <- struct{}{}
		})
		ts.Start()
		t.Cleanup(ts.Close)

		ctx, cancel := context.WithCancel(t.Context())
		resp := postResponses(t, ctx, ts.URL, `{"model":"auto","stream":true,"input":"hello"}`)
		var first string
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			var d struct{ Type, Delta string }
			if json.Unmarshal([]byte(strings.TrimPrefix(sc.Text(), "data: ")), &d) == nil && d.Type == "response.output_text.delta" {
				first = d.Delta
				break
			}
		}
		cancel()
		select {
		case <-served:
		case <-time.After(10 * time.Second):
			t.Fatal("the handler did not end")
		}
		check(t, s, resp.Header.Get("X-Switchyard-Request-Id"), first)
	})
}

// Conversations in parallel, each naming its own items, under -race.
func TestResponsesConcurrentConversations(t *testing.T) {
	_, base := simFleet(t, 2, "", nil)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			stream := i%2 == 0
			resp := postResponses(t, t.Context(), base, fmt.Sprintf(`{"model":"auto","stream":%v,"input":"hello %d"}`, stream, i))
			id := resp.Header.Get("X-Switchyard-Request-Id")
			responseOf(t, resp, stream)
			responseOf(t, postResponses(t, t.Context(), base, fmt.Sprintf(`{"model":"auto","stream":%v,"previous_response_id":"resp_%s",
				"input":[{"type":"item_reference","id":"msg_%s"},{"role":"user","content":"again"}]}`, stream, id, id)), stream)
		})
	}
	wg.Wait()
}

// storeClock is a clock tests move by hand.
type storeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *storeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *storeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// storedItem is an output item with id, of n bytes of JSON (at least 37).
func storedItem(id string, n int) json.RawMessage {
	item := fmt.Sprintf(`{"id":%q,"type":"message","text":""}`, id)
	return json.RawMessage(strings.Replace(item, `""`, `"`+strings.Repeat("x", max(0, n-len(item)))+`"`, 1))
}

// The store drops the entry unused longest when there are too many
// entries or bytes, and any entry unused for MaxAge; a use keeps an entry.
func TestResponseStoreBounds(t *testing.T) {
	held := func(st *responseStore, ids ...string) []string {
		var got []string
		for _, id := range ids {
			if _, ok := st.item(id); ok {
				got = append(got, id)
			}
		}
		return got
	}
	t.Run("count", func(t *testing.T) {
		st := newResponseStore(storeSettings{MaxEntries: 4})
		st.keep("resp_1", nil, []json.RawMessage{storedItem("a", 20)}) // a, resp_1
		st.keep("resp_2", nil, []json.RawMessage{storedItem("b", 20)}) // a, resp_1, b, resp_2
		st.item("a")                                                   // resp_1, b, resp_2, a
		st.keep("resp_3", nil, []json.RawMessage{storedItem("c", 20)}) // resp_2, a, c, resp_3
		if got := held(st, "a", "b", "c"); !slices.Equal(got, []string{"a", "c"}) {
			t.Errorf("items held = %v; want [a c]", got)
		}
		if _, ok := st.conversation("resp_2"); !ok || st.lru.Len() != 4 {
			t.Errorf("resp_2 held %v, %d entries", ok, st.lru.Len())
		}
	})
	t.Run("bytes", func(t *testing.T) {
		st := newResponseStore(storeSettings{MaxBytes: 450})
		st.keep("resp_1", []json.RawMessage{storedItem("in", 100)}, []json.RawMessage{storedItem("a", 100)}) // a 100, resp_1 200
		st.keep("resp_2", nil, []json.RawMessage{storedItem("b", 100)})                                      // b 100, resp_2 100
		if got := held(st, "a", "b"); !slices.Equal(got, []string{"b"}) || st.bytes != 400 {
			t.Errorf("items held = %v, %d bytes; want [b], 400", got, st.bytes)
		}
		st.keep("resp_3", nil, []json.RawMessage{storedItem("big", 600)})
		if got := held(st, "b", "big"); len(got) != 0 || st.bytes != 0 || st.lru.Len() != 0 {
			t.Errorf("items held = %v, %d bytes, %d entries; want none", got, st.bytes, st.lru.Len())
		}
	})
	t.Run("age", func(t *testing.T) {
		clock := &storeClock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
		st := newResponseStore(storeSettings{MaxAge: time.Hour, Now: clock.Now})
		st.keep("resp_1", nil, []json.RawMessage{storedItem("a", 20), storedItem("b", 20)})
		clock.advance(50 * time.Minute)
		st.item("a")
		clock.advance(20 * time.Minute)
		if got := held(st, "a", "b"); !slices.Equal(got, []string{"a"}) {
			t.Errorf("items held = %v; want [a], used 20 minutes ago", got)
		}
		if _, ok := st.conversation("resp_1"); ok {
			t.Error("resp_1, unused for 70 minutes, is held")
		}
		clock.advance(time.Hour)
		if got := held(st, "a"); len(got) != 0 || st.bytes != 0 {
			t.Errorf("items held = %v, %d bytes", got, st.bytes)
		}
	})
	t.Run("replace", func(t *testing.T) {
		st := newResponseStore(storeSettings{})
		st.keep("resp_1", nil, []json.RawMessage{storedItem("a", 60)})
		st.keep("resp_1", nil, []json.RawMessage{storedItem("a", 80)})
		if raw, _ := st.item("a"); len(raw) != 80 || st.lru.Len() != 2 || st.bytes != 160 {
			t.Errorf("item %s, %d entries, %d bytes", raw, st.lru.Len(), st.bytes)
		}
		conv, _ := st.conversation("resp_1")
		_ = append(conv, storedItem("b", 60))
		if again, _ := st.conversation("resp_1"); len(again) != 1 || len(again[:cap(again)]) != 1 {
			t.Errorf("an append changed the kept conversation: %s", again)
		}
	})
}

// The store is safe for concurrent use (run with -race).
func TestResponseStoreConcurrent(t *testing.T) {
	st := newResponseStore(storeSettings{MaxEntries: 50})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				id := fmt.Sprintf("%d_%d", g, i)
				st.keep("resp_"+id, []json.RawMessage{storedItem("in", 20)}, []json.RawMessage{storedItem("msg_"+id, 40)})
				st.item("msg_" + id)
				st.conversation(fmt.Sprintf("resp_%d_%d", (g+1)%8, i))
			}
		})
	}
	wg.Wait()
	st.mu.Lock()
	defer st.mu.Unlock()
	var bytes int64
	for el := st.lru.Front(); el != nil; el = el.Next() {
		bytes += el.Value.(*storeEntry).size
	}
	if st.lru.Len() > 50 || st.lru.Len() != len(st.items)+len(st.conversations) || bytes != st.bytes {
		t.Errorf("%d entries (%d items, %d conversations), %d bytes counted, %d held", st.lru.Len(), len(st.items), len(st.conversations), st.bytes, bytes)
	}
}
