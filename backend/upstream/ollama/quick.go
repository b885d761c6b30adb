package ollama

import (
	"encoding/json"
	"strings"

	"github.com/switchyard/switchyard/backend/upstream"
)

// quickLine reads the common /api/chat and /api/generate line (text,
// thinking, done with its reason and counts) into a wireLine with a JSON
// tokenizer (upstream.Tokens) instead of encoding/json's reflection, which
// cost about 2.4 µs and 13 allocations a line (BenchmarkRecv). It is a
// fast path: whatever it is not sure of (tool calls, images, logprobs, an
// error, a value of an unexpected type, a name encoding/json would match
// without regard to case, anything malformed) it leaves to
// json.Unmarshal, whose reading of such a line is the only one. What it
// accepts it reads as json.Unmarshal would (FuzzQuickLine holds the two to
// that).
//
// The zero value is ready; it is not safe for concurrent use.
type quickLine struct{ t upstream.Tokens }

// null is a raw null, as json.Unmarshal keeps one in a json.RawMessage.
var null = json.RawMessage("null")

// The names each object of a line is read with, for Skip.
var (
	lineNames = []string{"model", "message", "response", "thinking", "tool_calls", "done", "done_reason", "logprobs", "error",
		"total_duration", "load_duration", "prompt_eval_count", "prompt_eval_duration", "eval_count", "eval_duration"}
	messageNames = []string{"role", "content", "thinking", "images", "tool_calls", "tool_name", "tool_call_id"}
)

// read decodes b into *l, which it resets first; false when json.Unmarshal
// must read b instead (l is then to be reset again).
func (q *quickLine) read(b []byte, l *wireLine) bool {
	t := &q.t
	t.Reset(b)
	*l = wireLine{}
	ok := t.Object(func(name []byte) (ok bool) {
		switch string(name) {
		case "model":
			ok = t.Str(&l.Model)
		case "message":
			ok = t.Null() || q.message(l)
		case "response":
			ok = t.Str(&l.Response)
		case "thinking":
			ok = t.Str(&l.Thinking)
		case "done":
			ok = t.Flag(&l.Done)
		case "done_reason":
			ok = t.Str(&l.DoneReason)
		case "tool_calls":
			ok = t.Null() // else json.Unmarshal's
		case "logprobs":
			l.Logprobs, ok = null, t.Null()
		case "error":
			l.Error, ok = null, t.Null()
		case "total_duration":
			ok = upstream.Integer(t, &l.TotalDuration)
		case "load_duration":
			ok = upstream.Integer(t, &l.LoadDuration)
		case "prompt_eval_count":
			ok = upstream.Integer(t, &l.PromptEvalCount)
		case "prompt_eval_duration":
			ok = upstream.Integer(t, &l.PromptEvalDuration)
		case "eval_count":
			ok = upstream.Integer(t, &l.EvalCount)
		case "eval_duration":
			ok = upstream.Integer(t, &l.EvalDuration)
		default:
			ok = t.Skip(name, lineNames)
		}
		return ok
	})
	return ok && t.End()
}

// message reads a line's message as api.Message's UnmarshalJSON does: its
// role in lower case.
func (q *quickLine) message(l *wireLine) bool {
	t := &q.t
	m := &l.Message
	ok := t.Object(func(name []byte) (ok bool) {
		switch string(name) {
		case "role":
			ok = t.Str(&m.Role)
		case "content":
			ok = t.Str(&m.Content)
		case "thinking":
			ok = t.Str(&m.Thinking)
		case "tool_name":
			ok = t.Str(&m.ToolName)
		case "tool_call_id":
			ok = t.Str(&m.ToolCallID)
		case "images", "tool_calls":
			ok = t.Null()
		default:
			ok = t.Skip(name, messageNames)
		}
		return ok
	})
	m.Role = strings.ToLower(m.Role)
	return ok
}
