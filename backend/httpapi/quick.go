package httpapi

import (
	"bytes"
	"encoding/json"
	"strconv"
	"sync"

	"github.com/switchyard/switchyard/backend/openai/wire"
	"github.com/switchyard/switchyard/backend/upstream"
)

// quickChat reads the common chat request (a model, messages, the
// sampling settings, tools) with a JSON tokenizer (upstream.Tokens)
// instead of encoding/json's reflection, which was most of the API edge's
// decoding cost and about a dozen allocations a request
// (BenchmarkSameDialectStream). It is a fast path, not a second decoder:
// whatever it is not sure of (a value of an unexpected type, a name
// encoding/json would match without regard to case, a field sent twice
// whose value is an object or an array, which encoding/json merges, a null
// message, invalid UTF-8, anything malformed) it leaves to json.Unmarshal,
// whose reading and errors are the only ones. What it accepts it reads as
// json.Unmarshal would (FuzzQuickChat holds the two to that).
type quickChat struct {
	t upstream.Tokens
	// seen says the element objects is reading has had its function (a
	// tool's, a tool call's): objects clears it for each element, and the
	// elements with a function hold no array of objects of their own.
	seen bool
	// fields are the top-level fields read, in order, as mergeFields
	// reads them: the request's fields kept for an upstream of the
	// caller's dialect come from the same pass.
	fields []field
}

// field is one top-level field of a JSON object: its name and its value
// as written, in the object's own bytes.
type field struct {
	name  string
	value []byte
}

// tokenizers are those of the requests and answers being read (quickChat,
// mergeFields): one holds a decoder's buffers, too large to make for each.
var tokenizers = sync.Pool{New: func() any { return new(quickChat) }}

// decodeQuick decodes body into q, and returns its top-level fields as
// mergeFields would, in one pass, when the fast path can; false leaves q
// as it was, for mergeFields and json.Unmarshal. The fields' values are
// body's own bytes (mergeFields).
func (q *chatRequest) decodeQuick(body []byte) (map[string]json.RawMessage, bool) {
	d := tokenizers.Get().(*quickChat)
	var c chatRequest
	ok := d.read(body, func(name []byte) bool { return d.member(&c, name) })
	if ok {
		*q = c
	}
	return d.done(ok)
}

// done ends a fast path's decodeQuick: it returns the fields read when ok,
// and puts d back in the pool holding no body.
func (d *quickChat) done(ok bool) (fields map[string]json.RawMessage, _ bool) {
	if ok {
		putFields(&fields, d.fields)
	}
	d.t.Reset(nil)
	clear(d.fields)
	d.fields = d.fields[:0]
	tokenizers.Put(d)
	return fields, ok
}

// The names each object of a request is read with, for Skip.
var (
	chatNames = []string{"model", "messages", "tools", "stream", "stream_options", "temperature", "top_p", "max_tokens", "seed",
		"stop", "response_format", "reasoning_effort", "tool_choice", "n", "logprobs", "top_logprobs", "presence_penalty",
		"frequency_penalty", "top_k", "min_p", "repeat_penalty", "repetition_penalty", "chat_template_kwargs",
		"max_completion_tokens", "reasoning", "logit_bias"}
	messageNames       = []string{"role", "content", "tool_calls", "tool_call_id", "name"}
	toolNames          = []string{"type", "function"}
	toolFunctionNames  = []string{"name", "description", "parameters"}
	toolCallNames      = []string{"index", "id", "type", "function"}
	functionCallNames  = []string{"name", "arguments"}
	streamOptionsNames = []string{"include_usage"}
	kwargsNames        = []string{"enable_thinking"}
	reasoningNames     = []string{"effort"}
)

// read reads the object body, handing each top-level name to member,
// which reads its value, and notes its fields in d.fields.
func (d *quickChat) read(body []byte, member func(name []byte) bool) bool {
	t := &d.t
	t.Reset(body)
	ok := t.Object(func(name []byte) bool {
		n, from := fieldName(name), t.Offset()
		if !member(name) {
			return false
		}
		// The value is what follows the name and its colon.
		v := bytes.TrimLeft(body[from:t.Offset()], " \t\r\n:")
		d.fields = append(d.fields, field{n, v})
		return true
	})
	return ok && t.End()
}

