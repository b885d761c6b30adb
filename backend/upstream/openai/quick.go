package openai

import (
	"encoding/json"

	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/upstream"
)

// quickDecoder reads the common chat.completion.chunk (text, reasoning, a
// finish reason, usage) with a JSON tokenizer (upstream.Tokens) instead of
// encoding/json's reflection, which was most of a stream's decoding cost
// before its first token and of every event of a non-stream answer
// (BenchmarkRecv: 4.1 µs an event; quickly, about 1). It is a fast path,
// not a second decoder: whatever it is not sure of (tool calls, logprobs,
// an error, a value of an unexpected type, a name that encoding/json would
// match without regard to case, invalid UTF-8, anything malformed) it
// leaves to full, whose answer for such an event is the only one. What it
// does accept, it decodes as full would (FuzzQuickChunk holds the two to
// that).
//
// The zero value is ready; it is not safe for concurrent use.
type quickDecoder struct{ t upstream.Tokens }

// chunk decodes data into c. ok is false when full must read it instead;
// c is then to be dropped. model turns the model's raw value into its name
// (stream.modelName).
func (q *quickDecoder) chunk(data []byte, model func(json.RawMessage) string) (c fleet.Chunk, ok bool) {
	t := &q.t
	t.Reset(data)
	var (
		usage   *fleet.Usage
		choices int
		ch      quickChoice
	)
	ok = t.Object(func(name []byte) (ok bool) {
		switch string(name) {
		case "model":
			v, ok := t.Value()
			c.Model = model(json.RawMessage(v))
			return ok
		case "choices":
			choices, ok = q.choices(&ch)
			return ok
		case "usage":
			usage, ok = q.usage()
			return ok
		case "error":
			return t.Null() // else full says which error
		case "object":
			v, ok := t.Value()
			return ok && string(v) != `"error"`
		case "message":
			_, ok = t.Text()
			return ok
		}
		return t.Skip(name, topNames)
	})
	if !ok || !t.End() {
		return c, false // data after the value too
	}
	c.Raw = data
	c.Usage = usage
	if choices == 0 {
		c.UsageOnly = usage != nil
		return c, true
	}
	if ch.finish == "error" {
		return fleet.Chunk{}, false // full says it is the server's failure
	}
	c.Role = ch.role
	c.Content = ch.content + ch.text
	c.Reasoning = ch.reasoning
	if c.Reasoning == "" {
		c.Reasoning = ch.reasoningContent
	}
	c.FinishReason = ch.finish
	return c, true
}

// quickChoice is the first choice of a chunk, as quickDecoder reads it.
type quickChoice struct {
	text, role, content, reasoning, reasoningContent, finish string
}

// The names each object of a chunk is read with, for Skip.
var (
	topNames    = []string{"model", "choices", "usage", "error", "object", "message", "code"}
	choiceNames = []string{"text", "delta", "finish_reason", "logprobs"}
	deltaNames  = []string{"role", "content", "reasoning", "reasoning_content", "tool_calls"}
	usageNames  = []string{"prompt_tokens", "completion_tokens"}
)

// choices reads the choices array into ch and says how many it held
// (null is none). More than one is full's.
func (q *quickDecoder) choices(ch *quickChoice) (n int, ok bool) {
	t := &q.t
	if t.Null() {
		return 0, true
	}
	ok = t.Array(func() bool {
		n++
		return n == 1 && q.choice(ch)
	})
	return n, ok
}

func (q *quickDecoder) choice(ch *quickChoice) bool {
	t := &q.t
	return t.Object(func(name []byte) (ok bool) {
		switch string(name) {
		case "text":
			ok = t.Str(&ch.text)
		case "finish_reason":
			ok = t.Str(&ch.finish)
		case "logprobs":
			ok = t.Null()
		case "delta":
			ok = t.Null() || q.delta(ch)
		default:
			ok = t.Skip(name, choiceNames)
		}
		return ok
	})
}

func (q *quickDecoder) delta(ch *quickChoice) bool {
	t := &q.t
	return t.Object(func(name []byte) (ok bool) {
		switch string(name) {
		case "role":
			ok = t.Str(&ch.role)
		case "content":
			ok = t.Str(&ch.content)
		case "reasoning":
			ok = t.Str(&ch.reasoning)
		case "reasoning_content":
			ok = t.Str(&ch.reasoningContent)
		case "tool_calls":
			ok = t.Null()
		default:
			ok = t.Skip(name, deltaNames)
		}
		return ok
	})
}

// usage reads a usage object; nil for null.
func (q *quickDecoder) usage() (*fleet.Usage, bool) {
	t := &q.t
	if t.Null() {
		return nil, true
	}
	u := &fleet.Usage{}
	ok := t.Object(func(name []byte) (ok bool) {
		switch string(name) {
		case "prompt_tokens":
			ok = upstream.Integer(t, &u.PromptTokens)
		case "completion_tokens":
			ok = upstream.Integer(t, &u.CompletionTokens)
		default:
			ok = t.Skip(name, usageNames)
		}
		return ok
	})
	return u, ok
}
