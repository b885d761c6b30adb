package openai

import (
	"bytes"
	"encoding/json"
	"io"
	"strconv"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/switchyard/switchyard/backend/fleet"
)

// quickDecoder reads the common chat.completion.chunk (text, reasoning, a
// finish reason, usage) with a JSON tokenizer instead of encoding/json's
// reflection, which was most of a stream's decoding cost before its first
// token and of every event of a non-stream answer (BenchmarkRecv: 4.1 µs
// an event; quickly, under 1). It is a fast path, not a second decoder:
// whatever it is not sure of (tool calls, logprobs, an error, a value of an
// unexpected type, a key that encoding/json would match without regard to
// case, invalid UTF-8, anything malformed) it leaves to decode, whose
// answer for such an event is the only one. What it does accept, it
// decodes as decode would (FuzzQuickChunk holds the two to that).
//
// The zero value is ready; it is not safe for concurrent use.
type quickDecoder struct {
	dec  jsontext.Decoder
	in   bytes.Buffer
	text []byte // scratch for a string with escapes
}

// quickOptions: duplicate names are taken in order, the last winning, as
// encoding/json does; checking them would cost a map a chunk.
var quickOptions = jsontext.AllowDuplicateNames(true)

// chunk decodes data into c. ok is false when decode must read it instead;
// c is then to be dropped. model turns the model's raw value into its name
// (stream.modelName).
func (q *quickDecoder) chunk(data []byte, model func(json.RawMessage) string) (c fleet.Chunk, ok bool) {
	q.in = *bytes.NewBuffer(data)
	q.dec.Reset(&q.in, quickOptions)
	d := &q.dec
	var (
		usage   *fleet.Usage
		choices int
		ch      quickChoice
	)
	ok = q.object(func(name []byte) (ok bool) {
		switch string(name) {
		case "model":
			v, err := d.ReadValue()
			c.Model = model(json.RawMessage(v))
			return err == nil
		case "choices":
			choices, ok = q.choices(&ch)
			return ok
		case "usage":
			usage, ok = q.usage()
			return ok
		case "error":
			return d.PeekKind() == 'n' && d.SkipValue() == nil // else decode says which error
		case "object":
			v, err := d.ReadValue()
			return err == nil && string(v) != `"error"`
		case "message":
			_, ok = q.string()
			return ok
		}
		return q.skip(name, topNames)
	})
	if !ok {
		return c, false
	}
	if _, err := d.ReadToken(); err != io.EOF {
		return c, false // data after the value
	}
	c.Raw = data
	c.Usage = usage
	if choices == 0 {
		c.UsageOnly = usage != nil
		return c, true
	}
	if ch.finish == "error" {
		return fleet.Chunk{}, false // decode says it is the server's failure
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

// The names each object of a chunk is read with, for skip: a name
// encoding/json would take for one of these without regard to case is
// not skipped.
var (
	topNames    = []string{"model", "choices", "usage", "error", "object", "message", "code"}
	choiceNames = []string{"text", "delta", "finish_reason", "logprobs"}
	deltaNames  = []string{"role", "content", "reasoning", "reasoning_content", "tool_calls"}
	usageNames  = []string{"prompt_tokens", "completion_tokens"}
)

// choices reads the choices array into ch and says how many it held
// (null is none). More than one is decode's.
func (q *quickDecoder) choices(ch *quickChoice) (n int, ok bool) {
	d := &q.dec
	if q.null() {
		return 0, true
	}
	if d.PeekKind() != '[' {
		return 0, false
	}
	d.ReadToken()
	for d.PeekKind() != ']' {
		if n++; n > 1 || !q.choice(ch) {
			return n, false
		}
	}
	_, err := d.ReadToken()
	return n, err == nil
}

func (q *quickDecoder) choice(ch *quickChoice) bool {
	d := &q.dec
	return q.object(func(name []byte) (ok bool) {
		switch string(name) {
		case "text":
			ch.text, ok = q.string()
		case "finish_reason":
			ch.finish, ok = q.string()
		case "logprobs":
			ok = d.PeekKind() == 'n' && d.SkipValue() == nil
		case "delta":
			ok = q.null() || q.delta(ch)
		default:
			ok = q.skip(name, choiceNames)
		}
		return ok
	})
}

func (q *quickDecoder) delta(ch *quickChoice) bool {
	d := &q.dec
	return q.object(func(name []byte) (ok bool) {
		switch string(name) {
		case "role":
			ch.role, ok = q.string()
		case "content":
			ch.content, ok = q.string()
		case "reasoning":
			ch.reasoning, ok = q.string()
		case "reasoning_content":
			ch.reasoningContent, ok = q.string()
		case "tool_calls":
			ok = d.PeekKind() == 'n' && d.SkipValue() == nil
		default:
			ok = q.skip(name, deltaNames)
		}
		return ok
	})
}

// usage reads a usage object; nil for null.
func (q *quickDecoder) usage() (*fleet.Usage, bool) {
	if q.null() {
		return nil, true
	}
	u := &fleet.Usage{}
	ok := q.object(func(name []byte) (ok bool) {
		switch string(name) {
		case "prompt_tokens":
			u.PromptTokens, ok = q.int()
		case "completion_tokens":
			u.CompletionTokens, ok = q.int()
		default:
			ok = q.skip(name, usageNames)
		}
		return ok
	})
	return u, ok
}

// object reads an object, handing each name to member, which reads the
// value; false when member or the object's syntax says so.
func (q *quickDecoder) object(member func(name []byte) bool) bool {
	d := &q.dec
	if d.PeekKind() != '{' {
		return false
	}
	d.ReadToken()
	for d.PeekKind() != '}' {
		name, ok := q.name()
		if !ok || !member(name) {
			return false
		}
	}
	_, err := d.ReadToken()
	return err == nil
}

// null reads a null, reporting whether the next value was one.
func (q *quickDecoder) null() bool {
	return q.dec.PeekKind() == 'n' && q.dec.SkipValue() == nil
}

// name reads an object's next name, unquoted (one with escapes is
// decode's). It is valid until the next read.
func (q *quickDecoder) name() ([]byte, bool) {
	v, err := q.dec.ReadValue()
	if err != nil || len(v) < 2 || bytes.IndexByte(v, '\\') >= 0 {
		return nil, false
	}
	return v[1 : len(v)-1], true
}

// string reads a string value; null is "", as encoding/json leaves it.
func (q *quickDecoder) string() (string, bool) {
	v, err := q.dec.ReadValue()
	switch {
	case err != nil:
		return "", false
	case v.Kind() == 'n':
		return "", true
	case v.Kind() != '"':
		return "", false
	case bytes.IndexByte(v, '\\') < 0:
		return string(v[1 : len(v)-1]), true
	}
	if q.text, err = jsontext.AppendUnquote(q.text[:0], v); err != nil {
		return "", false
	}
	return string(q.text), true
}

// int reads an integer value; null is 0.
func (q *quickDecoder) int() (int, bool) {
	v, err := q.dec.ReadValue()
	switch {
	case err != nil:
		return 0, false
	case v.Kind() == 'n':
		return 0, true
	case v.Kind() != '0':
		return 0, false
	}
	n, err := strconv.ParseInt(string(v), 10, 0)
	return int(n), err == nil
}

// skip passes over the value of a name the object does not use, unless
// encoding/json would take the name for one of known.
func (q *quickDecoder) skip(name []byte, known []string) bool {
	for _, k := range known {
		if bytes.EqualFold(name, []byte(k)) {
			return false
		}
	}
	return q.dec.SkipValue() == nil
}
