package simfleet

import (
	"encoding/json"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/ollama/ollama/api"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
)

// instance writes one deterministic value per schema, valid for it.
func TestInstance(t *testing.T) {
	tests := []struct {
		name, schema, want string
	}{
		{"nothing", ``, `{}`},
		{"any", `{}`, `{}`},
		{"required only, in the order of properties",
			`{"type":"object","properties":{"city":{"type":"string"},"unit":{"type":"string","enum":["celsius","fahrenheit"]},"days":{"type":"integer","minimum":1,"maximum":7},"detail":{"type":"boolean"},"note":{"type":"string"}},"required":["detail","city","unit","days"]}`,
			`{"city":"sample city (alpha)","unit":"celsius","days":7,"detail":true}`},
		{"no required list: every property",
			`{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"null"}}}`,
			`{"a":4.2,"b":null}`},
		{"nested object and array",
			`{"type":"object","properties":{"people":{"type":"array","minItems":2,"items":{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},"required":["name","age"]}}},"required":["people"]}`,
			`{"people":[{"name":"sample name (alpha)","age":42},{"name":"sample name (alpha)","age":42}]}`},
		{"array of strings, distinct items", `{"type":"array","items":{"type":"string"},"minItems":2,"maxItems":3}`,
			`["sample value (alpha)","sample value 2 (alpha)"]`},
		{"maxItems 0", `{"type":"array","items":{"type":"string"},"maxItems":0}`, `[]`},
		{"tuple", `{"type":"array","prefixItems":[{"type":"integer"},{"type":"boolean"}]}`, `[42,true]`},
		{"$ref into $defs",
			`{"type":"object","properties":{"home":{"$ref":"#/$defs/Place"}},"required":["home"],"$defs":{"Place":{"type":"object","properties":{"zip":{"type":"string","maxLength":5}},"required":["zip"]}}}`,
			`{"home":{"zip":"sampl"}}`},
		{"$ref into definitions", `{"$ref":"#/definitions/N","definitions":{"N":{"type":"integer","minimum":100}}}`, `100`},
		{"anyOf skips null", `{"anyOf":[{"type":"null"},{"type":"string","format":"email"}]}`, `"sample@example.invalid"`},
		{"type list skips null", `{"type":["null","integer"],"exclusiveMaximum":10}`, `9`},
		{"exclusive bounds of a number", `{"type":"number","minimum":0,"exclusiveMaximum":3}`, `2.5`},
		{"draft-4 exclusive minimum", `{"type":"integer","minimum":50,"exclusiveMinimum":true}`, `51`},
		{"const", `{"const":{"k":[1, 2]}}`, `{"k":[1,2]}`},
		{"enum of numbers", `{"enum":[3,4]}`, `3`},
		{"formats", `{"type":"object","properties":{"at":{"type":"string","format":"date-time"},"id":{"type":"string","format":"uuid"},"web":{"type":"string","format":"uri"}}}`,
			`{"at":"2026-01-02T03:04:05Z","id":"123e4567-e89b-42d3-a456-426614174000","web":"https://example.invalid/sample"}`},
		{"minLength pads", `{"type":"string","minLength":24}`, `"sample value (alpha)xxxx"`},
		{"recursion ends", `{"type":"object","properties":{"next":{"$ref":"#"}},"required":["next"]}`,
			`{"next":{"next":{"next":{"next":{"next":{"next":{"next":null}}}}}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := instance(json.RawMessage(tt.schema), "alpha")
			if string(got) != tt.want || !json.Valid(got) {
				t.Errorf("instance(%s) = %s; want %s", tt.schema, got, tt.want)
			}
		})
	}
}

// weatherTool is the tool the tests offer, in the wire form of both
// protocols.
const weatherTool = `{"type":"function","function":{"name":"get_weather","description":"The weather in a city.",` +
	`"parameters":{"type":"object","properties":{"city":{"type":"string"},"unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["city","unit"]}}}`

const weatherArgs = `{"city":"sample city (alpha)","unit":"celsius"}`

var (
	ollamaCallID = regexp.MustCompile(`^call_[a-z0-9]{8}$`)
	vllmCallID   = regexp.MustCompile(`^chatcmpl-tool-[0-9a-f]{32}$`)
)

// A chat with tools is answered by a call of the first tool, in one piece
// on Ollama's /api/chat (with an id unless the server is legacy, done_reason
// stop), and the result of the tool is quoted by the next answer.
func TestOllamaToolCalls(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		for _, stream := range []bool{true, false} {
			t.Run(map[bool]string{false: "0.17.4", true: "legacy"}[legacy]+map[bool]string{true: "/stream", false: "/whole"}[stream], func(t *testing.T) {
				ctx := testContext(t)
				cfg := protos[0].config("alpha")
				cfg.LegacyToolCalls = legacy
				s := start(t, cfg)
				base, _ := url.Parse(s.URL())
				c := api.NewClient(base, client(t))
				var tools api.Tools
				if err := json.Unmarshal([]byte("["+weatherTool+"]"), &tools); err != nil {
					t.Fatal(err)
				}
				msgs := []api.Message{{Role: "user", Content: "Weather in Paris?"}}
				var parts []api.ChatResponse
				err := c.Chat(ctx, &api.ChatRequest{Model: "qwen3:8b", Messages: msgs, Tools: tools, Stream: &stream},
					func(r api.ChatResponse) error { parts = append(parts, r); return nil })
				if err != nil {
					t.Fatalf("Chat = %v", err)
				}
				last := parts[len(parts)-1]
				if !last.Done || last.DoneReason != "stop" {
					t.Errorf("last part = %+v; want done, done_reason stop", last)
				}
				var calls []api.ToolCall
				for _, p := range parts {
					if len(p.Message.ToolCalls) > 0 && p.Done && stream {
						t.Errorf("a tool call in the done line: %+v", p)
					}
					calls = append(calls, p.Message.ToolCalls...)
				}
				if len(calls) != 1 {
					t.Fatalf("tool calls = %+v; want one", calls)
				}
				call := calls[0]
				if legacy && call.ID != "" || !legacy && !ollamaCallID.MatchString(call.ID) {
					t.Errorf("call id = %q; want none for legacy, call_xxxxxxxx otherwise", call.ID)
				}
				if call.Function.Name != "get_weather" || call.Function.Index != 0 || call.Function.Arguments.String() != weatherArgs {
					t.Errorf("call = %+v; want get_weather(%s)", call.Function, weatherArgs)
				}

				msgs = append(msgs,
					api.Message{Role: "assistant", ToolCalls: calls},
					api.Message{Role: "tool", ToolName: "get_weather", Content: "Sunny, 21 °C", ToolCallID: call.ID})
				var answer strings.Builder
				err = c.Chat(ctx, &api.ChatRequest{Model: "qwen3:8b", Messages: msgs, Tools: tools, Stream: &stream},
					func(r api.ChatResponse) error { answer.WriteString(r.Message.Content); return nil })
				want := "alpha here (qwen3:8b): The tool returned: Sunny, 21 °C"
				if err != nil || answer.String() != want || s.ToolAnswer("qwen3:8b", "Sunny, 21 °C") != want {
					t.Errorf("answer to the tool result = %q, %v; want %q", answer.String(), err, want)
				}
			})
		}
	}
}

// openai-go sees a tool call of vLLM (streamed in fragments) and of
// Ollama's /v1 (one delta) alike: an id, type function, the arguments,
// finish_reason tool_calls.
func TestOpenAIToolCalls(t *testing.T) {
	for _, f := range []struct {
		name     string
		ollama   bool
		model    string
		id       *regexp.Regexp
		argDelta int // deltas that carry arguments
	}{
		{"vllm", false, "Qwen/Qwen3-32B", vllmCallID, len(fragments(weatherArgs, fragmentBytes))},
		{"ollama-v1", true, "qwen3:8b", ollamaCallID, 1},
	} {
		t.Run(f.name, func(t *testing.T) {
			ctx := testContext(t)
			p := protos[1]
			base := ""
			if f.ollama {
				p, base = protos[0], "/v1"
			}
			s := start(t, p.config("alpha"))
			c := openai.NewClient(option.WithBaseURL(s.URL()+base), option.WithAPIKey("unused"),
				option.WithHTTPClient(client(t)), option.WithMaxRetries(0))
			var def struct {
				Function struct {
					Name, Description string
					Parameters        shared.FunctionParameters
				}
			}
			if err := json.Unmarshal([]byte(weatherTool), &def); err != nil {
				t.Fatal(err)
			}
			tool := openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
				Name:        def.Function.Name,
				Description: openai.String(def.Function.Description),
				Parameters:  def.Function.Parameters,
			})
			params := openai.ChatCompletionNewParams{
				Model:    f.model,
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Paris?")},
				Tools:    []openai.ChatCompletionToolUnionParam{tool},
			}

			stream := c.Chat.Completions.NewStreaming(ctx, params)
			var acc openai.ChatCompletionAccumulator
			heads, argDeltas := 0, 0
			for stream.Next() {
				chunk := stream.Current()
				acc.AddChunk(chunk)
				for _, ch := range chunk.Choices {
					for _, tc := range ch.Delta.ToolCalls {
						if tc.ID != "" {
							heads++
							if tc.Type != "function" || tc.Function.Name != "get_weather" || tc.Index != 0 {
								t.Errorf("head delta %+v; want index 0, type function, the name", tc)
							}
						}
						if tc.Function.Arguments != "" {
							argDeltas++
						}
					}
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			if heads != 1 || argDeltas != f.argDelta {
				t.Errorf("%d head deltas, %d argument deltas; want 1 and %d", heads, argDeltas, f.argDelta)
			}
			whole, err := c.Chat.Completions.New(ctx, params)
			if err != nil {
				t.Fatal(err)
			}
			for name, got := range map[string]openai.ChatCompletion{"stream": acc.ChatCompletion, "whole": *whole} {
				ch := got.Choices[0]
				if ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) != 1 {
					t.Fatalf("%s: choice %+v; want one tool call, finish_reason tool_calls", name, ch)
				}
				tc := ch.Message.ToolCalls[0]
				if !f.id.MatchString(tc.ID) || tc.Type != "function" || tc.Function.Name != "get_weather" || tc.Function.Arguments != weatherArgs {
					t.Errorf("%s: tool call %+v; want id like %s, get_weather(%s)", name, tc, f.id, weatherArgs)
				}
			}
			if whole.Choices[0].Message.JSON.Content.Raw() != "null" {
				t.Errorf("content of a tool-call answer = %s; want null", whole.Choices[0].Message.JSON.Content.Raw())
			}

			// The result goes back as a tool message.
			tc := whole.Choices[0].Message.ToolCalls[0]
			params.Messages = append(params.Messages,
				whole.Choices[0].Message.ToParam(),
				openai.ToolMessage("Sunny, 21 °C", tc.ID))
			done, err := c.Chat.Completions.New(ctx, params)
			if err != nil || done.Choices[0].Message.Content != s.ToolAnswer(f.model, "Sunny, 21 °C") || done.Choices[0].FinishReason != "stop" {
				t.Errorf("answer to the tool result = %+v, %v; want %q", done, err, s.ToolAnswer(f.model, "Sunny, 21 °C"))
			}
			// tool_choice none: no call.
			params.Messages = params.Messages[:1]
			params.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("none")}
			plain, err := c.Chat.Completions.New(ctx, params)
			if err != nil || plain.Choices[0].Message.Content != s.Answer(f.model) {
				t.Errorf("tool_choice none = %+v, %v; want the answer", plain, err)
			}
		})
	}
}

const personSchema = `{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer","minimum":0},"tags":{"type":"array","items":{"type":"string"}}},"required":["name","age","tags"],"additionalProperties":false}`

const personJSON = `{"name":"sample name (alpha)","age":42,"tags":["sample tags (alpha)"]}`

// Structured output: Ollama's format and OpenAI's response_format make the
// answer a JSON value, an instance of the schema when there is one,
// streamed in pieces.
func TestStructuredOutput(t *testing.T) {
	answerJSON := func(s *Server, model string) string {
		b, _ := json.Marshal(map[string]string{"answer": s.Answer(model)})
		return string(b)
	}
	for _, tt := range []struct {
		name  string
		p     proto
		extra string // the request fields that ask for it
		want  func(s *Server, model string) string
	}{
		{"ollama format json", protos[0], `"format":"json"`, answerJSON},
		{"ollama format schema", protos[0], `"format":` + personSchema, func(*Server, string) string { return personJSON }},
		{"openai json_object", protos[1], `"response_format":{"type":"json_object"}`, answerJSON},
		{"openai json_schema", protos[1], `"response_format":{"type":"json_schema","json_schema":{"name":"person","strict":true,"schema":` + personSchema + `}}`,
			func(*Server, string) string { return personJSON }},
	} {
		for _, stream := range []bool{true, false} {
			t.Run(tt.name+map[bool]string{true: "/stream", false: "/whole"}[stream], func(t *testing.T) {
				ctx := testContext(t)
				s := start(t, tt.p.config("alpha"))
				body := strings.TrimSuffix(tt.p.body(tt.p.plain, stream, false), "}") + "," + tt.extra + "}"
				resp := mustPost(ctx, t, client(t), tt.p, s, body)
				expectStatus(t, resp, 200)
				raw, err := readAll(resp)
				if err != nil {
					t.Fatal(err)
				}
				var content string
				if stream {
					got := tt.p.collect(t, tt.p.events(t, raw))
					content = got.content
					if !got.finished || got.tokens < 2 {
						t.Errorf("stream %+v; want it finished, in pieces", got)
					}
				} else if tt.p.provider == "ollama" {
					content = decode[ollamaLine](t, string(raw)).Message.Content
				} else {
					content, _ = decode[oaLine](t, string(raw)).Choices[0].Message["content"].(string)
				}
				if want := tt.want(s, tt.p.plain); content != want {
					t.Errorf("content = %s; want %s", content, want)
				}
				if string(s.Structured(tt.p.plain, nil)) != answerJSON(s, tt.p.plain) {
					t.Errorf("Structured(nil) = %s", s.Structured(tt.p.plain, nil))
				}
			})
		}
	}
	// openai-go asks the same way.
	ctx := testContext(t)
	s := start(t, protos[1].config("alpha"))
	c := openai.NewClient(option.WithBaseURL(s.URL()), option.WithAPIKey("unused"), option.WithHTTPClient(client(t)), option.WithMaxRetries(0))
	var schema map[string]any
	json.Unmarshal([]byte(personSchema), &schema)
	got, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:    "mistral-7b",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Who?")},
		ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "person", Schema: schema, Strict: openai.Bool(true)},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	// openai-go sends the schema's keys sorted: the instance follows them.
	sent, _ := json.Marshal(schema)
	if want := string(s.Structured("mistral-7b", sent)); got.Choices[0].Message.Content != want {
		t.Errorf("openai-go json_schema content = %s; want %s", got.Choices[0].Message.Content, want)
	}
}