// member reads the value of the request's top-level field name into q.
func (d *quickChat) member(q *chatRequest, name []byte) bool {
	t := &d.t
	switch string(name) {
	case "model":
		return d.str(&q.Model)
	case "messages":
		return objects(d, &q.Messages, d.message)
	case "tools":
		return objects(d, &q.Tools, d.tool)
	case "stream":
		return d.flag(&q.Stream)
	case "stream_options":
		return one(d, &q.StreamOptions, func(o *wire.StreamOptions, name []byte) bool {
			if string(name) == "include_usage" {
				return d.flag(&o.IncludeUsage)
			}
			return t.Skip(name, streamOptionsNames)
		})
	case "temperature":
		return d.float(&q.Temperature)
	case "top_p":
		return d.float(&q.TopP)
	case "max_tokens":
		return d.int(&q.MaxTokens)
	case "seed":
		return d.int(&q.Seed)
	case "stop":
		return d.raw(&q.Stop)
	case "response_format":
		return d.raw(&q.ResponseFormat)
	case "reasoning_effort":
		return d.str(&q.ReasoningEffort)
	case "tool_choice":
		return d.raw(&q.ToolChoice)
	case "n":
		return d.int(&q.N)
	case "logprobs":
		return d.boolPtr(&q.Logprobs)
	case "top_logprobs":
		return d.int(&q.TopLogprobs)
	case "presence_penalty":
		return d.float(&q.PresencePenalty)
	case "frequency_penalty":
		return d.float(&q.FrequencyPenalty)
	case "top_k":
		return d.int(&q.TopK)
	case "min_p":
		return d.float(&q.MinP)
	case "repeat_penalty":
		return d.float(&q.RepeatPenalty)
	case "repetition_penalty":
		return d.float(&q.RepetitionPenalty)
	case "chat_template_kwargs":
		return one(d, &q.ChatTemplateKwargs, func(k *wire.TemplateKwargs, name []byte) bool {
			if string(name) == "enable_thinking" {
				return d.boolPtr(&k.EnableThinking)
			}
			return t.Skip(name, kwargsNames)
		})
	case "max_completion_tokens":
		return d.int(&q.MaxCompletionTokens)
	case "reasoning":
		return one(d, &q.Reasoning, func(r *wire.Reasoning, name []byte) bool {
			if string(name) == "effort" {
				return d.str(&r.Effort)
			}
			return t.Skip(name, reasoningNames)
		})
	case "logit_bias":
		return d.raw(&q.LogitBias)
	}
	return t.Skip(name, chatNames)
}

// objects reads an array of objects into *dst, handing each element's names
// to member; null leaves *dst nil. A second array for a slice already
// read is encoding/json's, which decodes it over the first one's
// elements.
func objects[T any](d *quickChat, dst *[]T, member func(e *T, name []byte) bool) bool {
	t := &d.t
	if *dst != nil {
		return false
	}
	if t.Null() {
		return true
	}
	s := []T{} // [] is an empty slice, as encoding/json makes it
	ok := t.Array(func() bool {
		s = append(s, *new(T))
		e := &s[len(s)-1]
		d.seen = false
		return t.Object(func(name []byte) bool { return member(e, name) })
	})
	*dst = s
	return ok
}

// one reads an object into a new *dst, handing its names to member; null
// leaves *dst nil. A second object for one already read is
// encoding/json's, which merges the two.
func one[T any](d *quickChat, dst **T, member func(v *T, name []byte) bool) bool {
	if *dst != nil {
		return false
	}
	if d.t.Null() {
		return true
	}
	v := new(T)
	*dst = v
	return d.t.Object(func(name []byte) bool { return member(v, name) })
}

