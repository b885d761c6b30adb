package httpapi

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/ollama/ollama/api"
)

// ollamaChatRequest is an Ollama chat request (/api/chat), Ollama's own
// type with the fast path through its usual bodies that quickChat gives
// OpenAI's: the model, messages of text, stream, format, think, and
// options whose values are numbers, strings, booleans or arrays of those.
// Whatever else it meets (images, tool calls, tools, keep_alive, a name
// sent twice whose value encoding/json would merge or decode over the
// first, anything quickChat leaves) it leaves to json.Unmarshal, which
// decodes this type as it decodes api.ChatRequest (the type has none of
// its own methods; its fields keep theirs). FuzzQuickOllamaChat holds the
// two to the same answers.
type ollamaChatRequest api.ChatRequest

// The names each object of an Ollama chat request is read with, for Skip.
var (
	ollamaChatNames = []string{"model", "messages", "stream", "format", "keep_alive", "tools", "options", "think",
		"truncate", "shift", "_debug_render_only", "logprobs", "top_logprobs"}
	ollamaMessageNames = []string{"role", "content", "thinking", "images", "tool_calls", "tool_name", "tool_call_id"}
)

// decodeQuick implements quickRequest.
func (q *ollamaChatRequest) decodeQuick(body []byte) (map[string]json.RawMessage, bool) {
	d := tokenizers.Get().(*quickChat)
	var c ollamaChatRequest
	ok := d.read(body, func(name []byte) bool { return d.ollamaChat(&c, name) })
	if ok {
		*q = c
	}
	return d.done(ok)
}

// ollamaChat reads the value of the request's top-level field name into q.
func (d *quickChat) ollamaChat(q *ollamaChatRequest, name []byte) bool {
	t := &d.t
	switch string(name) {
	case "model":
		return d.str(&q.Model)
	case "messages":
		return objects(d, &q.Messages, d.ollamaMessage)
	case "stream":
		return d.boolPtr(&q.Stream)
	case "format":
		return d.raw(&q.Format)
	case "options":
		return d.anyMap(&q.Options)
	case "think":
		return d.think(&q.Think)
	case "truncate":
		return d.boolPtr(&q.Truncate)
	case "shift":
		return d.boolPtr(&q.Shift)
	case "_debug_render_only":
		return d.flag(&q.DebugRenderOnly)
	case "logprobs":
		return d.flag(&q.Logprobs)
	case "top_logprobs":
		var n *int
		if !d.int(&n) {
			return false
		}
		if n != nil {
			q.TopLogprobs = *n
		}
		return true
	case "keep_alive", "tools":
		return false // their own decoders' (api.Duration) or too rare to matter
	}
	return t.Skip(name, ollamaChatNames)
}

// ollamaMessage reads a message's field name, as api.Message's
// UnmarshalJSON does: its role lower-cased.
func (d *quickChat) ollamaMessage(m *api.Message, name []byte) bool {
	switch string(name) {
	case "role":
		if !d.role(&m.Role, ollamaRoles) {
			return false
		}
		m.Role = strings.ToLower(m.Role)
		return true
	case "content":
		return d.str(&m.Content)
	case "thinking":
		return d.str(&m.Thinking)
	case "tool_name":
		return d.str(&m.ToolName)
	case "tool_call_id":
		return d.str(&m.ToolCallID)
	case "images", "tool_calls":
		return false // base64 and ordered maps: encoding/json's
	}
	return d.t.Skip(name, ollamaMessageNames)
}

// think reads think: true, false, or one of its levels; null is nil.
// Anything else is api.ThinkValue's to refuse, with its own error.
func (d *quickChat) think(dst **api.ThinkValue) bool {
	if *dst != nil {
		return false // a second one decodes into the first: encoding/json's
	}
	if d.t.Null() {
		return true
	}
	switch d.t.Kind() {
	case 't', 'f':
		b, ok := d.t.Bool()
		*dst = &api.ThinkValue{Value: b}
		return ok
	case '"':
		var s string
		if !d.str(&s) || (s != "high" && s != "medium" && s != "low") {
			return false
		}
		*dst = &api.ThinkValue{Value: s}
		return true
	}
	return false
}

// anyMap reads an object into a new map whose values are what
// encoding/json makes of them in an interface (float64, string, bool,
// nil, and []any of those); null is nil. A value that is an object, or an
// array holding one, is encoding/json's, and so is a second object for
// a map already read, which encoding/json merges into the first.
func (d *quickChat) anyMap(dst *map[string]any) bool {
	if *dst != nil {
		return false
	}
	if d.t.Null() {
		return true
	}
	m := make(map[string]any)
	*dst = m
	return d.t.Object(func(name []byte) bool {
		k := string(name)
		if d.t.Kind() == '[' {
			list := []any{}
			ok := d.t.Array(func() bool {
				v, ok := d.scalar()
				list = append(list, v)
				return ok
			})
			m[k] = list
			return ok
		}
		v, ok := d.scalar()
		m[k] = v
		return ok
	})
}

// scalar reads a number, string, boolean or null as encoding/json reads
// it into an interface; false for an object or an array.
func (d *quickChat) scalar() (any, bool) {
	switch d.t.Kind() {
	case '"':
		return d.t.Text()
	case 't', 'f', 'n':
		if d.t.Null() {
			return nil, true
		}
		return d.t.Bool()
	case '0':
		v, ok := d.t.Value()
		if !ok {
			return nil, false
		}
		f, err := strconv.ParseFloat(string(v), 64)
		return f, err == nil
	}
	return nil, false
}
