package router

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"strings"

	"github.com/switchyard/switchyard/backend/fleet"
)

// Answer is a complete, non-streamed answer.
type Answer struct {
	Meta
	Message      fleet.Message // role "assistant", content, thinking, tool calls
	FinishReason string
	Usage        *fleet.Usage
	Model        string // the model name the upstream reported
	// Logprobs are the answer's token log probabilities, one JSON array
	// (see fleet.Chunk.Logprobs); nil when none came.
	Logprobs json.RawMessage
	// Embeddings are the vectors of an embedding request.
	Embeddings [][]float32
	// Fields are the top-level fields of the upstream's answer as it sent
	// them, from its first event and those that ended it (finish, usage),
	// later ones winning: what a caller of the upstream's dialect should
	// still see of them (system_fingerprint, timings, usage details,
	// Ollama's durations).
	Fields map[string]json.RawMessage
}

// Complete routes a non-streaming request (docs/DESIGN.md, "Non-streaming
// requests"). Upstreams are still read as streams, so the first-token
// deadline catches stalls; and since nothing reaches the caller before the
// whole answer, an attempt that breaks after its first token falls back
// like any other failure.
func (r *Router) Complete(ctx context.Context, req *fleet.Request) (*Answer, error) {
	ru, err := r.begin(ctx, req, true)
	if err != nil {
		return nil, err
	}
	for {
		s, err := ru.commitNext()
		if err != nil {
			return nil, err
		}
		ans, err := s.collect()
		if errors.Is(err, errRetry) {
			continue
		}
		var e *Error
		if err != nil && !errors.As(err, &e) {
			// The caller left while the answer was being collected; it
			// is already recorded as a client abort.
			err = &Error{Failure: ru.gone(), Err: err, Attempts: ru.rec.Attempts, RequestID: ru.id}
		}
		return ans, err
	}
}

// collect reads the whole stream into one Answer and closes it.
func (s *Stream) collect() (*Answer, error) {
	defer s.Close()
	ans := &Answer{Meta: s.meta, Model: s.meta.Candidate.Model}
	ans.Message.Role = "assistant"
	var content, thinking strings.Builder
	var logprobs []byte
	for first := true; ; first = false {
		ch, err := s.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		content.WriteString(ch.Content)
		thinking.WriteString(ch.Reasoning)
		for _, tc := range ch.ToolCalls {
			ans.Message.ToolCalls = fleet.MergeToolCall(ans.Message.ToolCalls, tc)
		}
		if ch.FinishReason != "" {
			ans.FinishReason = ch.FinishReason
		}
		if ch.Usage != nil {
			ans.Usage = ch.Usage
		}
		if ch.Model != "" {
			ans.Model = ch.Model
		}
		if len(ch.Embeddings) > 0 {
			ans.Embeddings = ch.Embeddings
		}
		logprobs = appendArray(logprobs, ch.Logprobs)
		if first || ch.FinishReason != "" || ch.Usage != nil {
			ans.Fields = mergeFields(ans.Fields, ch.Raw)
		}
	}
	if logprobs != nil {
		ans.Logprobs = append(logprobs, ']')
	}
	ans.Message.Content = content.String()
	ans.Message.Thinking = thinking.String()
	return ans, nil
}

// appendArray appends the elements of the JSON array arr to the open array
// dst ("[a,b"), starting it when dst is nil.
func appendArray(dst []byte, arr json.RawMessage) []byte {
	arr = bytes.TrimSpace(arr)
	if len(arr) < 2 || arr[0] != '[' {
		return dst
	}
	inner := bytes.TrimSpace(arr[1 : len(arr)-1])
	if len(inner) == 0 {
		if dst == nil {
			dst = []byte{'['}
		}
		return dst
	}
	if dst == nil {
		dst = []byte{'['}
	} else if len(dst) > 1 {
		dst = append(dst, ',')
	}
	return append(dst, inner...)
}

// mergeFields puts the top-level fields of the JSON object raw over
// fields; raw that is not an object changes nothing.
func mergeFields(fields map[string]json.RawMessage, raw []byte) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &m) != nil {
		return fields
	}
	if fields == nil {
		return m
	}
	maps.Copy(fields, m)
	return fields
}
