package router

import (
	"bytes"
	"context"
	"errors"
	"io"
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
	// Logprobs are the log probabilities of the answer's chunks, in order,
	// each the JSON array its chunk carried (fleet.Chunk.Logprobs); nil
	// when none came. The API edge joins them.
	Logprobs [][]byte
	// Embeddings are the vectors of an embedding request.
	Embeddings [][]float32
	// Events are the upstream's events that carry the answer's top-level
	// fields, as it sent them: its first event and those that ended it
	// (finish, usage), in order. The API edge merges their fields, later
	// ones winning, for a caller of the upstream's dialect
	// (system_fingerprint, timings, usage details, Ollama's durations).
	Events [][]byte
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
		// A chunk's bytes are the stream's buffer until the next Recv.
		if len(ch.Logprobs) > 0 {
			ans.Logprobs = append(ans.Logprobs, bytes.Clone(ch.Logprobs))
		}
		if len(ch.Raw) > 0 && (first || ch.FinishReason != "" || ch.Usage != nil) {
			ans.Events = append(ans.Events, bytes.Clone(ch.Raw))
		}
	}
	ans.Message.Content = content.String()
	ans.Message.Thinking = thinking.String()
	return ans, nil
}