// inner reads an object that is a struct field, not a pointer (a tool's
// function): null leaves it as it was, and a second one is
// encoding/json's, which merges the two.
func (d *quickChat) inner(member func(name []byte) bool) bool {
	if d.seen {
		return false
	}
	d.seen = true
	return d.t.Null() || d.t.Object(member)
}

func (d *quickChat) message(m *wire.Message, name []byte) bool {
	switch string(name) {
	case "role":
		return d.role(&m.Role, openaiRoles)
	case "content":
		return d.raw(&m.Content)
	case "tool_calls":
		return objects(d, &m.ToolCalls, d.toolCall)
	case "tool_call_id":
		return d.str(&m.ToolCallID)
	case "name":
		return d.str(&m.Name)
	}
	return d.t.Skip(name, messageNames)
}

func (d *quickChat) toolCall(c *wire.ToolCall, name []byte) bool {
	switch string(name) {
	case "index":
		return d.int(&c.Index)
	case "id":
		return d.str(&c.ID)
	case "type":
		return d.str(&c.Type)
	case "function":
		return d.inner(func(name []byte) bool {
			switch string(name) {
			case "name":
				return d.str(&c.Function.Name)
			case "arguments":
				return d.str(&c.Function.Arguments)
			}
			return d.t.Skip(name, functionCallNames)
		})
	}
	return d.t.Skip(name, toolCallNames)
}

func (d *quickChat) tool(tl *wire.Tool, name []byte) bool {
	switch string(name) {
	case "type":
		return d.str(&tl.Type)
	case "function":
		return d.inner(func(name []byte) bool {
			switch string(name) {
			case "name":
				return d.str(&tl.Function.Name)
			case "description":
				return d.str(&tl.Function.Description)
			case "parameters":
				return d.raw(&tl.Function.Parameters)
			}
			return d.t.Skip(name, toolFunctionNames)
		})
	}
	return d.t.Skip(name, toolNames)
}

// str reads a string; null leaves dst as it was, as encoding/json does.
func (d *quickChat) str(dst *string) bool { return d.t.Str(dst) }

// flag reads true or false; null leaves dst as it was.
func (d *quickChat) flag(dst *bool) bool { return d.t.Flag(dst) }

// boolPtr reads true or false into a new bool; null is nil.
func (d *quickChat) boolPtr(dst **bool) bool {
	if d.t.Null() {
		*dst = nil
		return true
	}
	b, ok := d.t.Bool()
	*dst = &b
	return ok
}

// int reads an integer into a new int; null is nil. A number that is no
// integer, or too large, is encoding/json's to refuse.
func (d *quickChat) int(dst **int) bool {
	if d.t.Null() {
		*dst = nil
		return true
	}
	n, ok := d.t.Int()
	v := int(n)
	*dst = &v
	return ok && int64(v) == n
}

// float reads a number into a new float64; null is nil. One out of
// float64's range is encoding/json's to refuse.
func (d *quickChat) float(dst **float64) bool {
	if d.t.Null() {
		*dst = nil
		return true
	}
	if d.t.Kind() != '0' {
		return false
	}
	v, ok := d.t.Value()
	if !ok {
		return false
	}
	f, err := strconv.ParseFloat(string(v), 64)
	*dst = &f
	return err == nil
}

// role reads a message's role: one of roles is that role's constant, not
// a string made for each message.
func (d *quickChat) role(dst *string, roles []string) bool {
	if d.t.Kind() == '"' {
		v, ok := d.t.Value()
		if !ok {
			return false
		}
		for _, r := range roles {
			if len(v) == len(r)+2 && string(v[1:len(v)-1]) == r {
				*dst = r
				return true
			}
		}
		s, ok := upstream.Plain(v) // escapes in a role are encoding/json's to read
		*dst = s
		return ok
	}
	return d.str(dst)
}

// raw reads a value as it was written, which a json.RawMessage keeps
// (null too). The tokenizer reads the body where it lies (jsontext parses
// a bytes.Buffer in place) and the body is the request's own, never
// written again, so the value stays there rather than be copied.
func (d *quickChat) raw(dst *json.RawMessage) bool {
	v, ok := d.t.Value()
	*dst = v
	return ok
}
